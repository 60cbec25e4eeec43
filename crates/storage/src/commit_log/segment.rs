//! Segment files: fixed slots in the log's directory, created once, zero
//! filled, and reused.
//!
//! # Why reuse
//! `fdatasync` of a write inside a file's existing size only flushes data;
//! a write that grows the file also commits the file system's metadata. On
//! the machines ringstore is measured on, a 3 KB write plus `fdatasync`
//! takes about 130 µs inside a file and about 300 µs at its end. So a slot
//! is written in full with zeros when created, and a segment whose records
//! the engine has flushed goes back to the free slots instead of away.
//!
//! A slot is named `segment-<slot>.log`; which segment it holds, and in
//! which use of the file, is its header's business (`record.rs`).

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::record::{HEADER_LEN, SegmentHeader};
use crate::file_system::{self, FileHandle, FileSystem, OpenMode};

/// One segment file.
#[derive(Debug)]
pub(crate) struct Slot {
    /// The slot's number, in its file name.
    pub(crate) number: u32,
    pub(crate) path: PathBuf,
    pub(crate) file: Arc<dyn FileHandle>,
}

const PREFIX: &str = "segment-";
const SUFFIX: &str = ".log";

/// The path of slot `number` in `dir`.
pub(crate) fn slot_path(dir: &Path, number: u32) -> PathBuf {
    dir.join(format!("{PREFIX}{number:06}{SUFFIX}"))
}

/// The slot numbers of the segment files in `dir`, sorted. Other files are
/// ignored.
pub(crate) fn list_slots(files: &dyn FileSystem, dir: &Path) -> io::Result<Vec<u32>> {
    let mut numbers = Vec::new();
    for path in files.read_dir(dir)? {
        let number: Option<u32> = path.file_name().and_then(|n| n.to_str()).and_then(|name| {
            name.strip_prefix(PREFIX)?
                .strip_suffix(SUFFIX)?
                .parse()
                .ok()
        });
        numbers.extend(number);
    }
    numbers.sort_unstable();
    Ok(numbers)
}

impl Slot {
    /// Opens the existing slot `number` of `dir`.
    pub(crate) fn open(files: &dyn FileSystem, dir: &Path, number: u32) -> io::Result<Slot> {
        let path = slot_path(dir, number);
        let file = files.open(&path, OpenMode::ReadWrite)?;
        Ok(Slot { number, path, file })
    }

    /// Creates slot `number` in `dir`, `bytes` long and all zeros, durably
    /// (file and directory entry).
    pub(crate) fn create(
        files: &dyn FileSystem,
        dir: &Path,
        number: u32,
        bytes: u64,
    ) -> io::Result<Slot> {
        let path = slot_path(dir, number);
        let file = files.open(&path, OpenMode::CreateNew)?;
        const CHUNK: usize = 1 << 20;
        let zeros = vec![0u8; CHUNK];
        let mut at = 0u64;
        while at < bytes {
            let len = CHUNK.min((bytes - at) as usize);
            file.write_all_at(&zeros[..len], at)?;
            at += len as u64;
        }
        file.sync_data()?;
        files.sync_dir(dir)?;
        Ok(Slot { number, path, file })
    }

    /// The header's bytes (fewer if the file is shorter).
    pub(crate) fn read_header(&self) -> io::Result<Vec<u8>> {
        let mut header = vec![0u8; HEADER_LEN];
        let mut read: usize = 0;
        while read < HEADER_LEN {
            match self.file.read_at(&mut header[read..], read as u64)? {
                0 => break,
                n => read += n,
            }
        }
        header.truncate(read);
        Ok(header)
    }

    /// The whole file.
    pub(crate) fn read_all(&self) -> io::Result<Vec<u8>> {
        file_system::read_all(self.file.as_ref())
    }

    /// Starts a new use of the slot: writes `header` and syncs it, so that no
    /// record can be durable behind a header that is not.
    pub(crate) fn begin(&self, header: SegmentHeader) -> io::Result<()> {
        self.file.write_all_at(&header.encode(), 0)?;
        self.file.sync_data()
    }

    /// Writes `bytes` at `offset` (no sync).
    pub(crate) fn write_at(&self, bytes: &[u8], offset: u64) -> io::Result<()> {
        self.file.write_all_at(bytes, offset)
    }

    /// Makes what was written durable.
    pub(crate) fn sync(&self) -> io::Result<()> {
        self.file.sync_data()
    }

    /// Marks the slot free: zeros its header, so that its records, already
    /// flushed to the engine, are not replayed again. Not synced: if the
    /// zeros are lost in a crash, replaying those records again is harmless
    /// (a merge by last-write-wins is idempotent).
    pub(crate) fn retire(&self) -> io::Result<()> {
        self.file.write_all_at(&[0u8; HEADER_LEN], 0)
    }
}
