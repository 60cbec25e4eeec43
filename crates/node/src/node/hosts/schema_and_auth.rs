//! The context as the schema's gossip's ([`SchemaHost`]) and client
//! authentication's ([`AuthHost`]) host. The auth host reads and writes
//! users through the coordinator, so client authentication names neither
//! the coordinator nor the context.
//!
//! The auth host is the context in its `Arc`, as the coordinator takes
//! one (its helper tasks outlive the call that spawns them); the schema's
//! host it hands out is the context itself.

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use ringstore_membership::MembershipHandle;
use ringstore_metrics::NodeMetrics;
use ringstore_placement::HostId;
use ringstore_replication::ConsistencyLevel;
use ringstore_storage::{Cell, Store, Timestamp};

use crate::client_auth::AuthHost;
use crate::context::NodeContext;
use crate::coordinator;
use crate::error::Result;
use crate::peers::Peers;
use crate::schema::store::SchemaStore;
use crate::schema::{KeyspaceDef, SchemaHost};

impl SchemaHost for NodeContext {
    fn host_id(&self) -> HostId {
        self.host_id
    }

    fn schema(&self) -> &SchemaStore {
        &self.schema
    }

    fn store(&self) -> &Store {
        &self.store
    }

    fn membership(&self) -> &MembershipHandle {
        &self.membership
    }

    fn peers(&self) -> &Peers {
        &self.peers
    }

    fn schema_timeout(&self) -> Duration {
        Duration::from_millis(self.config.timeouts.schema_ms)
    }

    fn change_timestamp(&self) -> Result<Timestamp> {
        self.check_clock()?;
        Ok(self.clock.next())
    }
}

impl AuthHost for Arc<NodeContext> {
    type Schema = NodeContext;

    fn schema_host(&self) -> &NodeContext {
        self
    }

    fn auth_replication_factor(&self) -> u32 {
        self.config.auth.replication_factor
    }

    fn next_timestamp(&self) -> Timestamp {
        self.clock.next()
    }

    fn now(&self) -> Timestamp {
        self.clock.now()
    }

    fn read<'a>(
        &'a self,
        keyspace: &'a KeyspaceDef,
        key: Vec<u8>,
        level: ConsistencyLevel,
    ) -> BoxFuture<'a, Result<Option<Cell>>> {
        Box::pin(coordinator::read(self, keyspace, key, level))
    }

    fn write<'a>(
        &'a self,
        keyspace: &'a KeyspaceDef,
        key: Vec<u8>,
        cell: Cell,
        level: ConsistencyLevel,
    ) -> BoxFuture<'a, Result<()>> {
        Box::pin(coordinator::write(self, keyspace, key, cell, level))
    }

    fn metrics(&self) -> &NodeMetrics {
        &self.metrics
    }
}
