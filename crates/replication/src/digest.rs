//! Digests: a 64-bit fingerprint of what a replica holds for a key.
//!
//! A digest read asks a replica for [`Digest::of`] its cell instead of the
//! cell itself; the coordinator compares it with the digest of the data it
//! got. The hash is the first 64 bits (h1) of Cassandra's MurmurHash3
//! x64_128, seed 0, over [`Cell::canonical_bytes`] — the same function on
//! every node, so equal cells give equal digests everywhere. Those bytes do
//! not change with the format a node stores cells in (format 2 added a
//! checksum), so nodes of two builds agree during a rolling upgrade.
//!
//! # Caveats
//! - 64 bits: an accidental collision between different cells is negligible;
//!   a deliberate one is not defended against (nor is it in Cassandra).

use std::fmt;

use ringstore_cell::Cell;
use ringstore_placement::cassandra_murmur3_x64_128;

/// The fingerprint of a replica's cell for a key (or of its absence).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Digest(pub u64);

/// What is hashed when a replica has no cell for the key. Every cell
/// encoding starts with a non-zero format byte and is at least 10 bytes
/// long, so no cell encodes to this.
const NO_CELL: &[u8] = &[0];

impl Digest {
    /// The digest of `cell`, or of "no cell" for `None`.
    pub fn of(cell: Option<&Cell>) -> Digest {
        let (h1, _) = match cell {
            Some(cell) => cassandra_murmur3_x64_128(&cell.canonical_bytes(), 0),
            None => cassandra_murmur3_x64_128(NO_CELL, 0),
        };
        Digest(h1)
    }
}

impl fmt::Display for Digest {
    /// 16 lower-case hex digits.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:016x}", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ringstore_cell::Timestamp;

    #[test]
    fn equal_cells_have_equal_digests_and_different_ones_differ() {
        let a = Cell::live(Timestamp(5), b"v".to_vec());
        assert_eq!(Digest::of(Some(&a)), Digest::of(Some(&a.clone())));
        let later = Cell::live(Timestamp(6), b"v".to_vec());
        let other_value = Cell::live(Timestamp(5), b"w".to_vec());
        let expiring = Cell::expiring(Timestamp(5), b"v".to_vec(), 10, Timestamp(5));
        let tombstone = Cell::tombstone(Timestamp(5));
        let digests =
            [&a, &later, &other_value, &expiring, &tombstone].map(|c| Digest::of(Some(c)));
        for (i, x) in digests.iter().enumerate() {
            for y in &digests[i + 1..] {
                assert_ne!(x, y);
            }
        }
    }

    #[test]
    fn no_cell_has_its_own_digest() {
        let none = Digest::of(None);
        assert_eq!(none, Digest::of(None));
        assert_ne!(none, Digest::of(Some(&Cell::tombstone(Timestamp(0)))));
        assert_ne!(none, Digest::of(Some(&Cell::live(Timestamp(0), vec![]))));
    }

    #[test]
    fn the_digest_is_murmur3_h1_of_the_cell_s_canonical_bytes() {
        let cell = Cell::live(Timestamp(42), b"value".to_vec());
        let (h1, _) = cassandra_murmur3_x64_128(&cell.canonical_bytes(), 0);
        assert_eq!(Digest::of(Some(&cell)), Digest(h1));
        assert_eq!(Digest(0xab).to_string(), "00000000000000ab");
    }
}
