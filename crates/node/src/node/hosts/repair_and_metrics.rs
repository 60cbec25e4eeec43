//! The context as repair's ([`RepairHost`]), the metrics page's
//! ([`MetricsHost`]) and `toppartitions`' ([`TopPartitionsHost`]) host.
//! The repair host answers with topology's judgement of range movements,
//! and the metrics host with repair's sample, so neither subsystem names
//! the other.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use ringstore_hotkeys::Samplers;
use ringstore_membership::{ClusterView, MembershipHandle};
use ringstore_metrics::{NodeMetrics, RepairSample};
use ringstore_placement::{HostId, ReplicaMap};
use ringstore_storage::{KeyspaceId, Store, Timestamp};
use ringstore_streaming::{StreamThrottle, Streams};
use tokio::sync::watch;

use crate::config::RepairConfig;
use crate::context::NodeContext;
use crate::error::{MovementsUnderway, Result};
use crate::metrics::{HintNumbers, MetricsHost};
use crate::peers::Peers;
use crate::repair::RepairHost;
use crate::repair::scheduler::metrics_sample;
use crate::repair::state::RepairState;
use crate::schema::KeyspaceDef;
use crate::services::top_partitions::TopPartitionsHost;
use crate::topology::movements_under_way;

impl RepairHost for NodeContext {
    fn host_id(&self) -> HostId {
        self.host_id
    }

    fn store(&self) -> &Store {
        &self.store
    }

    fn repair(&self) -> &RepairState {
        &self.repair
    }

    fn now(&self) -> Timestamp {
        self.clock.now()
    }

    fn view(&self) -> Arc<ClusterView> {
        NodeContext::view(self)
    }

    fn views(&self) -> watch::Receiver<Arc<ClusterView>> {
        self.membership.watch_view()
    }

    fn keyspaces(&self) -> Vec<KeyspaceDef> {
        NodeContext::keyspaces(self)
    }

    fn keyspace_name(&self, id: KeyspaceId) -> String {
        NodeContext::keyspace_name(self, id)
    }

    fn replica_map(&self, keyspace: &KeyspaceDef) -> Arc<ReplicaMap> {
        self.placement(keyspace).1
    }

    fn movements_under_way(&self) -> Option<MovementsUnderway> {
        movements_under_way(&NodeContext::view(self))
    }

    fn peers(&self) -> &Peers {
        &self.peers
    }

    fn metrics(&self) -> &Arc<NodeMetrics> {
        &self.metrics
    }

    fn stream_throttle(&self) -> &StreamThrottle {
        &self.stream_throttle
    }

    fn streams(&self) -> &Streams {
        &self.streams
    }

    fn repair_config(&self) -> &RepairConfig {
        &self.config.repair
    }

    fn dc(&self) -> &str {
        &self.config.dc
    }

    fn client_address(&self) -> SocketAddr {
        self.config.advertised_client_address()
    }

    fn started(&self) -> Instant {
        self.started
    }
}

impl MetricsHost for NodeContext {
    fn metrics(&self) -> &NodeMetrics {
        &self.metrics
    }

    fn membership(&self) -> &MembershipHandle {
        &self.membership
    }

    fn store(&self) -> &Store {
        &self.store
    }

    fn keyspaces(&self) -> Vec<KeyspaceDef> {
        NodeContext::keyspaces(self)
    }

    fn schema_version(&self) -> String {
        self.schema.current().version().to_string()
    }

    fn hints(&self) -> HintNumbers {
        HintNumbers {
            pending: self.handoff.pending(),
            counters: self.handoff.counters(),
            store_failures: self.handoff.store_failures(),
            paused: self.handoff.is_paused(),
        }
    }

    fn streams(&self) -> &Streams {
        &self.streams
    }

    fn stream_throttle(&self) -> &StreamThrottle {
        &self.stream_throttle
    }

    fn started(&self) -> Instant {
        self.started
    }

    fn refused_writes(&self) -> u64 {
        self.clock_guard.refused()
    }

    fn repair_sample(&self) -> RepairSample {
        metrics_sample(self, self.started.elapsed())
    }
}

impl TopPartitionsHost for NodeContext {
    fn keyspace(&self, name: &str) -> Result<KeyspaceDef> {
        NodeContext::keyspace(self, name)
    }

    fn hot_keys(&self) -> &Samplers<KeyspaceId> {
        &self.hot_keys
    }
}
