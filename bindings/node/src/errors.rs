//! The core's errors as plain objects that index.js turns into the
//! package's error classes (LockError and its subclasses). An outcome is
//! resolved, never rejected, so that the classes are made in JavaScript,
//! where `instanceof` works from ESM and CommonJS alike.

use napi_derive::napi;
use redis_lock_client::Error;

/// Why one node did not grant, extend or release.
#[napi(object)]
pub struct NodeCause {
    /// `host:port` of the node.
    pub node: String,
    /// What went wrong there.
    pub cause: String,
}

/// A failed operation: `kind` picks the class in index.js.
#[napi(object)]
pub struct Failure {
    /// taken | no-quorum | lost | rejected | config | other
    pub kind: String,
    pub message: String,
    pub causes: Vec<NodeCause>,
    pub granted: Option<u32>,
    pub needed: Option<u32>,
}

/// The failure for `err`, its message prefixed with `context`
/// (e.g. `lock "report"`).
pub fn failure(context: &str, err: Error) -> Failure {
    let message = format!("{context}: {err}");
    let mut out = Failure {
        kind: String::new(),
        message,
        causes: Vec::new(),
        granted: None,
        needed: None,
    };
    out.kind = match err {
        Error::Taken => "taken",
        Error::NoQuorum {
            granted,
            needed,
            failures,
        } => {
            out.granted = u32::try_from(granted).ok();
            out.needed = u32::try_from(needed).ok();
            out.causes = failures
                .into_iter()
                .map(|f| NodeCause {
                    node: f.node,
                    cause: f.cause,
                })
                .collect();
            "no-quorum"
        }
        Error::Expired => "lost",
        Error::Rejected { node, message } => {
            out.causes = vec![NodeCause {
                node,
                cause: message,
            }];
            "rejected"
        }
        Error::Config(_) => "config",
        _ => "other",
    }
    .to_string();
    out
}
