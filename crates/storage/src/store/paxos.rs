//! The `paxos` tree: each key's Paxos acceptor state, as opaque bytes.
//!
//! The store keeps the bytes and says when they are durable; the format
//! belongs to its user (the paxos crate's `AcceptorState::encode`, which
//! carries a format byte and a CRC-32), as the `hints` tree's belongs to
//! hinted handoff. The storage crate stays below the paxos crate.
//!
//! # Layout
//! Key `keyspace uuid (16 bytes) ++ key`: a keyspace's state is one prefix
//! of the tree, so a later garbage collection or drop can remove it with
//! one range scan. No token in the key: Paxos state is looked up by key,
//! never scanned by token range (yet).
//!
//! # Durability
//! [`Store::paxos_put`] is durable on return whatever the store's
//! [`Durability`](crate::Durability): it waits, as [`Store::meta_put`] does,
//! for an engine flush that started after the write (group-committed with
//! every other writer waiting at that moment). A promise or an accept must
//! be on disk before the replica answers it: a replica that answered and
//! then forgot could promise a lower ballot again, or let a quorum lose a
//! chosen value. [`Store::paxos_put_unflushed`] does not wait: for state
//! whose loss is harmless (a commit's most recent commit ballot), durable
//! with the store's next flush, and never durable without the writes made
//! before it (a flush covers every write made before it).

use ringstore_cell::KeyspaceId;

use super::Store;
use crate::error::Result;
use crate::group_commit::Ticket;

/// The tree of per-key Paxos acceptor state (see `store/paxos.rs`).
pub const PAXOS_TREE: &str = "paxos";

/// The `paxos` tree's key of `key` in keyspace `ks`.
fn paxos_key(ks: KeyspaceId, key: &[u8]) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(16 + key.len());
    bytes.extend_from_slice(ks.0.as_bytes());
    bytes.extend_from_slice(key);
    bytes
}

impl Store {
    /// The Paxos state stored for `key` of keyspace `ks`, as the bytes last
    /// put (`None` if none was). Reads inline, as [`Store::read`] does.
    pub fn paxos_get(&self, ks: KeyspaceId, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.inner.paxos.get(&paxos_key(ks, key))
    }

    /// Stores `state` as the Paxos state of `key` of keyspace `ks`, durable
    /// on return whatever the mode (see `store/paxos.rs`). A caller that
    /// read, changed and writes back the state serializes those steps per
    /// key itself: the store does not compare.
    pub async fn paxos_put(&self, ks: KeyspaceId, key: &[u8], state: &[u8]) -> Result<()> {
        let ticket = self.paxos_insert(ks, key, state).await?;
        self.inner.group.wait(ticket).await
    }

    /// [`Store::paxos_put`] without waiting: durable with the store's next
    /// flush (see [`Store::meta_put_unflushed`]).
    pub async fn paxos_put_unflushed(
        &self,
        ks: KeyspaceId,
        key: &[u8],
        state: &[u8],
    ) -> Result<()> {
        self.paxos_insert(ks, key, state).await.map(drop)
    }

    /// Inserts Paxos state off the async workers; its flush's ticket.
    async fn paxos_insert(&self, ks: KeyspaceId, key: &[u8], state: &[u8]) -> Result<Ticket> {
        let (key, state) = (paxos_key(ks, key), state.to_vec());
        let ((), ticket) = self
            .off_worker(move |store| {
                store.write(|| store.inner.paxos.insert(&key, &state).map(drop))
            })
            .await?;
        Ok(ticket)
    }
}
