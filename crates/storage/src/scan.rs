//! `Scan`: the cells of a keyspace in a token range, in token order.
//!
//! A scan runs the (at most two) byte-range scans of
//! [`token_range_scans`] one after the other, decoding each entry into its
//! token, key and cell. For a wrapping range the piece starting at
//! `Token::MIN` comes first, so the whole scan is in ascending token order.
//!
//! # Caveats
//! - Not a snapshot: writes made during the scan may or may not appear.
//! - A corrupt entry yields an error and the scan goes on to the next entry;
//!   an engine error yields an error and ends the scan.
//! - Tombstones and expired cells are returned, not hidden: replication and
//!   streaming need them.

use std::collections::VecDeque;
use std::sync::Arc;

use ringstore_placement::{Token, TokenRange};

use crate::cell::Cell;
use crate::engine::{KvIter, Tree};
use crate::error::Result;
use crate::key_encoding::{OwnedBounds, after_row_bounds, decode_data_key, token_range_scans};

/// An iterator over `(token, key, cell)` for the keys of one keyspace whose
/// tokens lie in a token range, in `(token, key)` order.
pub struct Scan {
    tree: Arc<dyn Tree>,
    /// Byte ranges not yet begun, in order.
    pending: VecDeque<OwnedBounds>,
    current: Option<KvIter>,
    ended: bool,
}

impl Scan {
    pub(crate) fn new(tree: Arc<dyn Tree>, range: TokenRange) -> Scan {
        let pending = token_range_scans(range)
            .iter()
            .map(|r| {
                let (from, to) = r.bounds();
                (from.map(<[u8]>::to_vec), to.map(<[u8]>::to_vec))
            })
            .collect();
        Scan {
            tree,
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
    ) -> Scan {
        Scan {
            tree,
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
    Ok((token, key.to_vec(), Cell::decode(value)?))
}

impl Iterator for Scan {
    type Item = Result<(Token, Vec<u8>, Cell)>;

    fn next(&mut self) -> Option<Self::Item> {
        while !self.ended {
            if let Some(entries) = &mut self.current {
                match entries.next() {
                    Some(Ok((data_key, value))) => return Some(decode_entry(&data_key, &value)),
                    Some(Err(error)) => {
                        self.ended = true;
                        return Some(Err(error));
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
