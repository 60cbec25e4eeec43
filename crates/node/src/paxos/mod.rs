//! Per-key Paxos, replica side: this node as an acceptor of lightweight
//! transactions.
//!
//! The rules are `ringstore_paxos`'s ([`AcceptorState`](ringstore_paxos::AcceptorState):
//! `prepare`, `accept`, `commit`, each a [`Step`](ringstore_paxos::Step) of
//! state to persist and a reply). This module is their shell: it keeps each
//! key's state on disk, serializes the calls of one key, and answers only
//! once what it answered is durable. The internode service's
//! `PaxosPrepare`, `PaxosAccept` and `PaxosCommit` call [`replica`]'s
//! functions, and so can a coordinator for its own replica, without a
//! network hop: they take a [`PaxosReplicaHost`] (the node's context
//! implements it in `node/hosts/paxos.rs`), plain values in and out.
//!
//! # One call, step by step
//! 1. Admit: the node serves writes (not drained, its disk not failed), the
//!    key is 1 byte to `limits::MAX_KEY_BYTES`, and the keyspace is not one
//!    the node's schema knows as dropped. A keyspace not learned yet is
//!    taken, as a replica write to it is: the coordinator chose the
//!    electorate, a promise or an accept is safe whatever this node knows
//!    of the schema, and a node that restarted with its schema behind
//!    (a torn crash) must not hold up every round it votes in until the
//!    schema catches up (simulation seed 1343 found that: a compare-and-set
//!    refused through a healthy coordinator, the restarted node counted in
//!    its quorum).
//! 2. Lock the key ([`KeyLocks`]): load → step → persist → reply of one key
//!    never interleave, or two concurrent prepares could both load the same
//!    state, both promise, and the older write the last word, a promise
//!    going back.
//! 3. Load the state from the store's `paxos` tree (none stored: the empty
//!    state), raised to the keyspace's floor ([`floors`]: ballots below it
//!    are refused, standing in for the promises a purge deleted). Bytes
//!    that do not decode are a typed error
//!    ([`PaxosReplicaError::CorruptState`](crate::error::PaxosReplicaError),
//!    `DATA_LOSS`), never a panic and never a fresh empty state: a replica
//!    that forgot its promise could promise a lower ballot again.
//! 4. Step the acceptor; persist what it says to persist; reply.
//!    - Prepare: the promise is synced before the reply; the reply then
//!      carries the key's data cell, read after the promise is durable and
//!      under the key's lock, so it holds every commit the reported most
//!      recent commit (MRC) stands for.
//!    - Accept: the accepted proposal is synced before the reply.
//!    - Commit: the proposal's cell is merged into the data through the
//!      store's ordinary `apply` (last write wins, as durable as the node's
//!      durability mode makes any write; reads, hints, repair and streaming
//!      see it as any other write), and only then is the MRC recorded.
//!
//! # Where the state lives, and why it is durable before the reply
//! In the store's own `paxos` tree (`ringstore_storage`'s `store/paxos.rs`),
//! keyed `keyspace id ++ key`, holding `AcceptorState::encode`'s bytes
//! (format byte, CRC-32). `Store::paxos_put` returns once an engine flush
//! that started after the write has completed: the path the store's
//! metadata takes (`meta_put`), durable whatever the durability mode, and
//! group-committed with every other writer waiting then. This follows the
//! house way for records that are not cells — the hints crate keeps its
//! records in the store's reserved `hints` tree, node metadata lives in
//! `system` — and keeps Paxos state out of the keyspace data trees, so no
//! scan, repair, stream or snapshot of data ever meets it. A separate sled
//! database or a system keyspace of cells would have needed a second
//! flush path or a cell encoding of a state that is no cell.
//!
//! The MRC of a commit is written unflushed (`paxos_put_unflushed`): losing
//! it in a crash only makes a later round re-propose a value already
//! chosen, and a flush never makes it durable without the commit's cell,
//! which was applied first.
//!
//! # Caveats
//! - A promise or an accept costs an engine flush (sled's `flush`, shared
//!   by concurrent callers), not a commit log append: slower than a plain
//!   write in batch mode. Logging Paxos state in the commit log is future
//!   work.
//! - The key locks are striped ([`KeyLocks`]): two keys in one stripe wait
//!   for each other (only for one flush each).
//! - Paxos state is purged only by `repair --paxos-only` (the coordinator's
//!   `cas/repair.rs` finishes uncommitted keys, then [`purge`] raises the
//!   floor and deletes what it covers), and survives the drop of its
//!   keyspace.
//! - Local Paxos calls are not counted in the keyspace metrics or sampled
//!   by `toppartitions` yet.

pub mod floors;
pub mod host;
pub mod key_locks;
pub mod purge;
pub mod replica;
pub mod wire;

pub use floors::PaxosFloors;
pub use host::PaxosReplicaHost;
pub use key_locks::KeyLocks;
pub use purge::{PurgeReport, purge, uncommitted};
pub use replica::{PrepareAnswer, accept, commit, prepare};
