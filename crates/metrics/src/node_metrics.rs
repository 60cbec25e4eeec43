//! [`NodeMetrics`]: every family of one node, how the request path records
//! into them, and the page a scrape gets.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Mutex, PoisonError, RwLock};
use std::time::Duration;

use prometheus::{
    Histogram, HistogramVec, IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Registry,
    TextEncoder,
};

use crate::error::{MetricsError, Result};
use crate::families::{Families, advance, gauge_value};
use crate::labels::{AuthRefusal, CoordinatorOp, Expired, InternodeRpc, LocalOp, Operation, Stage};
use crate::percentiles::LatencySummary;
use crate::sampled::Sampled;
use crate::snapshot::NodeSnapshot;
use crate::stage::StageGuard;

/// Latency histogram bucket bounds, in seconds: 30 buckets growing by 1.5×
/// from 50 µs to about 6.4 s.
pub fn latency_buckets() -> Vec<f64> {
    std::iter::successors(Some(50e-6), |b| Some(b * 1.5))
        .take(30)
        .collect()
}

/// The recording handles of one client operation at one consistency level.
#[derive(Clone)]
pub struct RequestHandles {
    count: IntCounter,
    latency: Histogram,
}

impl RequestHandles {
    /// Records one request that took `elapsed`.
    pub fn record(&self, elapsed: Duration) {
        self.count.inc();
        self.latency.observe(elapsed.as_secs_f64());
    }
}

/// The recording handles of one keyspace's replica-local reads and writes.
#[derive(Clone)]
pub struct KeyspaceHandles {
    reads: IntCounter,
    writes: IntCounter,
    read_latency: Histogram,
    write_latency: Histogram,
}

impl KeyspaceHandles {
    /// Records one local `op` of one key that took `elapsed`.
    pub fn record(&self, op: LocalOp, elapsed: Duration) {
        let (count, latency) = match op {
            LocalOp::Read => (&self.reads, &self.read_latency),
            LocalOp::Write => (&self.writes, &self.write_latency),
        };
        count.inc();
        latency.observe(elapsed.as_secs_f64());
    }
}

/// A `Client/Pipeline` stream counted as open until this is dropped.
#[derive(Debug)]
pub struct OpenPipeline(IntGauge);

impl Drop for OpenPipeline {
    fn drop(&mut self) {
        self.0.dec();
    }
}

