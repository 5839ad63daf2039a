//! The clock shim (`clockshim.c`): an LD_PRELOAD library that shifts a
//! server's wall clock by the seconds written in a file.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// Build the shim once per process, next to the module.
pub fn clockshim() -> PathBuf {
    static SHIM: OnceLock<PathBuf> = OnceLock::new();
    SHIM.get_or_init(|| {
        let out = crate::server::module_path().with_file_name("clockshim.so");
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("clockshim.c");
        let ok = std::process::Command::new("cc")
            .args(["-shared", "-fPIC", "-O2", "-o"])
            .arg(&out)
            .arg(&src)
            .arg("-ldl")
            .status()
            .expect("cc (gcc) is needed to build the clock shim");
        assert!(ok.success(), "building the clock shim failed");
        out
    })
    .clone()
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
