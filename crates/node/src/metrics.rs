//! The node's metrics page: what `GET /metrics` and `ringstore metrics`
//! show. The request path records into the node's [`NodeMetrics`] as it
//! goes; this module samples the rest of the node (gossip, hints, streams,
//! ring, schema, keyspace sizes) into a [`NodeSnapshot`] and renders both.
//! Counters restart at zero with the process.
//!
//! It reads the node through a [`MetricsHost`], which the node's context
//! implements (in `node/hosts/`): this module names neither the context nor
//! the repair subsystem, whose part of the page the host makes.

use std::collections::BTreeMap;
use std::time::Instant;

use ringstore_hints::{HintCounters, TargetStats};

use ringstore_membership::{Liveness, MembershipHandle, MembershipStats, NodeState};
use ringstore_metrics::{
    ClockSample, KeyspaceSample, NodeMetrics, NodeSnapshot, RepairSample, Stage, StageSample,
    Traffic,
};
use ringstore_placement::HostId;
use ringstore_storage::Store;
use ringstore_streaming::{StreamThrottle, Streams};

use crate::error::Result;
use crate::schema::KeyspaceDef;

/// What the metrics page reads of the running node, and nothing more.
pub trait MetricsHost: Send + Sync {
    /// Where the request path records (rendered with the sample).
    fn metrics(&self) -> &NodeMetrics;
    /// The gossip agent: its counters, the cluster view (members up and
    /// down, the ring) and the clock report.
    fn membership(&self) -> &MembershipHandle;
    /// The storage: load, disk use, pending runs, damage, keyspace sizes.
    fn store(&self) -> &Store;
    /// The keyspaces that hold data (not dropped), whose sizes are shown.
    fn keyspaces(&self) -> Vec<KeyspaceDef>;
    /// The version of the current schema.
    fn schema_version(&self) -> String;
    /// Hinted handoff's numbers: hints pending, stored, replayed and
    /// dropped.
    fn hints(&self) -> HintNumbers;
    /// The node's streams: bytes moved, streams running.
    fn streams(&self) -> &Streams;
    /// The node-wide stream throttle, whose rate is shown.
    fn stream_throttle(&self) -> &StreamThrottle;
    /// When the node started (its uptime).
    fn started(&self) -> Instant;
    /// Writes refused because this node's clock was off.
    fn refused_writes(&self) -> u64;
    /// What repairs and garbage collection did, as the repair subsystem
    /// samples it.
    fn repair_sample(&self) -> RepairSample;
}

/// Hinted handoff's numbers, as the page shows them (a copy: the page
/// needs nothing else of handoff).
#[derive(Clone, Debug, Default)]
pub struct HintNumbers {
    /// The hints pending, and their bytes, per target.
    pub pending: BTreeMap<HostId, TargetStats>,
    /// Hints stored, replayed and dropped (by reason) since the node started.
    pub counters: HintCounters,
    /// Hints the coordinator could not store (a storage failure).
    pub store_failures: u64,
    /// Whether delivery is paused (`pausehandoff`).
    pub paused: bool,
}

/// The page a scrape gets, in the Prometheus text format.
pub async fn page(host: &dyn MetricsHost) -> Result<String> {
    // A drained node's gossip has stopped: its counters are then unknown.
    let gossip = host.membership().stats().await.unwrap_or_default();
    let keyspaces = sizes(host);
    let snapshot = snapshot(host, &gossip, keyspaces);
    Ok(host.metrics().render(&snapshot)?)
}

/// The sizes of every keyspace this node holds, by name, from the store's
/// live counts (no cell is read).
pub fn keyspace_sizes(host: &impl MetricsHost) -> Vec<KeyspaceSample> {
    sizes(host)
}

fn sizes(host: &dyn MetricsHost) -> Vec<KeyspaceSample> {
    let mut keyspaces: Vec<KeyspaceSample> = host
        .keyspaces()
        .into_iter()
        .map(|keyspace| {
            let counts = host.store().keyspace_counts(keyspace.id);
            KeyspaceSample {
                name: keyspace.name,
                keys: counts.keys,
                bytes: counts.bytes,
                tombstones: counts.tombstones,
            }
        })
        .collect();
    keyspaces.sort_by(|a, b| a.name.cmp(&b.name));
    keyspaces
}

