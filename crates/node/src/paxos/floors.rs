//! Each keyspace's Paxos floor on this replica: the ballot at or below
//! which it refuses prepares (and below which it refuses accepts), standing
//! in for every promise it purged (`ringstore_paxos`'s `gc.rs`).
//!
//! A floor only rises. It is stored in the store's `system` tree
//! (`paxos_floor/<keyspace id>`, a format byte and the ballot) and made
//! durable **before** any state is purged under it: a restarted replica
//! that forgot its floor would have forgotten the promises it purged too.
//! The floors read so far are cached; a keyspace's floor is read from the
//! store the first time a call needs it, so starting a node reads nothing.
//!
//! Readers take the cached floor under the key's lock; a purge takes the
//! same lock after the raise is cached, so a call that runs after a key
//! was purged always sees the floor that covers it.

use std::collections::HashMap;
use std::sync::Mutex;

use ringstore_paxos::Ballot;
use ringstore_storage::{KeyspaceId, Store};

use crate::error::{PaxosReplicaError, Result};

/// The format byte of a stored floor.
const FLOOR_FORMAT: u8 = 1;

/// The floors of this replica's keyspaces (see the module docs).
#[derive(Debug, Default)]
pub struct PaxosFloors {
    /// The floors read or raised so far; `None`: none is stored.
    known: Mutex<HashMap<KeyspaceId, Option<Ballot>>>,
    /// Raises one at a time: read, store durably, cache.
    raising: tokio::sync::Mutex<()>,
}

impl PaxosFloors {
    /// Keyspace `ks`'s floor (`None`: never raised), from the cache or,
    /// the first time, from `store`.
    pub fn floor(&self, store: &Store, ks: KeyspaceId) -> Result<Option<Ballot>> {
        if let Some(floor) = self.cached(ks) {
            return Ok(floor);
        }
        let floor = match store.meta_get(&meta_name(ks))? {
            None => None,
            Some(bytes) => Some(decode(ks, &bytes)?),
        };
        let mut known = self.known.lock().unwrap_or_else(|e| e.into_inner());
        // A raise may have cached a newer floor meanwhile: keep the newest.
        let entry = known.entry(ks).or_insert(floor);
        *entry = (*entry).max(floor);
        Ok(*entry)
    }

    /// Raises keyspace `ks`'s floor to `to` if it is lower, durably; the
    /// floor in force afterwards (never below the one before).
    pub async fn raise(&self, store: &Store, ks: KeyspaceId, to: Ballot) -> Result<Ballot> {
        let _one_at_a_time = self.raising.lock().await;
        let current = self.floor(store, ks)?;
        if let Some(current) = current.filter(|current| *current >= to) {
            return Ok(current);
        }
        store.meta_put(&meta_name(ks), &encode(to)).await?;
        self.known
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(ks, Some(to));
        Ok(to)
    }

    fn cached(&self, ks: KeyspaceId) -> Option<Option<Ballot>> {
        let known = self.known.lock().unwrap_or_else(|e| e.into_inner());
        known.get(&ks).copied()
    }
}

/// The `system` tree's name of keyspace `ks`'s floor.
fn meta_name(ks: KeyspaceId) -> String {
    format!("paxos_floor/{ks}")
}

fn encode(floor: Ballot) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(17);
    bytes.push(FLOOR_FORMAT);
    bytes.extend_from_slice(&floor.micros.to_be_bytes());
    bytes.extend_from_slice(&floor.tiebreak.to_be_bytes());
    bytes
}

fn decode(ks: KeyspaceId, bytes: &[u8]) -> Result<Ballot> {
    let corrupt = || PaxosReplicaError::CorruptFloor {
        keyspace: ks,
        length: bytes.len(),
        format: bytes.first().copied(),
    };
    let Some((&FLOOR_FORMAT, rest)) = bytes.split_first() else {
        return Err(corrupt().into());
    };
    let Ok(fields) = <&[u8; 16]>::try_from(rest) else {
        return Err(corrupt().into());
    };
    let (micros, tiebreak) = fields.split_at(8);
    Ok(Ballot {
        micros: i64::from_be_bytes(micros.try_into().map_err(|_| corrupt())?),
        tiebreak: u64::from_be_bytes(tiebreak.try_into().map_err(|_| corrupt())?),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_floor_reads_back_and_damaged_bytes_are_an_error() {
        let ks = KeyspaceId(uuid::Uuid::from_u128(7));
        let floor = Ballot {
            micros: -5,
            tiebreak: u64::MAX,
        };
        assert_eq!(decode(ks, &encode(floor)).unwrap(), floor);
        for damaged in [&[][..], &[1, 2, 3][..], &[9; 17][..]] {
            assert!(decode(ks, damaged).is_err(), "{damaged:?} decoded");
        }
    }
}
