//! The context as streaming's ([`StreamHost`]), topology's
//! ([`TopologyHost`]) and snapshots' ([`SnapshotHost`]) host. Topology's
//! calls into the schema's gossip (`schema::sync`) and repair's sync of
//! gained ranges (`repair::node_ops`), so topology names neither.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use ringstore_membership::{ClusterView, MembershipHandle};
use ringstore_metrics::NodeMetrics;
use ringstore_placement::{HostId, Location, Ring};
use ringstore_storage::{KeyspaceId, Store};
use ringstore_streaming::{StreamThrottle, Streams};

use crate::context::NodeContext;
use crate::error::Result;
use crate::peers::Peers;
use crate::repair::node_ops::sync_gained_ranges;
use crate::schema::sync::{merge_and_publish, pull_from_live_peers, push_with_retries};
use crate::schema::{KeyspaceDef, SchemaEntry, SchemaHost};
use crate::snapshots::SnapshotHost;
use crate::streaming::StreamHost;
use crate::topology::host::{TokenAllocation, TopologyHost};

impl StreamHost for NodeContext {
    fn host_id(&self) -> HostId {
        self.host_id
    }

    fn store(&self) -> &Store {
        &self.store
    }

    fn view(&self) -> Arc<ClusterView> {
        NodeContext::view(self)
    }

    fn keyspace_name(&self, id: KeyspaceId) -> String {
        NodeContext::keyspace_name(self, id)
    }

    fn peers(&self) -> &Peers {
        &self.peers
    }

    fn metrics(&self) -> &NodeMetrics {
        &self.metrics
    }

    fn streams(&self) -> &Streams {
        &self.streams
    }

    fn stream_throttle(&self) -> &StreamThrottle {
        &self.stream_throttle
    }
}

impl TopologyHost for NodeContext {
    fn ring_delay(&self) -> Duration {
        Duration::from_millis(self.config.ring_delay_ms)
    }

    fn seeds(&self) -> &[SocketAddr] {
        &self.config.seeds
    }

    fn gossip_address(&self) -> SocketAddr {
        self.config.advertised_gossip_address()
    }

    fn token_allocation(&self) -> TokenAllocation {
        let config = &self.config;
        TokenAllocation {
            location: Location::new(config.dc.as_str(), config.rack.as_str()),
            num_tokens: config.num_tokens as usize,
            local_replication_factor: config.allocate_tokens_for_local_replication_factor,
        }
    }

    fn membership(&self) -> &MembershipHandle {
        &self.membership
    }

    fn operation(&self) -> &tokio::sync::Mutex<()> {
        &self.operation
    }

    fn keyspaces(&self) -> Vec<KeyspaceDef> {
        NodeContext::keyspaces(self)
    }

    fn keyspace(&self, name: &str) -> Result<KeyspaceDef> {
        NodeContext::keyspace(self, name)
    }

    fn schema_version(&self) -> uuid::Uuid {
        self.schema.current().version()
    }

    fn pull_schema(&self) -> BoxFuture<'_, usize> {
        Box::pin(pull_from_live_peers(self))
    }

    fn publish_keyspace(&self, keyspace: KeyspaceDef) -> BoxFuture<'_, Result<()>> {
        Box::pin(async move {
            let entry = SchemaEntry {
                keyspace,
                timestamp: SchemaHost::change_timestamp(self)?,
                dropped: false,
            };
            merge_and_publish(self, vec![entry]).await?;
            Ok(())
        })
    }

    fn push_schema(&self, attempts: u32) -> BoxFuture<'_, Result<()>> {
        Box::pin(push_with_retries(self, attempts))
    }

    fn sync_gained_ranges<'a>(
        &'a self,
        before: &'a Arc<Ring>,
        after: &'a Arc<Ring>,
        gainer: Option<HostId>,
    ) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            sync_gained_ranges(self, before, after, gainer).await?;
            Ok(())
        })
    }

    fn hand_off_hints(&self, recipient: SocketAddr) -> BoxFuture<'_, Result<u64>> {
        Box::pin(self.handoff.hand_off(self, recipient))
    }

    fn request_stop(&self) {
        self.stop_requested.send_replace(true);
    }
}

impl SnapshotHost for NodeContext {
    fn data_dir(&self) -> &Path {
        &self.config.data_dir
    }

    fn store(&self) -> &Store {
        &self.store
    }

    fn keyspaces(&self) -> Vec<KeyspaceDef> {
        NodeContext::keyspaces(self)
    }

    fn keyspace(&self, name: &str) -> Result<KeyspaceDef> {
        NodeContext::keyspace(self, name)
    }
}
