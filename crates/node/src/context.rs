//! What every service of a running node shares.
//!
//! Subsystems should not take it whole: each asks for a narrow host trait
//! of what it uses. `HandoffHost` and `RemovalHost` are implemented at the
//! end of this file; the others (`StreamHost`, `TopologyHost`,
//! `SnapshotHost`, `RepairHost`, `MetricsHost`, `SchemaHost`, `AuthHost`,
//! `CoordinatorHost`, `DrainHost`, `DiskFailureHost`, `TopPartitionsHost`)
//! in `node/hosts/`, as
//! naming those modules here would draw them into a
//! circle with this one (their impls call modules that import this one,
//! or they use the node's error type, which does).

use std::sync::Arc;
use std::time::Instant;

use ringstore_membership::{ClusterView, Generation, MembershipHandle};
use ringstore_metrics::{LocalOp, NodeMetrics};
use ringstore_placement::{HostId, ReplicaMap};
use ringstore_storage::{KeyspaceId, Store};

use crate::clock::TimestampSource;
use crate::clock_guard::ClockGuard;
use crate::config::NodeConfig;
use crate::coordinator::peer_calls::read_queues::ReadQueues;
use crate::coordinator::peer_calls::write_queues::ApplyQueues;
use crate::coordinator::peer_calls::write_streams::ApplyStreams;
use crate::coordinator::read_flights::ReadFlights;
use crate::coordinator::read_latencies::ReadLatencies;
use crate::error::{NodeError, Result, ServingError};
use crate::handoff::{Handoff, HandoffHost};
use crate::peers::Peers;
use crate::repair::state::RepairState;
use crate::replica_maps::ReplicaMaps;
use crate::schema::store::SchemaStore;
use crate::schema::{KeyspaceDef, Schema};
use crate::serving::Serving;
use crate::settling_ring::SettlingRing;
use ringstore_streaming::{StreamThrottle, Streams};

/// The running node's shared state: configuration, identity, storage,
/// membership, schema and the placement cache. Services hold it in an `Arc`.
/// Only what tests and tools outside the crate read is `pub` (identity,
/// storage, schema, hints, the clock, metrics); the rest is the crate's own.
pub struct NodeContext {
    /// The configuration it started with.
    pub(crate) config: NodeConfig,
    /// The server TLS of its ports, swapped by `reloadsecrets`.
    pub(crate) tls: crate::tls::TlsHandles,
    /// Its host id.
    pub host_id: HostId,
    /// Its generation (restart counter).
    pub(crate) generation: Generation,
    /// Its storage.
    pub store: Store,
    /// Its membership task.
    pub(crate) membership: MembershipHandle,
    /// Its schema.
    pub schema: SchemaStore,
    /// Replica maps of the current ring.
    pub(crate) replica_maps: ReplicaMaps,
    /// Internode clients.
    pub(crate) peers: Peers,
    /// Write timestamps, and the node's wall clock.
    pub clock: TimestampSource,
    /// Refuses writes while this node's clock is off from the majority.
    pub clock_guard: ClockGuard,
    /// Hinted handoff.
    pub handoff: Handoff,
    /// When it started.
    pub(crate) started: Instant,
    /// The node-wide throttle of the data it streams to others.
    pub(crate) stream_throttle: StreamThrottle,
    /// Its streams, for `netstats`.
    pub(crate) streams: Streams,
    /// Held by the topology operation this node runs (one at a time).
    pub(crate) operation: tokio::sync::Mutex<()>,
    /// Repair: trees, history, progress.
    pub(crate) repair: RepairState,
    /// Set to ask the node to stop (after a decommission).
    pub(crate) stop_requested: tokio::sync::watch::Sender<bool>,
    /// Its metrics: the Prometheus families, `tpstats` stages and latency
    /// histograms (shared with the storage's sync observer).
    pub metrics: Arc<NodeMetrics>,
    /// Each keyspace's recent replica read latency, for speculative retry.
    pub(crate) read_latencies: ReadLatencies,
    /// Reads in flight per key, for coalescing reads of hot keys.
    pub(crate) read_flights: ReadFlights,
    /// Replica writes queued per peer, for coalescing them into calls.
    pub(crate) apply_queues: ApplyQueues,
    /// Each peer's stream of replica writes (the calls `apply_queues` shape).
    pub(crate) apply_streams: Arc<ApplyStreams>,
    /// The coordinator's replica reads, coalesced per peer.
    pub(crate) read_queues: ReadQueues,
    /// Peers seen refusing `ReadMany` (an earlier build), for a while.
    pub(crate) read_many_refusals:
        crate::coordinator::peer_calls::read_many_refusals::ReadManyRefusals,
    /// The ring last replaced, which writes still reach for `ring_delay`.
    pub(crate) settling_ring: SettlingRing,
    /// Members replicas showed in a newer state than this node's view.
    pub(crate) ring_lag: crate::ring_lag::RingLag,
    /// The `toppartitions` sessions sampling this node's local reads and
    /// writes, per keyspace.
    pub(crate) hot_keys: ringstore_hotkeys::Samplers<ringstore_storage::KeyspaceId>,
    /// Whether the node takes writes and gossips (not after `drain` or a
    /// disk failure).
    pub(crate) serving: tokio::sync::watch::Sender<Serving>,
    /// The locks serializing the Paxos acceptor calls of one key.
    pub(crate) paxos_locks: crate::paxos::KeyLocks,
    /// Each keyspace's Paxos floor on this replica (`paxos/floors.rs`).
    pub(crate) paxos_floors: crate::paxos::PaxosFloors,
    /// The ballots this node issues as a Paxos coordinator: its clock and a
    /// tie-breaker drawn at random when this run of the node first
    /// coordinates a compare-and-set (not at start: a simulation's runs
    /// without compare-and-sets keep their random streams). Held only to
    /// issue one.
    pub(crate) ballot_clock: std::sync::Mutex<Option<ringstore_paxos::BallotClock>>,
    /// The lightweight transactions waiting for their turn on each key.
    pub(crate) cas_queue: crate::coordinator::cas::CasQueue,
}

