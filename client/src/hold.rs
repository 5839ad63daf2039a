//! Exclusive or shared: what an acquisition asks the servers for
//! (`SHARED`, `LIMIT n`) and how many grants it needs for it.

use crate::error::Error;
use crate::quorum::{majority, shared_quorum};
use redis::Cmd;

/// The largest `LIMIT` the module accepts (2^31 - 1).
pub const MAX_LIMIT: u32 = i32::MAX as u32;

/// The kind of hold one acquisition asks for.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Hold {
    /// `SHARED`: other shared holders may hold it at the same time.
    pub(crate) shared: bool,
    /// `LIMIT n`: at most n shared holders at once (implies `shared`).
    pub(crate) limit: Option<u32>,
}

impl Hold {
    /// The acquisition's options after the TTL: `SHARED [LIMIT n]`, or
    /// nothing for an exclusive lock (its command stays as it was).
    pub(crate) fn args(&self, cmd: &mut Cmd) {
        if self.shared {
            cmd.arg("SHARED");
            if let Some(limit) = self.limit {
                cmd.arg("LIMIT").arg(limit);
            }
        }
    }

    /// Grants needed out of `nodes`: a majority, or for a limited shared
    /// hold the larger quorum that bounds the holders (`shared_quorum`).
    pub(crate) fn need(&self, nodes: usize) -> usize {
        if self.shared {
            shared_quorum(nodes, self.limit)
        } else {
            majority(nodes)
        }
    }

    /// A limit the servers would refuse, refused before anything is sent.
    pub(crate) fn check(&self) -> Result<(), Error> {
        match self.limit {
            Some(limit) if !(1..=MAX_LIMIT).contains(&limit) => Err(Error::Config(format!(
                "limit {limit} must be from 1 to {MAX_LIMIT}"
            ))),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(hold: Hold) -> Vec<String> {
        let mut cmd = redis::cmd("LOCK.ACQUIRE");
        hold.args(&mut cmd);
        let args = cmd.args_iter().map(|a| match a {
            redis::Arg::Simple(b) => String::from_utf8_lossy(b).into_owned(),
            _ => String::new(),
        });
        args.skip(1).collect()
    }

    #[test]
    fn the_options_sent_and_the_grants_needed() {
        let exclusive = Hold::default();
        assert!(
            words(exclusive).is_empty(),
            "exclusive: the command as before"
        );
        assert_eq!(exclusive.need(3), 2);
        let readers = Hold {
            shared: true,
            limit: None,
        };
        assert_eq!(words(readers), ["SHARED"]);
        assert_eq!(
            (readers.need(1), readers.need(3), readers.need(5)),
            (1, 2, 3)
        );
        let two = Hold {
            shared: true,
            limit: Some(2),
        };
        assert_eq!(words(two), ["SHARED", "LIMIT", "2"]);
        assert_eq!((two.need(1), two.need(3), two.need(5)), (1, 3, 4));
    }

    #[test]
    fn limits_outside_what_the_servers_take_are_refused() {
        let limited = |limit| Hold {
            shared: true,
            limit: Some(limit),
        };
        assert!(matches!(limited(0).check(), Err(Error::Config(_))));
        assert!(matches!(
            limited(MAX_LIMIT + 1).check(),
            Err(Error::Config(_))
        ));
        assert!(limited(1).check().is_ok());
        assert!(limited(MAX_LIMIT).check().is_ok());
        assert!(Hold::default().check().is_ok());
    }
}
