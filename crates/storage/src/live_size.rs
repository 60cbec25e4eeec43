//! Live bytes per keyspace: what a node reports as its `Load`.
//!
//! sled never returns freed space to the file system, so the size of its
//! files only grows: an operator who deletes everything and garbage-collects
//! would see no change in `status`. The store therefore counts, per keyspace,
//! the bytes of what it holds: each stored key plus its encoded cell
//! (tombstones and expired cells included until garbage collection purges
//! them), the same bytes `tablestats` reports. Every write moves its
//! keyspace's counter by the difference between the new and the old stored
//! bytes of its key. The engine's file size is still reported, as the disk
//! the node uses.
//!
//! # Across restarts
//! [`Store::close`](crate::Store::close) saves the counters in the `system`
//! tree (`live-sizes`: a format byte, then a 16-byte keyspace id and an
//! 8-byte count per keyspace). Opening a store takes the record and deletes
//! it, durably, before any write, so a record exists only while the counters
//! it holds are exact. After a crash there is none, and opening recounts by
//! scanning every data tree: a restart after a crash costs one read of the
//! data, a clean restart nothing.
//!
//! # Invariants
//! - Whenever no write is in progress, each keyspace's counter equals the
//!   sum over its stored keys of key length plus encoded cell length.
//! - A keyspace's counter goes with its tree when the keyspace is dropped.
//!
//! # Caveats
//! - The node's metadata, its hints and sled's own overhead are not counted:
//!   they are on disk (see the disk size) but are not the keyspaces' data.

use std::collections::HashMap;
use std::ops::Bound;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use uuid::Uuid;

use crate::engine::{Engine, Tree};
use crate::error::Result;
use crate::key_encoding::TOKEN_LEN;
use crate::keyspace::KeyspaceId;

/// The `system` tree's record of the counters saved by a clean close.
const RECORD: &[u8] = b"live-sizes";
/// The record's format version.
const FORMAT: u8 = 1;
/// The bytes of one keyspace's entry in the record: its id and its count.
const ENTRY_LEN: usize = 16 + 8;

/// One keyspace's live bytes, shared by every writer of the keyspace.
pub(crate) type LiveBytes = Arc<AtomicI64>;

/// The live bytes a stored `(data key, encoded cell)` pair accounts for: the
/// user's key (the data key without its token prefix) and the cell.
pub(crate) fn stored_size(data_key: &[u8], cell: &[u8]) -> i64 {
    (data_key.len().saturating_sub(TOKEN_LEN) + cell.len()) as i64
}

/// Adds to `counter` the change of one key's stored cell from `old` bytes
/// to `new` bytes (`None`: no cell).
pub(crate) fn account(
    counter: &AtomicI64,
    data_key: &[u8],
    old: Option<usize>,
    new: Option<usize>,
) {
    let key = data_key.len().saturating_sub(TOKEN_LEN);
    let size = |cell: Option<usize>| cell.map_or(0, |cell| (key + cell) as i64);
    let delta = size(new) - size(old);
    if delta != 0 {
        counter.fetch_add(delta, Ordering::Relaxed);
    }
}

/// The counter's bytes, never negative.
pub(crate) fn bytes_of(counter: &AtomicI64) -> u64 {
    counter.load(Ordering::Relaxed).max(0) as u64
}

/// The live bytes of every stored keyspace when a store opens: from the
/// record of a clean close, which is then deleted (durably), or else counted
/// from the data trees.
pub(crate) fn recover(
    engine: &dyn Engine,
    system: &dyn Tree,
) -> Result<HashMap<KeyspaceId, LiveBytes>> {
    let saved = system.get(RECORD)?;
    let sizes = match saved.as_deref().and_then(decode) {
        Some(sizes) => {
            system.remove(RECORD)?;
            engine.flush()?;
            sizes
        }
        // No record (a crash), or a damaged one: count.
        None => count(engine)?,
    };
    Ok(sizes
        .into_iter()
        .map(|(ks, bytes)| (ks, Arc::new(AtomicI64::new(bytes as i64))))
        .collect())
}

