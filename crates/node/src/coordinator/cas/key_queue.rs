//! Rivals on one key wait their turn here instead of racing.
//!
//! Two compare-and-sets of one key coordinated by one node would pre-empt
//! each other's ballots (each prepare outranks the other's accept), and
//! with random backoff throughput collapses as clients are added
//! (CASSANDRA-15746). This node runs one operation per key at a time, in
//! arrival order (tokio's mutex is fair), and the client library sends a
//! key's operations to one node (its first live replica), so rivals queue
//! instead of racing. Operations on different keys never wait for each
//! other: the table holds one lock per key with an operation running or
//! waiting, and a key's entry goes when its last operation does.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use ringstore_storage::KeyspaceId;
use tokio::sync::{Mutex as TurnLock, OwnedMutexGuard};

type KeyOf = (KeyspaceId, Vec<u8>);

/// The keys with operations running or waiting on this coordinator.
#[derive(Debug, Default)]
pub struct CasQueue {
    /// Held only to look up, insert or remove an entry, never across an
    /// await.
    keys: Mutex<HashMap<KeyOf, Arc<TurnLock<()>>>>,
}

/// A place in a key's queue: once [`CasQueue::wait_turn`] returns, the
/// key's turn, until dropped. Dropped while still waiting (its caller gave
/// up), it leaves the queue.
#[derive(Debug)]
pub struct Turn<'q> {
    queue: &'q CasQueue,
    key: KeyOf,
    lock: Option<Arc<TurnLock<()>>>,
    held: Option<OwnedMutexGuard<()>>,
}

impl CasQueue {
    /// Waits until the operations on `key` of `keyspace` that arrived
    /// earlier are done.
    pub async fn wait_turn(&self, keyspace: KeyspaceId, key: &[u8]) -> Turn<'_> {
        let key = (keyspace, key.to_vec());
        let lock = self.table().entry(key.clone()).or_default().clone();
        let mut turn = Turn {
            queue: self,
            key,
            lock: Some(lock.clone()),
            held: None,
        };
        turn.held = Some(lock.lock_owned().await);
        turn
    }

    /// Keys with an operation running or waiting.
    pub fn busy_keys(&self) -> usize {
        self.table().len()
    }

    fn table(&self) -> std::sync::MutexGuard<'_, HashMap<KeyOf, Arc<TurnLock<()>>>> {
        self.keys.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        let mut table = self.queue.table();
        drop(self.held.take());
        drop(self.lock.take());
        // Every waiter holds a clone, taken under the table's lock: one
        // reference left is the table's own, and nobody waits.
        if table
            .get(&self.key)
            .is_some_and(|lock| Arc::strong_count(lock) == 1)
        {
            table.remove(&self.key);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn ks() -> KeyspaceId {
        KeyspaceId(uuid::Uuid::from_u128(7))
    }

    #[tokio::test(start_paused = true)]
    async fn rivals_on_one_key_take_turns_in_arrival_order_and_other_keys_do_not_wait() {
        let queue = Arc::new(CasQueue::default());
        let first = queue.wait_turn(ks(), b"k").await;
        let (order_tx, mut order) = tokio::sync::mpsc::unbounded_channel();
        for rival in 0..3 {
            let (queue, order_tx) = (queue.clone(), order_tx.clone());
            tokio::spawn(async move {
                let _turn = queue.wait_turn(ks(), b"k").await;
                order_tx.send(rival).unwrap();
                tokio::time::sleep(Duration::from_millis(5)).await;
            });
            // Let each rival reach the queue before the next one.
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        // Another key is not held up by the busy one.
        let other = tokio::time::timeout(Duration::from_millis(1), queue.wait_turn(ks(), b"j"))
            .await
            .expect("another key waits for nobody");
        drop(other);
        assert!(
            order.try_recv().is_err(),
            "nobody ran while the key was held"
        );
        drop(first);
        let mut seen = Vec::new();
        for _ in 0..3 {
            seen.push(order.recv().await.unwrap());
        }
        assert_eq!(seen, vec![0, 1, 2]);
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert_eq!(
            queue.busy_keys(),
            0,
            "the key's entry goes with its last turn"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_waiter_that_gives_up_leaves_no_entry_behind() {
        let queue = CasQueue::default();
        let held = queue.wait_turn(ks(), b"k").await;
        let gave_up =
            tokio::time::timeout(Duration::from_millis(5), queue.wait_turn(ks(), b"k")).await;
        assert!(gave_up.is_err());
        assert_eq!(queue.busy_keys(), 1);
        drop(held);
        assert_eq!(queue.busy_keys(), 0);
    }
}
