//! The damaged cells a store meets: counted (the node's
//! `ringstore_storage_corrupt_reads_total`) and logged.
//!
//! A cell is *damaged* when its stored bytes do not read back
//! ([`StorageError::is_corruption`]): whichever check caught it (the cell's
//! CRC, its layout, or the engine's own). Every path that reads a stored
//! cell counts what it meets here: reads, the merge of a write, scans and
//! the fold. The same damaged cell read twice counts twice; the count says
//! how often a replica could not serve what it stores, not how many cells
//! are damaged.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::{StorageError, printable_key};
use ringstore_cell::KeyspaceId;

/// How many times the store met a damaged cell since it opened.
#[derive(Debug, Default)]
pub(crate) struct DamageCount(AtomicU64);

impl DamageCount {
    /// Counts one meeting with a damaged cell.
    pub(crate) fn note(&self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }

    /// The count so far.
    pub(crate) fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }

    /// Counts one meeting and logs it at error level: in keyspace `ks`, at
    /// `key` when known, while `doing` (what the store does about it).
    pub(crate) fn note_and_log(
        &self,
        ks: KeyspaceId,
        key: Option<&[u8]>,
        doing: &'static str,
        error: &StorageError,
    ) {
        self.note();
        let key = key.map(printable_key).unwrap_or_else(|| "(unknown)".into());
        tracing::error!(keyspace = %ks, %key, %error, "a stored cell does not read back: {doing}");
    }
}
