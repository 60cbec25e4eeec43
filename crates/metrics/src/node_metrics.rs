//! [`NodeMetrics`]: every family of one node, how the request path records
//! into them, and the page a scrape gets.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Mutex, PoisonError, RwLock};
use std::time::Duration;

use prometheus::core::Collector;
use prometheus::{
    Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Opts,
    Registry, TextEncoder,
};

use crate::error::{MetricsError, Result};
use crate::labels::{CoordinatorOp, InternodeRpc, LocalOp, Operation, Stage};
use crate::percentiles::LatencySummary;
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

/// Every metric family of one node, in its own registry. See the crate docs.
pub struct NodeMetrics {
    registry: Registry,
    client_requests: IntCounterVec,
    client_errors: IntCounterVec,
    client_latency: HistogramVec,
    coordinator_latency: HistogramVec,
    coordinator_unavailables: IntCounterVec,
    coordinator_timeouts: IntCounterVec,
    read_repairs: IntCounter,
    internode_latency: HistogramVec,
    storage_sync_latency: Histogram,
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

/// The families mirrored from a [`NodeSnapshot`] at scrape time.
struct Sampled {
    uptime: IntGauge,
    load: IntGauge,
    gossip_packets: IntCounterVec,
    gossip_bytes: IntCounterVec,
    gossip_dropped: IntCounterVec,
    gossip_members: IntGaugeVec,
    ring_epoch: IntGauge,
    ring_info: IntGaugeVec,
    schema_info: IntGaugeVec,
    hints_pending: IntGaugeVec,
    hints_pending_bytes: IntGaugeVec,
    hints_stored: IntCounter,
    hints_replayed: IntCounter,
    hints_dropped: IntCounterVec,
    hint_store_failures: IntCounter,
    stream_bytes: IntCounterVec,
    streams_running: IntGauge,
    stream_throughput: IntGauge,
    keyspace_keys: IntGaugeVec,
    keyspace_bytes: IntGaugeVec,
    keyspace_tombstones: IntGaugeVec,
}

/// Registers families in one registry.
struct Families<'a>(&'a Registry);

impl Families<'_> {
    fn add<C: Collector + Clone + 'static>(&self, name: &'static str, c: C) -> Result<C> {
        self.0
            .register(Box::new(c.clone()))
            .map_err(|source| MetricsError::Register { name, source })?;
        Ok(c)
    }

    fn counter(&self, name: &'static str, help: &str) -> Result<IntCounter> {
        let c = IntCounter::new(name, help)
            .map_err(|source| MetricsError::Register { name, source })?;
        self.add(name, c)
    }

    fn counters(&self, name: &'static str, help: &str, labels: &[&str]) -> Result<IntCounterVec> {
        let c = IntCounterVec::new(Opts::new(name, help), labels)
            .map_err(|source| MetricsError::Register { name, source })?;
        self.add(name, c)
    }

    fn gauge(&self, name: &'static str, help: &str) -> Result<IntGauge> {
        let g =
            IntGauge::new(name, help).map_err(|source| MetricsError::Register { name, source })?;
        self.add(name, g)
    }

    fn gauges(&self, name: &'static str, help: &str, labels: &[&str]) -> Result<IntGaugeVec> {
        let g = IntGaugeVec::new(Opts::new(name, help), labels)
            .map_err(|source| MetricsError::Register { name, source })?;
        self.add(name, g)
    }

    fn histograms(&self, name: &'static str, help: &str, labels: &[&str]) -> Result<HistogramVec> {
        let opts = HistogramOpts::new(name, help).buckets(latency_buckets());
        let h = HistogramVec::new(opts, labels)
            .map_err(|source| MetricsError::Register { name, source })?;
        self.add(name, h)
    }
}

fn read<T>(lock: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    lock.read().unwrap_or_else(PoisonError::into_inner)
}

fn write<T>(lock: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    lock.write().unwrap_or_else(PoisonError::into_inner)
}

/// Moves a counter mirroring a monotonic count up to `value` (never down:
/// the count it mirrors only grows while the process lives).
fn advance(counter: &IntCounter, value: u64) {
    let now = counter.get();
    if value > now {
        counter.inc_by(value - now);
    }
}

