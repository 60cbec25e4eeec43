//! Live counts per keyspace: the bytes a node reports as its `Load`, and the
//! keys and tombstones `tablestats` and `/metrics` show.
//!
//! sled never returns freed space to the file system, so the size of its
//! files only grows: an operator who deletes everything and garbage-collects
//! would see no change in `status`. The store therefore counts, per keyspace,
//! what it holds: the bytes of each stored key plus its encoded cell
//! (tombstones and expired cells included until garbage collection purges
//! them), the same bytes `tablestats` reports; the keys stored; and how many
//! of their cells are tombstones. Every write moves its keyspace's counts by
//! the difference between the new and the old stored cell of its key, so
//! reading them costs nothing, where a scan would read every cell. The
//! engine's file size is still reported, as the disk the node uses.
//!
//! # Across restarts
//! [`Store::close`](crate::Store::close) saves the counts in the `system`
//! tree (`live-sizes`: a format byte, then per keyspace its 16-byte id and
//! three 8-byte counts: bytes, keys, tombstones). Opening a store takes the
//! record and deletes it, durably, before any write, so a record exists only
//! while the counts it holds are exact. After a crash there is none, and
//! opening recounts by scanning every data tree: a restart after a crash
//! costs one read of the data, a clean restart nothing. A record of an older
//! format (format 1 held bytes only) is recounted the same way.
//!
//! # Invariants
//! - Whenever no write is in progress, each keyspace's counts equal, over its
//!   stored keys: the sum of key length plus encoded cell length, the number
//!   of keys, and the number of tombstone cells.
//! - A keyspace's counts go with its tree when the keyspace is dropped.
//!
//! # Caveats
//! - The node's metadata, its hints and sled's own overhead are not counted:
//!   they are on disk (see the disk size) but are not the keyspaces' data.
//! - The three counters move one after another, so a reader racing a write
//!   may see one moved and not yet the next; each is exact once writes stop.
//! - An expired TTL cell counts as a live key, not a tombstone, until
//!   garbage collection purges it: whether it is visible depends on the time
//!   of the read, not on what is stored.

use std::collections::HashMap;
use std::ops::Bound;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use uuid::Uuid;

use crate::data_tree::DataTree;
use crate::engine::{Engine, Tree};
use crate::error::Result;
use crate::key_encoding::TOKEN_LEN;
use ringstore_cell::Cell;
use ringstore_cell::KeyspaceId;

/// The `system` tree's record of the counts saved by a clean close.
const RECORD: &[u8] = b"live-sizes";
/// The record's format version.
const FORMAT: u8 = 2;
/// The bytes of one keyspace's entry in the record: its id and its counts.
const ENTRY_LEN: usize = 16 + 3 * 8;

/// What a keyspace holds on this node, as [`crate::Store::keyspace_counts`]
/// reports it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KeyspaceCounts {
    /// Bytes of keys and encoded cells (tombstones and expired cells included).
    pub bytes: u64,
    /// Keys stored (tombstones and expired cells included).
    pub keys: u64,
    /// Keys whose cell is a tombstone.
    pub tombstones: u64,
}

/// One keyspace's live counts, shared by every writer of the keyspace.
#[derive(Debug, Default)]
pub(crate) struct LiveCounters {
    bytes: AtomicI64,
    keys: AtomicI64,
    tombstones: AtomicI64,
}

/// A shared handle to one keyspace's counters.
pub(crate) type LiveCounts = Arc<LiveCounters>;

impl LiveCounters {
    fn starting_at(counts: KeyspaceCounts) -> LiveCounters {
        let signed = |n: u64| AtomicI64::new(i64::try_from(n).unwrap_or(i64::MAX));
        LiveCounters {
            bytes: signed(counts.bytes),
            keys: signed(counts.keys),
            tombstones: signed(counts.tombstones),
        }
    }

