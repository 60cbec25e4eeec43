//! One run file: cells sorted by data key, written once, read by point
//! lookups and range scans.
//!
//! # Layout
//! ```text
//! magic "RSRUN\x01\0\0"
//! block*      records, then the crc32 of those records (4 bytes LE)
//!   record    u32 key length, data key, u32 cell length, encoded cell
//! index       u32 block count, then per block: u32 first-key length,
//!             first key, u64 offset, u32 length (records only);
//!             then u32 last-key length, last key
//! footer      u64 index offset, u64 index length, u64 cells,
//!             u64 tombstones, u64 live bytes (keys and cells, as
//!             `live_size` counts them), u32 index crc32, u32 footer
//!             crc32 (of the 44 bytes before it), magic
//! ```
//! Integers are little-endian. A block holds records until it reaches
//! [`BLOCK_BYTES`], so a point lookup reads one block.
//!
//! # Invariants
//! - Data keys are strictly increasing through the file: the writer refuses
//!   a key not above the last one ([`StorageError::RunOutOfOrder`]).
//! - A file is complete once its name ends in `.run`: the writer writes
//!   `NAME.run.tmp`, syncs it, renames it and syncs the directory.
//! - Every byte read back is checked: the footer and the index when the
//!   file opens, a block each time it is read. A mismatch is
//!   [`StorageError::CorruptRun`], never a panic.

use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::error::{Result, StorageError};
use crate::file_system::{FileHandle, FileSystem, OpenMode, parent_of, read_exact_at};
use crate::key_encoding::TOKEN_LEN;
use crate::live_size::KeyspaceCounts;
use ringstore_cell::Cell;

/// The first bytes of every run file.
const MAGIC: &[u8; 8] = b"RSRUN\x01\0\0";
/// A block is closed once its records reach this many bytes.
const BLOCK_BYTES: usize = 64 << 10;
/// The writer hands the file system this many bytes at a time.
const WRITE_BYTES: usize = 1 << 20;
/// Bytes of the footer.
const FOOTER_BYTES: usize = 8 * 5 + 4 + 4 + MAGIC.len();

/// One block's place in the file.
#[derive(Clone, Debug)]
struct BlockEntry {
    first_key: Vec<u8>,
    offset: u64,
    len: u32,
}

/// Writes one run file, cells in increasing data key order.
pub(crate) struct RunWriter {
    files: Arc<dyn FileSystem>,
    final_path: PathBuf,
    tmp_path: PathBuf,
    file: Arc<dyn FileHandle>,
    /// Bytes not yet handed to the file, which come after `flushed`.
    out: Vec<u8>,
    flushed: u64,
    written: u64,
    block: Vec<u8>,
    block_first: Option<Vec<u8>>,
    index: Vec<BlockEntry>,
    last_key: Option<Vec<u8>>,
    counts: KeyspaceCounts,
}

impl RunWriter {
    /// Starts the run that will be `path` once finished.
    pub(crate) fn create(files: Arc<dyn FileSystem>, path: PathBuf) -> Result<RunWriter> {
        let tmp_path = path.with_extension("run.tmp");
        let file = files
            .open(&tmp_path, OpenMode::Truncate)
            .map_err(StorageError::Disk)?;
        let mut out = Vec::with_capacity(WRITE_BYTES + BLOCK_BYTES);
        out.extend_from_slice(MAGIC);
        Ok(RunWriter {
            files,
            final_path: path,
            tmp_path,
            file,
            out,
            flushed: 0,
            written: MAGIC.len() as u64,
            block: Vec::with_capacity(BLOCK_BYTES + (8 << 10)),
            block_first: None,
            index: Vec::new(),
            last_key: None,
            counts: KeyspaceCounts::default(),
        })
    }

    /// The last data key appended, if any.
    pub(crate) fn last_key(&self) -> Option<&[u8]> {
        self.last_key.as_deref()
    }