/// Every metric family of one node, in its own registry. See the crate docs.
pub struct NodeMetrics {
    registry: Registry,
    client_requests: IntCounterVec,
    client_errors: IntCounterVec,
    client_latency: HistogramVec,
    coordinator_latency: HistogramVec,
    coordinator_requests: IntCounterVec,
    coordinator_unavailables: IntCounterVec,
    coordinator_timeouts: IntCounterVec,
    read_repairs: IntCounter,
    speculative_retries: IntCounter,
    coalesced_reads: IntCounter,
    coalesced_writes: IntCounter,
    apply_streams_opened: IntCounter,
    coalesced_replica_reads: IntCounter,
    auth_refusals: IntCounterVec,
    expired_drops: IntCounterVec,
    pipelines_opened: IntCounter,
    pipelines_open: IntGauge,
    internode_latency: HistogramVec,
    storage_sync_latency: Histogram,
    commitlog_sync_latency: Histogram,
    commitlog_damage: IntGauge,
    keyspace_requests: IntCounterVec,
    keyspace_latency: HistogramVec,
    stage_active: IntGaugeVec,
    stage_pending: IntGaugeVec,
    stage_completed: IntCounterVec,
    /// `(active, completed)` of each recorded stage, in [`Stage::ALL`] order.
    stages: Vec<(IntGauge, IntCounter)>,
    requests: RwLock<HashMap<(Operation, &'static str), RequestHandles>>,
    keyspaces: RwLock<HashMap<String, KeyspaceHandles>>,
    peers: RwLock<HashMap<(SocketAddr, InternodeRpc), Histogram>>,
    sampled: Sampled,
    /// Held while a page is rendered, so two scrapes never interleave their
    /// updates of the sampled families.
    rendering: Mutex<()>,
}

fn read<T>(lock: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    lock.read().unwrap_or_else(PoisonError::into_inner)
}

fn write<T>(lock: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    lock.write().unwrap_or_else(PoisonError::into_inner)
}

impl NodeMetrics {
    /// Every family, registered in a new registry.
    pub fn new() -> Result<NodeMetrics> {
        let registry = Registry::new();
        let f = Families(&registry);
        let client = ["operation", "consistency"];
        let stage_active = f.gauges(
            "ringstore_stage_active",
            "Work in progress, by stage (tpstats' Active).",
            &["stage"],
        )?;
        let stage_pending = f.gauges(
            "ringstore_stage_pending",
            "Work waiting for its turn, by stage (tpstats' Pending).",
            &["stage"],
        )?;
        let stage_completed = f.counters(
            "ringstore_stage_completed_total",
            "Work done, by stage (tpstats' Completed).",
            &["stage"],
        )?;
        let stages = Stage::ALL
            .iter()
            .map(|s| {
                stage_pending.with_label_values(&[s.label()]).set(0);
                (
                    stage_active.with_label_values(&[s.label()]),
                    stage_completed.with_label_values(&[s.label()]),
                )
            })
            .collect();
        let metrics = NodeMetrics {
            client_requests: f.counters(
                "ringstore_client_requests_total",
                "Client requests answered, by operation and consistency level.",
                &client,
            )?,
            client_errors: f.counters(
                "ringstore_client_request_errors_total",
                "Client requests answered with an error, by operation, consistency level and gRPC code.",
                &["operation", "consistency", "code"],
            )?,
            client_latency: f.histograms(
                "ringstore_client_request_duration_seconds",
                "Client request latency as the coordinator sees it, by operation and consistency level.",
                &client,
            )?,
            coordinator_latency: f.histograms(
                "ringstore_coordinator_duration_seconds",
                "Coordinated reads and writes of one key (proxyhistograms), successful or not.",
                &["operation"],
            )?,
            coordinator_requests: f.counters(
                "ringstore_coordinator_requests_total",
                "Reads and writes of one key this node coordinated, by whether it is a replica of the key (replica_local=\"false\": every replica was remote, a hop a token-aware client saves).",
                &["operation", "replica_local"],
            )?,
            coordinator_unavailables: f.counters(
                "ringstore_coordinator_unavailables_total",
                "Reads and writes refused for want of live replicas, or failed by too many replicas.",
                &["operation"],
            )?,
            coordinator_timeouts: f.counters(
                "ringstore_coordinator_timeouts_total",
                "Reads and writes that timed out waiting for replicas.",
                &["operation"],
            )?,
            read_repairs: f.counter(
                "ringstore_read_repairs_total",
                "Stale replicas a read repaired (blocking read repair).",
            )?,
            speculative_retries: f.counter(
                "ringstore_speculative_retries_total",
                "Extra replica requests reads sent after waiting their keyspace's speculative_retry delay.",
            )?,
            coalesced_reads: f.counter(
                "ringstore_coalesced_reads_total",
                "Reads of one key that queued for a replica round shared with concurrent reads of the key at the same level (hot keys).",
            )?,
            coalesced_writes: f.counter(
                "ringstore_coalesced_writes_total",
                "Replica writes to another node that queued behind its busy call slots and left in a call shared with others.",
            )?,
            apply_streams_opened: f.counter(
                "ringstore_apply_streams_opened_total",
                "Streams of replica writes this node opened to peers, refused ones included: about one per peer while connections hold.",
            )?,
            coalesced_replica_reads: f.counter(
                "ringstore_coalesced_replica_reads_total",
                "Replica reads to another node that queued behind its busy call slots and left in a call shared with others.",
            )?,
            auth_refusals: f.counters(
                "ringstore_client_auth_refusals_total",
                "Client requests refused by client authentication: missing credentials, failed logins (unknown user or wrong password), logins throttled without a check (too many failures from the source or as the user), denied permissions.",
                &["reason"],
            )?,
            expired_drops: f.counters(
                "ringstore_dropped_expired_total",
                "Work dropped undone because its waiter had stopped waiting: client writes read after the client's deadline (refused, unstamped) and replica writes read after the coordinator's (not applied; the coordinator hints them).",
                &["kind"],
            )?,
            pipelines_opened: f.counter(
                "ringstore_client_pipelines_total",
                "Client/Pipeline streams opened (each carries many requests, counted in ringstore_client_requests_total as their unary kinds).",
            )?,
            pipelines_open: f.gauge(
                "ringstore_client_pipelines_open",
                "Client/Pipeline streams open now.",
            )?,
            internode_latency: f.histograms(
                "ringstore_internode_request_duration_seconds",
                "Internode calls this node made (coordinating, replaying and handing over hints, streaming, repairing), by peer internode address and RPC.",
                &["peer", "rpc"],
            )?,
            storage_sync_latency: f
                .histograms(
                    "ringstore_storage_sync_duration_seconds",
                    "Storage flushes to disk (fsync; group commit and periodic syncs).",
                    &[],
                )?
                .with_label_values::<&str>(&[]),
            commitlog_sync_latency: f
                .histograms(
                    "ringstore_commitlog_sync_duration_seconds",
                    "Commit log writes, each ending in the fdatasync that acknowledges every batch-durability write appended while the previous one ran.",
                    &[],
                )?
                .with_label_values::<&str>(&[]),
            commitlog_damage: f.gauge(
                "ringstore_commitlog_damaged_sections",
                "Damaged places in synced commit log sections that the replay found when this node started: acknowledged writes that may be missing here until a repair.",
            )?,
            keyspace_requests: f.counters(
                "ringstore_keyspace_local_requests_total",
                "Replica-local reads and writes of one key, by keyspace (tablestats).",
                &["keyspace", "operation"],
            )?,
            keyspace_latency: f.histograms(
                "ringstore_keyspace_local_duration_seconds",
                "Replica-local read and write latency, by keyspace (tablestats).",
                &["keyspace", "operation"],
            )?,
            stage_active,
            stage_pending,
            stage_completed,
            stages,
            requests: RwLock::default(),
            keyspaces: RwLock::default(),
            peers: RwLock::default(),
            sampled: Sampled::new(&f)?,
            rendering: Mutex::new(()),
            registry,
        };
        // Families a scrape should show before their first sample.
        for reason in AuthRefusal::ALL {
            metrics.auth_refusals.with_label_values(&[reason.label()]);
        }
        for kind in Expired::ALL {
            metrics.expired_drops.with_label_values(&[kind.label()]);
        }
        for op in [CoordinatorOp::Read, CoordinatorOp::Write] {
            let label = [op.label()];
            metrics.coordinator_latency.with_label_values(&label);
            for local in ["true", "false"] {
                metrics
                    .coordinator_requests
                    .with_label_values(&[op.label(), local]);
            }
            metrics.coordinator_unavailables.with_label_values(&label);
            metrics.coordinator_timeouts.with_label_values(&label);
        }
        Ok(metrics)
    }

