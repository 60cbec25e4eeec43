//! The system calls behind a durable flush, watched with `strace`.
//!
//! sled 0.34's own flush stops at `sync_file_range`, which a power loss can
//! undo; `SledEngine`'s flush must add an `fdatasync` of sled's log file, or a
//! `syncfs` once sled keeps large values in blob files of their own. The
//! flushes run in a child process (this test binary again, running only
//! [`flushes_watched_by_strace`]) under `strace`, and the parent reads the
//! calls it made. Needs `strace` (Debian's package of that name) and ptrace
//! permission, as on the CI machines.

use std::path::Path;
use std::process::Command;

use ringstore_storage::{Engine, SledEngine, SledOptions};

/// Set for the child run: the database directory it flushes in.
const CHILD_DIR: &str = "RINGSTORE_FSYNC_TEST_DIR";
/// Flushes of small values the child makes before the large one.
const SMALL_FLUSHES: usize = 3;
/// Over a quarter of sled's 512 KiB log segment: stored as a blob file.
const BLOB_SIZED: usize = 300 << 10;

/// The child's part (run by the test below, skipped otherwise): three
/// flushes of small values, then one after a value large enough for a blob.
#[test]
#[ignore = "the child process of the strace test; run by it"]
fn flushes_watched_by_strace() {
    let dir = std::env::var(CHILD_DIR).expect("run by the strace test, which sets the directory");
    let engine = SledEngine::open(&dir, SledOptions::small()).unwrap();
    let tree = engine.open_tree("t").unwrap();
    for i in 0..SMALL_FLUSHES {
        tree.insert(format!("k{i}").as_bytes(), b"small").unwrap();
        engine.flush().unwrap();
    }
    tree.insert(b"big", &vec![1u8; BLOB_SIZED]).unwrap();
    engine.flush().unwrap();
}

#[test]
fn every_flush_ends_in_fdatasync_of_the_log_or_syncfs_once_there_are_blobs() {
    let scratch = tempfile::tempdir().unwrap();
    let db = scratch.path().join("db-dir");
    let trace = scratch.path().join("strace.out");
    let status = Command::new("strace")
        .args(["-f", "-y", "-e", "trace=fdatasync,syncfs", "-o"])
        .arg(&trace)
        .arg(std::env::current_exe().unwrap())
        .args(["--ignored", "--exact", "flushes_watched_by_strace"])
        .env(CHILD_DIR, &db)
        .status()
        .expect("could not run strace: install it (apt-get install strace)");
    assert!(status.success(), "the traced flushes failed: {status}");

    let calls = std::fs::read_to_string(&trace).unwrap();
    let on_log = |call: &str| count_calls(&calls, call, &db.join("db"));
    assert_eq!(
        on_log("fdatasync"),
        SMALL_FLUSHES,
        "one fdatasync of sled's log per flush of small values; strace saw:\n{calls}"
    );
    assert_eq!(
        on_log("syncfs"),
        1,
        "one syncfs for the flush after a blob was written; strace saw:\n{calls}"
    );
}

/// Successful calls of `name` on the file at `path` in strace's output
/// (`-y` prints each descriptor's path: `fdatasync(5</dir/db>) = 0`).
fn count_calls(trace: &str, name: &str, path: &Path) -> usize {
    let call = format!("{name}(");
    let file = format!("<{}>)", path.display());
    trace
        .lines()
        .filter(|line| line.contains(&call) && line.contains(&file) && line.ends_with("= 0"))
        .count()
}
