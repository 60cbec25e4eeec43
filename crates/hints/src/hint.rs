//! `Hint`: a write a coordinator could not deliver, kept for its target.
//!
//! # Format (version 2)
//! ```text
//! version (2) | target (16) | keyspace (16) | created_at (8, i64 BE)
//!   | key length (4, u32 BE) | key | cell (`Cell::encode`) | crc32 (4, BE)
//! ```
//! The CRC-32 covers every byte before it. The cell checks itself (its
//! format has a CRC of its own), but a hint's key and keyspace do not: a
//! flipped bit there would replay the write onto another key, a wrong cell
//! sent. So a hint whose bytes do not check is refused as corrupt, and the
//! hint store deletes and counts it, as any undecodable hint.
//!
//! Version 1, which earlier builds wrote, is the same without the trailing
//! CRC (`... | key | cell (the rest)`): still decoded, so hints stored before
//! an upgrade are delivered; they go as they are replayed.
//!
//! The first byte is the format version; [`Hint::decode`] refuses any other
//! version, and truncated, oversized or garbage input, with an error — never a
//! panic. A new format gets a new version byte and a decoder arm that migrates
//! it to the current [`Hint`].

use ringstore_cell::{Cell, KeyspaceId, Timestamp};
use ringstore_placement::HostId;
use uuid::Uuid;

use crate::error::{HintsError, Result};

/// The format version of an encoded hint (its first byte).
pub const HINT_FORMAT: u8 = 2;

/// The format without a checksum of the whole hint, still read.
const HINT_FORMAT_UNCHECKED: u8 = 1;

/// Bytes of format 2's trailing CRC-32.
const CRC_LEN: usize = 4;

/// Bytes of an encoded hint before its key: version, target, keyspace,
/// created_at, key length.
const HEADER_LEN: usize = 1 + 16 + 16 + 8 + 4;

/// One undelivered write for one replica.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Hint {
    /// The replica the write is for.
    pub target: HostId,
    /// The keyspace incarnation written to (a dropped keyspace's hints are
    /// refused by the target's store on replay).
    pub keyspace: KeyspaceId,
    /// The partition key; at most `u32::MAX` bytes.
    pub key: Vec<u8>,
    /// The write itself, with its own timestamp, so replaying it late or twice
    /// is harmless under last-write-wins.
    pub cell: Cell,
    /// When the coordinator stored the hint (µs since the epoch). Hints older
    /// than the keyspace's `gc_grace` are discarded, not replayed.
    pub created_at: Timestamp,
}

impl Hint {
    /// The length of [`Hint::encode`]'s output, in bytes, computed without
    /// encoding: what the per-target cap and the throttle count.
    pub fn size_bytes(&self) -> u64 {
        (HEADER_LEN + self.key.len() + self.cell.encoded_len() + CRC_LEN) as u64
    }

    /// Encodes as described in the module docs.
    ///
    /// # Panics
    /// If the key is longer than `u32::MAX` bytes (ringstore's keys are far
    /// smaller; the coordinator refuses such writes long before).
    pub fn encode(&self) -> Vec<u8> {
        let key_len = u32::try_from(self.key.len()).expect("hint key longer than u32::MAX bytes");
        let cell = self.cell.encode();
        let mut bytes = Vec::with_capacity(HEADER_LEN + self.key.len() + cell.len() + CRC_LEN);
        bytes.push(HINT_FORMAT);
        bytes.extend_from_slice(self.target.0.as_bytes());
        bytes.extend_from_slice(self.keyspace.0.as_bytes());
        bytes.extend_from_slice(&self.created_at.0.to_be_bytes());
        bytes.extend_from_slice(&key_len.to_be_bytes());
        bytes.extend_from_slice(&self.key);
        bytes.extend_from_slice(&cell);
        let crc = crc32fast::hash(&bytes);
        bytes.extend_from_slice(&crc.to_be_bytes());
        bytes
    }

