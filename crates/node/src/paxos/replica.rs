//! The acceptor's three calls, for one key of one keyspace: load the state,
//! step it, make what it says durable, then answer (see the module essay).
//!
//! Each function is what the internode service's RPC of the same name runs,
//! and what a coordinator calls for its own replica.

use ringstore_paxos::{AcceptReply, AcceptorState, Ballot, PrepareReply, Promise, Proposal};
use ringstore_storage::{Cell, KeyspaceId, StorageError, Store};

use crate::error::{NodeError, PaxosReplicaError, Result};
use crate::limits::check_key;
use crate::paxos::host::PaxosReplicaHost;

/// A replica's answer to a prepare.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PrepareAnswer {
    /// The ballot was newer than anything promised or accepted here; the
    /// promise is durable.
    Promised {
        /// What this replica accepted and committed for the key.
        promise: Promise,
        /// Its data cell for the key, read after the promise was durable.
        data: Option<Cell>,
    },
    /// Refused.
    Rejected {
        /// The newest ballot promised or accepted here.
        promised: Ballot,
    },
}

impl PrepareAnswer {
    /// The proposer's event for this answer from `from`.
    pub fn into_event(self, from: ringstore_placement::HostId) -> ringstore_paxos::Event {
        match self {
            PrepareAnswer::Promised { promise, data } => ringstore_paxos::Event::Promised {
                from,
                promise,
                data,
            },
            PrepareAnswer::Rejected { promised } => {
                ringstore_paxos::Event::PrepareRejected { from, promised }
            }
        }
    }
}

/// Prepare `ballot` for `key` of keyspace `ks`: promise it if it is newer
/// than anything promised or accepted and than the keyspace's floor,
/// durably, and answer with the key's data cell.
pub async fn prepare(
    host: &impl PaxosReplicaHost,
    ks: KeyspaceId,
    key: &[u8],
    ballot: Ballot,
) -> Result<PrepareAnswer> {
    admit(host, ks, key)?;
    let _key = host.paxos_locks().lock(ks, key).await;
    let store = host.store();
    let floor = host.paxos_floors().floor(store, ks)?;
    let step = load(store, ks, key)?.floored(floor).prepare(ballot);
    if let Some(state) = &step.persist {
        store
            .paxos_put(ks, key, &state.encode())
            .await
            .map_err(stored(ks))?;
    }
    Ok(match step.reply {
        PrepareReply::Promised(promise) => PrepareAnswer::Promised {
            promise,
            data: store.read(ks, key).map_err(stored(ks))?,
        },
        PrepareReply::Rejected { promised } => PrepareAnswer::Rejected { promised },
    })
}

/// Accept `proposal` for `key` of keyspace `ks` unless a newer ballot was
/// promised or accepted, or the keyspace's floor is newer; an acceptance
/// is durable when this returns.
pub async fn accept(
    host: &impl PaxosReplicaHost,
    ks: KeyspaceId,
    key: &[u8],
    proposal: Proposal,
) -> Result<AcceptReply> {
    admit(host, ks, key)?;
    let _key = host.paxos_locks().lock(ks, key).await;
    let store = host.store();
    let floor = host.paxos_floors().floor(store, ks)?;
    let step = load(store, ks, key)?.floored(floor).accept(proposal);
    if let Some(state) = &step.persist {
        store
            .paxos_put(ks, key, &state.encode())
            .await
            .map_err(stored(ks))?;
    }
    Ok(step.reply)
}

/// Commit the chosen `proposal` for `key` of keyspace `ks`: merge its cell
/// into the data by last write wins (the store's ordinary write path), then
/// record its ballot as the most recent commit if it is newer.
pub async fn commit(
    host: &impl PaxosReplicaHost,
    ks: KeyspaceId,
    key: &[u8],
    proposal: Proposal,
) -> Result<()> {
    admit(host, ks, key)?;
    let _key = host.paxos_locks().lock(ks, key).await;
    let store = host.store();
    let step = load(store, ks, key)?.commit(proposal);
    if let Some(cell) = step.reply {
        store.apply(ks, key, cell).await.map_err(stored(ks))?;
    }
    if let Some(state) = &step.persist {
        // Unflushed: losing the MRC only makes a later round re-propose a
        // chosen value, and no flush keeps it without the cell applied
        // above (see the module essay).
        store
            .paxos_put_unflushed(ks, key, &state.encode())
            .await
            .map_err(stored(ks))?;
    }
    Ok(())
}

/// Refuses a call this replica must not take part in: the node does not
/// serve writes, the key is out of bounds, or the keyspace is unknown or
/// dropped.
fn admit(host: &impl PaxosReplicaHost, ks: KeyspaceId, key: &[u8]) -> Result<()> {
    host.check_serving()?;
    check_key(key)?;
    host.check_keyspace(ks)
}

/// The stored acceptor state of `key` in `ks` (the empty state if none was
/// stored); damaged bytes are an error, never the empty state.
pub(super) fn load(store: &Store, ks: KeyspaceId, key: &[u8]) -> Result<AcceptorState> {
    match store.paxos_get(ks, key).map_err(stored(ks))? {
        None => Ok(AcceptorState::default()),
        Some(bytes) => AcceptorState::decode(&bytes).map_err(|source| {
            PaxosReplicaError::CorruptState {
                keyspace: ks,
                key: key.to_vec(),
                source,
            }
            .into()
        }),
    }
}

/// A storage failure as the node's error: a keyspace the store knows as
/// dropped is `NOT_FOUND`, as a replica write to it is.
fn stored(ks: KeyspaceId) -> impl FnOnce(StorageError) -> NodeError {
    move |error| match error {
        StorageError::KeyspaceDropped { .. } => NodeError::KeyspaceNotFound(ks.to_string()),
        other => other.into(),
    }
}

#[cfg(test)]
#[path = "replica_tests.rs"]
mod tests;
