//! The families mirrored from a [`NodeSnapshot`] at scrape time.

use prometheus::{Gauge, GaugeVec, IntCounter, IntCounterVec, IntGauge, IntGaugeVec};

use crate::error::Result;
use crate::families::{Families, advance, gauge_value};
use crate::snapshot::NodeSnapshot;

/// The families mirrored from a [`NodeSnapshot`] at scrape time.
pub(crate) struct Sampled {
    uptime: IntGauge,
    load: IntGauge,
    disk: IntGauge,
    runs_pending: IntGauge,
    runs_pending_cells: IntGauge,
    runs_damaged: IntGauge,
    corrupt_reads: IntCounter,
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
    repair_ranges: IntCounterVec,
    repair_mismatched_keys: IntCounter,
    repair_rows_sent: IntCounter,
    repair_bytes: IntCounter,
    repair_running: IntGauge,
    repair_oldest_unrepaired: IntGauge,
    gc_purged: IntCounter,
    clock_offset: Gauge,
    clock_peer_offset: GaugeVec,
    clock_skewed: IntGauge,
    clock_refused_writes: IntCounter,
}

impl Sampled {
    pub(crate) fn new(f: &Families<'_>) -> Result<Sampled> {
        let direction = ["direction"];
        Ok(Sampled {
            uptime: f.gauge(
                "ringstore_uptime_seconds",
                "Seconds since the node started.",
            )?,
            load: f.gauge(
                "ringstore_storage_load_bytes",
                "Live bytes of the keyspaces' keys and cells on this node (the node's Load).",
            )?,
            disk: f.gauge(
                "ringstore_storage_disk_bytes",
                "Bytes the storage engine's files occupy on disk.",
            )?,
            runs_pending: f.gauge(
                "ringstore_storage_runs_pending",
                "Runs of streamed cells (bootstrap, decommission, removenode, replace, alter) not yet folded into the storage engine.",
            )?,
            runs_pending_cells: f.gauge(
                "ringstore_storage_runs_pending_cells",
                "Cells in the runs not yet folded into the storage engine.",
            )?,
            runs_damaged: f.gauge(
                "ringstore_storage_runs_damaged",
                "Run files that did not check when this node started or when the fold read them: their unread cells are missing here until a repair.",
            )?,
            corrupt_reads: f.counter(
                "ringstore_storage_corrupt_reads_total",
                "Times a stored cell did not read back (its checksum or layout did not hold, or the engine reported corruption), on a read, a write's merge, a scan or the fold. A read that met one was served by another replica; read repair, a later write or a repair rewrites the cell.",
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
            repair_ranges: f.counters(
                "ringstore_repair_ranges_total",
                "Ranges this node repaired as coordinator, by outcome (repaired or failed).",
                &["outcome"],
            )?,
            repair_mismatched_keys: f.counter(
                "ringstore_repair_mismatched_keys_total",
                "Keys repairs found differing between replicas.",
            )?,
            repair_rows_sent: f.counter(
                "ringstore_repair_rows_sent_total",
                "Rows repairs wrote to replicas that lacked them.",
            )?,
            repair_bytes: f.counter(
                "ringstore_repair_bytes_total",
                "Bytes repairs exchanged with other nodes (hashes, row lists, cells).",
            )?,
            repair_running: f.gauge(
                "ringstore_repair_running",
                "1 while this node coordinates a repair.",
            )?,
            repair_oldest_unrepaired: f.gauge(
                "ringstore_repair_oldest_unrepaired_seconds",
                "Age of the last repair of the least recently repaired range this node is the primary replica of.",
            )?,
            gc_purged: f.counter(
                "ringstore_gc_purged_total",
                "Tombstones and expired cells purged by garbage collection.",
            )?,
            clock_offset: f.float_gauge(
                "ringstore_clock_offset_seconds",
                "This node's clock minus the median of the live members' clocks, as gossip estimates it.",
            )?,
            clock_peer_offset: f.float_gauges(
                "ringstore_clock_peer_offset_seconds",
                "Each live peer's clock minus this node's, as gossip estimates it.",
                &["peer"],
            )?,
            clock_skewed: f.gauge(
                "ringstore_clock_skewed",
                "1 while this node's clock is off from the majority by more than max_clock_offset (it refuses to coordinate writes).",
            )?,
            clock_refused_writes: f.counter(
                "ringstore_clock_skew_refused_writes_total",
                "Writes this node refused to coordinate because its clock was off from the majority.",
            )?,
        })
    }

    pub(crate) fn update(&self, s: &NodeSnapshot) {
        self.uptime.set(gauge_value(s.uptime_seconds));
        self.load.set(gauge_value(s.load_bytes));
        self.disk.set(gauge_value(s.disk_bytes));
        self.runs_pending.set(gauge_value(s.runs_pending.0));
        self.runs_pending_cells.set(gauge_value(s.runs_pending.1));
        self.runs_damaged.set(gauge_value(s.runs_damaged));
        advance(&self.corrupt_reads, s.corrupt_reads);
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
        let r = &s.repair;
        advance(
            &self.repair_ranges.with_label_values(&["repaired"]),
            r.ranges_repaired,
        );
        advance(
            &self.repair_ranges.with_label_values(&["failed"]),
            r.ranges_failed,
        );
        advance(&self.repair_mismatched_keys, r.mismatched_keys);
        advance(&self.repair_rows_sent, r.rows_sent);
        advance(&self.repair_bytes, r.bytes);
        self.repair_running.set(gauge_value(r.running));
        self.repair_oldest_unrepaired
            .set(gauge_value(r.oldest_unrepaired_seconds));
        advance(&self.gc_purged, r.purged);
        let c = &s.clock;
        self.clock_offset.set(c.offset_seconds);
        self.clock_peer_offset.reset();
        for (peer, offset) in &c.peer_offsets {
            self.clock_peer_offset
                .with_label_values(&[peer.as_str()])
                .set(*offset);
        }
        self.clock_skewed.set(i64::from(c.skewed));
        advance(&self.clock_refused_writes, c.refused_writes);
    }
}
