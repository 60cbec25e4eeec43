//! A stored value with its write timestamp, optional expiry, or a tombstone,
//! and the last-write-wins rule that reconciles two versions.
//!
//! Two clocks meet in a cell and are kept apart:
//! - The **timestamp** is the time the write claims (the client's, or the
//!   coordinator's): it orders writes.
//! - The **expiry** of a TTL write is the coordinator's wall time when it
//!   accepted the write plus the TTL (Cassandra's local deletion time), so a
//!   write back-dated by its client still lives for its whole TTL.
//!
//! Which version wins ([`Cell::compare`]) depends on the two cells only, never
//! on the time of the merge: replicas merging the same versions before and
//! after an expiry keep the same winner (CASSANDRA-14592). Only what a client
//! sees ([`Cell::visible_value`]) depends on the time of the read.
//!
//! # Stored formats
//! ```text
//! format 1: 1 | flags | timestamp (8, BE) | [expiry (8, BE)] | value
//! format 2: 2 | flags | timestamp (8, BE) | [expiry (8, BE)] | value | crc32 (4, BE)
//! ```
//! Every [`Cell::encode`] writes format 2, whose CRC-32 (crc32fast, over
//! every byte before it) lets a cell check itself wherever its bytes come
//! from: an engine that hands back flipped bytes (sled's cache, the
//! simulation's stand-in engine), a run, a hint. [`Cell::decode`] still
//! reads format 1, which has no checksum: a store written by an earlier build
//! keeps its cells as they are, and each moves to format 2 when a write,
//! a repair or a fold next rewrites its key (migration by rewrite; no pass
//! over the data). Until then a damaged format-1 cell is caught only if its
//! damage breaks the layout, or by the check of the path it came through.
//! Both formats keep the flags at byte 1, so the live counts read them
//! without decoding ([`Cell::encoded_is_tombstone`]).
//!
//! What nodes compare with each other (read digests, Merkle row hashes,
//! stream checksums) is [`Cell::canonical_bytes`], format 1's bytes, not the
//! stored encoding: it names a version of a cell whatever format a node
//! stores it in, so nodes of two builds agree on it during a rolling upgrade
//! and no check of the wire pays for the stored CRC.
//!
//! A build from before format 2 refuses format-2 cells as corrupt: once
//! a node has written with this build, it cannot be downgraded in place.

use std::cmp::Ordering;
use std::fmt;

/// Microseconds since the Unix epoch: the time a write claims, and the unit
/// of expiry times. Coordinators issue them strictly increasing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Timestamp(pub i64);

