//! The file-system seam: every file the store's own durability code keeps
//! (commit log segments, run files, their directories) is read, written,
//! synced, renamed and removed through one small trait, so a simulation can
//! put a disk underneath that crashes, tears, rots and fails on cue.
//!
//! # Why
//! The five ways a byte of ringstore becomes durable — the commit log's
//! sync, the engine's flush, a run sealed (written, synced, renamed, its
//! directory synced), the fold (merged, flushed, then the run deleted) and
//! the checkpoint (flushed, then log segments recycled) — are each an order
//! of file operations that is right only if every step before it is
//! durable. A SIGKILL test cannot lose a page cache, tear a write, flip a
//! bit or answer `EIO`; [`SimulatedFileSystem`] can, so the simulation runs
//! the real commit log, runs and fold on it (FoundationDB's simulated files
//! and TigerBeetle's storage fault injection are the models).
//!
//! # The contract (what [`OsFileSystem`] gives and [`SimulatedFileSystem`] keeps)
//! - A write is visible to reads at once, and durable only once
//!   [`FileHandle::sync_data`] of its file has returned.
//! - A file created, renamed or removed is durably so only once
//!   [`FileSystem::sync_dir`] of its directory has returned; until then a
//!   crash may undo it (the file's bytes follow the file, not the name).
//! - [`FileSystem::create_dir_all`] is durable on return (it is rare, and
//!   every caller would sync the parent at once).
//! - Errors are `io::Error`s; the callers add the path.
//!
//! # Caveats
//! - sled keeps its own files and threads and has no such seam; in the
//!   simulation it is stood in for by [`SimulatedDisk`](crate::SimulatedDisk),
//!   which keeps exactly sled's promise (a flushed write survives a crash,
//!   an unflushed one may not) and nothing more.
//! - The node's files outside the store (its identity key, snapshots) still
//!   use `std::fs`.

mod os;
mod simulated;

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use os::OsFileSystem;
pub(crate) use simulated::SplitMix;
pub use simulated::{FileFaults, IoFault, SimulatedFileSystem};

/// How [`FileSystem::open`] opens a file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpenMode {
    /// An existing file, for reading.
    Read,
    /// An existing file, for reading and writing.
    ReadWrite,
    /// A new file for reading and writing; fails if the path exists.
    CreateNew,
    /// A file for writing, created or emptied.
    Truncate,
}

/// A directory tree of files. See the module docs for the contract.
pub trait FileSystem: Send + Sync + fmt::Debug {
    /// Creates `dir` and its missing parents, durably.
    fn create_dir_all(&self, dir: &Path) -> io::Result<()>;

    /// The paths of the entries (files and directories) directly in `dir`,
    /// in no particular order.
    fn read_dir(&self, dir: &Path) -> io::Result<Vec<PathBuf>>;

    /// Opens the file at `path`.
    fn open(&self, path: &Path, mode: OpenMode) -> io::Result<Arc<dyn FileHandle>>;

    /// Removes the file at `path` (not durable until its directory is synced).
    fn remove_file(&self, path: &Path) -> io::Result<()>;

    /// Removes `dir` and everything in it (durable only once its parent is
    /// synced).
    fn remove_dir_all(&self, dir: &Path) -> io::Result<()>;

    /// Renames `from` to `to`, replacing `to` (not durable until the
    /// directory is synced).
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;

    /// Makes the creations, renames and removals of entries in `dir` durable.
    fn sync_dir(&self, dir: &Path) -> io::Result<()>;
}

/// An open file: positional reads and writes, and a sync.
pub trait FileHandle: Send + Sync + fmt::Debug {
    /// Reads up to `buf.len()` bytes at `offset`; how many (0 at the end).
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize>;

    /// Writes all of `bytes` at `offset`, growing the file if needed.
    fn write_all_at(&self, bytes: &[u8], offset: u64) -> io::Result<()>;

    /// Makes every write to this file made before the call durable.
    fn sync_data(&self) -> io::Result<()>;

    /// The file's length in bytes.
    fn len(&self) -> io::Result<u64>;