    /// Appends one cell; `data_key` must be above every key before it.
    pub(crate) fn append(&mut self, data_key: &[u8], cell: &[u8]) -> Result<()> {
        if self
            .last_key
            .as_deref()
            .is_some_and(|last| data_key <= last)
        {
            return Err(StorageError::RunOutOfOrder);
        }
        if self.block_first.is_none() {
            self.block_first = Some(data_key.to_vec());
        }
        put_bytes(&mut self.block, data_key);
        put_bytes(&mut self.block, cell);
        self.counts.keys += 1;
        self.counts.bytes += (data_key.len().saturating_sub(TOKEN_LEN) + cell.len()) as u64;
        self.counts.tombstones += u64::from(Cell::encoded_is_tombstone(cell));
        match &mut self.last_key {
            Some(last) => {
                last.clear();
                last.extend_from_slice(data_key);
            }
            None => self.last_key = Some(data_key.to_vec()),
        }
        if self.block.len() >= BLOCK_BYTES {
            self.close_block()?;
        }
        Ok(())
    }

    fn close_block(&mut self) -> Result<()> {
        let Some(first_key) = self.block_first.take() else {
            return Ok(());
        };
        let crc = crc32fast::hash(&self.block);
        self.out.extend_from_slice(&self.block);
        self.out.extend_from_slice(&crc.to_le_bytes());
        if self.out.len() >= WRITE_BYTES {
            self.write_out()?;
        }
        self.index.push(BlockEntry {
            first_key,
            offset: self.written,
            len: self.block.len() as u32,
        });
        self.written += self.block.len() as u64 + 4;
        self.block.clear();
        Ok(())
    }

    /// Hands the buffered bytes to the file.
    fn write_out(&mut self) -> Result<()> {
        self.file
            .write_all_at(&self.out, self.flushed)
            .map_err(StorageError::Disk)?;
        self.flushed += self.out.len() as u64;
        self.out.clear();
        Ok(())
    }

    /// Writes the index and footer, syncs the file, gives it its final name
    /// and syncs the directory; the finished run, opened. `None` (and no
    /// file) when no cell was appended.
    pub(crate) fn finish(mut self) -> Result<Option<Run>> {
        if self.counts.keys == 0 {
            self.files
                .remove_file(&self.tmp_path)
                .map_err(StorageError::Disk)?;
            return Ok(None);
        }
        self.close_block()?;
        let mut index = Vec::new();
        index.extend_from_slice(&(self.index.len() as u32).to_le_bytes());
        for entry in &self.index {
            put_bytes(&mut index, &entry.first_key);
            index.extend_from_slice(&entry.offset.to_le_bytes());
            index.extend_from_slice(&entry.len.to_le_bytes());
        }
        put_bytes(&mut index, self.last_key.as_deref().unwrap_or_default());
        let mut footer = Vec::with_capacity(FOOTER_BYTES);
        let counts = self.counts;
        for n in [
            self.written,
            index.len() as u64,
            counts.keys,
            counts.tombstones,
            counts.bytes,
        ] {
            footer.extend_from_slice(&n.to_le_bytes());
        }
        footer.extend_from_slice(&crc32fast::hash(&index).to_le_bytes());
        footer.extend_from_slice(&crc32fast::hash(&footer).to_le_bytes());
        footer.extend_from_slice(MAGIC);
        self.out.extend_from_slice(&index);
        self.out.extend_from_slice(&footer);
        self.write_out()?;
        self.file.sync_data().map_err(StorageError::Disk)?;
        self.files
            .rename(&self.tmp_path, &self.final_path)
            .map_err(StorageError::Disk)?;
        sync_dir(self.files.as_ref(), &self.final_path)?;
        Run::open(self.files.as_ref(), self.final_path).map(Some)
    }

    /// Gives up the run: its temporary file is removed.
    pub(crate) fn abandon(self) {
        let _ = self.files.remove_file(&self.tmp_path);
    }
}

fn put_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    out.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
    out.extend_from_slice(bytes);
}

/// Syncs the directory holding `path`, so a rename or removal in it is
/// durable.
pub(crate) fn sync_dir(files: &dyn FileSystem, path: &Path) -> Result<()> {
    files.sync_dir(parent_of(path)).map_err(StorageError::Disk)
}

/// Reads length-prefixed byte strings and integers off a slice.
struct Reader<'a> {
    bytes: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.bytes.len() < n {
            return None;
        }
        let (head, rest) = self.bytes.split_at(n);
        self.bytes = rest;
        Some(head)
    }
    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }
    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }
    fn bytes(&mut self) -> Option<&'a [u8]> {
        let n = self.u32()? as usize;
        self.take(n)
    }
}