    /// The counts now, never negative.
    pub(crate) fn get(&self) -> KeyspaceCounts {
        let read = |counter: &AtomicI64| counter.load(Ordering::Relaxed).max(0) as u64;
        KeyspaceCounts {
            bytes: read(&self.bytes),
            keys: read(&self.keys),
            tombstones: read(&self.tombstones),
        }
    }
}

/// What one stored, encoded cell adds to its keyspace's counts, besides its
/// key: its length, and whether it is a tombstone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct StoredCell {
    len: usize,
    tombstone: bool,
}

impl StoredCell {
    /// The stored cell `encoded`, read without decoding it.
    pub(crate) fn of(encoded: &[u8]) -> StoredCell {
        StoredCell {
            len: encoded.len(),
            tombstone: Cell::encoded_is_tombstone(encoded),
        }
    }
}

/// Moves `counters` by the change of one key's stored cell from `old` to
/// `new` (`None`: no cell).
pub(crate) fn account(
    counters: &LiveCounters,
    data_key: &[u8],
    old: Option<StoredCell>,
    new: Option<StoredCell>,
) {
    let key = data_key.len().saturating_sub(TOKEN_LEN);
    let bytes = |cell: Option<StoredCell>| cell.map_or(0, |cell| (key + cell.len) as i64);
    let keys = |cell: Option<StoredCell>| i64::from(cell.is_some());
    let tombstones = |cell: Option<StoredCell>| i64::from(cell.is_some_and(|c| c.tombstone));
    for (counter, delta) in [
        (&counters.bytes, bytes(new) - bytes(old)),
        (&counters.keys, keys(new) - keys(old)),
        (&counters.tombstones, tombstones(new) - tombstones(old)),
    ] {
        if delta != 0 {
            counter.fetch_add(delta, Ordering::Relaxed);
        }
    }
}

/// The counts of every stored keyspace when a store opens: from the record
/// of a clean close, which is then deleted (durably), or else counted from
/// the data trees.
pub(crate) fn recover(
    engine: &dyn Engine,
    system: &dyn Tree,
) -> Result<HashMap<KeyspaceId, LiveCounts>> {
    let saved = system.get(RECORD)?;
    let counts = match saved.as_deref().and_then(decode) {
        Some(counts) => {
            system.remove(RECORD)?;
            engine.flush()?;
            counts
        }
        // No record (a crash), or a damaged or older one: count.
        None => count(engine)?,
    };
    Ok(counts
        .into_iter()
        .map(|(ks, counts)| (ks, Arc::new(LiveCounters::starting_at(counts))))
        .collect())
}

/// Saves `counters` for the next open; exact only when no write is in
/// progress (the caller has closed the store), and durable after the next
/// flush.
pub(crate) fn save(system: &dyn Tree, counters: &HashMap<KeyspaceId, LiveCounts>) -> Result<()> {
    let counts: HashMap<KeyspaceId, KeyspaceCounts> = counters
        .iter()
        .map(|(ks, counters)| (*ks, counters.get()))
        .collect();
    system.insert(RECORD, &encode(&counts)).map(drop)
}

/// The counts of every data tree of `engine`, by a full scan.
fn count(engine: &dyn Engine) -> Result<HashMap<KeyspaceId, KeyspaceCounts>> {
    let mut all = HashMap::new();
    for name in engine.tree_names() {
        let Some(ks) = KeyspaceId::from_data_tree_name(&name) else {
            continue;
        };
        let tree = engine.open_tree(&name)?;
        let counters = LiveCounters::default();
        for entry in tree.range(Bound::Unbounded, Bound::Unbounded) {
            let (key, cell) = entry?;
            account(&counters, &key, None, Some(StoredCell::of(&cell)));
        }
        all.insert(ks, counters.get());
    }
    Ok(all)
}

fn encode(counts: &HashMap<KeyspaceId, KeyspaceCounts>) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(1 + counts.len() * ENTRY_LEN);
    bytes.push(FORMAT);
    for (ks, counts) in counts {
        bytes.extend_from_slice(ks.0.as_bytes());
        for count in [counts.bytes, counts.keys, counts.tombstones] {
            bytes.extend_from_slice(&count.to_be_bytes());
        }
    }
    bytes
}

