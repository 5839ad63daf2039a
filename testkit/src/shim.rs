//! LD_PRELOAD shims: the clock shim (`clockshim.c`) shifts a process's
//! wall clock by the seconds written in a file; the slow lookup
//! (`slowlookup.c`) makes every host name lookup take longer.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// Build the clock shim once per process, next to the module.
pub fn clockshim() -> PathBuf {
    static SHIM: OnceLock<PathBuf> = OnceLock::new();
    SHIM.get_or_init(|| build("clockshim")).clone()
}

/// Build the slow lookup once per process, next to the module. Its delay
/// is `SLOWLOOKUP_MS` in the environment of the process it is preloaded in.
pub fn slowlookup() -> PathBuf {
    static SHIM: OnceLock<PathBuf> = OnceLock::new();
    SHIM.get_or_init(|| build("slowlookup")).clone()
}

/// `NAME.c` of this crate built into `NAME.so` next to the module.
fn build(name: &str) -> PathBuf {
    let out = crate::server::module_path().with_file_name(format!("{name}.so"));
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("{name}.c"));
    let ok = std::process::Command::new("cc")
        .args(["-shared", "-fPIC", "-O2", "-o"])
        .arg(&out)
        .arg(&src)
        .arg("-ldl")
        .status()
        .expect("cc (gcc) is needed to build the LD_PRELOAD shims");
    assert!(ok.success(), "building {name}.so failed");
    out
}

/// A server's wall-clock offset, in seconds, as the shim reads it.
pub struct ClockOffset(pub PathBuf);

impl ClockOffset {
    pub fn new(dir: &Path) -> ClockOffset {
        let path = dir.join("clock-offset");
        std::fs::write(&path, "0").unwrap();
        ClockOffset(path)
    }

    pub fn set(&self, seconds: i64) {
        std::fs::write(&self.0, seconds.to_string()).unwrap();
    }

    /// Environment for redis-server: preload the shim, point it here.
    pub fn env(&self) -> [(String, String); 2] {
        [
            ("LD_PRELOAD".into(), clockshim().display().to_string()),
            ("CLOCKSHIM_FILE".into(), self.0.display().to_string()),
        ]
    }
}