    /// The handles of client `op` at consistency level `level` (its name,
    /// such as `QUORUM`), created on first use and cached.
    pub fn request(&self, op: Operation, level: &'static str) -> RequestHandles {
        if let Some(handles) = read(&self.requests).get(&(op, level)) {
            return handles.clone();
        }
        let labels = [op.label(), level];
        let handles = RequestHandles {
            count: self.client_requests.with_label_values(&labels),
            latency: self.client_latency.with_label_values(&labels),
        };
        write(&self.requests).insert((op, level), handles.clone());
        handles
    }

    /// Counts a client request of `op` at `level` answered with gRPC `code`
    /// (its name, such as `UNAVAILABLE`).
    pub fn client_error(&self, op: Operation, level: &str, code: &str) {
        self.client_errors
            .with_label_values(&[op.label(), level, code])
            .inc();
    }

    /// Records one coordinated read or write of one key.
    pub fn coordinated(&self, op: CoordinatorOp, elapsed: Duration) {
        self.coordinator_latency
            .with_label_values(&[op.label()])
            .observe(elapsed.as_secs_f64());
    }

    /// Counts a read or write of one key coordinated by a replica of the
    /// key (`replica_local`) or by a node that is none.
    pub fn coordinator_request(&self, op: CoordinatorOp, replica_local: bool) {
        let local = if replica_local { "true" } else { "false" };
        self.coordinator_requests
            .with_label_values(&[op.label(), local])
            .inc();
    }

