//! Per-key serialization of acceptor calls: a fixed set of striped locks.
//!
//! A key's calls load its state, step it and persist it; two of them
//! interleaving could write back a stale state (a promise going back).
//! Each key hashes to one of [`KeyLocks::STRIPES`] locks, as Cassandra
//! stripes its Paxos locks: memory stays bounded whatever the number of
//! keys, with no table of per-key mutexes to clean up, at the price of two
//! keys in one stripe waiting for each other.
//!
//! The locks are tokio's: a holder waits across `.await` for the state's
//! flush (and a commit's apply), which must not block a worker thread.
//! The stripe is chosen with SipHash under fixed keys
//! (`std::hash::DefaultHasher::new`), so a simulation's runs are repeatable.

use std::hash::{Hash, Hasher};

use ringstore_storage::KeyspaceId;
use tokio::sync::{Mutex, MutexGuard};

/// Striped locks over (keyspace, key).
pub struct KeyLocks {
    stripes: Box<[Mutex<()>]>,
}

impl Default for KeyLocks {
    fn default() -> KeyLocks {
        KeyLocks::new(KeyLocks::STRIPES)
    }
}

impl std::fmt::Debug for KeyLocks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyLocks")
            .field("stripes", &self.stripes.len())
            .finish()
    }
}

impl KeyLocks {
    /// The number of stripes a node keeps: 1024, each holding for one
    /// flush at most (a few ms on a synced disk), so two keys in one stripe
    /// rarely wait.
    pub const STRIPES: usize = 1024;

    /// `stripes` locks (at least one).
    pub fn new(stripes: usize) -> KeyLocks {
        KeyLocks {
            stripes: (0..stripes.max(1)).map(|_| Mutex::new(())).collect(),
        }
    }

    /// Waits for the lock of `key` in keyspace `ks`; held until the guard
    /// is dropped.
    pub async fn lock(&self, ks: KeyspaceId, key: &[u8]) -> MutexGuard<'_, ()> {
        self.stripes[self.stripe(ks, key)].lock().await
    }

    /// The stripe of `key` in `ks`.
    fn stripe(&self, ks: KeyspaceId, key: &[u8]) -> usize {
        let mut hasher = std::hash::DefaultHasher::new();
        ks.0.hash(&mut hasher);
        key.hash(&mut hasher);
        // The remainder is below `stripes.len()`, a `usize`.
        usize::try_from(hasher.finish() % self.stripes.len() as u64).unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_always_takes_the_same_stripe_and_keys_spread_over_them() {
        let locks = KeyLocks::new(16);
        let ks = KeyspaceId::random();
        assert_eq!(locks.stripe(ks, b"k"), locks.stripe(ks, b"k"));
        let used: std::collections::HashSet<usize> = (0..200)
            .map(|i| locks.stripe(ks, format!("key{i}").as_bytes()))
            .collect();
        assert!(used.len() > 8, "{used:?}");
    }

    #[tokio::test]
    async fn a_held_key_is_not_handed_out_twice() {
        let locks = KeyLocks::new(4);
        let ks = KeyspaceId::random();
        let held = locks.lock(ks, b"k").await;
        assert!(locks.stripes[locks.stripe(ks, b"k")].try_lock().is_err());
        drop(held);
        assert!(locks.stripes[locks.stripe(ks, b"k")].try_lock().is_ok());
    }
}