/// The counts of a record, or `None` when it is damaged or of another
/// format (then the trees are counted instead).
fn decode(bytes: &[u8]) -> Option<HashMap<KeyspaceId, KeyspaceCounts>> {
    let (&format, entries) = bytes.split_first()?;
    if format != FORMAT || entries.len() % ENTRY_LEN != 0 {
        return None;
    }
    let be = |bytes: &[u8]| u64::from_be_bytes(bytes.try_into().expect("8 bytes"));
    Some(
        entries
            .chunks_exact(ENTRY_LEN)
            .map(|entry| {
                let (id, numbers) = entry.split_at(16);
                let id = Uuid::from_slice(id).expect("16 bytes");
                let counts = KeyspaceCounts {
                    bytes: be(&numbers[..8]),
                    keys: be(&numbers[8..16]),
                    tombstones: be(&numbers[16..]),
                };
                (KeyspaceId(id), counts)
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory_engine::MemoryEngine;
    use ringstore_cell::Timestamp;

    fn counts(bytes: u64, keys: u64, tombstones: u64) -> KeyspaceCounts {
        KeyspaceCounts {
            bytes,
            keys,
            tombstones,
        }
    }

    #[test]
    fn a_saved_record_decodes_to_what_was_saved() {
        let all: HashMap<KeyspaceId, KeyspaceCounts> = (0..5)
            .map(|n| (KeyspaceId::random(), counts(n * 1_000_003, n * 7, n)))
            .collect();
        assert_eq!(decode(&encode(&all)).unwrap(), all);
    }

    #[test]
    fn damaged_and_older_records_are_refused() {
        let all = HashMap::from([(KeyspaceId::random(), counts(7, 1, 0))]);
        let good = encode(&all);
        // Format 1: one id and one 8-byte count of bytes.
        let mut format_1 = vec![1];
        format_1.extend_from_slice(&good[1..17]);
        format_1.extend_from_slice(&7u64.to_be_bytes());
        for bad in [vec![], vec![3], good[..good.len() - 1].to_vec(), format_1] {
            assert!(decode(&bad).is_none(), "{bad:?}");
        }
    }

    #[test]
    fn a_damaged_record_makes_open_count_the_trees() {
        let engine = MemoryEngine::new();
        let system = engine.open_tree("system").unwrap();
        let ks = KeyspaceId::random();
        let tree = engine.open_tree(&ks.data_tree_name()).unwrap();
        let (live, tombstone) = (
            Cell::live(Timestamp(1), b"v".to_vec()).encode(),
            Cell::tombstone(Timestamp(2)).encode(),
        );
        tree.insert(b"12345678key", &live).unwrap();
        tree.insert(b"12345678gone", &tombstone).unwrap();
        system.insert(RECORD, &[FORMAT, 1, 2]).unwrap();
        let recovered = recover(&engine, system.as_ref()).unwrap();
        let expected = (3 + live.len() + 4 + tombstone.len()) as u64;
        assert_eq!(recovered[&ks].get(), counts(expected, 2, 1));
    }

    #[test]
    fn accounting_moves_by_the_difference_of_stored_cells() {
        let counters = LiveCounters::default();
        let key = b"12345678k";
        let (live, tombstone) = (
            Cell::live(Timestamp(1), b"abc".to_vec()).encode(),
            Cell::tombstone(Timestamp(2)).encode(),
        );
        let (live, tombstone) = (StoredCell::of(&live), StoredCell::of(&tombstone));
        account(&counters, key, None, Some(live));
        assert_eq!(counters.get(), counts(1 + live.len as u64, 1, 0));
        account(&counters, key, Some(live), Some(tombstone));
        assert_eq!(counters.get(), counts(1 + tombstone.len as u64, 1, 1));
        account(&counters, key, Some(tombstone), None);
        assert_eq!(counters.get(), counts(0, 0, 0));
    }
}