    /// Decodes what [`Hint::encode`] wrote. Any other input is an error.
    pub fn decode(bytes: &[u8]) -> Result<Hint> {
        let corrupt = |reason: String| HintsError::CorruptHint { reason };
        let Some((&format, _)) = bytes.split_first() else {
            return Err(corrupt("empty".into()));
        };
        let checked = match format {
            HINT_FORMAT_UNCHECKED => bytes,
            HINT_FORMAT => {
                let (checked, crc) = bytes
                    .split_last_chunk::<CRC_LEN>()
                    .ok_or_else(|| corrupt("truncated checksum".into()))?;
                let (stored, computed) = (u32::from_be_bytes(*crc), crc32fast::hash(checked));
                if stored != computed {
                    return Err(corrupt(format!(
                        "checksum mismatch: stored {stored:08x}, computed {computed:08x}"
                    )));
                }
                checked
            }
            _ => return Err(corrupt(format!("unknown hint format {format}"))),
        };
        let rest = &checked[1..];
        let (target, rest) = rest
            .split_first_chunk::<16>()
            .ok_or_else(|| corrupt("truncated target".into()))?;
        let (keyspace, rest) = rest
            .split_first_chunk::<16>()
            .ok_or_else(|| corrupt("truncated keyspace".into()))?;
        let (created_at, rest) = rest
            .split_first_chunk::<8>()
            .ok_or_else(|| corrupt("truncated created_at".into()))?;
        let (key_len, rest) = rest
            .split_first_chunk::<4>()
            .ok_or_else(|| corrupt("truncated key length".into()))?;
        let key_len = u32::from_be_bytes(*key_len) as usize;
        if rest.len() < key_len {
            return Err(corrupt(format!(
                "key of {key_len} bytes but only {} left",
                rest.len()
            )));
        }
        let (key, cell) = rest.split_at(key_len);
        let cell = Cell::decode(cell).map_err(|source| HintsError::CorruptCell { source })?;
        Ok(Hint {
            target: HostId(Uuid::from_bytes(*target)),
            keyspace: KeyspaceId(Uuid::from_bytes(*keyspace)),
            key: key.to_vec(),
            cell,
            created_at: Timestamp(i64::from_be_bytes(*created_at)),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn sample() -> Hint {
        Hint {
            target: HostId::from_u128(7),
            keyspace: KeyspaceId(Uuid::from_u128(9)),
            key: b"user:1".to_vec(),
            cell: Cell::expiring(Timestamp(42), b"alice".to_vec(), 60, Timestamp(1_000)),
            created_at: Timestamp(1_000),
        }
    }

    #[test]
    fn the_first_byte_is_the_format_version() {
        assert_eq!(sample().encode()[0], HINT_FORMAT);
    }

    #[test]
    fn unknown_versions_are_refused() {
        let mut bytes = sample().encode();
        bytes[0] = 3;
        let error = Hint::decode(&bytes).unwrap_err();
        assert!(error.is_corruption());
        assert!(
            error.to_string().contains("unknown hint format 3"),
            "{error}"
        );
    }

    #[test]
    fn every_truncation_is_refused() {
        let bytes = sample().encode();
        for len in 0..bytes.len() {
            assert!(
                Hint::decode(&bytes[..len]).is_err(),
                "prefix of {len} bytes"
            );
        }
    }

    #[test]
    fn every_single_bit_flip_is_refused_key_and_keyspace_included() {
        let bytes = sample().encode();
        for bit in 0..bytes.len() * 8 {
            let mut flipped = bytes.clone();
            flipped[bit / 8] ^= 1 << (bit % 8);
            let error = Hint::decode(&flipped).unwrap_err();
            assert!(error.is_corruption(), "bit {bit}: {error}");
        }
    }

    /// What an earlier build stored: version 1, no checksum of the whole.
    fn format_1(hint: &Hint) -> Vec<u8> {
        let mut bytes = vec![HINT_FORMAT_UNCHECKED];
        bytes.extend_from_slice(hint.target.0.as_bytes());
        bytes.extend_from_slice(hint.keyspace.0.as_bytes());
        bytes.extend_from_slice(&hint.created_at.0.to_be_bytes());
        bytes.extend_from_slice(&(hint.key.len() as u32).to_be_bytes());
        bytes.extend_from_slice(&hint.key);
        bytes.extend_from_slice(&hint.cell.canonical_bytes());
        bytes
    }

    #[test]
    fn hints_an_earlier_build_stored_are_still_read() {
        assert_eq!(Hint::decode(&format_1(&sample())).unwrap(), sample());
    }

    #[test]
    fn a_key_length_past_the_end_is_refused() {
        let mut bytes = sample().encode();
        bytes[HEADER_LEN - 4..HEADER_LEN].copy_from_slice(&u32::MAX.to_be_bytes());
        assert!(Hint::decode(&bytes).is_err());
    }

    fn any_hint() -> impl Strategy<Value = Hint> {
        (
            any::<u128>(),
            any::<u128>(),
            proptest::collection::vec(any::<u8>(), 0..40),
            any::<i64>(),
            proptest::option::of(any::<i64>()),
            proptest::option::of(proptest::collection::vec(any::<u8>(), 0..40)),
            any::<i64>(),
        )
            .prop_map(|(target, ks, key, ts, exp, value, created)| Hint {
                target: HostId::from_u128(target),
                keyspace: KeyspaceId(Uuid::from_u128(ks)),
                key,
                cell: Cell {
                    timestamp: Timestamp(ts),
                    expires_at: exp.map(Timestamp),
                    value,
                },
                created_at: Timestamp(created),
            })
    }

    proptest! {
        #[test]
        fn hints_round_trip_through_their_encoding(hint in any_hint()) {
            let bytes = hint.encode();
            prop_assert_eq!(bytes.len() as u64, hint.size_bytes());
            prop_assert_eq!(Hint::decode(&bytes).unwrap(), hint.clone());
            prop_assert_eq!(Hint::decode(&format_1(&hint)).unwrap(), hint);
        }

        #[test]
        fn decoding_arbitrary_bytes_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = Hint::decode(&bytes);
        }

        #[test]
        fn decoding_mutated_hints_never_panics(hint in any_hint(), at in any::<usize>(), byte in any::<u8>()) {
            let mut bytes = hint.encode();
            let at = at % bytes.len();
            bytes[at] = byte;
            if let Ok(decoded) = Hint::decode(&bytes) {
                prop_assert_eq!(decoded.encode(), bytes);
            }
        }
    }
}
