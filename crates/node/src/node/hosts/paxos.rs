//! The context as the Paxos replica's host ([`PaxosReplicaHost`]).

use ringstore_storage::{KeyspaceId, Store};

use crate::context::NodeContext;
use crate::error::{NodeError, PaxosReplicaError, Result};
use crate::paxos::{KeyLocks, PaxosReplicaHost};

impl PaxosReplicaHost for NodeContext {
    fn store(&self) -> &Store {
        &self.store
    }

    fn paxos_locks(&self) -> &KeyLocks {
        &self.paxos_locks
    }

    fn check_serving(&self) -> Result<()> {
        NodeContext::check_serving(self)
    }

    fn check_keyspace(&self, id: KeyspaceId) -> Result<()> {
        let schema = self.schema.current();
        match schema.entries().find(|e| e.keyspace.id == id) {
            Some(entry) if entry.dropped => Err(NodeError::KeyspaceNotFound(id.to_string())),
            Some(_) => Ok(()),
            None => Err(PaxosReplicaError::UnknownKeyspace(id).into()),
        }
    }
}
