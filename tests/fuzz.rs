//! Thousands of random argv to every LOCK.* command on a real server: every
//! command gets exactly one reply and the server keeps answering.

use crate::common;
use common::*;
use rand::{rngs::StdRng, RngExt, SeedableRng};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// Read exactly one RESP2 reply; returns its header line, followed by the
/// payload for a bulk string.
fn read_reply(r: &mut BufReader<TcpStream>) -> String {
    let mut line = String::new();
    r.read_line(&mut line).expect("reply");
    assert!(line.ends_with("\r\n"), "truncated reply {line:?}");
    let mut head = line.trim_end().to_string();
    let n: i64 = head[1..].parse().unwrap_or(-1);
    match head.as_bytes()[0] {
        b'+' | b'-' | b':' => {}
        b'$' if n >= 0 => {
            let mut buf = vec![0; n as usize + 2];
            r.read_exact(&mut buf).unwrap();
            head.push(' ');
            head.push_str(&String::from_utf8_lossy(&buf[..n as usize]));
        }
        b'$' => {}
        b'*' => {
            for _ in 0..n.max(0) {
                read_reply(r);
            }
        }
        other => panic!("unexpected reply type {:?} in {head:?}", other as char),
    }
    head
}

fn random_arg(rng: &mut StdRng) -> Vec<u8> {
    let pool: [&[u8]; 17] = [
        b"alice",
        b"bob",
        b"0",
        b"1",
        b"-1",
        b"100",
        b"86400001",
        b"9999999999999999999999",
        b"WAIT",
        b"REENTRANT",
        b"reentrant",
        b"TICKET",
        b"",
        b"1.5",
        b" 7",
        b"\0",
        b"str",
    ];
    match rng.random_range(0..10) {
        0..=5 => pool[rng.random_range(0..pool.len())].to_vec(),
        6..=8 => (0..rng.random_range(0..40)).map(|_| rng.random()).collect(),
        _ => vec![rng.random(); rng.random_range(1000..200_000)],
    }
}

#[test]
fn random_argv_gets_one_reply_each_and_the_server_survives() {
    let s = Server::start();
    let mut setup = s.conn();
    q(&mut setup, "SET str plain").unwrap();
    q(&mut setup, "LPUSH list x").unwrap();
    let stream = TcpStream::connect(("127.0.0.1", s.port)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut writer = stream.try_clone().unwrap();
    let mut reader = BufReader::new(stream);
    let mut rng = StdRng::seed_from_u64(0x10c4);
    let commands = [
        "LOCK.ACQUIRE",
        "LOCK.RELEASE",
        "LOCK.EXTEND",
        "LOCK.STATUS",
        "LOCK.APPLY",
        "lock.acquire",
    ];
    let keys: [&[u8]; 5] = [b"k1", b"k2", b"str", b"list", b"k\0bin"];
    let (mut errors, mut total) = (0, 0);
    for batch in 0..100 {
        let mut sent = Vec::new();
        for _ in 0..50 {
            let mut argv = vec![commands[rng.random_range(0..commands.len())]
                .as_bytes()
                .to_vec()];
            let arity = rng.random_range(0..8);
            for i in 0..arity {
                if i == 0 && rng.random_bool(0.8) {
                    argv.push(keys[rng.random_range(0..keys.len())].to_vec());
                } else {
                    argv.push(random_arg(&mut rng));
                }
            }
            // Keep WAIT from blocking the fuzzer: its timeout is 1 ms or junk.
            for i in 1..argv.len() {
                if argv[i - 1].eq_ignore_ascii_case(b"WAIT")
                    && !argv[i].eq_ignore_ascii_case(b"WAIT")
                {
                    argv[i] = [&b"1"[..], b"x", b"-1"][rng.random_range(0..3)].to_vec();
                }
            }
            sent.extend(encode(&argv));
        }
        sent.extend(encode(&[
            b"ECHO".to_vec(),
            format!("marker-{batch}").into_bytes(),
        ]));
        writer.write_all(&sent).unwrap();
        for _ in 0..50 {
            let head = read_reply(&mut reader);
            errors += usize::from(head.starts_with('-'));
            total += 1;
        }
        // The marker comes right after the 50 replies: no command replied twice or not at all.
        let marker = format!("marker-{batch}");
        assert_eq!(
            read_reply(&mut reader),
            format!("${} {marker}", marker.len())
        );
    }
    assert_eq!(total, 5000);
    assert!(
        errors > 1000 && errors < 5000,
        "a mix of accepted and rejected commands: {errors}"
    );
    assert_eq!(
        q(&mut setup, "PING").unwrap(),
        Value::SimpleString("PONG".into())
    );
    assert_eq!(
        q(&mut setup, "GET str").unwrap(),
        Value::BulkString(b"plain".to_vec())
    );
}
