//! `Scan`: the cells of a keyspace in a token range, in token order.
//!
//! A scan runs the (at most two) byte-range scans of
//! [`token_range_scans`] one after the other, decoding each entry into its
//! token, key and cell. For a wrapping range the piece starting at
//! `Token::MIN` comes first, so the whole scan is in ascending token order.
//!
//! # Caveats
//! - Not a snapshot: writes made during the scan may or may not appear.
//! - A damaged entry (a cell that does not read back, or a data key that is
//!   not `token ++ key`) yields an error and the scan goes on to the next
//!   entry; an engine error yields an error and ends the scan. Every
//!   damaged entry, and an engine error that reports corruption, is counted
//!   and logged here (`damage`), so callers decide only what to do: skip
//!   the row or fail (the node's repair, streaming, cleanup and snapshots
//!   each say which), never send it on.
//! - Tombstones and expired cells are returned, not hidden: replication and
//!   streaming need them.

use std::collections::VecDeque;
use std::sync::Arc;

use ringstore_placement::{Token, TokenRange};

use crate::damage::DamageCount;
use crate::engine::{KvIter, Tree};
use crate::error::{Result, StorageError};
use crate::key_encoding::{OwnedBounds, after_row_bounds, decode_data_key, token_range_scans};
use ringstore_cell::Cell;
use ringstore_cell::KeyspaceId;

/// An iterator over `(token, key, cell)` for the keys of one keyspace whose
/// tokens lie in a token range, in `(token, key)` order.
pub struct Scan {
    tree: Arc<dyn Tree>,
    damage: ScanDamage,
    /// Byte ranges not yet begun, in order.
    pending: VecDeque<OwnedBounds>,
    current: Option<KvIter>,
    ended: bool,
}

/// What a scan counts and logs its damaged entries with: the keyspace it
/// scans and the store's count.
pub(crate) struct ScanDamage {
    pub(crate) ks: KeyspaceId,
    pub(crate) count: Arc<DamageCount>,
}

impl Scan {
    pub(crate) fn new(tree: Arc<dyn Tree>, range: TokenRange, damage: ScanDamage) -> Scan {
        let pending = token_range_scans(range)
            .iter()
            .map(|r| {
                let (from, to) = r.bounds();
                (from.map(<[u8]>::to_vec), to.map(<[u8]>::to_vec))
            })
            .collect();
        Scan {
            tree,
            damage,
            pending,
            current: None,
            ended: false,
        }
    }

    /// The rows strictly after `(after, after_key)` (after every row of
    /// token `after` without a key) up to the last row of token `last`.
    pub(crate) fn after_row(
        tree: Arc<dyn Tree>,
        after: Token,
        after_key: Option<&[u8]>,
        last: Token,
        damage: ScanDamage,
    ) -> Scan {
        Scan {
            tree,
            damage,
            pending: after_row_bounds(after, after_key, last)
                .into_iter()
                .collect(),
            current: None,
            ended: false,
        }
    }
}

fn decode_entry(data_key: &[u8], value: &[u8]) -> Result<(Token, Vec<u8>, Cell)> {
    let (token, key) = decode_data_key(data_key)?;
    let cell = Cell::decode(value).map_err(|reason| StorageError::from(reason).at_key(key))?;
    Ok((token, key.to_vec(), cell))
}

impl Scan {
    /// Counts and logs `error` if it reports damage; returns it.
    fn noted(&self, error: crate::StorageError) -> crate::StorageError {
        if error.is_corruption() {
            let key = match &error {
                crate::StorageError::CorruptCell { key, .. } => key.as_deref(),
                _ => None,
            };
            let doing = "the scan's caller skips the row or fails";
            self.damage
                .count
                .note_and_log(self.damage.ks, key, doing, &error);
        }
        error
    }
}

impl Iterator for Scan {
    type Item = Result<(Token, Vec<u8>, Cell)>;

    fn next(&mut self) -> Option<Self::Item> {
        while !self.ended {
            if let Some(entries) = &mut self.current {
                match entries.next() {
                    Some(Ok((data_key, value))) => {
                        return Some(
                            decode_entry(&data_key, &value).map_err(|error| self.noted(error)),
                        );
                    }
                    Some(Err(error)) => {
                        self.ended = true;
                        return Some(Err(self.noted(error)));
                    }
                    None => self.current = None,
                }
            }
            let Some(range) = self.pending.pop_front() else {
                self.ended = true;
                break;
            };
            let (from, to) = &range;
            self.current = Some(self.tree.range(
                from.as_ref().map(Vec::as_slice),
                to.as_ref().map(Vec::as_slice),
            ));
        }
        None
    }
}
