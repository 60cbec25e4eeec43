//! The node's metrics page: what `GET /metrics` and `ringstore metrics`
//! show. The request path records into [`NodeContext::metrics`] as it goes;
//! this module samples the rest of the node (gossip, hints, streams, ring,
//! schema, keyspace sizes) into a [`NodeSnapshot`] and renders both.
//! Counters restart at zero with the process.

use std::sync::atomic::Ordering;

use ringstore_membership::{Liveness, MembershipStats, NodeState};
use ringstore_metrics::{
    ClockSample, KeyspaceSample, NodeSnapshot, RepairSample, Stage, StageSample, Traffic,
};

use crate::context::NodeContext;
use crate::error::Result;
use crate::repair::scheduler::scheduled_ranges;

/// The page a scrape gets, in the Prometheus text format.
pub async fn page(context: &NodeContext) -> Result<String> {
    // A drained node's gossip has stopped: its counters are then unknown.
    let gossip = context.membership.stats().await.unwrap_or_default();
    let keyspaces = keyspace_sizes(context);
    let snapshot = snapshot(context, &gossip, keyspaces);
    Ok(context.metrics.render(&snapshot)?)
}

/// The sizes of every keyspace this node holds, by name, from the store's
/// live counts (no cell is read).
pub fn keyspace_sizes(context: &NodeContext) -> Vec<KeyspaceSample> {
    let mut keyspaces: Vec<KeyspaceSample> = context
        .keyspaces()
        .into_iter()
        .map(|keyspace| {
            let counts = context.store.keyspace_counts(keyspace.id);
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

/// The sampled numbers of `context`'s node.
fn snapshot(
    context: &NodeContext,
    gossip: &MembershipStats,
    keyspaces: Vec<KeyspaceSample>,
) -> NodeSnapshot {
    let view = context.view();
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
    let handoff = &context.handoff;
    let pending = handoff.pending();
    let c = handoff.counters();
    let (received, sent) = context.streams.bytes_moved();
    let hints_pending: u64 = pending.values().map(|t| t.hints).sum();
    NodeSnapshot {
        uptime_seconds: context.started.elapsed().as_secs(),
        load_bytes: context.store.load_bytes(),
        disk_bytes: context.store.disk_bytes().unwrap_or(0),
        runs_pending: {
            let (runs, cells) = context.store.runs_pending();
            (runs as u64, cells)
        },
        runs_damaged: context.store.run_damage() as u64,
        corrupt_reads: context.store.corrupt_reads(),
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
        schema_version: context.schema.current().version().to_string(),
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
        hint_store_failures: handoff.store_failures(),
        stream_bytes: Traffic { sent, received },
        streams_running: context.streams.running() as u64,
        stream_throughput_mib_per_sec: context.stream_throttle.mib_per_sec(),
        stages: vec![
            StageSample {
                stage: Stage::HintDelivery,
                active: u64::from(hints_pending > 0 && !handoff.is_paused()),
                pending: hints_pending,
                completed: c.replayed,
            },
            StageSample {
                stage: Stage::Streaming,
                active: context.streams.running() as u64,
                pending: 0,
                completed: 0,
            },
        ],
        keyspaces,
        repair: repair_sample(context),
        clock: clock_sample(context),
    }
}

/// This node's clock against its live peers', as gossip estimates it.
fn clock_sample(context: &NodeContext) -> ClockSample {
    let report = context.membership.clock_report();
    ClockSample {
        offset_seconds: report.verdict.offset_micros() as f64 / 1e6,
        peer_offsets: report
            .peers
            .iter()
            .map(|(host, p)| (host.to_string(), p.offset_micros as f64 / 1e6))
            .collect(),
        skewed: report.verdict.is_skewed(),
        refused_writes: context.clock_guard.refused(),
    }
}

/// What repairs and garbage collection did on this node, and how long ago
/// the least recently repaired of its primary ranges was repaired.
fn repair_sample(context: &NodeContext) -> RepairSample {
    let stats = &context.repair.stats;
    let now = context.clock.now();
    let started = now.0 - context.started.elapsed().as_micros() as i64;
    let oldest = scheduled_ranges(context)
        .iter()
        .map(|r| r.last_repaired.map_or(started, |at| at.0))
        .min()
        .map_or(0, |at| (now.0 - at).max(0) as u64 / 1_000_000);
    RepairSample {
        ranges_repaired: stats.ranges_repaired.load(Ordering::Relaxed),
        ranges_failed: stats.ranges_failed.load(Ordering::Relaxed),
        mismatched_keys: stats.mismatched_keys.load(Ordering::Relaxed),
        rows_sent: stats.rows_sent.load(Ordering::Relaxed),
        bytes: stats.bytes.load(Ordering::Relaxed),
        running: u64::from(context.repair.running.try_lock().is_err()),
        oldest_unrepaired_seconds: oldest,
        purged: stats.purged.load(Ordering::Relaxed),
    }
}
