//! The `paxos` tree: each key's Paxos acceptor state, as opaque bytes.
//!
//! The store keeps the bytes and says when they are durable; the format
//! belongs to its user (the paxos crate's `AcceptorState::encode`, which
//! carries a format byte and a CRC-32), as the `hints` tree's belongs to
//! hinted handoff. The storage crate stays below the paxos crate.
//!
//! # Layout
//! Key `keyspace uuid (16 bytes) ++ key`: a keyspace's state is one prefix
//! of the tree, which garbage collection walks in pages
//! ([`Store::paxos_page`]) and a drop can remove with one range scan. No
//! token in the key: Paxos state is looked up by key, or walked whole per
//! keyspace, never scanned by token range.
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
//! [`Store::paxos_remove`] does not wait either: a purge lost in a crash
//! only brings back state that was purgeable, and still is.

use std::ops::Bound;

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

    /// Up to `limit` entries of keyspace `ks`'s Paxos state, in key order,
    /// starting after `after` (from the first key when `None`): each key
    /// (without the keyspace prefix) with its state's bytes. Reads inline;
    /// a caller walks a keyspace page by page, passing the last key back.
    pub fn paxos_page(
        &self,
        ks: KeyspaceId,
        after: Option<&[u8]>,
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let prefix = ks.0.as_bytes();
        let start = match after {
            Some(key) => Bound::Excluded(paxos_key(ks, key)),
            None => Bound::Included(prefix.to_vec()),
        };
        let end = prefix_end(prefix);
        let end_bound = end.as_deref().map_or(Bound::Unbounded, Bound::Excluded);
        let mut page = Vec::new();
        for entry in self
            .inner
            .paxos
            .range(start.as_ref().map(Vec::as_slice), end_bound)
        {
            if page.len() >= limit {
                break;
            }
            let (key, state) = entry?;
            page.push((key[prefix.len()..].to_vec(), state));
        }
        Ok(page)
    }

    /// Removes the Paxos state of `key` of keyspace `ks`, durable with the
    /// store's next flush (see `store/paxos.rs`). The caller holds the
    /// key's lock and has decided the state may go.
    pub async fn paxos_remove(&self, ks: KeyspaceId, key: &[u8]) -> Result<()> {
        let key = paxos_key(ks, key);
        self.off_worker(move |store| store.write(|| store.inner.paxos.remove(&key).map(drop)))
            .await
            .map(drop)
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

/// The first key past every key starting with `prefix` (`None`: no such key,
/// the prefix is all `0xff`).
fn prefix_end(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < u8::MAX {
            end.push(last + 1);
            return Some(end);
        }
    }
    None
}
