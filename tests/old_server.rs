//! On a server older than the module needs, loading fails with a message
//! naming what is missing, instead of crashing. `make test` fetches Redis
//! 6.2.14 (pinned) and passes it as OLD_REDIS_SERVER.

use crate::common;
use common::*;

#[test]
fn an_older_server_refuses_the_module_with_a_clear_message() {
    let Some(old) = std::env::var_os("OLD_REDIS_SERVER") else {
        eprintln!("OLD_REDIS_SERVER not set (make test sets it): nothing to check");
        return;
    };
    let log = refused_start(std::path::Path::new(&old), &[]);
    assert!(
        log.contains("lacks the module API") && log.contains("needs Redis >= 7.0"),
        "no clear load error in the log:\n{log}"
    );
    assert!(!log.contains("panicked"), "the module panicked:\n{log}");
}