    /// Whether the file is empty.
    fn is_empty(&self) -> io::Result<bool> {
        Ok(self.len()? == 0)
    }
}

/// Runs `op` again while it fails with `Interrupted` (`EINTR`): a signal
/// that arrived during a system call is no failure of the disk, and the
/// node must not stop over it (the fault suite's run on a fresh machine
/// saw a flush fail with "Interrupted system call" and the node stop
/// taking writes). `std` retries its reads, writes and syncs itself; the
/// rest (directory listings, renames, removals, `syncfs`) do not.
pub fn retrying<T>(mut op: impl FnMut() -> io::Result<T>) -> io::Result<T> {
    loop {
        match op() {
            Err(error) if error.kind() == io::ErrorKind::Interrupted => continue,
            outcome => return outcome,
        }
    }
}

/// Reads exactly `buf.len()` bytes at `offset`, or fails with
/// `UnexpectedEof`.
pub fn read_exact_at(file: &dyn FileHandle, buf: &mut [u8], offset: u64) -> io::Result<()> {
    let mut done = 0;
    while done < buf.len() {
        match retrying(|| file.read_at(&mut buf[done..], offset + done as u64))? {
            0 => {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "the file ends before the bytes asked for",
                ));
            }
            n => done += n,
        }
    }
    Ok(())
}

/// The whole content of `file`.
pub fn read_all(file: &dyn FileHandle) -> io::Result<Vec<u8>> {
    let mut bytes = vec![0u8; file.len()? as usize];
    let mut done = 0;
    while done < bytes.len() {
        match retrying(|| file.read_at(&mut bytes[done..], done as u64))? {
            0 => break,
            n => done += n,
        }
    }
    bytes.truncate(done);
    Ok(bytes)
}

/// The directory holding `path` (`.` for a bare name).
pub fn parent_of(path: &Path) -> &Path {
    match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;

    /// A file of `content` whose reads fail with `EINTR` every other call.
    #[derive(Debug)]
    struct InterruptedEveryOtherRead {
        content: Vec<u8>,
        interrupt_next: Mutex<bool>,
    }

    impl FileHandle for InterruptedEveryOtherRead {
        fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
            let mut interrupt = self.interrupt_next.lock().unwrap();
            *interrupt = !*interrupt;
            if !*interrupt {
                return Err(io::Error::from_raw_os_error(4));
            }
            // A short read of at most 3 bytes, so the loops go round.
            let start = (offset as usize).min(self.content.len());
            let n = buf.len().min(3).min(self.content.len() - start);
            buf[..n].copy_from_slice(&self.content[start..start + n]);
            Ok(n)
        }

        fn write_all_at(&self, _: &[u8], _: u64) -> io::Result<()> {
            unreachable!("read only")
        }

        fn sync_data(&self) -> io::Result<()> {
            Ok(())
        }

        fn len(&self) -> io::Result<u64> {
            Ok(self.content.len() as u64)
        }
    }

    #[test]
    fn reads_interrupted_by_a_signal_are_retried_not_failed() {
        let file = InterruptedEveryOtherRead {
            content: b"interrupted, not failed".to_vec(),
            interrupt_next: Mutex::new(false),
        };
        let mut buf = [0u8; 10];
        read_exact_at(&file, &mut buf, 13).unwrap();
        assert_eq!(&buf, b"not failed");
        assert_eq!(read_all(&file).unwrap(), file.content);
    }

    #[test]
    fn retrying_passes_other_errors_and_successes_through() {
        let mut calls = 0;
        let outcome: io::Result<u8> = retrying(|| {
            calls += 1;
            match calls {
                1 | 2 => Err(io::Error::from(io::ErrorKind::Interrupted)),
                _ => Err(io::Error::from(io::ErrorKind::StorageFull)),
            }
        });
        assert_eq!(outcome.unwrap_err().kind(), io::ErrorKind::StorageFull);
        assert_eq!(calls, 3);
        assert_eq!(retrying(|| Ok::<_, io::Error>(7)).unwrap(), 7);
    }
}
