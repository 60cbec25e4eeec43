//! The node's metrics as Prometheus text: gossip traffic and drops, hinted
//! handoff, range streaming, storage and uptime. Counters restart at zero with the process.

use std::fmt::Write;

use ringstore_membership::MembershipStats;

use crate::context::NodeContext;

/// A metrics page under construction.
struct Page(String);

impl Page {
    /// Declares `name` of `kind` (`counter` or `gauge`) with its help text.
    fn family(&mut self, name: &str, kind: &str, help: &str) {
        let _ = writeln!(self.0, "# HELP {name} {help}\n# TYPE {name} {kind}");
    }

    /// One sample; `labels` as `key="value"` pairs.
    fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: u64) {
        let labels: Vec<String> = labels.iter().map(|(k, v)| format!("{k}=\"{v}\"")).collect();
        let labels = if labels.is_empty() {
            String::new()
        } else {
            format!("{{{}}}", labels.join(","))
        };
        let _ = writeln!(self.0, "{name}{labels} {value}");
    }
}

/// Renders the metrics of `context`'s node, with its gossip counters.
pub fn render(context: &NodeContext, gossip: &MembershipStats) -> String {
    let mut page = Page(String::new());
    page.family(
        "ringstore_uptime_seconds",
        "gauge",
        "Seconds since the node started.",
    );
    page.sample(
        "ringstore_uptime_seconds",
        &[],
        context.started.elapsed().as_secs(),
    );
    page.family(
        "ringstore_storage_load_bytes",
        "gauge",
        "Bytes the storage engine uses on disk.",
    );
    page.sample(
        "ringstore_storage_load_bytes",
        &[],
        context.store.load_bytes().unwrap_or(0),
    );

    page.family(
        "ringstore_gossip_packets_total",
        "counter",
        "Gossip datagrams by direction.",
    );
    page.sample(
        "ringstore_gossip_packets_total",
        &[("direction", "sent")],
        gossip.packets_sent,
    );
    page.sample(
        "ringstore_gossip_packets_total",
        &[("direction", "received")],
        gossip.packets_received,
    );
    page.family(
        "ringstore_gossip_bytes_total",
        "counter",
        "Gossip bytes by direction.",
    );
    page.sample(
        "ringstore_gossip_bytes_total",
        &[("direction", "sent")],
        gossip.bytes_sent,
    );
    page.sample(
        "ringstore_gossip_bytes_total",
        &[("direction", "received")],
        gossip.bytes_received,
    );
    page.family(
        "ringstore_gossip_dropped_total",
        "counter",
        "Gossip datagrams dropped, by reason.",
    );
    for (reason, count) in [
        ("malformed", gossip.dropped_malformed),
        ("foreign_cluster", gossip.dropped_foreign_cluster),
        ("bad_auth", gossip.dropped_bad_auth),
        ("replay", gossip.dropped_replay),
        ("rejected_by_swim", gossip.swim_errors),
        ("bad_metadata", gossip.metadata_rejected),
    ] {
        page.sample(
            "ringstore_gossip_dropped_total",
            &[("reason", reason)],
            count,
        );
    }

    let handoff = &context.handoff;
    page.family(
        "ringstore_hints_pending",
        "gauge",
        "Hints waiting for their target.",
    );
    page.family(
        "ringstore_hints_pending_bytes",
        "gauge",
        "Bytes of hints waiting for their target.",
    );
    let pending = handoff.pending();
    for (target, stats) in &pending {
        let target = target.to_string();
        page.sample(
            "ringstore_hints_pending",
            &[("target", &target)],
            stats.hints,
        );
        page.sample(
            "ringstore_hints_pending_bytes",
            &[("target", &target)],
            stats.bytes,
        );
    }
    let c = handoff.counters();
    page.family("ringstore_hints_stored_total", "counter", "Hints stored.");
    page.sample("ringstore_hints_stored_total", &[], c.stored);
    page.family(
        "ringstore_hints_replayed_total",
        "counter",
        "Hints delivered and acknowledged.",
    );
    page.sample("ringstore_hints_replayed_total", &[], c.replayed);
    page.family(
        "ringstore_hints_dropped_total",
        "counter",
        "Hints dropped or not stored, by reason.",
    );
    for (reason, count) in [
        ("over_cap", c.dropped_over_cap),
        ("expired", c.dropped_expired),
        ("outside_window", c.dropped_outside_window),
        ("corrupt", c.dropped_corrupt),
        ("keyspace_dropped", c.dropped_keyspace),
        ("refused", c.dropped_refused),
        ("truncated", c.truncated),
    ] {
        page.sample(
            "ringstore_hints_dropped_total",
            &[("reason", reason)],
            count,
        );
    }
    page.family(
        "ringstore_hint_store_failures_total",
        "counter",
        "Hints that could not be stored (their replica needs a repair).",
    );
    page.sample(
        "ringstore_hint_store_failures_total",
        &[],
        handoff.store_failures(),
    );
    let (received, sent) = context.streams.bytes_moved();
    page.family(
        "ringstore_stream_bytes_total",
        "counter",
        "Bytes of range streams, by direction.",
    );
    page.sample(
        "ringstore_stream_bytes_total",
        &[("direction", "received")],
        received,
    );
    page.sample(
        "ringstore_stream_bytes_total",
        &[("direction", "sent")],
        sent,
    );
    page.family(
        "ringstore_streams_running",
        "gauge",
        "Range stream sessions in progress.",
    );
    page.sample(
        "ringstore_streams_running",
        &[],
        context.streams.running() as u64,
    );
    page.family(
        "ringstore_stream_throughput_mib_per_sec",
        "gauge",
        "The node's stream throttle (0: unthrottled).",
    );
    page.sample(
        "ringstore_stream_throughput_mib_per_sec",
        &[],
        context.stream_throttle.mib_per_sec(),
    );
    page.0
}
