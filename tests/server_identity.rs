//! Which server the suite runs against. `make test` runs the integration
//! tests twice, on Debian's redis-server and on Valkey, and tells each run
//! what it must find (`EXPECT_SERVER`), so a run on the wrong binary fails
//! instead of passing silently.

use crate::common;
use common::*;

#[test]
fn the_suite_runs_against_the_server_it_was_asked_for() {
    let expected = match (
        std::env::var("EXPECT_SERVER"),
        std::env::var("REDIS_SERVER"),
    ) {
        (Ok(expected), _) => expected,
        (Err(_), Err(_)) => "redis".to_string(), // the default: redis-server from PATH
        (Err(_), Ok(binary)) => {
            panic!("REDIS_SERVER={binary} needs EXPECT_SERVER, e.g. \"valkey 8.1\"")
        }
    };
    let s = Server::start();
    let mut c = s.conn();
    let (name, version) = server_identity(&mut c);
    let found = format!("{name} {version}");
    assert!(
        found.starts_with(&expected),
        "expected {expected}, running against {found} ({})",
        server_binary().display()
    );
    // The module is really loaded there.
    assert!(int(&mut c, "LOCK.ACQUIRE who me 1000") > 0);
}