    /// Counts a read or write refused or failed for want of replicas.
    pub fn unavailable(&self, op: CoordinatorOp) {
        self.coordinator_unavailables
            .with_label_values(&[op.label()])
            .inc();
    }

    /// Counts a read or write that timed out.
    pub fn timed_out(&self, op: CoordinatorOp) {
        self.coordinator_timeouts
            .with_label_values(&[op.label()])
            .inc();
    }

    /// Counts a client request refused by client authentication.
    pub fn auth_refused(&self, reason: AuthRefusal) {
        self.auth_refusals
            .with_label_values(&[reason.label()])
            .inc();
    }

    /// Counts work of `kind` dropped because its waiter had stopped waiting.
    pub fn dropped_expired(&self, kind: Expired) {
        self.expired_drops.with_label_values(&[kind.label()]).inc();
    }

    /// How much work of `kind` was dropped as expired since the start.
    pub fn expired_count(&self, kind: Expired) -> u64 {
        self.expired_drops.with_label_values(&[kind.label()]).get()
    }

    /// Counts a `Client/Pipeline` stream opened; it counts as open until
    /// the guard is dropped.
    pub fn pipeline_opened(&self) -> OpenPipeline {
        self.pipelines_opened.inc();
        self.pipelines_open.inc();
        OpenPipeline(self.pipelines_open.clone())
    }

    /// Counts `replicas` stale replicas repaired by a read.
    pub fn read_repaired(&self, replicas: u64) {
        self.read_repairs.inc_by(replicas);
    }

    /// Counts one extra replica request sent by a read's speculative retry.
    pub fn speculative_retry(&self) {
        self.speculative_retries.inc();
    }

    /// Speculative retries sent since start.
    pub fn speculative_retries(&self) -> u64 {
        self.speculative_retries.get()
    }

    /// Counts one read that queued for a shared replica round.
    pub fn coalesced_read(&self) {
        self.coalesced_reads.inc();
    }

    /// Reads that queued for a shared replica round since start.
    pub fn coalesced_reads(&self) -> u64 {
        self.coalesced_reads.get()
    }

    /// Counts `count` replica writes that left in a shared call.
    pub fn coalesced_writes(&self, count: usize) {
        self.coalesced_writes.inc_by(count as u64);
    }

    /// Replica writes that left in a shared call since start.
    pub fn coalesced_writes_total(&self) -> u64 {
        self.coalesced_writes.get()
    }

    /// Counts a stream of replica writes opened to a peer.
    pub fn apply_stream_opened(&self) {
        self.apply_streams_opened.inc();
    }

    /// Streams of replica writes opened to peers since start.
    pub fn apply_streams_opened_total(&self) -> u64 {
        self.apply_streams_opened.get()
    }

    /// Counts `count` replica reads that left in a shared call.
    pub fn coalesced_replica_reads(&self, count: usize) {
        self.coalesced_replica_reads.inc_by(count as u64);
    }

    /// Replica reads that left in a shared call since start.
    pub fn coalesced_replica_reads_total(&self) -> u64 {
        self.coalesced_replica_reads.get()
    }

