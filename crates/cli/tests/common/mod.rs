//! What the command-line tests share: the `submem` binary with the model
//! fetch off, its output as text, and the check that a refused command
//! failed cleanly with a message.
#![allow(dead_code)] // each test crate uses its own share of these

use std::process::{Command, Output};

/// The `submem` binary under test, independent of any user's abort hook and
/// never fetching models.
pub fn submem() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_submem"));
    c.env_remove("SUBMEM_BENCH_ABORT_AFTER")
        .env("SUBMEM_FETCH", "false");
    c
}

/// A command's stdout and stderr, one after the other.
pub fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// The command failed, said `needle`, and did not panic.
pub fn assert_clean_failure(o: &Output, needle: &str) {
    let t = text(o);
    assert!(!o.status.success(), "should fail: {t}");
    assert!(t.contains(needle), "expected {needle:?} in: {t}");
    assert!(!t.contains("panicked"), "panic: {t}");
}
