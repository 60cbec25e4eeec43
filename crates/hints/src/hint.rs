//! `Hint`: a write a coordinator could not deliver, kept for its target.
//!
//! # Format (version 1)
//! ```text
//! version (1) | target (16) | keyspace (16) | created_at (8, i64 BE)
//!   | key length (4, u32 BE) | key | cell (the rest: `Cell::encode`)
//! ```
//! The first byte is the format version; [`Hint::decode`] refuses any other
//! version, and truncated, oversized or garbage input, with an error — never a
//! panic. A new format gets a new version byte and a decoder arm that migrates
//! it to the current [`Hint`].

use ringstore_placement::HostId;
use ringstore_storage::{Cell, KeyspaceId, Timestamp};
use uuid::Uuid;

use crate::error::{HintsError, Result};

/// The format version of an encoded hint (its first byte).
pub const HINT_FORMAT: u8 = 1;

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
        // Mirrors `Cell::encode`: version, flags, timestamp, optional expiry, value.
        let cell = 2
            + 8
            + if self.cell.expires_at.is_some() { 8 } else { 0 }
            + self.cell.value.as_ref().map_or(0, Vec::len);
        (HEADER_LEN + self.key.len() + cell) as u64
    }

    /// Encodes as described in the module docs.
    ///
    /// # Panics
    /// If the key is longer than `u32::MAX` bytes (ringstore's keys are far
    /// smaller; the coordinator refuses such writes long before).
    pub fn encode(&self) -> Vec<u8> {
        let key_len = u32::try_from(self.key.len()).expect("hint key longer than u32::MAX bytes");
        let cell = self.cell.encode();
        let mut bytes = Vec::with_capacity(HEADER_LEN + self.key.len() + cell.len());
        bytes.push(HINT_FORMAT);
        bytes.extend_from_slice(self.target.0.as_bytes());
        bytes.extend_from_slice(self.keyspace.0.as_bytes());
        bytes.extend_from_slice(&self.created_at.0.to_be_bytes());
        bytes.extend_from_slice(&key_len.to_be_bytes());
        bytes.extend_from_slice(&self.key);
        bytes.extend_from_slice(&cell);
        bytes
    }

    /// Decodes what [`Hint::encode`] wrote. Any other input is an error.
    pub fn decode(bytes: &[u8]) -> Result<Hint> {
        let corrupt = |reason: String| HintsError::CorruptHint { reason };
        let Some((&format, rest)) = bytes.split_first() else {
            return Err(corrupt("empty".into()));
        };
        if format != HINT_FORMAT {
            return Err(corrupt(format!("unknown hint format {format}")));
        }
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
        bytes[0] = 2;
        let error = Hint::decode(&bytes).unwrap_err();
        assert!(error.is_corruption());
        assert!(
            error.to_string().contains("unknown hint format 2"),
            "{error}"
        );
    }

    #[test]
    fn every_truncation_is_refused() {
        let bytes = sample().encode();
        // The cell's value runs to the end, so a truncation inside it is a
        // different (shorter) value, not an error: check the fixed-size parts.
        let fixed = HEADER_LEN + sample().key.len() + 2 + 8 + 8;
        for len in 0..fixed {
            assert!(
                Hint::decode(&bytes[..len]).is_err(),
                "prefix of {len} bytes"
            );
        }
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
            prop_assert_eq!(Hint::decode(&bytes).unwrap(), hint);
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
