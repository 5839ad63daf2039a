//! A lock name's fencing tokens keep increasing when its cluster slot moves
//! between primaries that started at different times. Before 2026-11-28 a
//! node counted from its start + 60 s, so a node restarted (or started)
//! later granted up to a minute above an older one, and a slot moved from
//! it to the older node went back.

use crate::common;
use common::*;
use redis_lock_testkit::redis_cli as cli;
use std::time::Duration;

/// Acquire `key` for `owner` on the node that serves its slot and return
/// the token.
fn grant(nodes: &[Server], node: usize, key: &str, owner: &str) -> u64 {
    let reply = cli(nodes[node].port, &["LOCK.ACQUIRE", key, owner, "30000"]);
    reply
        .parse()
        .unwrap_or_else(|_| panic!("LOCK.ACQUIRE {key} on node {node}: {reply}"))
}

fn release(nodes: &[Server], node: usize, key: &str, owner: &str) {
    let reply = cli(nodes[node].port, &["LOCK.RELEASE", key, owner]);
    assert_eq!(reply, "1", "LOCK.RELEASE {key} on node {node}");
}

#[test]
fn a_slot_moved_from_a_restarted_primary_to_an_older_one_gets_a_larger_token() {
    let mut nodes = cluster(3);
    let key = "fence:{moved}";
    let (old, slot) = owner_of(&nodes, key);
    let young = (old + 1) % 3;
    // Grants on the older node first, then `young` restarts (nothing
    // persisted, no guard): it counts from its new start.
    let first = grant(&nodes, old, key, "a");
    release(&nodes, old, key, "a");
    nodes[young].restart();
    for n in &nodes {
        assert!(
            eventually(Duration::from_secs(20), || cli(
                n.port,
                &["CLUSTER", "INFO"]
            )
            .contains("cluster_state:ok")),
            "cluster did not converge after the restart"
        );
    }
    move_slot(&nodes, &slot, old, young);
    let on_young = grant(&nodes, young, key, "b");
    assert!(on_young > first, "{on_young} after {first}");
    release(&nodes, young, key, "b");
    move_slot(&nodes, &slot, young, old);
    let back = grant(&nodes, old, key, "c");
    assert!(
        back > on_young,
        "token went backwards when the slot moved back to the older node: {back} after {on_young}"
    );
}

#[test]
fn tokens_strictly_increase_while_a_name_is_resharded_back_and_forth() {
    let nodes = cluster(3);
    let key = "fence:{reshard}";
    let (mut at, slot) = owner_of(&nodes, key);
    let mut last = 0u64;
    // 12 moves over all three primaries (started one after another), some
    // of them with the lock held: MIGRATE carries it with its token.
    for step in 0..12 {
        let owner = format!("o{step}");
        let token = grant(&nodes, at, key, &owner);
        assert!(
            token > last,
            "step {step} on node {at}: {token} after {last}"
        );
        last = token;
        let to = (at + 1 + step % 2) % 3;
        let held = step % 3 == 0;
        if !held {
            release(&nodes, at, key, &owner);
        }
        move_slot(&nodes, &slot, at, to);
        at = to;
        if held {
            let status = cli(nodes[at].port, &["LOCK.STATUS", key]);
            assert!(
                status.contains(&last.to_string()),
                "the lock moved with its token: {status}"
            );
            release(&nodes, at, key, &owner);
        }
    }
}