impl Timestamp {
    /// The current wall-clock time.
    pub fn now() -> Timestamp {
        let micros = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_micros() as i64)
            .unwrap_or(0);
        Timestamp(micros)
    }

    /// `self` plus `seconds`, saturating.
    pub fn plus_seconds(self, seconds: u32) -> Timestamp {
        Timestamp(self.0.saturating_add(i64::from(seconds) * 1_000_000))
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// One version of a key's value: a live value (possibly expiring) or a
/// tombstone. Replicas keep, per key, the version that wins by [`Cell::reconcile`].
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Cell {
    /// The time the write claims; orders writes.
    pub timestamp: Timestamp,
    /// When the cell began hiding its key, on the coordinator's wall clock
    /// (Cassandra's *local deletion time*), independent of `timestamp`:
    /// for a TTL write, when it stops being visible (the time the write was
    /// accepted plus the TTL); for a tombstone, when the delete was accepted
    /// ([`Cell::deletion`]; `None` for tombstones made without it);
    /// `None` for a value that never expires.
    pub expires_at: Option<Timestamp>,
    /// The value; `None` for a tombstone (a delete).
    pub value: Option<Vec<u8>>,
}

/// The first byte of a cell encoded by [`Cell::encode`]: its format version
/// (see the module docs).
const CELL_FORMAT: u8 = 2;
/// The format without a checksum: still read, and the layout of
/// [`Cell::canonical_bytes`].
const CELL_FORMAT_UNCHECKED: u8 = 1;
const FLAG_TOMBSTONE: u8 = 1;
const FLAG_EXPIRES: u8 = 2;
/// Bytes of the header both formats share: format version and flags.
const HEADER_LEN: usize = 2;
/// Bytes of format 2's trailing CRC-32.
const CRC_LEN: usize = 4;

/// Why stored bytes do not read back as a cell.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CellDamage {
    /// The bytes end before the named part.
    #[error("truncated: no room for its {0}")]
    Truncated(&'static str),
    /// The first byte names no format this build knows.
    #[error("unknown cell format {0}")]
    UnknownFormat(u8),
    /// A format-2 cell whose bytes do not match its CRC-32.
    #[error("checksum mismatch: stored {stored:08x}, computed {computed:08x}")]
    Checksum {
        /// The CRC the cell carries.
        stored: u32,
        /// The CRC of the bytes it covers.
        computed: u32,
    },
    /// Flags that no format defines.
    #[error("unknown flags {0:#x}")]
    UnknownFlags(u8),
    /// A tombstone followed by value bytes.
    #[error("a tombstone with a value")]
    TombstoneWithValue,
}

impl Cell {
    /// A live value written at `timestamp` that never expires.
    pub fn live(timestamp: Timestamp, value: Vec<u8>) -> Cell {
        Cell {
            timestamp,
            expires_at: None,
            value: Some(value),
        }
    }

    /// A live value written at `timestamp` that stops being visible
    /// `ttl_seconds` after `now`, the coordinator's current wall time: the TTL
    /// counts from when the write is accepted, not from its timestamp.
    pub fn expiring(
        timestamp: Timestamp,
        value: Vec<u8>,
        ttl_seconds: u32,
        now: Timestamp,
    ) -> Cell {
        Cell {
            timestamp,
            expires_at: Some(now.plus_seconds(ttl_seconds)),
            value: Some(value),
        }
    }

    /// A deletion at `timestamp`.
    pub fn tombstone(timestamp: Timestamp) -> Cell {
        Cell {
            timestamp,
            expires_at: None,
            value: None,
        }
    }

    /// A deletion at `timestamp`, accepted by its coordinator at wall time
    /// `now`: tombstone garbage collection counts from `now`, whatever
    /// timestamp the client claimed (see [`Cell::deletion_time`]).
    pub fn deletion(timestamp: Timestamp, now: Timestamp) -> Cell {
        Cell {
            timestamp,
            expires_at: Some(now),
            value: None,
        }
    }

    /// When the cell began (or begins) hiding its key on its coordinator's
    /// wall clock: a tombstone's deletion time (its timestamp if it has
    /// none), a TTL cell's expiry; `None` for a value that never expires.
    /// Garbage collection of the cell counts from this time.
    pub fn deletion_time(&self) -> Option<Timestamp> {
        if self.is_tombstone() {
            Some(self.expires_at.unwrap_or(self.timestamp))
        } else {
            self.expires_at
        }
    }

    /// Whether the cell is a deletion (it has no value).
    pub fn is_tombstone(&self) -> bool {
        self.value.is_none()
    }

    /// Whether `bytes` are of the format [`Cell::encode`] writes (not
    /// whether they decode).
    pub fn is_current_format(bytes: &[u8]) -> bool {
        bytes.first() == Some(&CELL_FORMAT)
    }

    /// Whether the encoded cell `bytes` (either format) is a tombstone,
    /// read from its flags without decoding or checking it (`false` for
    /// bytes too short to hold them or of an unknown format).
    pub fn encoded_is_tombstone(bytes: &[u8]) -> bool {
        match bytes {
            [CELL_FORMAT | CELL_FORMAT_UNCHECKED, flags, ..] => flags & FLAG_TOMBSTONE != 0,
            _ => false,
        }
    }

    /// Whether the cell hides the key at `now`: a tombstone, or expired.
    pub fn is_deleted_at(&self, now: Timestamp) -> bool {
        self.is_tombstone() || self.expires_at.is_some_and(|at| at <= now)
    }

    /// The value visible at `now`, if any.
    pub fn visible_value(&self, now: Timestamp) -> Option<&[u8]> {
        if self.is_deleted_at(now) {
            None
        } else {
            self.value.as_deref()
        }
    }

    /// Last-write-wins, from the two cells alone: the higher timestamp wins;
    /// on equal timestamps a tombstone wins over a live cell, then an
    /// expiring cell over a non-expiring one, then the later expiry, then the
    /// greater value bytes.
    ///
    /// A total order that is `Equal` only for equal cells, and independent of
    /// the time: every replica picks the same winner from the same versions
    /// whenever it merges them. (Deciding by "expired at the time of the
    /// merge" instead would let replicas merging before and after an expiry
    /// keep different winners forever, CASSANDRA-14592.)
    pub fn compare(&self, other: &Cell) -> Ordering {
        self.timestamp
            .cmp(&other.timestamp)
            .then_with(|| self.is_tombstone().cmp(&other.is_tombstone()))
            // `None < Some`: an expiring cell wins, then the later expiry.
            .then_with(|| self.expires_at.cmp(&other.expires_at))
            .then_with(|| self.value.cmp(&other.value))
    }

    /// The winner of `self` and `other` by [`Cell::compare`].
    pub fn reconcile(self, other: Cell) -> Cell {
        if other.compare(&self) == Ordering::Greater {
            other
        } else {
            self
        }
    }

    /// Encodes in format 2 (see the module docs): what the store, the
    /// commit log, runs, hints and snapshots keep.
    pub fn encode(&self) -> Vec<u8> {
        let mut bytes = Vec::with_capacity(self.encoded_len());
        self.encode_into(&mut bytes);
        bytes
    }

    /// The length of [`Cell::encode`]'s output, computed without encoding.
    pub fn encoded_len(&self) -> usize {
        self.canonical_len() + CRC_LEN
    }

    /// [`Cell::encode`], appended to `bytes`.
    pub fn encode_into(&self, bytes: &mut Vec<u8>) {
        let start = bytes.len();
        self.body_into(CELL_FORMAT, bytes);
        let crc = crc32fast::hash(&bytes[start..]);
        bytes.extend_from_slice(&crc.to_be_bytes());
    }

    /// The bytes that name this version of the cell on every node, whatever
    /// format it stores: exactly format 1's encoding, without a checksum.
    /// What read digests, Merkle row hashes and stream checksums are
    /// computed over (see the module docs); never stored by this build.
    pub fn canonical_bytes(&self) -> Vec<u8> {
        let mut bytes = Vec::with_capacity(self.canonical_len());
        self.body_into(CELL_FORMAT_UNCHECKED, &mut bytes);
        bytes
    }

    /// The length of [`Cell::canonical_bytes`], computed without encoding.
    pub fn canonical_len(&self) -> usize {
        HEADER_LEN
            + 8
            + if self.expires_at.is_some() { 8 } else { 0 }
            + self.value.as_ref().map_or(0, Vec::len)
    }

    /// Appends `format | flags | timestamp | [expiry] | value`.
    fn body_into(&self, format: u8, bytes: &mut Vec<u8>) {
        let mut flags = 0;
        if self.is_tombstone() {
            flags |= FLAG_TOMBSTONE;
        }
        if self.expires_at.is_some() {
            flags |= FLAG_EXPIRES;
        }
        let value = self.value.as_deref().unwrap_or_default();
        bytes.push(format);
        bytes.push(flags);
        bytes.extend_from_slice(&self.timestamp.0.to_be_bytes());
        if let Some(at) = self.expires_at {
            bytes.extend_from_slice(&at.0.to_be_bytes());
        }
        bytes.extend_from_slice(value);
    }

    /// Decodes either format (see the module docs). Bytes that do not read
    /// back (an unknown format, a layout that does not hold, a format-2 cell
    /// whose CRC does not match) are a [`CellDamage`] naming what is wrong,
    /// never a panic. The storage crate turns it into its `CorruptCell`
    /// error, with the key when it knows it.
    pub fn decode(bytes: &[u8]) -> Result<Cell, CellDamage> {
        let body = match bytes.first() {
            None => return Err(CellDamage::Truncated("header")),
            Some(&CELL_FORMAT_UNCHECKED) => bytes,
            Some(&CELL_FORMAT) => {
                let (body, crc) = bytes
                    .split_last_chunk::<CRC_LEN>()
                    .filter(|(body, _)| body.len() >= HEADER_LEN)
                    .ok_or(CellDamage::Truncated("checksum"))?;
                let stored = u32::from_be_bytes(*crc);
                let computed = crc32fast::hash(body);
                if stored != computed {
                    return Err(CellDamage::Checksum { stored, computed });
                }
                body
            }
            Some(&format) => return Err(CellDamage::UnknownFormat(format)),
        };
        let [_, flags, rest @ ..] = body else {
            return Err(CellDamage::Truncated("header"));
        };
        if flags & !(FLAG_TOMBSTONE | FLAG_EXPIRES) != 0 {
            return Err(CellDamage::UnknownFlags(*flags));
        }
        let (timestamp, rest) = take_i64(rest).ok_or(CellDamage::Truncated("timestamp"))?;
        let (expires_at, rest) = if flags & FLAG_EXPIRES != 0 {
            let (at, rest) = take_i64(rest).ok_or(CellDamage::Truncated("expiry"))?;
            (Some(Timestamp(at)), rest)
        } else {
            (None, rest)
        };
        let value = if flags & FLAG_TOMBSTONE != 0 {
            if !rest.is_empty() {
                return Err(CellDamage::TombstoneWithValue);
            }
            None
        } else {
            Some(rest.to_vec())
        };
        Ok(Cell {
            timestamp: Timestamp(timestamp),
            expires_at,
            value,
        })
    }
}

fn take_i64(bytes: &[u8]) -> Option<(i64, &[u8])> {
    let (head, rest) = bytes.split_first_chunk::<8>()?;
    Some((i64::from_be_bytes(*head), rest))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const NOW: Timestamp = Timestamp(1_000_000_000);
    const AN_HOUR: i64 = 3_600_000_000;

    fn expiring_at(timestamp: i64, expires_at: Timestamp, value: &[u8]) -> Cell {
        Cell {
            timestamp: Timestamp(timestamp),
            expires_at: Some(expires_at),
            value: Some(value.to_vec()),
        }
    }

    #[test]
    fn later_timestamp_wins() {
        let old = Cell::live(Timestamp(1), b"old".to_vec());
        let new = Cell::live(Timestamp(2), b"new".to_vec());
        assert_eq!(old.clone().reconcile(new.clone()), new);
        assert_eq!(new.clone().reconcile(old), new);
    }

    #[test]
    fn on_equal_timestamps_a_tombstone_wins_then_the_greater_value() {
        let live = Cell::live(Timestamp(5), b"zzz".to_vec());
        let dead = Cell::tombstone(Timestamp(5));
        assert_eq!(live.clone().reconcile(dead.clone()), dead);
        let expiring = expiring_at(5, NOW, b"zzz");
        assert_eq!(expiring.reconcile(dead.clone()), dead);
        let a = Cell::live(Timestamp(5), b"a".to_vec());
        let b = Cell::live(Timestamp(5), b"b".to_vec());
        assert_eq!(a.clone().reconcile(b.clone()), b);
        assert_eq!(b.clone().reconcile(a), b);
    }

    #[test]
    fn on_equal_timestamps_an_expiring_cell_wins_then_the_later_expiry() {
        let forever = Cell::live(Timestamp(5), b"zzz".to_vec());
        let soon = expiring_at(5, NOW, b"b");
        let later = expiring_at(5, NOW.plus_seconds(1), b"a");
        assert_eq!(forever.clone().reconcile(soon.clone()), soon);
        assert_eq!(soon.clone().reconcile(forever), soon);
        assert_eq!(soon.clone().reconcile(later.clone()), later);
        assert_eq!(later.clone().reconcile(soon), later);
    }

    #[test]
    fn an_expired_cell_hides_the_key() {
        let expiring = Cell::expiring(Timestamp(1), b"v".to_vec(), 5, NOW);
        assert_eq!(expiring.visible_value(NOW), Some(&b"v"[..]));
        assert_eq!(expiring.visible_value(NOW.plus_seconds(4)), Some(&b"v"[..]));
        assert!(expiring.is_deleted_at(NOW.plus_seconds(5)));
        assert_eq!(expiring.visible_value(NOW.plus_seconds(5)), None);
    }

    #[test]
    fn a_ttl_counts_from_the_time_of_the_write_not_from_its_timestamp() {
        let an_hour_ago = Timestamp(NOW.0 - AN_HOUR);
        let cell = Cell::expiring(an_hour_ago, b"v".to_vec(), 60, NOW);
        assert_eq!(cell.visible_value(NOW), Some(&b"v"[..]));
        assert_eq!(cell.visible_value(NOW.plus_seconds(59)), Some(&b"v"[..]));
        assert_eq!(cell.visible_value(NOW.plus_seconds(60)), None);
    }

    #[test]
    fn merging_before_and_after_an_expiry_picks_the_same_winner() {
        // CASSANDRA-14592: equal timestamps, one cell expiring at NOW, the
        // other with the greater value. Replica A merges them (in one order)
        // before the expiry, replica B (in the other) after it. When the
        // winner depended on the time of the merge, A kept "zzz" visible
        // forever and B hid the key: they never converged.
        let expiring = expiring_at(5, NOW, b"a");
        let forever = Cell::live(Timestamp(5), b"zzz".to_vec());
        let on_a = forever.clone().reconcile(expiring.clone());
        let on_b = expiring.clone().reconcile(forever);
        assert_eq!(
            on_a, expiring,
            "an expiring cell wins over a non-expiring one"
        );
        assert_eq!(on_a, on_b);
        for read_at in [Timestamp(NOW.0 - 1), NOW, NOW.plus_seconds(3600)] {
            assert_eq!(on_a.visible_value(read_at), on_b.visible_value(read_at));
        }
        assert_eq!(on_a.visible_value(Timestamp(NOW.0 - 1)), Some(&b"a"[..]));
        assert_eq!(on_a.visible_value(NOW), None);
    }

    #[test]
    fn corrupt_encodings_are_errors() {
        let damage = |bytes: &[u8]| match Cell::decode(bytes) {
            Err(reason) => reason,
            other => panic!("{bytes:?} decoded as {other:?}"),
        };
        assert_eq!(damage(&[]), CellDamage::Truncated("header"));
        assert_eq!(
            damage(&[9, 0, 0, 0, 0, 0, 0, 0, 0, 0]),
            CellDamage::UnknownFormat(9)
        );
        assert_eq!(
            damage(&[CELL_FORMAT_UNCHECKED, 0, 1, 2]),
            CellDamage::Truncated("timestamp")
        );
        assert_eq!(
            damage(&[CELL_FORMAT_UNCHECKED, 0x80, 0, 0, 0, 0, 0, 0, 0, 0]),
            CellDamage::UnknownFlags(0x80)
        );
        let mut tombstone = Cell::tombstone(Timestamp(1)).canonical_bytes();
        tombstone.push(7);
        assert_eq!(damage(&tombstone), CellDamage::TombstoneWithValue);
        assert_eq!(
            damage(&[CELL_FORMAT, 0, 1, 2]),
            CellDamage::Truncated("checksum")
        );
        // A format-2 cell cut short: what is left fails its checksum.
        let live = Cell::live(Timestamp(1), b"value".to_vec()).encode();
        assert!(matches!(
            damage(&live[..live.len() - 1]),
            CellDamage::Checksum { .. }
        ));
    }

    #[test]
    fn every_single_bit_flip_in_a_stored_cell_is_caught() {
        let cells = [
            Cell::live(
                Timestamp(1_700_000_000_000_000),
                b"a value of some length".to_vec(),
            ),
            Cell::live(Timestamp(-3), Vec::new()),
            Cell::expiring(Timestamp(5), b"v".to_vec(), 60, NOW),
            Cell::tombstone(Timestamp(7)),
            Cell::deletion(Timestamp(7), NOW),
        ];
        for cell in cells {
            let good = cell.encode();
            assert_eq!(good[0], CELL_FORMAT);
            assert_eq!(Cell::decode(&good).unwrap(), cell);
            for bit in 0..good.len() * 8 {
                let mut flipped = good.clone();
                flipped[bit / 8] ^= 1 << (bit % 8);
                assert!(
                    Cell::decode(&flipped).is_err(),
                    "bit {bit} of {cell:?} flipped decoded"
                );
            }
        }
    }

    #[test]
    fn format_1_cells_still_decode_and_both_formats_show_their_flags() {
        let cells = [
            Cell::live(Timestamp(9), b"old".to_vec()),
            Cell::expiring(Timestamp(5), b"v".to_vec(), 60, NOW),
            Cell::deletion(Timestamp(7), NOW),
        ];
        for cell in cells {
            let old = cell.canonical_bytes();
            assert_eq!(old[0], CELL_FORMAT_UNCHECKED);
            assert_eq!(Cell::decode(&old).unwrap(), cell);
            let new = cell.encode();
            assert_eq!(new.len(), cell.encoded_len());
            assert_eq!(new.len(), old.len() + CRC_LEN);
            assert_eq!(new[1..old.len()], old[1..], "the same body");
            for bytes in [&old, &new] {
                assert_eq!(Cell::encoded_is_tombstone(bytes), cell.is_tombstone());
            }
        }
        assert!(!Cell::encoded_is_tombstone(&[9, FLAG_TOMBSTONE]));
        assert!(!Cell::encoded_is_tombstone(&[CELL_FORMAT]));
    }

    fn any_cell() -> impl Strategy<Value = Cell> {
        (
            -5i64..5,
            proptest::option::of(-5i64..5),
            proptest::option::of(proptest::collection::vec(any::<u8>(), 0..3)),
        )
            .prop_map(|(ts, exp, value)| Cell {
                timestamp: Timestamp(ts),
                expires_at: exp.map(Timestamp),
                value,
            })
    }

    /// A replica that receives `cells` in order, each merged with what it
    /// stores; returns what it stores at the end.
    fn replica_applying(cells: &[&Cell]) -> Option<Cell> {
        cells
            .iter()
            .fold(None, |stored: Option<Cell>, &cell| match stored {
                None => Some(cell.clone()),
                Some(stored) => Some(stored.reconcile(cell.clone())),
            })
    }

    proptest! {
        #[test]
        fn cells_round_trip(cell in any_cell()) {
            prop_assert_eq!(Cell::decode(&cell.encode()).unwrap(), cell.clone());
            prop_assert_eq!(Cell::decode(&cell.canonical_bytes()).unwrap(), cell);
        }

        #[test]
        fn reconcile_is_commutative_associative_and_idempotent(a in any_cell(), b in any_cell(), c in any_cell()) {
            prop_assert_eq!(a.clone().reconcile(b.clone()), b.clone().reconcile(a.clone()));
            prop_assert_eq!(
                a.clone().reconcile(b.clone()).reconcile(c.clone()),
                a.clone().reconcile(b.clone().reconcile(c.clone()))
            );
            prop_assert_eq!(a.clone().reconcile(a.clone()), a);
        }

        #[test]
        fn compare_is_a_total_order_equal_only_for_equal_cells(a in any_cell(), b in any_cell()) {
            prop_assert_eq!(a.compare(&b), b.compare(&a).reverse());
            prop_assert_eq!(a.compare(&b) == Ordering::Equal, a == b);
        }

        /// Expiry times and read times are drawn from the same small range,
        /// so reads fall before, at and after the cells' expiries.
        #[test]
        fn replicas_show_the_same_value_at_every_time_whatever_the_order_of_merges(
            a in any_cell(),
            b in any_cell(),
            c in any_cell(),
            read_at in proptest::collection::vec(-8i64..8, 1..6),
        ) {
            let first = replica_applying(&[&a, &b, &c]);
            let second = replica_applying(&[&c, &a, &b]);
            let third = replica_applying(&[&b, &c, &a, &b]);
            prop_assert_eq!(&first, &second);
            prop_assert_eq!(&first, &third);
            for now in read_at.into_iter().map(Timestamp) {
                let seen = |stored: &Option<Cell>| {
                    stored.as_ref().and_then(|cell| cell.visible_value(now)).map(<[u8]>::to_vec)
                };
                prop_assert_eq!(seen(&first), seen(&second));
                prop_assert_eq!(seen(&first), seen(&third));
            }
        }
    }
}
