//! What the coordinator and its transport need from the running node, and
//! nothing more: the [`CoordinatorHost`] trait. The node's context
//! implements it (in `node/hosts/coordinator.rs`), so no file of the
//! `coordinator/` folder names the context, and a test can drive them with
//! a double of its own.
//!
//! One host serves the read and write paths and their transport: they are
//! one subsystem (the coordinator moves a request's messages through the
//! per-peer queues and calls), and splitting it would only repeat the
//! same accessors.
//!
//! The path is hot, so its functions are generic over the host
//! (`&Arc<H>` where a request spawns tasks that outlive it, `&impl
//! CoordinatorHost` elsewhere): no `dyn` call, allocation or lock is added
//! per request, and every accessor hands out a reference to what the
//! context holds (or a copy of a small value).
//!
//! The trait is `pub(crate)`: the queues it hands out are the crate's own.
//!
//! # Caveats
//! - The host still hands out whole components (the hint store, the peer
//!   clients, the queues) rather than narrower verbs on them: the
//!   components are already the seams the coordinator is tested through.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use ringstore_membership::ClusterView;
use ringstore_metrics::{LocalOp, NodeMetrics};
use ringstore_placement::HostId;
use ringstore_storage::{KeyspaceId, Store, Timestamp};
use tokio::sync::watch;

use crate::coordinator::peer_calls::read_many_refusals::ReadManyRefusals;
use crate::coordinator::peer_calls::read_queues::ReadQueues;
use crate::coordinator::peer_calls::write_queues::ApplyQueues;
use crate::coordinator::peer_calls::write_streams::ApplyStreams;
use crate::coordinator::read_flights::ReadFlights;
use crate::coordinator::read_latencies::ReadLatencies;
use crate::error::{NodeError, Result};
use crate::handoff::Handoff;
use crate::peers::Peers;
use crate::replica_maps::ReplicaMaps;
use crate::ring_lag::RingLag;
use crate::settling_ring::SettlingRing;

/// What the coordinator's read and write paths, and the calls and queues
/// they send replica requests through, use of the node they run on.
pub(crate) trait CoordinatorHost: Send + Sync + 'static {
    /// This node's host id: a replica that is this node is read and
    /// written locally, never called, and gets no hint from itself.
    fn host_id(&self) -> HostId;
    /// Its storage: where this node applies and reads its own replica's
    /// cells, and where hints are stored.
    fn store(&self) -> &Store;
    /// The node's clock: the "now" a replica write's deadline counts from.
    fn now(&self) -> Timestamp;
    /// The current cluster view: the ring a request is placed on, which
    /// replicas are up, and their internode addresses.
    fn view(&self) -> Arc<ClusterView>;
    /// The cluster view as it changes: a request refused by a replica whose
    /// ring is ahead waits for this node's view to catch up (`ring_lag`).
    fn views(&self) -> watch::Receiver<Arc<ClusterView>>;
    /// This node's datacenter, for the `LOCAL_*` and `EACH_*` levels.
    fn dc(&self) -> &str;
    /// The write timeout (ms): how long a write, a replica write and a
    /// read repair wait for acks.
    fn write_timeout_ms(&self) -> u64;
    /// The read timeout (ms): how long a read round waits for replicas
    /// (half of it is the speculation delay before latencies are known).
    fn read_timeout_ms(&self) -> u64;
    /// How long (ms) writes still reach the replicas of a replaced ring
    /// (`settling_ring`).
    fn ring_delay_ms(&self) -> u64;
    /// The replica maps of each ring and keyspace strategy, cached.
    fn replica_maps(&self) -> &ReplicaMaps;
    /// The ring last replaced, which writes still reach for `ring_delay`.
    fn settling_ring(&self) -> &SettlingRing;
    /// The members replicas showed in a newer state than this node's view.
    fn ring_lag(&self) -> &RingLag;
    /// The node's metrics: coordinator and internode latencies, stages,
    /// coalescing and speculation counters.
    fn metrics(&self) -> &NodeMetrics;
    /// Records a replica-local `op` on `key` of keyspace `id` (named
    /// `name`) that took `elapsed`: in the keyspace's metrics, and in the
    /// `toppartitions` sessions sampling it.
    fn served_locally(
        &self,
        id: KeyspaceId,
        name: &str,
        op: LocalOp,
        key: &[u8],
        elapsed: Duration,
    );
    /// Hinted handoff: where writes to replicas down or failed are kept.
    fn handoff(&self) -> &Handoff;
    /// Each keyspace's recent replica read latency, for speculative retry.
    fn read_latencies(&self) -> &ReadLatencies;
    /// Reads in flight per key, for coalescing reads of hot keys.
    fn read_flights(&self) -> &ReadFlights;
    /// Internode clients, to call the replicas.
    fn peers(&self) -> &Peers;
    /// Replica writes queued per peer, for coalescing them into calls.
    fn apply_queues(&self) -> &ApplyQueues;
    /// Each peer's stream of replica writes (the calls `apply_queues`
    /// shape).
    fn apply_streams(&self) -> &Arc<ApplyStreams>;
    /// The replica reads queued per peer, for coalescing them into calls.
    fn read_queues(&self) -> &ReadQueues;
    /// Peers seen refusing `ReadMany` (an earlier build), for a while.
    fn read_many_refusals(&self) -> &ReadManyRefusals;

    /// The internode address of `host`, from the current view: where a
    /// replica request to it is sent.
    fn internode_address(&self, host: HostId) -> Result<SocketAddr> {
        self.view()
            .member(host)
            .map(|m| m.metadata.internode_addr)
            .ok_or(NodeError::NoAddress(host))
    }
}
