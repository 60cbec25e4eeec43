//! Garbage collection of this replica's Paxos state, under a floor
//! (`ringstore_paxos`'s `gc.rs` says why it is safe):
//!
//! 1. Raise the keyspace's floor, durably ([`PaxosFloors::raise`](super::floors::PaxosFloors::raise)).
//! 2. Walk the keyspace's state page by page; for each key, under its
//!    lock, reload the state and delete it if it is purgeable under the
//!    floor (every ballot older, its acceptance committed here).
//!
//! The walk also lists the keys whose acceptance was never committed here
//! ([`uncommitted`]): those a repair round must finish before their state
//! can go.

use ringstore_paxos::{AcceptorState, Ballot};
use ringstore_storage::{KeyspaceId, Store};

use crate::error::Result;
use crate::paxos::host::PaxosReplicaHost;
use crate::paxos::replica::load;

/// How many states one page of the walk reads.
const PAGE: usize = 512;

/// What a purge did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PurgeReport {
    /// The floor it purged under (the keyspace's floor afterwards).
    pub floor: Option<Ballot>,
    /// States deleted.
    pub purged: u64,
    /// States kept: newer than the floor, or accepted but not committed
    /// here.
    pub kept: u64,
}

/// Raises keyspace `ks`'s floor to `floor` and deletes every state that is
/// purgeable under it.
pub async fn purge(
    host: &impl PaxosReplicaHost,
    ks: KeyspaceId,
    floor: Ballot,
) -> Result<PurgeReport> {
    let store = host.store();
    let floor = host.paxos_floors().raise(store, ks, floor).await?;
    let mut report = PurgeReport {
        floor: Some(floor),
        ..PurgeReport::default()
    };
    for keys in pages(store, ks) {
        for key in keys? {
            let _key = host.paxos_locks().lock(ks, &key).await;
            // Reloaded under the lock: the page may be stale by now.
            if load(store, ks, &key)?.purgeable(floor) {
                store.paxos_remove(ks, &key).await?;
                report.purged += 1;
            } else {
                report.kept += 1;
            }
        }
    }
    Ok(report)
}

/// The keys of keyspace `ks` whose accepted proposal this replica never
/// saw committed: a repair round must finish them before they can be
/// purged. A state that does not decode is an error.
pub fn uncommitted(host: &impl PaxosReplicaHost, ks: KeyspaceId) -> Result<Vec<Vec<u8>>> {
    let store = host.store();
    let mut keys = Vec::new();
    for page in pages(store, ks) {
        for key in page? {
            if is_uncommitted(&load(store, ks, &key)?) {
                keys.push(key);
            }
        }
    }
    Ok(keys)
}

/// The keys of keyspace `ks`'s Paxos state, a page of [`PAGE`] at a time in
/// key order; each page is read when asked for, so states written or
/// removed meanwhile may or may not be seen.
fn pages(store: &Store, ks: KeyspaceId) -> impl Iterator<Item = Result<Vec<Vec<u8>>>> + '_ {
    let mut after: Option<Vec<u8>> = None;
    let mut done = false;
    std::iter::from_fn(move || {
        if done {
            return None;
        }
        let page = match store.paxos_page(ks, after.as_deref(), PAGE) {
            Ok(page) => page,
            Err(error) => {
                done = true;
                return Some(Err(error.into()));
            }
        };
        let keys: Vec<Vec<u8>> = page.into_iter().map(|(key, _)| key).collect();
        after = keys.last().cloned();
        done = after.is_none();
        (!keys.is_empty()).then_some(Ok(keys))
    })
}

fn is_uncommitted(state: &AcceptorState) -> bool {
    state
        .accepted
        .as_ref()
        .is_some_and(|accepted| state.committed.is_none_or(|c| accepted.ballot > c))
}