impl NodeContext {
    /// The current cluster view.
    pub fn view(&self) -> Arc<ClusterView> {
        self.membership.view()
    }

    /// What rotating the node's secrets reads and swaps.
    pub fn rotation(&self) -> crate::rotation::Rotation<'_> {
        crate::rotation::Rotation {
            config: &self.config,
            membership: &self.membership,
            tls: &self.tls,
            peers: &self.peers,
        }
    }

    /// The node's gossip agent (a cloneable handle).
    pub fn membership(&self) -> &MembershipHandle {
        &self.membership
    }

    /// Whether the node takes writes and gossips (see [`Serving`]).
    pub fn is_serving(&self) -> bool {
        self.serving.borrow().is_normal()
    }

    /// `UNAVAILABLE` naming the drain or the disk failure when the node no
    /// longer takes writes.
    pub fn check_serving(&self) -> Result<()> {
        match &*self.serving.borrow() {
            Serving::Normal => Ok(()),
            Serving::Drained => Err(ServingError::Drained.into()),
            Serving::DiskFailed(error) => Err(ServingError::DiskFailed {
                error: error.clone(),
            }
            .into()),
        }
    }

    /// `UNAVAILABLE` naming this node's clock offset and `max_clock_offset`
    /// when its clock is off from the majority of the live members by more
    /// than that, or its timestamps run ahead of its clock by more: it must
    /// not stamp writes (see [`crate::clock_guard`]).
    pub fn check_clock(&self) -> Result<()> {
        self.clock_guard
            .check(&self.membership.clock_report(), &self.clock)
    }

    /// The keyspace named `name`, or `NOT_FOUND`.
    pub fn keyspace(&self, name: &str) -> Result<KeyspaceDef> {
        self.schema
            .current()
            .keyspace(name)
            .cloned()
            .ok_or_else(|| NodeError::KeyspaceNotFound(name.to_string()))
    }

    /// Records a replica-local `op` on `key` of keyspace `id` (named
    /// `name`) that took `elapsed`: in the keyspace's metrics, and in the
    /// `toppartitions` sessions sampling it.
    pub(crate) fn served_locally(
        &self,
        id: KeyspaceId,
        name: &str,
        op: LocalOp,
        key: &[u8],
        elapsed: std::time::Duration,
    ) {
        self.metrics.keyspace(name).record(op, elapsed);
        let sampled = match op {
            LocalOp::Read => ringstore_hotkeys::Operation::Reads,
            LocalOp::Write => ringstore_hotkeys::Operation::Writes,
        };
        self.hot_keys.record(&id, sampled, key);
    }

    /// A keyspace id, as a replica receives it, that the schema has not
    /// dropped. An id this node does not know yet is accepted: its schema
    /// may lag, and data lives by id.
    pub fn live_keyspace(&self, id: &str) -> Result<KeyspaceId> {
        let id = crate::convert::keyspace_id_from_pb(id)?;
        if self.schema.current().is_dropped(id) {
            return Err(NodeError::KeyspaceNotFound(id.to_string()));
        }
        Ok(id)
    }

    /// The name of the keyspace with `id` (its id when the schema does not know it).
    pub fn keyspace_name(&self, id: KeyspaceId) -> String {
        self.schema.current().name_of(id)
    }

    /// The keyspaces that hold data (not dropped), as the schema says.
    pub fn keyspaces(&self) -> Vec<KeyspaceDef> {
        self.schema
            .current()
            .entries()
            .filter(|e| !e.dropped)
            .map(|e| e.keyspace.clone())
            .collect()
    }

    /// The current view and the replica map of `keyspace` on its ring.
    pub fn placement(&self, keyspace: &KeyspaceDef) -> (Arc<ClusterView>, Arc<ReplicaMap>) {
        let view = self.view();
        let map = self
            .replica_maps
            .replica_map(&view.ring, keyspace.id, &keyspace.strategy);
        (view, map)
    }
}

impl HandoffHost for NodeContext {
    fn host_id(&self) -> HostId {
        self.host_id
    }

    fn store(&self) -> &Store {
        &self.store
    }

    fn handoff(&self) -> &Handoff {
        &self.handoff
    }

    fn schema(&self) -> Arc<Schema> {
        self.schema.current()
    }

    fn membership(&self) -> &MembershipHandle {
        &self.membership
    }

    fn peers(&self) -> &Peers {
        &self.peers
    }

    fn write_timeout_ms(&self) -> u64 {
        self.config.timeouts.write_ms
    }

    fn metrics(&self) -> &NodeMetrics {
        &self.metrics
    }
}

impl crate::removal::RemovalHost for NodeContext {
    fn host_id(&self) -> HostId {
        self.host_id
    }

    fn membership(&self) -> &MembershipHandle {
        &self.membership
    }

    fn peers(&self) -> &Peers {
        &self.peers
    }

    fn request_stop(&self) {
        self.stop_requested.send_replace(true);
    }
}