/// Saves `sizes` for the next open; exact only when no write is in progress
/// (the caller has closed the store), and durable after the next flush.
pub(crate) fn save(system: &dyn Tree, sizes: &HashMap<KeyspaceId, LiveBytes>) -> Result<()> {
    let sizes: HashMap<KeyspaceId, u64> = sizes
        .iter()
        .map(|(ks, counter)| (*ks, bytes_of(counter)))
        .collect();
    system.insert(RECORD, &encode(&sizes)).map(drop)
}

/// The live bytes of every data tree of `engine`, by a full scan.
fn count(engine: &dyn Engine) -> Result<HashMap<KeyspaceId, u64>> {
    let mut sizes = HashMap::new();
    for name in engine.tree_names() {
        let Some(ks) = KeyspaceId::from_data_tree_name(&name) else {
            continue;
        };
        let tree = engine.open_tree(&name)?;
        let mut bytes = 0u64;
        for entry in tree.range(Bound::Unbounded, Bound::Unbounded) {
            let (key, cell) = entry?;
            bytes += stored_size(&key, &cell) as u64;
        }
        sizes.insert(ks, bytes);
    }
    Ok(sizes)
}

fn encode(sizes: &HashMap<KeyspaceId, u64>) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(1 + sizes.len() * ENTRY_LEN);
    bytes.push(FORMAT);
    for (ks, size) in sizes {
        bytes.extend_from_slice(ks.0.as_bytes());
        bytes.extend_from_slice(&size.to_be_bytes());
    }
    bytes
}

/// The counts of a record, or `None` when it is damaged or of an unknown
/// format (then the trees are counted instead).
fn decode(bytes: &[u8]) -> Option<HashMap<KeyspaceId, u64>> {
    let (&format, entries) = bytes.split_first()?;
    if format != FORMAT || entries.len() % ENTRY_LEN != 0 {
        return None;
    }
    Some(
        entries
            .chunks_exact(ENTRY_LEN)
            .map(|entry| {
                let (id, size) = entry.split_at(16);
                let id = Uuid::from_slice(id).expect("16 bytes");
                let size = u64::from_be_bytes(size.try_into().expect("8 bytes"));
                (KeyspaceId(id), size)
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory_engine::MemoryEngine;

    #[test]
    fn a_saved_record_decodes_to_what_was_saved() {
        let sizes: HashMap<KeyspaceId, u64> = (0..5)
            .map(|n| (KeyspaceId::random(), n * 1_000_003))
            .collect();
        assert_eq!(decode(&encode(&sizes)).unwrap(), sizes);
    }

    #[test]
    fn damaged_records_are_refused() {
        let sizes = HashMap::from([(KeyspaceId::random(), 7)]);
        let good = encode(&sizes);
        for bad in [vec![], vec![2], good[..good.len() - 1].to_vec()] {
            assert!(decode(&bad).is_none(), "{bad:?}");
        }
    }

    #[test]
    fn a_damaged_record_makes_open_count_the_trees() {
        let engine = MemoryEngine::new();
        let system = engine.open_tree("system").unwrap();
        let ks = KeyspaceId::random();
        let tree = engine.open_tree(&ks.data_tree_name()).unwrap();
        tree.insert(b"12345678key", b"cell").unwrap();
        system.insert(RECORD, &[FORMAT, 1, 2]).unwrap();
        let sizes = recover(&engine, system.as_ref()).unwrap();
        assert_eq!(bytes_of(&sizes[&ks]), 3 + 4);
    }

    #[test]
    fn accounting_moves_by_the_difference_of_stored_bytes() {
        let counter = AtomicI64::new(0);
        let key = b"12345678k";
        account(&counter, key, None, Some(3));
        assert_eq!(bytes_of(&counter), 1 + 3);
        account(&counter, key, Some(3), Some(6));
        assert_eq!(bytes_of(&counter), 1 + 6);
        account(&counter, key, Some(6), None);
        assert_eq!(bytes_of(&counter), 0);
    }
}
