//! Section 2: memory per held lock against a string key with PX, by
//! used_memory before and after filling n keys with a 32-byte owner.

use redis_lock_testkit::Server;

pub struct Row {
    pub keys: usize,
    pub string_bytes: f64,
    pub lock_bytes: f64,
}

fn used(c: &mut redis::Connection) -> i64 {
    let info: String = redis::cmd("INFO").arg("memory").query(c).unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

/// Long enough to outlive the measurement: the module's default
/// `lock.max-ttl-ms` (10 min), the longest TTL it accepts.
const TTL_MS: u64 = 600_000;

fn per_key(c: &mut redis::Connection, n: usize, lock: bool) -> f64 {
    redis::cmd("FLUSHALL").arg("SYNC").query::<()>(c).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(200));
    let before = used(c);
    for chunk in (0..n).collect::<Vec<_>>().chunks(10_000) {
        let mut p = redis::pipe();
        for i in chunk {
            let key = format!("lk:{i:012}");
            let owner = format!("{i:032x}");
            if lock {
                p.cmd("LOCK.ACQUIRE")
                    .arg(key)
                    .arg(owner)
                    .arg(TTL_MS)
                    .ignore();
            } else {
                p.cmd("SET")
                    .arg(key)
                    .arg(owner)
                    .arg("PX")
                    .arg(TTL_MS)
                    .ignore();
            }
        }
        p.query::<()>(c).unwrap();
    }
    (used(c) - before) as f64 / n as f64
}

pub fn run(server: &Server, sizes: &[usize]) -> Vec<Row> {
    let mut c = server.conn();
    let rows = sizes
        .iter()
        .map(|&keys| Row {
            keys,
            string_bytes: per_key(&mut c, keys, false),
            lock_bytes: per_key(&mut c, keys, true),
        })
        .collect();
    redis::cmd("FLUSHALL").query::<()>(&mut c).unwrap();
    rows
}