/// A finished run file, open for reading: its index in memory.
#[derive(Debug)]
pub(crate) struct Run {
    path: PathBuf,
    file: Arc<dyn FileHandle>,
    index: Vec<BlockEntry>,
    last_key: Vec<u8>,
    counts: KeyspaceCounts,
    file_bytes: u64,
}

impl Run {
    /// Opens the run file at `path`, checking its footer and index.
    pub(crate) fn open(files: &dyn FileSystem, path: PathBuf) -> Result<Run> {
        let corrupt = |reason: &str| StorageError::CorruptRun {
            path: path.clone(),
            reason: reason.to_string(),
        };
        let file = files
            .open(&path, OpenMode::Read)
            .map_err(StorageError::Disk)?;
        let file_bytes = file.len().map_err(StorageError::Disk)?;
        if file_bytes < (MAGIC.len() + FOOTER_BYTES) as u64 {
            return Err(corrupt("shorter than a header and a footer"));
        }
        let mut footer = [0u8; FOOTER_BYTES];
        read_exact_at(file.as_ref(), &mut footer, file_bytes - FOOTER_BYTES as u64)
            .map_err(StorageError::Disk)?;
        let (body, magic) = footer.split_at(FOOTER_BYTES - MAGIC.len());
        let (summed, crc) = body.split_at(body.len() - 4);
        if magic != MAGIC || crc32fast::hash(summed).to_le_bytes() != crc {
            return Err(corrupt("the footer does not check"));
        }
        let mut fields = Reader { bytes: summed };
        let (index_offset, index_len, keys, tombstones, bytes, index_crc) = (|| {
            Some((
                fields.u64()?,
                fields.u64()?,
                fields.u64()?,
                fields.u64()?,
                fields.u64()?,
                fields.u32()?,
            ))
        })()
        .ok_or_else(|| corrupt("short footer"))?;
        if index_offset.checked_add(index_len) != Some(file_bytes - FOOTER_BYTES as u64) {
            return Err(corrupt("the index is not where the footer says"));
        }
        let mut index = vec![0u8; index_len as usize];
        read_exact_at(file.as_ref(), &mut index, index_offset).map_err(StorageError::Disk)?;
        if crc32fast::hash(&index) != index_crc {
            return Err(corrupt("the index does not check"));
        }
        let (blocks, last_key) = decode_index(&index, index_offset)
            .ok_or_else(|| corrupt("the index does not decode"))?;
        Ok(Run {
            path,
            file,
            index: blocks,
            last_key,
            counts: KeyspaceCounts {
                bytes,
                keys,
                tombstones,
            },
            file_bytes,
        })
    }

    /// Where the run is.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// The lowest data key in the run.
    pub(crate) fn first_key(&self) -> &[u8] {
        &self.index[0].first_key
    }

    /// The highest data key in the run.
    pub(crate) fn last_key(&self) -> &[u8] {
        &self.last_key
    }

    /// What the run holds, counted as `live_size` counts a keyspace.
    pub(crate) fn counts(&self) -> KeyspaceCounts {
        self.counts
    }

    /// The file's size.
    pub(crate) fn file_bytes(&self) -> u64 {
        self.file_bytes
    }

    /// The encoded cell stored at `data_key`, if the run has one.
    pub(crate) fn get(&self, data_key: &[u8]) -> Result<Option<Vec<u8>>> {
        if data_key < self.first_key() || data_key > self.last_key() {
            return Ok(None);
        }
        let block = self
            .index
            .partition_point(|b| b.first_key.as_slice() <= data_key)
            - 1;
        let records = self.read_block(block)?;
        let mut reader = Reader { bytes: &records };
        while !reader.bytes.is_empty() {
            let (key, cell) = self.record(&mut reader)?;
            if key == data_key {
                return Ok(Some(cell.to_vec()));
            }
            if key > data_key {
                break;
            }
        }
        Ok(None)
    }

