//! A TCP proxy in front of one server that can hold back chosen requests:
//! a chunk of client bytes containing a marker (e.g. `LOCK.RELEASE`) is
//! forwarded only after a delay, and everything behind it on that
//! connection waits too (TCP keeps order). Models a slow network path for
//! one kind of request, which no server setting can. Threads, not tasks, so
//! it runs beside any runtime; dropping it closes every connection.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

#[derive(Default)]
pub(crate) struct Rule {
    marker: Vec<u8>,
    delay: Duration,
    /// Chunks being held back right now.
    holding: Arc<AtomicUsize>,
}

pub struct DelayProxy {
    pub port: u16,
    rule: Arc<Mutex<Rule>>,
    _listening: Listening,
}

/// A proxy in front of each of `servers`, and the proxies' URLs (in order).
pub fn in_front_of(servers: &[crate::Server]) -> (Vec<DelayProxy>, Vec<String>) {
    let proxies: Vec<DelayProxy> = servers.iter().map(|s| DelayProxy::to(s.port)).collect();
    let urls = proxies.iter().map(DelayProxy::url).collect();
    (proxies, urls)
}

/// The listening half every proxy shares: accepts on a free loopback port,
/// connects each client to 127.0.0.1:`target` and hands both streams to
/// `serve`, which runs the pumps. Dropping it closes every connection.
pub(crate) struct Listening {
    pub(crate) port: u16,
    stop: Arc<AtomicBool>,
    streams: Arc<Mutex<Vec<TcpStream>>>,
}

impl Listening {
    pub(crate) fn start(
        target: u16,
        serve: impl Fn(TcpStream, TcpStream) + Send + 'static,
    ) -> Listening {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let stop = Arc::new(AtomicBool::new(false));
        let streams = Arc::new(Mutex::new(Vec::new()));
        let (s, all) = (stop.clone(), streams.clone());
        std::thread::spawn(move || {
            for client in listener.incoming() {
                if s.load(Ordering::SeqCst) {
                    return;
                }
                let Ok(client) = client else { continue };
                let Ok(server) = TcpStream::connect(("127.0.0.1", target)) else {
                    continue;
                };
                let _ = client.set_nodelay(true);
                let _ = server.set_nodelay(true);
                {
                    let mut all = all.lock().unwrap();
                    all.push(client.try_clone().unwrap());
                    all.push(server.try_clone().unwrap());
                }
                serve(client, server);
            }
        });
        Listening {
            port,
            stop,
            streams,
        }
    }
}

impl Drop for Listening {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop so it sees the flag.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
        for s in self.streams.lock().unwrap().drain(..) {
            let _ = s.shutdown(Shutdown::Both);
        }
    }
}

impl DelayProxy {
    /// Listen on a free loopback port and forward to 127.0.0.1:`target`.
    pub fn to(target: u16) -> DelayProxy {
        let rule = Arc::new(Mutex::new(Rule::default()));
        let r = rule.clone();
        let listening = Listening::start(target, move |client, server| {
            let (c2, s2) = (client.try_clone().unwrap(), server.try_clone().unwrap());
            let rule = r.clone();
            std::thread::spawn(move || pump(client, server, Some(rule)));
            std::thread::spawn(move || pump(s2, c2, None));
        });
        DelayProxy {
            port: listening.port,
            rule,
            _listening: listening,
        }
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// From now on, hold back client chunks containing `marker` by `delay`.
    pub fn delay(&self, marker: &str, delay: Duration) {
        let mut rule = self.rule.lock().unwrap();
        rule.marker = marker.as_bytes().to_vec();
        rule.delay = delay;
    }

    /// A chunk is being held back right now.
    pub fn holding(&self) -> bool {
        self.rule.lock().unwrap().holding.load(Ordering::SeqCst) > 0
    }

    /// Forward everything at once again.
    pub fn clear(&self) {
        let mut rule = self.rule.lock().unwrap();
        rule.marker.clear();
        rule.delay = Duration::ZERO;
    }
}

/// Copy `from` to `to` until either side closes; with a rule, hold back
/// the chunks that contain its marker.
pub(crate) fn pump(mut from: TcpStream, mut to: TcpStream, rule: Option<Arc<Mutex<Rule>>>) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let hold = rule.as_ref().and_then(|rule| {
            let rule = rule.lock().unwrap();
            let hit = !rule.marker.is_empty()
                && buf[..n]
                    .windows(rule.marker.len())
                    .any(|w| w == rule.marker.as_slice());
            (hit && !rule.delay.is_zero()).then(|| (rule.delay, rule.holding.clone()))
        });
        if let Some((delay, holding)) = hold {
            holding.fetch_add(1, Ordering::SeqCst);
            std::thread::sleep(delay);
            holding.fetch_sub(1, Ordering::SeqCst);
        }
        if to.write_all(&buf[..n]).is_err() {
            break;
        }
    }
    let _ = to.shutdown(Shutdown::Write);
}