fn gauge_value(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
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
            internode_latency: f.histograms(
                "ringstore_internode_request_duration_seconds",
                "Internode calls this node made as a coordinator, by peer internode address and RPC.",
                &["peer", "rpc"],
            )?,
            storage_sync_latency: f
                .histograms(
                    "ringstore_storage_sync_duration_seconds",
                    "Storage flushes to disk (fsync; group commit and periodic syncs).",
                    &[],
                )?
                .with_label_values::<&str>(&[]),
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
        for op in [CoordinatorOp::Read, CoordinatorOp::Write] {
            let label = [op.label()];
            metrics.coordinator_latency.with_label_values(&label);
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

    /// Counts `replicas` stale replicas repaired by a read.
    pub fn read_repaired(&self, replicas: u64) {
        self.read_repairs.inc_by(replicas);
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

impl Sampled {
    fn new(f: &Families<'_>) -> Result<Sampled> {
        let direction = ["direction"];
        Ok(Sampled {
            uptime: f.gauge(
                "ringstore_uptime_seconds",
                "Seconds since the node started.",
            )?,
            load: f.gauge(
                "ringstore_storage_load_bytes",
                "Bytes the storage engine uses on disk.",
            )?,
            gossip_packets: f.counters(
                "ringstore_gossip_packets_total",
                "Gossip datagrams by direction.",
                &direction,
            )?,
            gossip_bytes: f.counters(
                "ringstore_gossip_bytes_total",
                "Gossip bytes by direction.",
                &direction,
            )?,
            gossip_dropped: f.counters(
                "ringstore_gossip_dropped_total",
                "Gossip datagrams dropped, by reason.",
                &["reason"],
            )?,
            gossip_members: f.gauges(
                "ringstore_gossip_members",
                "Cluster members this node sees, by liveness (up or down).",
                &["liveness"],
            )?,
            ring_epoch: f.gauge(
                "ringstore_ring_epoch",
                "The epoch of the ring this node uses; grows with every ring change.",
            )?,
            ring_info: f.gauges(
                "ringstore_ring_info",
                "Always 1; the checksum label is equal on nodes that agree on the ring.",
                &["checksum"],
            )?,
            schema_info: f.gauges(
                "ringstore_schema_info",
                "Always 1; the version label is equal on nodes that agree on the schema.",
                &["version"],
            )?,
            hints_pending: f.gauges(
                "ringstore_hints_pending",
                "Hints waiting for their target.",
                &["target"],
            )?,
            hints_pending_bytes: f.gauges(
                "ringstore_hints_pending_bytes",
                "Bytes of hints waiting for their target.",
                &["target"],
            )?,
            hints_stored: f.counter("ringstore_hints_stored_total", "Hints stored.")?,
            hints_replayed: f.counter(
                "ringstore_hints_replayed_total",
                "Hints delivered and acknowledged.",
            )?,
            hints_dropped: f.counters(
                "ringstore_hints_dropped_total",
                "Hints dropped or not stored, by reason.",
                &["reason"],
            )?,
            hint_store_failures: f.counter(
                "ringstore_hint_store_failures_total",
                "Hints that could not be stored (their replica needs a repair).",
            )?,
            stream_bytes: f.counters(
                "ringstore_stream_bytes_total",
                "Bytes of range streams, by direction.",
                &direction,
            )?,
            streams_running: f.gauge(
                "ringstore_streams_running",
                "Range stream sessions in progress.",
            )?,
            stream_throughput: f.gauge(
                "ringstore_stream_throughput_mib_per_sec",
                "The node's stream throttle (0: unthrottled).",
            )?,
            keyspace_keys: f.gauges(
                "ringstore_keyspace_keys",
                "Keys this node stores, by keyspace (tombstones included).",
                &["keyspace"],
            )?,
            keyspace_bytes: f.gauges(
                "ringstore_keyspace_bytes",
                "Bytes of keys and cells this node stores, by keyspace.",
                &["keyspace"],
            )?,
            keyspace_tombstones: f.gauges(
                "ringstore_keyspace_tombstones",
                "Tombstones this node stores, by keyspace.",
                &["keyspace"],
            )?,
        })
    }

    fn update(&self, s: &NodeSnapshot) {
        self.uptime.set(gauge_value(s.uptime_seconds));
        self.load.set(gauge_value(s.load_bytes));
        for (family, traffic) in [
            (&self.gossip_packets, s.gossip_packets),
            (&self.gossip_bytes, s.gossip_bytes),
            (&self.stream_bytes, s.stream_bytes),
        ] {
            advance(&family.with_label_values(&["sent"]), traffic.sent);
            advance(&family.with_label_values(&["received"]), traffic.received);
        }
        for &(reason, count) in &s.gossip_dropped {
            advance(&self.gossip_dropped.with_label_values(&[reason]), count);
        }
        self.gossip_members
            .with_label_values(&["up"])
            .set(gauge_value(s.members_up));
        self.gossip_members
            .with_label_values(&["down"])
            .set(gauge_value(s.members_down));
        self.ring_epoch.set(gauge_value(s.ring_epoch));
        self.ring_info.reset();
        self.ring_info
            .with_label_values(&[s.ring_checksum.to_string().as_str()])
            .set(1);
        self.schema_info.reset();
        self.schema_info
            .with_label_values(&[s.schema_version.as_str()])
            .set(1);
        self.hints_pending.reset();
        self.hints_pending_bytes.reset();
        for (target, hints, bytes) in &s.hints_pending {
            let label = [target.as_str()];
            self.hints_pending
                .with_label_values(&label)
                .set(gauge_value(*hints));
            self.hints_pending_bytes
                .with_label_values(&label)
                .set(gauge_value(*bytes));
        }
        advance(&self.hints_stored, s.hints_stored);
        advance(&self.hints_replayed, s.hints_replayed);
        for &(reason, count) in &s.hints_dropped {
            advance(&self.hints_dropped.with_label_values(&[reason]), count);
        }
        advance(&self.hint_store_failures, s.hint_store_failures);
        self.streams_running.set(gauge_value(s.streams_running));
        self.stream_throughput
            .set(gauge_value(s.stream_throughput_mib_per_sec));
        self.keyspace_keys.reset();
        self.keyspace_bytes.reset();
        self.keyspace_tombstones.reset();
        for k in &s.keyspaces {
            let label = [k.name.as_str()];
            self.keyspace_keys
                .with_label_values(&label)
                .set(gauge_value(k.keys));
            self.keyspace_bytes
                .with_label_values(&label)
                .set(gauge_value(k.bytes));
            self.keyspace_tombstones
                .with_label_values(&label)
                .set(gauge_value(k.tombstones));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::{KeyspaceSample, StageSample, Traffic};

    fn line<'a>(page: &'a str, prefix: &str) -> Option<&'a str> {
        page.lines()
            .find_map(|l| l.strip_prefix(prefix).map(str::trim))
    }

    #[test]
    fn recorded_requests_show_on_the_page_by_operation_and_level() {
        let metrics = NodeMetrics::new().unwrap();
        for _ in 0..3 {
            metrics
                .request(Operation::Put, "QUORUM")
                .record(Duration::from_micros(300));
        }
        metrics.client_error(Operation::Get, "ONE", "UNAVAILABLE");
        metrics.unavailable(CoordinatorOp::Read);
        {
            let _guard = metrics.stage(Stage::ClientRequest);
            assert_eq!(metrics.stage_numbers(Stage::ClientRequest), (1, 0, 0));
        }
        assert_eq!(metrics.stage_numbers(Stage::ClientRequest), (0, 0, 1));
        let page = metrics.render(&NodeSnapshot::default()).unwrap();
        let labels = "{consistency=\"QUORUM\",operation=\"put\"}";
        assert_eq!(
            line(&page, &format!("ringstore_client_requests_total{labels}")),
            Some("3")
        );
        assert_eq!(
            line(
                &page,
                &format!("ringstore_client_request_duration_seconds_count{labels}")
            ),
            Some("3")
        );
        assert_eq!(
            line(
                &page,
                "ringstore_client_request_errors_total{code=\"UNAVAILABLE\",consistency=\"ONE\",operation=\"get\"}"
            ),
            Some("1")
        );
        assert_eq!(
            line(
                &page,
                "ringstore_stage_completed_total{stage=\"ClientRequest\"}"
            ),
            Some("1")
        );
    }

    #[test]
    fn sampled_counters_follow_the_snapshot_and_stale_labels_go() {
        let metrics = NodeMetrics::new().unwrap();
        let mut snapshot = NodeSnapshot {
            hints_stored: 20,
            gossip_packets: Traffic {
                sent: 5,
                received: 7,
            },
            hints_pending: vec![("a".into(), 2, 100)],
            keyspaces: vec![KeyspaceSample {
                name: "ks".into(),
                keys: 10,
                bytes: 400,
                tombstones: 1,
            }],
            stages: vec![StageSample {
                stage: Stage::HintDelivery,
                active: 0,
                pending: 2,
                completed: 9,
            }],
            schema_version: "v1".into(),
            ..NodeSnapshot::default()
        };
        let page = metrics.render(&snapshot).unwrap();
        assert_eq!(line(&page, "ringstore_hints_stored_total"), Some("20"));
        assert_eq!(
            line(
                &page,
                "ringstore_gossip_packets_total{direction=\"received\"}"
            ),
            Some("7")
        );
        assert_eq!(
            line(&page, "ringstore_hints_pending{target=\"a\"}"),
            Some("2")
        );
        assert_eq!(
            line(&page, "ringstore_keyspace_keys{keyspace=\"ks\"}"),
            Some("10")
        );
        assert_eq!(
            line(&page, "ringstore_stage_pending{stage=\"HintDelivery\"}"),
            Some("2")
        );
        snapshot.hints_stored = 25;
        snapshot.hints_pending.clear();
        snapshot.schema_version = "v2".into();
        let page = metrics.render(&snapshot).unwrap();
        assert_eq!(line(&page, "ringstore_hints_stored_total"), Some("25"));
        assert_eq!(line(&page, "ringstore_hints_pending{"), None);
        assert_eq!(line(&page, "ringstore_schema_info{version=\"v1\"}"), None);
        assert_eq!(
            line(&page, "ringstore_schema_info{version=\"v2\"}"),
            Some("1")
        );
    }

    /// Every family, each with at least one sample.
    fn page_with_every_family() -> String {
        let metrics = NodeMetrics::new().unwrap();
        let peer: SocketAddr = "127.0.0.1:7101".parse().unwrap();
        metrics
            .request(Operation::Get, "ONE")
            .record(Duration::ZERO);
        metrics.client_error(Operation::Get, "ONE", "UNAVAILABLE");
        metrics.internode(peer, InternodeRpc::Apply, Duration::ZERO);
        metrics
            .keyspace("ks")
            .record(LocalOp::Write, Duration::ZERO);
        metrics
            .render(&NodeSnapshot {
                hints_pending: vec![("a".into(), 1, 1)],
                hints_dropped: vec![("over_cap", 0)],
                gossip_dropped: vec![("replay", 0)],
                keyspaces: vec![KeyspaceSample::default()],
                ..NodeSnapshot::default()
            })
            .unwrap()
    }

    #[test]
    fn the_grafana_dashboard_uses_only_families_the_node_exports() {
        let page = page_with_every_family();
        let families: Vec<&str> = page
            .lines()
            .filter_map(|l| l.strip_prefix("# TYPE "))
            .filter_map(|l| l.split_whitespace().next())
            .collect();
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../deploy/grafana-dashboard.json"
        );
        let dashboard = std::fs::read_to_string(path).unwrap();
        let mut used = 0;
        for (at, _) in dashboard.match_indices("ringstore_") {
            let name: String = dashboard[at..]
                .chars()
                .take_while(|c| c.is_ascii_lowercase() || *c == '_')
                .collect();
            let family = ["_bucket", "_count", "_sum"]
                .iter()
                .find_map(|suffix| name.strip_suffix(suffix))
                .unwrap_or(&name);
            assert!(
                families.contains(&family),
                "the dashboard uses {name}, which the node does not export"
            );
            used += 1;
        }
        assert!(used >= 20, "the dashboard charts only {used} series");
    }

    #[test]
    fn latency_buckets_span_50_microseconds_to_seconds() {
        let buckets = latency_buckets();
        assert_eq!(buckets.len(), 30);
        assert!((buckets[0] - 50e-6).abs() < 1e-12);
        assert!(buckets[29] > 6.0 && buckets[29] < 7.0, "{}", buckets[29]);
    }
}
