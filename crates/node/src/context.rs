//! What every service of a running node shares.

use std::sync::Arc;
use std::time::Instant;

use ringstore_membership::{ClusterView, Generation, MembershipHandle};
use ringstore_placement::{HostId, ReplicaMap};
use ringstore_storage::Store;

use crate::clock::TimestampSource;
use crate::config::NodeConfig;
use crate::error::{NodeError, Result};
use crate::handoff::Handoff;
use crate::peers::Peers;
use crate::placements::Placements;
use crate::schema::KeyspaceDef;
use crate::schema_store::SchemaStore;

/// The running node's shared state: configuration, identity, storage,
/// membership, schema and the placement cache. Services hold it in an `Arc`.
pub struct NodeContext {
    /// The configuration it started with.
    pub config: NodeConfig,
    /// Its host id.
    pub host_id: HostId,
    /// Its generation (restart counter).
    pub generation: Generation,
    /// Its storage.
    pub store: Store,
    /// Its membership task.
    pub membership: MembershipHandle,
    /// Its schema.
    pub schema: SchemaStore,
    /// Replica maps of the current ring.
    pub placements: Placements,
    /// Internode clients.
    pub peers: Peers,
    /// Write timestamps.
    pub clock: TimestampSource,
    /// Hinted handoff.
    pub handoff: Handoff,
    /// When it started.
    pub started: Instant,
}

impl NodeContext {
    /// The current cluster view.
    pub fn view(&self) -> Arc<ClusterView> {
        self.membership.view()
    }

    /// The keyspace named `name`, or `NOT_FOUND`.
    pub fn keyspace(&self, name: &str) -> Result<KeyspaceDef> {
        self.schema
            .current()
            .keyspace(name)
            .cloned()
            .ok_or_else(|| NodeError::KeyspaceNotFound(name.to_string()))
    }

    /// The current view and the replica map of `keyspace` on its ring.
    pub fn placement(&self, keyspace: &KeyspaceDef) -> (Arc<ClusterView>, Arc<ReplicaMap>) {
        let view = self.view();
        let map = self
            .placements
            .replica_map(&view.ring, keyspace.id, &keyspace.strategy);
        (view, map)
    }
}
