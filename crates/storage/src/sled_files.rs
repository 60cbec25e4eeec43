//! `SledFiles`: the syncing that sled 0.34's own flush leaves undone.
//!
//! # Why
//! `Db::flush` returns once sled has written its log buffers with
//! `sync_file_range(WAIT_BEFORE | WRITE | WAIT_AFTER)`. That call starts and
//! waits for the writeback of the data pages, and nothing more: it does not
//! write the file's metadata (its size, its newly allocated blocks) and it
//! does not flush the drive's volatile write cache, so a power loss can still
//! lose what it "synced" (the call's own manual says so). And values or tree
//! nodes larger than a quarter of a log segment (128 KiB) live in files of
//! their own under `blobs/`, which sled writes without any sync at all.
//! A store that acknowledges a write "after it is synced to disk" (batch
//! durability) must therefore finish the job after every flush. This is what
//! Cassandra's commit log does with `fsync` (`FileChannel.force`) and Redis
//! with `fdatasync` under `appendfsync always`.
//!
//! # What it does
//! After each [`SledFiles::sync`] (called right after `Db::flush`):
//! - with no blob files, `fdatasync` of sled's log file (`db`): its data,
//!   the metadata needed to read it back, and a cache flush;
//! - with blob files, `syncfs` of the file system holding the database: every
//!   file of it, blobs and directory entries included. A blob written since
//!   the last flush is not known by name (sled does not say), and `syncfs` is
//!   one call whatever their number.
//!
//! At open, the database directory and `blobs/` are synced once, so the
//! entries of the files sled created are durable too.
//!
//! # Caveats
//! - `syncfs` also writes back whatever else is dirty on that file system
//!   (other programs' files): give a node's data its own file system when
//!   large values are common.
//! - Between sled's write of a log entry that points to a blob and this sync,
//!   a power loss can leave the entry without its blob. The write was not yet
//!   acknowledged; sled reports such a blob as corrupt on reading.

use crate::file_system::retrying;
use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};

/// sled 0.34's log file, inside the database directory.
const LOG_FILE: &str = "db";
/// sled 0.34's directory of large values and nodes.
const BLOBS_DIR: &str = "blobs";

/// How [`SledFiles::sync`] made the last flush durable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FileSync {
    /// `fdatasync` of the log file: there were no blob files.
    LogData,
    /// `syncfs` of the database's file system: there were blob files.
    FileSystem,
}

/// Handles to the files a sled database keeps in its directory.
#[derive(Debug)]
pub(crate) struct SledFiles {
    log: File,
    blobs: PathBuf,
}

impl SledFiles {
    /// Opens the files of the sled database in `dir` (which sled has opened
    /// already), and syncs the directory entries sled created.
    pub(crate) fn open(dir: &Path) -> io::Result<SledFiles> {
        let log = File::open(dir.join(LOG_FILE))?;
        let blobs = dir.join(BLOBS_DIR);
        sync_directory(dir)?;
        if blobs.is_dir() {
            sync_directory(&blobs)?;
        }
        Ok(SledFiles { log, blobs })
    }

    /// Makes everything sled has flushed durable (see the module docs).
    pub(crate) fn sync(&self) -> io::Result<FileSync> {
        if self.has_blobs()? {
            retrying(|| Ok(rustix::fs::syncfs(&self.log)?))?;
            Ok(FileSync::FileSystem)
        } else {
            self.log.sync_data()?;
            Ok(FileSync::LogData)
        }
    }

    /// Whether sled's blob directory holds any file (reads one entry).
    fn has_blobs(&self) -> io::Result<bool> {
        let listed = retrying(|| {
            let mut entries = std::fs::read_dir(&self.blobs)?;
            Ok(entries.next().transpose()?.is_some())
        });
        match listed {
            Ok(any) => Ok(any),
            Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(false),
            Err(error) => Err(error),
        }
    }
}

/// `fsync` of a directory: the entries created in it become durable.
fn sync_directory(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::Engine;
    use crate::sled_engine::{SledEngine, SledOptions};

    /// Over a quarter of sled's 512 KiB log segment: stored as a blob file.
    const BLOB_SIZED: usize = 300 << 10;

    #[test]
    fn a_flush_of_small_values_syncs_the_log_file_s_data() {
        let dir = tempfile::tempdir().unwrap();
        let engine = SledEngine::open(dir.path(), SledOptions::small()).unwrap();
        let tree = engine.open_tree("t").unwrap();
        tree.insert(b"k", b"small value").unwrap();
        assert_eq!(engine.flush_durably().unwrap(), FileSync::LogData);
    }

    #[test]
    fn a_flush_once_sled_holds_blob_files_syncs_the_whole_file_system() {
        let dir = tempfile::tempdir().unwrap();
        let engine = SledEngine::open(dir.path(), SledOptions::small()).unwrap();
        let tree = engine.open_tree("t").unwrap();
        tree.insert(b"big", &vec![7u8; BLOB_SIZED]).unwrap();
        assert_eq!(engine.flush_durably().unwrap(), FileSync::FileSystem);
        let blobs = std::fs::read_dir(dir.path().join(BLOBS_DIR))
            .unwrap()
            .count();
        assert!(blobs > 0, "the large value was not written as a blob file");
    }
}
