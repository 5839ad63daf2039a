//! A TCP proxy in front of one server that reads the client's requests as
//! RESP commands: it can answer a command carrying a given argument with an
//! error instead of running it (a module from before that option, as in a
//! rolling upgrade), and hold back commands of a given name. Replies stay
//! in order: a refused command is sent on as `EVAL` of an `error_reply`,
//! so the server answers it in its place. Threads, not tasks; dropping it
//! closes every connection.

use crate::proxy::{pump, Listening};
use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

#[derive(Default, Clone)]
struct Rules {
    /// Commands with this argument (any case) are refused with `error`.
    refuse_arg: Vec<u8>,
    error: String,
    /// Commands of these names wait this long before they go on.
    delays: Vec<(Vec<u8>, Duration)>,
    /// The next command of this name runs, and its reply is lost with the
    /// client's connection (one-shot).
    lose_reply_of: Vec<u8>,
}

pub struct RespProxy {
    pub port: u16,
    rules: Arc<Mutex<Rules>>,
    _listening: Listening,
}

impl RespProxy {
    /// Listen on a free loopback port and forward to 127.0.0.1:`target`.
    pub fn to(target: u16) -> RespProxy {
        let rules = Arc::new(Mutex::new(Rules::default()));
        let r = rules.clone();
        let listening = Listening::start(target, move |client, server| {
            let (c2, s2) = (client.try_clone().unwrap(), server.try_clone().unwrap());
            let rules = r.clone();
            std::thread::spawn(move || requests(client, server, target, rules));
            std::thread::spawn(move || pump(s2, c2, None));
        });
        RespProxy {
            port: listening.port,
            rules,
            _listening: listening,
        }
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// From now on, answer commands carrying `arg` with the error `error`.
    pub fn refuse(&self, arg: &str, error: &str) {
        let mut rules = self.rules.lock().unwrap();
        rules.refuse_arg = arg.as_bytes().to_vec();
        rules.error = error.to_string();
    }

    /// The next `command` runs on the server, then the client's connection
    /// is cut before its reply: the server did it, the client cannot know.
    /// (The proxy runs it on a connection of its own and waits for the
    /// reply, so it has run before the client sees the cut.)
    pub fn lose_reply_of(&self, command: &str) {
        self.rules.lock().unwrap().lose_reply_of = command.as_bytes().to_vec();
    }

    /// From now on, hold back each `command` by `delay` (and what follows
    /// it on its connection); a zero `delay` stops holding it back. Other
    /// commands keep the delays they were given.
    pub fn delay(&self, command: &str, delay: Duration) {
        let mut rules = self.rules.lock().unwrap();
        let name = command.as_bytes().to_ascii_uppercase();
        rules.delays.retain(|(held, _)| *held != name);
        if !delay.is_zero() {
            rules.delays.push((name, delay));
        }
    }
}

/// One whole command at the start of `buf` (`*N` then N bulk strings): its
/// length in bytes and its arguments; None until it has all arrived.
fn parse_command(buf: &[u8]) -> Option<(usize, Vec<Vec<u8>>)> {
    fn line(buf: &[u8], at: usize) -> Option<(usize, &[u8])> {
        let rest = buf.get(at..)?;
        let end = rest.windows(2).position(|w| w == b"\r\n")?;
        Some((at + end + 2, &rest[..end]))
    }
    let (mut at, head) = line(buf, 0)?;
    assert_eq!(head.first(), Some(&b'*'), "only RESP arrays are proxied");
    let n: usize = std::str::from_utf8(&head[1..]).ok()?.parse().ok()?;
    let mut args = Vec::with_capacity(n);
    for _ in 0..n {
        let (next, h) = line(buf, at)?;
        let len: usize = std::str::from_utf8(&h[1..]).ok()?.parse().ok()?;
        if buf.len() < next + len + 2 {
            return None;
        }
        args.push(buf[next..next + len].to_vec());
        at = next + len + 2;
    }
    Some((at, args))
}

/// RESP2 encoding of one command.
pub fn encode<A: AsRef<[u8]>>(args: &[A]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        let a = a.as_ref();
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
    out
}

/// Run one raw command on a connection of its own to 127.0.0.1:`port`,
/// until its reply (one read is enough for the short replies used here).
fn run_aside(port: u16, raw: &[u8]) {
    if let Ok(mut aside) = TcpStream::connect(("127.0.0.1", port)) {
        let _ = aside.write_all(raw);
        let _ = aside.read(&mut [0u8; 512]);
    }
}

fn requests(mut from: TcpStream, mut to: TcpStream, target: u16, rules: Arc<Mutex<Rules>>) {
    let mut buf = Vec::new();
    let mut chunk = vec![0u8; 64 * 1024];
    loop {
        let n = match from.read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        buf.extend_from_slice(&chunk[..n]);
        while let Some((used, args)) = parse_command(&buf) {
            let raw: Vec<u8> = buf.drain(..used).collect();
            let lose = {
                let mut rules = rules.lock().unwrap();
                let hit = args
                    .first()
                    .is_some_and(|c| c.eq_ignore_ascii_case(&rules.lose_reply_of));
                if hit {
                    rules.lose_reply_of.clear();
                }
                hit
            };
            if lose {
                run_aside(target, &raw);
                let _ = from.shutdown(Shutdown::Both);
                break;
            }
            let rules = rules.lock().unwrap().clone();
            let refused = !rules.refuse_arg.is_empty()
                && args
                    .iter()
                    .any(|a| a.eq_ignore_ascii_case(&rules.refuse_arg));
            let slow = args.first().and_then(|c| {
                let mut delays = rules.delays.iter();
                delays.find_map(|(held, d)| c.eq_ignore_ascii_case(held).then_some(*d))
            });
            let out = if refused {
                let script = format!("return redis.error_reply({:?})", rules.error);
                encode(&[&b"EVAL"[..], script.as_bytes(), b"0"])
            } else {
                raw
            };
            if let Some(delay) = slow {
                std::thread::sleep(delay);
            }
            if to.write_all(&out).is_err() {
                return;
            }
        }
    }
    let _ = to.shutdown(Shutdown::Write);
}
