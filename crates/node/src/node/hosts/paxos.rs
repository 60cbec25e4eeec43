//! The context as the Paxos replica's host ([`PaxosReplicaHost`]) and as
//! the host of a lightweight transaction's coordinator ([`CasHost`]).

use ringstore_storage::{KeyspaceId, Store};

use ringstore_paxos::{Ballot, BallotClock};

use crate::context::NodeContext;
use crate::coordinator::CoordinatorHost;
use crate::coordinator::cas::{CasHost, CasQueue};
use crate::error::{NodeError, Result};
use crate::paxos::{KeyLocks, PaxosFloors, PaxosReplicaHost};

impl PaxosReplicaHost for NodeContext {
    fn store(&self) -> &Store {
        &self.store
    }

    fn paxos_locks(&self) -> &KeyLocks {
        &self.paxos_locks
    }

    fn paxos_floors(&self) -> &PaxosFloors {
        &self.paxos_floors
    }

    fn check_serving(&self) -> Result<()> {
        NodeContext::check_serving(self)
    }

    fn check_keyspace(&self, id: KeyspaceId) -> Result<()> {
        let schema = self.schema.current();
        match schema.entries().find(|e| e.keyspace.id == id) {
            Some(entry) if entry.dropped => Err(NodeError::KeyspaceNotFound(id.to_string())),
            Some(_) | None => Ok(()),
        }
    }
}

impl CasHost for NodeContext {
    type Replica = NodeContext;

    fn paxos_replica(&self) -> &NodeContext {
        self
    }

    fn next_ballot(&self, after: Option<Ballot>) -> Ballot {
        let now = CoordinatorHost::now(self);
        // A tie-breaker fresh for each run of the node: after a restart
        // whose clock went back, a ballot of the last run is never issued
        // again with the same tie-breaker.
        self.ballot_clock
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get_or_insert_with(|| BallotClock::new(rand::random()))
            .next(now, after)
    }

    fn cas_queue(&self) -> &CasQueue {
        &self.cas_queue
    }
}
