//! What a replica says about one row without sending it: a 64-bit hash of
//! the whole row for the Merkle tree, and a [`RowVersion`] (the parts of the
//! cell that decide which version wins, plus a hash of the value) for the
//! row-level comparison.

use std::cmp::Ordering;

use ringstore_cell::{Cell, Timestamp};
use xxhash_rust::xxh3::Xxh3;

/// The hash of one row (key and cell) that the Merkle tree folds into its
/// leaves. Every part of the cell counts (timestamp, tombstone, expiry,
/// value), so two replicas agree on a row's hash only if they hold the same
/// version of it, whatever format each stores it in
/// ([`Cell::canonical_bytes`]).
pub fn row_hash(key: &[u8], cell: &Cell) -> u64 {
    let mut hasher = Xxh3::new();
    hasher.update(&(key.len() as u64).to_le_bytes());
    hasher.update(key);
    hasher.update(&cell.canonical_bytes());
    hasher.digest()
}

/// The hash of a cell's value (0 for a tombstone).
fn value_hash(cell: &Cell) -> u64 {
    cell.value.as_deref().map_or(0, xxhash_rust::xxh3::xxh3_64)
}

/// A replica's version of one row, small enough to list by the thousand:
/// everything [`Cell::compare`] looks at, with the value replaced by its hash.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RowVersion {
    /// The cell's write timestamp.
    pub timestamp: Timestamp,
    /// Whether the cell is a tombstone.
    pub tombstone: bool,
    /// The cell's expiry, if it has a TTL.
    pub expires_at: Option<Timestamp>,
    /// A hash of the value (0 for a tombstone).
    pub value_hash: u64,
}

impl RowVersion {
    /// The version of `cell`.
    pub fn of(cell: &Cell) -> RowVersion {
        RowVersion {
            timestamp: cell.timestamp,
            tombstone: cell.is_tombstone(),
            expires_at: cell.expires_at,
            value_hash: value_hash(cell),
        }
    }

    /// [`Cell::compare`] on what the versions hold: `None` when only the
    /// values could decide (same timestamp, kind and expiry, different
    /// values), which takes the cells themselves.
    pub fn compare(&self, other: &RowVersion) -> Option<Ordering> {
        let order = self
            .timestamp
            .cmp(&other.timestamp)
            .then_with(|| self.tombstone.cmp(&other.tombstone))
            .then_with(|| self.expires_at.cmp(&other.expires_at));
        match order {
            Ordering::Equal if self.value_hash != other.value_hash => None,
            order => Some(order),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn live(ts: i64, value: &[u8]) -> Cell {
        Cell::live(Timestamp(ts), value.to_vec())
    }

    #[test]
    fn a_row_hash_changes_with_every_part_of_the_row() {
        let base = row_hash(b"k", &live(1, b"v"));
        assert_eq!(base, row_hash(b"k", &live(1, b"v")));
        assert_ne!(base, row_hash(b"k2", &live(1, b"v")));
        assert_ne!(base, row_hash(b"k", &live(2, b"v")));
        assert_ne!(base, row_hash(b"k", &live(1, b"w")));
        assert_ne!(base, row_hash(b"k", &Cell::tombstone(Timestamp(1))));
        let expiring = Cell::expiring(Timestamp(1), b"v".to_vec(), 5, Timestamp(0));
        assert_ne!(base, row_hash(b"k", &expiring));
    }

    #[test]
    fn versions_compare_as_cells_do_or_say_the_values_must_decide() {
        let cells = [
            live(1, b"a"),
            live(2, b"a"),
            Cell::tombstone(Timestamp(2)),
            Cell::expiring(Timestamp(2), b"a".to_vec(), 5, Timestamp(0)),
            Cell::expiring(Timestamp(2), b"a".to_vec(), 9, Timestamp(0)),
        ];
        for a in &cells {
            for b in &cells {
                let by_version = RowVersion::of(a).compare(&RowVersion::of(b));
                assert_eq!(by_version, Some(a.compare(b)), "{a:?} vs {b:?}");
            }
        }
        assert_eq!(
            RowVersion::of(&live(1, b"a")).compare(&RowVersion::of(&live(1, b"b"))),
            None
        );
    }
}