    /// The run's cells whose data keys lie within the bounds, in order.
    pub(crate) fn range(
        self: &std::sync::Arc<Self>,
        from: Bound<Vec<u8>>,
        to: Bound<Vec<u8>>,
    ) -> RunRange {
        let start_block = match &from {
            Bound::Unbounded => 0,
            Bound::Included(key) | Bound::Excluded(key) => self
                .index
                .partition_point(|b| b.first_key.as_slice() <= key.as_slice())
                .saturating_sub(1),
        };
        RunRange {
            run: std::sync::Arc::clone(self),
            next_block: start_block,
            records: Vec::new(),
            at: 0,
            from,
            to,
            ended: false,
        }
    }

    fn read_block(&self, block: usize) -> Result<Vec<u8>> {
        let entry = &self.index[block];
        let mut bytes = vec![0u8; entry.len as usize + 4];
        read_exact_at(self.file.as_ref(), &mut bytes, entry.offset).map_err(StorageError::Disk)?;
        let crc = bytes.split_off(entry.len as usize);
        if crc32fast::hash(&bytes).to_le_bytes()[..] != crc[..] {
            return Err(self.corrupt(format!("block {block} does not check")));
        }
        Ok(bytes)
    }

    fn record<'a>(&self, reader: &mut Reader<'a>) -> Result<(&'a [u8], &'a [u8])> {
        match (reader.bytes(), reader.bytes()) {
            (Some(key), Some(cell)) => Ok((key, cell)),
            _ => Err(self.corrupt("a record runs past its block".into())),
        }
    }

    fn corrupt(&self, reason: String) -> StorageError {
        StorageError::CorruptRun {
            path: self.path.clone(),
            reason,
        }
    }
}

fn decode_index(index: &[u8], index_offset: u64) -> Option<(Vec<BlockEntry>, Vec<u8>)> {
    let mut reader = Reader { bytes: index };
    let count = reader.u32()? as usize;
    let mut blocks = Vec::with_capacity(count.min(index.len() / 16));
    for _ in 0..count {
        let first_key = reader.bytes()?.to_vec();
        let (offset, len) = (reader.u64()?, reader.u32()?);
        let in_order = blocks
            .last()
            .is_none_or(|b: &BlockEntry| b.first_key < first_key);
        if !in_order || offset.checked_add(u64::from(len) + 4)? > index_offset {
            return None;
        }
        blocks.push(BlockEntry {
            first_key,
            offset,
            len,
        });
    }
    let last_key = reader.bytes()?.to_vec();
    let sane = !blocks.is_empty()
        && reader.bytes.is_empty()
        && blocks.last().is_some_and(|b| b.first_key <= last_key);
    sane.then_some((blocks, last_key))
}

/// An iterator over a run's cells in a key range: `(data key, encoded cell)`.
pub(crate) struct RunRange {
    run: std::sync::Arc<Run>,
    next_block: usize,
    records: Vec<u8>,
    at: usize,
    from: Bound<Vec<u8>>,
    to: Bound<Vec<u8>>,
    ended: bool,
}

impl RunRange {
    fn next_record(&mut self) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        loop {
            if self.at < self.records.len() {
                let mut reader = Reader {
                    bytes: &self.records[self.at..],
                };
                let before = reader.bytes.len();
                let (key, cell) = self.run.record(&mut reader)?;
                let (key, cell) = (key.to_vec(), cell.to_vec());
                self.at += before - reader.bytes.len();
                return Ok(Some((key, cell)));
            }
            if self.next_block >= self.run.index.len() {
                return Ok(None);
            }
            self.records = self.run.read_block(self.next_block)?;
            self.at = 0;
            self.next_block += 1;
        }
    }
}

impl Iterator for RunRange {
    type Item = Result<(Vec<u8>, Vec<u8>)>;

    fn next(&mut self) -> Option<Self::Item> {
        while !self.ended {
            let (key, cell) = match self.next_record() {
                Ok(Some(record)) => record,
                Ok(None) => break,
                Err(error) => {
                    self.ended = true;
                    return Some(Err(error));
                }
            };
            let below = match &self.from {
                Bound::Included(from) => key < *from,
                Bound::Excluded(from) => key <= *from,
                Bound::Unbounded => false,
            };
            if below {
                continue;
            }
            let above = match &self.to {
                Bound::Included(to) => key > *to,
                Bound::Excluded(to) => key >= *to,
                Bound::Unbounded => false,
            };
            if above {
                break;
            }
            return Some(Ok((key, cell)));
        }
        self.ended = true;
        None
    }
}
