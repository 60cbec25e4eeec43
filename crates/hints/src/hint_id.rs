//! `HintId`: where a hint lives in the hints tree, and the key encoding that
//! makes one target's hints a single range scan, oldest first.
//!
//! # Key layout
//! ```text
//! target (16, the UUID's bytes) | created_at (8, i64 with the sign bit
//!   flipped, BE) | sequence (8, u64 BE)
//! ```
//! Flipping the sign bit turns two's-complement order into unsigned byte
//! order, so the byte order of keys is the order of `(target, created_at,
//! sequence)` — the derived [`Ord`] of [`HintId`]. The sequence number is
//! unique within a [`HintStore`](crate::HintStore) (it resumes past the
//! largest one found on open), so two hints with the same target and time
//! never collide.
//!
//! Keys carry no version byte: this layout is version 1 of the `hints` tree,
//! and a new layout would be migrated by rewriting every entry on open (the
//! values, which do carry a version, hold everything needed to rebuild keys).

use ringstore_cell::Timestamp;
use ringstore_placement::HostId;
use uuid::Uuid;

use crate::error::{HintsError, Result};

/// The length of every key in the hints tree.
pub(crate) const KEY_LEN: usize = 16 + 8 + 8;

/// The identity of a stored hint, handed out by
/// [`HintStore::next_batch`](crate::HintStore::next_batch) and given back to
/// [`HintStore::delete`](crate::HintStore::delete) once the target acknowledged.
/// Ordered like the hints tree: by target, then age (oldest first).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct HintId {
    target: HostId,
    created_at: Timestamp,
    sequence: u64,
}

impl HintId {
    pub(crate) fn new(target: HostId, created_at: Timestamp, sequence: u64) -> HintId {
        HintId {
            target,
            created_at,
            sequence,
        }
    }

    /// The replica the hint is for.
    pub fn target(&self) -> HostId {
        self.target
    }

    /// When the hint was stored.
    pub fn created_at(&self) -> Timestamp {
        self.created_at
    }

    /// The store-wide sequence number that makes the id unique.
    pub fn sequence(&self) -> u64 {
        self.sequence
    }

    /// The tree key, as in the module docs.
    pub(crate) fn to_key(self) -> [u8; KEY_LEN] {
        let mut key = [0; KEY_LEN];
        key[..16].copy_from_slice(self.target.0.as_bytes());
        key[16..24].copy_from_slice(&flip(self.created_at.0).to_be_bytes());
        key[24..].copy_from_slice(&self.sequence.to_be_bytes());
        key
    }

    /// Parses a tree key.
    pub(crate) fn from_key(key: &[u8]) -> Result<HintId> {
        let corrupt = || HintsError::CorruptKey {
            reason: format!("{} bytes, expected {KEY_LEN}", key.len()),
        };
        let key: &[u8; KEY_LEN] = key.try_into().map_err(|_| corrupt())?;
        let (target, rest) = key.split_first_chunk::<16>().ok_or_else(corrupt)?;
        let (created_at, sequence) = rest.split_first_chunk::<8>().ok_or_else(corrupt)?;
        let sequence: &[u8; 8] = sequence.try_into().map_err(|_| corrupt())?;
        Ok(HintId {
            target: HostId(Uuid::from_bytes(*target)),
            created_at: Timestamp(unflip(u64::from_be_bytes(*created_at))),
            sequence: u64::from_be_bytes(*sequence),
        })
    }

    /// The first and last possible keys of `target`'s hints (inclusive).
    pub(crate) fn key_range(target: HostId) -> ([u8; KEY_LEN], [u8; KEY_LEN]) {
        let mut first = [0; KEY_LEN];
        first[..16].copy_from_slice(target.0.as_bytes());
        let mut last = [0xFF; KEY_LEN];
        last[..16].copy_from_slice(target.0.as_bytes());
        (first, last)
    }
}

/// An `i64` as a `u64` whose unsigned order is the signed order.
fn flip(value: i64) -> u64 {
    (value as u64) ^ (1 << 63)
}

fn unflip(value: u64) -> i64 {
    (value ^ (1 << 63)) as i64
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn any_id() -> impl Strategy<Value = HintId> {
        (0u128..4, any::<i64>(), any::<u64>())
            .prop_map(|(t, c, s)| HintId::new(HostId::from_u128(t), Timestamp(c), s))
    }

    #[test]
    fn keys_of_the_wrong_length_are_refused() {
        assert!(HintId::from_key(&[0; KEY_LEN - 1]).is_err());
        assert!(HintId::from_key(&[0; KEY_LEN + 1]).is_err());
    }

    proptest! {
        #[test]
        fn ids_round_trip_through_their_keys(id in any_id()) {
            prop_assert_eq!(HintId::from_key(&id.to_key()).unwrap(), id);
        }

        #[test]
        fn key_byte_order_is_target_then_age_then_sequence(a in any_id(), b in any_id()) {
            prop_assert_eq!(a.to_key().cmp(&b.to_key()), a.cmp(&b));
        }

        #[test]
        fn a_targets_keys_lie_in_its_key_range(id in any_id()) {
            let (first, last) = HintId::key_range(id.target());
            prop_assert!(first <= id.to_key() && id.to_key() <= last);
        }
    }
}
