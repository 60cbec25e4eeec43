//! The context as the coordinator's host ([`CoordinatorHost`]): the read
//! and write paths and their transport (the per-peer queues and calls).
//! Every method hands out a field of the context or a setting, so the
//! generic, per-request code compiles to what it did on the context.

use std::sync::Arc;
use std::time::Duration;

use ringstore_membership::ClusterView;
use ringstore_metrics::{LocalOp, NodeMetrics};
use ringstore_placement::HostId;
use ringstore_storage::{KeyspaceId, Store, Timestamp};
use tokio::sync::watch;

use crate::context::NodeContext;
use crate::coordinator::host::CoordinatorHost;
use crate::coordinator::peer_calls::read_many_refusals::ReadManyRefusals;
use crate::coordinator::peer_calls::read_queues::ReadQueues;
use crate::coordinator::peer_calls::write_queues::ApplyQueues;
use crate::coordinator::peer_calls::write_streams::ApplyStreams;
use crate::coordinator::read_flights::ReadFlights;
use crate::coordinator::read_latencies::ReadLatencies;
use crate::handoff::Handoff;
use crate::peers::Peers;
use crate::replica_maps::ReplicaMaps;
use crate::ring_lag::RingLag;
use crate::settling_ring::SettlingRing;

impl CoordinatorHost for NodeContext {
    fn host_id(&self) -> HostId {
        self.host_id
    }

    fn store(&self) -> &Store {
        &self.store
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

    fn dc(&self) -> &str {
        &self.config.dc
    }

    fn write_timeout_ms(&self) -> u64 {
        self.config.timeouts.write_ms
    }

    fn read_timeout_ms(&self) -> u64 {
        self.config.timeouts.read_ms
    }

    fn ring_delay_ms(&self) -> u64 {
        self.config.ring_delay_ms
    }

    fn replica_maps(&self) -> &ReplicaMaps {
        &self.replica_maps
    }

    fn settling_ring(&self) -> &SettlingRing {
        &self.settling_ring
    }

    fn ring_lag(&self) -> &RingLag {
        &self.ring_lag
    }

    fn metrics(&self) -> &NodeMetrics {
        &self.metrics
    }

    fn served_locally(
        &self,
        id: KeyspaceId,
        name: &str,
        op: LocalOp,
        key: &[u8],
        elapsed: Duration,
    ) {
        NodeContext::served_locally(self, id, name, op, key, elapsed);
    }

    fn handoff(&self) -> &Handoff {
        &self.handoff
    }

    fn read_latencies(&self) -> &ReadLatencies {
        &self.read_latencies
    }

    fn read_flights(&self) -> &ReadFlights {
        &self.read_flights
    }

    fn peers(&self) -> &Peers {
        &self.peers
    }

    fn apply_queues(&self) -> &ApplyQueues {
        &self.apply_queues
    }

    fn apply_streams(&self) -> &Arc<ApplyStreams> {
        &self.apply_streams
    }

    fn read_queues(&self) -> &ReadQueues {
        &self.read_queues
    }

    fn read_many_refusals(&self) -> &ReadManyRefusals {
        &self.read_many_refusals
    }
}