    /// Records an internode call to `peer` that took `elapsed`.
    pub fn internode(&self, peer: SocketAddr, rpc: InternodeRpc, elapsed: Duration) {
        let seconds = elapsed.as_secs_f64();
        if let Some(histogram) = read(&self.peers).get(&(peer, rpc)) {
            histogram.observe(seconds);
            return;
        }
        let histogram = self
            .internode_latency
            .with_label_values(&[peer.to_string().as_str(), rpc.label()]);
        histogram.observe(seconds);
        write(&self.peers).insert((peer, rpc), histogram);
    }

    /// Records one storage sync that took `elapsed`.
    pub fn storage_synced(&self, elapsed: Duration) {
        self.storage_sync_latency.observe(elapsed.as_secs_f64());
    }

    /// Records one commit log write and sync that took `elapsed`.
    pub fn commitlog_synced(&self, elapsed: Duration) {
        self.commitlog_sync_latency.observe(elapsed.as_secs_f64());
    }

    /// Records the damaged places the commit log's replay found at start.
    pub fn commitlog_damage_found(&self, places: usize) {
        self.commitlog_damage
            .set(i64::try_from(places).unwrap_or(i64::MAX));
    }

    /// The handles of keyspace `name`'s local reads and writes, created on
    /// first use and cached.
    pub fn keyspace(&self, name: &str) -> KeyspaceHandles {
        if let Some(handles) = read(&self.keyspaces).get(name) {
            return handles.clone();
        }
        let handles = KeyspaceHandles {
            reads: self.keyspace_requests.with_label_values(&[name, "read"]),
            writes: self.keyspace_requests.with_label_values(&[name, "write"]),
            read_latency: self.keyspace_latency.with_label_values(&[name, "read"]),
            write_latency: self.keyspace_latency.with_label_values(&[name, "write"]),
        };
        write(&self.keyspaces).insert(name.to_string(), handles.clone());
        handles
    }

    /// Counts one unit of recorded `stage` work in flight until the guard drops.
    pub fn stage(&self, stage: Stage) -> StageGuard<'_> {
        let (active, completed) = &self.stages[Stage::ALL
            .iter()
            .position(|&s| s == stage)
            .expect("every stage is in Stage::ALL")];
        StageGuard::enter(active, completed)
    }

    /// `(active, pending, completed)` of `stage`, as last recorded or sampled.
    pub fn stage_numbers(&self, stage: Stage) -> (u64, u64, u64) {
        let label = [stage.label()];
        let value = |g: i64| u64::try_from(g).unwrap_or(0);
        (
            value(self.stage_active.with_label_values(&label).get()),
            value(self.stage_pending.with_label_values(&label).get()),
            self.stage_completed.with_label_values(&label).get(),
        )
    }

    /// The latency of coordinated `op`s since start.
    pub fn coordinator_summary(&self, op: CoordinatorOp) -> LatencySummary {
        LatencySummary::of(&self.coordinator_latency.with_label_values(&[op.label()]))
    }

    /// The latency of keyspace `name`'s local `op`s since start.
    pub fn keyspace_summary(&self, name: &str, op: LocalOp) -> LatencySummary {
        let handles = self.keyspace(name);
        LatencySummary::of(match op {
            LocalOp::Read => &handles.read_latency,
            LocalOp::Write => &handles.write_latency,
        })
    }

    /// The page a scrape gets: `snapshot` copied into the sampled families,
    /// then every family in the Prometheus text format.
    pub fn render(&self, snapshot: &NodeSnapshot) -> Result<String> {
        let _rendering = self
            .rendering
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        self.sampled.update(snapshot);
        for sample in &snapshot.stages {
            let label = [sample.stage.label()];
            self.stage_active
                .with_label_values(&label)
                .set(gauge_value(sample.active));
            self.stage_pending
                .with_label_values(&label)
                .set(gauge_value(sample.pending));
            advance(
                &self.stage_completed.with_label_values(&label),
                sample.completed,
            );
        }
        TextEncoder::new()
            .encode_to_string(&self.registry.gather())
            .map_err(MetricsError::Encode)
    }
}

#[cfg(test)]
#[path = "node_metrics_tests.rs"]
mod tests;
