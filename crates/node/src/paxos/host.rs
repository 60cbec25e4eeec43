//! What a Paxos replica needs of the node it runs on: the
//! [`PaxosReplicaHost`] trait. The node's context implements it (in
//! `node/hosts/paxos.rs`), so nothing in `paxos/` names the context, and a
//! test drives the replica with a double over a real store.

use ringstore_storage::{KeyspaceId, Store};

use crate::error::Result;
use crate::paxos::floors::PaxosFloors;
use crate::paxos::key_locks::KeyLocks;

/// What this node's Paxos replica uses of the node.
pub trait PaxosReplicaHost: Send + Sync {
    /// The node's storage: the `paxos` tree of acceptor state, and the data
    /// a commit's cell is merged into.
    fn store(&self) -> &Store;
    /// The locks that serialize the acceptor calls of one key.
    fn paxos_locks(&self) -> &KeyLocks;
    /// The keyspaces' floors, below which this replica refuses ballots.
    fn paxos_floors(&self) -> &PaxosFloors;
    /// `Ok` when the node takes writes; `UNAVAILABLE` naming the drain or
    /// the disk failure otherwise.
    fn check_serving(&self) -> Result<()>;
    /// `NOT_FOUND` when the node's schema knows keyspace `id` as dropped;
    /// `Ok` otherwise, a keyspace not learned yet included (see the module
    /// essay).
    fn check_keyspace(&self, id: KeyspaceId) -> Result<()>;
}
