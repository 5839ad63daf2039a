//! One version everywhere: the module (`MODULE LIST`), the client crate and
//! the CLI (`redis-lock --version`), the Python wheel (bindings/python, whose
//! pyproject takes it from its Cargo.toml) and CHANGELOG.md. The built
//! wheel's own metadata is checked by `make dist-check`.

use crate::common;
use common::*;
use std::path::Path;
use std::process::Command;

const VERSION: &str = env!("CARGO_PKG_VERSION");

fn repo_file(path: &str) -> String {
    let full = Path::new(env!("CARGO_MANIFEST_DIR")).join(path);
    std::fs::read_to_string(&full).unwrap_or_else(|e| panic!("{}: {e}", full.display()))
}

/// What follows `version` in a Cargo.toml's [package] table: `= "0.1.0"`,
/// or `.workspace = true` for a member taking the workspace's.
fn package_version(manifest: &str) -> Option<String> {
    let package = manifest.split("[package]").nth(1)?;
    let table = package.split("\n[").next()?;
    table.lines().find_map(|l| {
        let rest = l.trim().strip_prefix("version")?.trim();
        Some(rest.to_string())
    })
}

#[test]
fn every_crate_of_the_workspace_takes_the_workspace_version() {
    for manifest in ["Cargo.toml", "client/Cargo.toml", "testkit/Cargo.toml"] {
        assert_eq!(
            package_version(&repo_file(manifest)).as_deref(),
            Some(".workspace = true"),
            "{manifest}"
        );
    }
}

#[test]
fn the_python_binding_has_the_same_version() {
    let manifest = repo_file("bindings/python/Cargo.toml");
    assert_eq!(package_version(&manifest), Some(format!("= \"{VERSION}\"")));
    // pyproject.toml names none of its own: maturin takes the Cargo.toml one.
    let pyproject = repo_file("bindings/python/pyproject.toml");
    assert!(pyproject.contains("dynamic = [\"version\"]"), "{pyproject}");
    assert!(
        !pyproject
            .lines()
            .any(|l| l.trim_start().starts_with("version")),
        "pyproject.toml must not set its own version"
    );
}

#[test]
fn the_node_package_has_the_same_version() {
    let manifest = repo_file("bindings/node/Cargo.toml");
    assert_eq!(package_version(&manifest), Some(format!("= \"{VERSION}\"")));
    let package = repo_file("bindings/node/package.json");
    assert!(
        package.contains(&format!("\"version\": \"{VERSION}\"")),
        "bindings/node/package.json is not version {VERSION}"
    );
}

#[test]
fn the_changelog_has_an_entry_for_this_version() {
    let changelog = repo_file("CHANGELOG.md");
    let heading = format!("## [{VERSION}] - ");
    assert!(
        changelog.contains(&heading),
        "no '{heading}' in CHANGELOG.md"
    );
}

#[test]
fn the_cli_reports_the_version() {
    let out = Command::new(workspace_binary("redis-lock"))
        .arg("--version")
        .output()
        .unwrap();
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8(out.stdout).unwrap().trim(),
        format!("redis-lock {VERSION}")
    );
}

#[test]
fn module_list_reports_the_version() {
    let s = Server::start();
    let mut c = s.conn();
    let modules: Vec<Vec<redis::Value>> = redis::cmd("MODULE").arg("LIST").query(&mut c).unwrap();
    let field = |module: &[redis::Value], name: &str| -> Option<String> {
        module.chunks(2).find_map(|pair| {
            let key: String = redis::from_redis_value_ref(&pair[0]).ok()?;
            (key == name).then(|| redis::from_redis_value_ref(&pair[1]).ok())?
        })
    };
    let lock = modules
        .iter()
        .find(|m| field(m, "name").as_deref() == Some("lock"))
        .expect("the lock module in MODULE LIST");
    let ver: u32 = field(lock, "ver").unwrap().parse().unwrap();
    let shown = format!("{}.{}.{}", ver / 10_000, ver / 100 % 100, ver % 100);
    assert_eq!(shown, VERSION, "MODULE LIST ver {ver}");
}