/// The sampled numbers of `host`'s node.
fn snapshot(
    host: &dyn MetricsHost,
    gossip: &MembershipStats,
    keyspaces: Vec<KeyspaceSample>,
) -> NodeSnapshot {
    let view = host.membership().view();
    let members = view
        .members
        .values()
        .filter(|m| m.metadata.state != NodeState::Left)
        .filter(|m| !view.removed.contains(&m.metadata.host_id));
    let (mut up, mut down) = (0, 0);
    for member in members {
        if member.liveness == Liveness::Up {
            up += 1;
        } else {
            down += 1;
        }
    }
    let hints = host.hints();
    let store = host.store();
    let pending = hints.pending;
    let c = hints.counters;
    let (received, sent) = host.streams().bytes_moved();
    let hints_pending: u64 = pending.values().map(|t| t.hints).sum();
    NodeSnapshot {
        uptime_seconds: host.started().elapsed().as_secs(),
        load_bytes: store.load_bytes(),
        disk_bytes: store.disk_bytes().unwrap_or(0),
        runs_pending: {
            let (runs, cells) = store.runs_pending();
            (runs as u64, cells)
        },
        runs_damaged: store.run_damage() as u64,
        corrupt_reads: store.corrupt_reads(),
        gossip_packets: Traffic {
            sent: gossip.packets_sent,
            received: gossip.packets_received,
        },
        gossip_bytes: Traffic {
            sent: gossip.bytes_sent,
            received: gossip.bytes_received,
        },
        gossip_dropped: vec![
            ("malformed", gossip.dropped_malformed),
            ("foreign_cluster", gossip.dropped_foreign_cluster),
            ("bad_auth", gossip.dropped_bad_auth),
            ("replay", gossip.dropped_replay),
            ("rejected_by_swim", gossip.swim_errors),
            ("bad_metadata", gossip.metadata_rejected),
        ],
        members_up: up,
        members_down: down,
        ring_epoch: view.ring.epoch(),
        ring_checksum: view.ring.checksum(),
        schema_version: host.schema_version(),
        hints_pending: pending
            .iter()
            .map(|(target, stats)| (target.to_string(), stats.hints, stats.bytes))
            .collect(),
        hints_stored: c.stored,
        hints_replayed: c.replayed,
        hints_dropped: vec![
            ("over_cap", c.dropped_over_cap),
            ("expired", c.dropped_expired),
            ("outside_window", c.dropped_outside_window),
            ("corrupt", c.dropped_corrupt),
            ("keyspace_dropped", c.dropped_keyspace),
            ("refused", c.dropped_refused),
            ("truncated", c.truncated),
        ],
        hint_store_failures: hints.store_failures,
        stream_bytes: Traffic { sent, received },
        streams_running: host.streams().running() as u64,
        stream_throughput_mib_per_sec: host.stream_throttle().mib_per_sec(),
        stages: vec![
            StageSample {
                stage: Stage::HintDelivery,
                active: u64::from(hints_pending > 0 && !hints.paused),
                pending: hints_pending,
                completed: c.replayed,
            },
            StageSample {
                stage: Stage::Streaming,
                active: host.streams().running() as u64,
                pending: 0,
                completed: 0,
            },
        ],
        keyspaces,
        repair: host.repair_sample(),
        clock: clock_sample(host),
    }
}

/// This node's clock against its live peers', as gossip estimates it.
fn clock_sample(host: &dyn MetricsHost) -> ClockSample {
    let report = host.membership().clock_report();
    ClockSample {
        offset_seconds: report.verdict.offset_micros() as f64 / 1e6,
        peer_offsets: report
            .peers
            .iter()
            .map(|(host, p)| (host.to_string(), p.offset_micros as f64 / 1e6))
            .collect(),
        skewed: report.verdict.is_skewed(),
        refused_writes: host.refused_writes(),
    }
}
