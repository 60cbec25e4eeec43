//! The API's views made from what the host answers: pure functions of the
//! CLI's answers (the services' messages), the ring and the clock, so they
//! can be tested with made-up ones.

use ringstore_placement::{RING_SIZE, Ring, Token};
use ringstore_proto::v1 as pb;
use ringstore_storage::Timestamp;

use crate::console::api::{
    HintTarget, HintsView, NodeRow, NodeView, NodesView, RangeArc, RepairJob, RepairRange,
    RepairView, RingOwner, RingView, StreamRow, StreamsView, status_letters,
};

/// Microseconds as milliseconds.
fn millis(micros: i64) -> f64 {
    micros as f64 / 1e3
}

/// Where `token` sits on the ring, as a fraction from its lowest token.
fn ring_fraction(token: Token) -> f64 {
    Token::MIN.distance_to(token) as f64 / RING_SIZE
}

/// `GET /api/v1/node` from `info`.
pub(crate) fn node(info: pb::InfoResponse) -> NodeView {
    let clock = info.clock.unwrap_or_default();
    NodeView {
        host_id: info.host_id,
        cluster_name: info.cluster_name,
        datacenter: info.datacenter,
        rack: info.rack,
        state: info.state,
        uptime_seconds: info.uptime_seconds,
        load_bytes: info.load_bytes,
        software_version: info.software_version,
        schema_version: info.schema_version,
        hints_pending: info.pending_hints,
        clock_offset_ms: (clock.peers_measured > 0).then(|| millis(clock.offset_micros)),
        clock_skewed: clock.skewed,
        storage_failure: info.storage_failure,
    }
}

/// `GET /api/v1/nodes` from `status`, marking the row of `local` (this
/// node's host id).
pub(crate) fn nodes(status: pb::StatusResponse, local: &str) -> NodesView {
    NodesView {
        ring_epoch: status.ring_epoch,
        ring_checksum: status.ring_checksum,
        nodes: status
            .nodes
            .into_iter()
            .map(|n| NodeRow {
                status: status_letters(n.up, &n.state),
                local: n.host_id == local,
                host_id: n.host_id,
                address: n.client_address,
                up: n.up,
                state: n.state,
                datacenter: n.datacenter,
                rack: n.rack,
                load_bytes: n.load_bytes,
                tokens: n.token_count,
                ownership: n.ownership,
                clock_offset_ms: n.clock_offset_micros.map(millis),
                clock_uncertainty_ms: n.clock_uncertainty_micros.map(millis),
                version: n.software_version,
                schema_version: n.schema_version,
            })
            .collect(),
    }
}

/// `GET /api/v1/ring` from the ring, with the owners' addresses from
/// `status`'s rows.
pub(crate) fn ring(ring: &Ring, status: &pb::StatusResponse) -> RingView {
    let ranges = ring
        .entries()
        .enumerate()
        .map(|(position, (token, host))| {
            let range = ring.range_at(position);
            debug_assert_eq!(range.end, token);
            RangeArc {
                start_token: range.start.0.to_string(),
                end_token: range.end.0.to_string(),
                start_fraction: ring_fraction(range.start),
                fraction: range.fraction(),
                owner: host.id.to_string(),
            }
        })
        .collect();
    let ownership = ring.primary_ownership();
    let mut owners: Vec<RingOwner> = ring
        .hosts()
        .iter()
        .map(|host| {
            let id = host.id.to_string();
            RingOwner {
                address: status
                    .nodes
                    .iter()
                    .find(|n| n.host_id == id)
                    .map(|n| n.client_address.clone()),
                host_id: id,
                datacenter: host.location.dc.to_string(),
                rack: host.location.rack.to_string(),
                token_count: host.token_count,
                ownership: ownership.get(&host.id).copied().unwrap_or(0.0),
            }
        })
        .collect();
    owners.sort_by(|a, b| a.host_id.cmp(&b.host_id));
    RingView {
        epoch: ring.epoch(),
        checksum: ring.checksum(),
        ranges,
        owners,
    }
}

/// `GET /api/v1/streams` from `netstats`.
pub(crate) fn streams(stats: pb::NetStatsResponse) -> StreamsView {
    StreamsView {
        mode: stats.mode,
        stream_throughput_mib_per_sec: stats.stream_throughput_mib_per_sec,
        streams: stats
            .streams
            .into_iter()
            .map(|s| StreamRow {
                progress: progress(&s),
                operation: s.operation,
                direction: s.direction,
                peer_host_id: s.peer_host_id,
                peer_address: s.peer_address,
                keyspace: s.keyspace,
                ranges_done: s.ranges_done,
                ranges_total: s.ranges_total,
                bytes_done: s.bytes_done,
                bytes_total: s.bytes_total,
                bytes_per_second: s.bytes_per_second,
                eta_seconds: s.eta_seconds,
                state: s.state,
            })
            .collect(),
    }
}

/// How far a session is, 0 to 1: by bytes, or by ranges while no bytes
/// are expected (an empty range), 1 once done.
fn progress(stream: &pb::StreamProgress) -> f64 {
    let fraction = |done: f64, total: f64| {
        if total > 0.0 {
            (done / total).clamp(0.0, 1.0)
        } else {
            0.0
        }
    };
    if stream.state == "done" {
        1.0
    } else if stream.bytes_total > 0 {
        fraction(stream.bytes_done as f64, stream.bytes_total as f64)
    } else {
        fraction(
            f64::from(stream.ranges_done),
            f64::from(stream.ranges_total),
        )
    }
}

/// `GET /api/v1/repair` from `repair status`, with ages by `now`.
pub(crate) fn repair(status: pb::RepairStatusResponse, now: Timestamp) -> RepairView {
    RepairView {
        schedule: status.schedule,
        schedule_interval_seconds: status.schedule_interval_seconds,
        tombstone_gc: status.tombstone_gc,
        current: status.current.map(|job| RepairJob {
            id: job.id,
            state: job.state,
            ranges_done: job.ranges_done,
            ranges_failed: job.ranges_failed,
            ranges_total: job.ranges_total,
            eta_seconds: job.eta_seconds,
            dry_run: job.dry_run,
        }),
        ranges: status
            .ranges
            .into_iter()
            .map(|r| RepairRange {
                keyspace: r.keyspace,
                start_token: r.start_token.to_string(),
                end_token: r.end_token.to_string(),
                // A repair stamped ahead of this clock (another node's)
                // is taken as just now.
                seconds_since_repair: r
                    .last_repaired_micros
                    .map(|at| now.0.saturating_sub(at).max(0) as f64 / 1e6),
                overdue: r.overdue,
            })
            .collect(),
    }
}

/// `GET /api/v1/hints` from `hints`.
pub(crate) fn hints(hints: pb::HintsResponse) -> HintsView {
    let counters = hints.counters.unwrap_or_default();
    HintsView {
        enabled: hints.enabled,
        paused: hints.paused,
        throttle_kib: hints.throttle_kib,
        stored: counters.stored,
        replayed: counters.replayed,
        targets: hints
            .targets
            .into_iter()
            .map(|t| HintTarget {
                host_id: t.host_id,
                address: t.address,
                hints: t.hints,
                bytes: t.bytes,
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ringstore_placement::{HostId, Location, RingMember};

    fn host(n: u128) -> HostId {
        HostId(uuid::Uuid::from_u128(n))
    }

    #[test]
    fn the_ring_is_one_arc_per_token_covering_it_once() {
        let ring = Ring::new(
            7,
            [
                RingMember::new(
                    host(1),
                    Location::new("dc1", "rack1"),
                    vec![Token(-100), Token(i64::MAX / 2)],
                ),
                RingMember::new(host(2), Location::new("dc1", "rack2"), vec![Token(0)]),
            ],
        )
        .unwrap();
        let status = pb::StatusResponse {
            nodes: vec![pb::NodeStatus {
                host_id: host(2).to_string(),
                client_address: "127.0.0.12:7100".into(),
                ..Default::default()
            }],
            ..Default::default()
        };
        let view = ring_view(&ring, &status);
        assert_eq!(view.epoch, 7);
        let ends: Vec<&str> = view.ranges.iter().map(|r| r.end_token.as_str()).collect();
        assert_eq!(ends, ["-100", "0", &(i64::MAX / 2).to_string()]);
        // The first range wraps: it starts at the last token.
        assert_eq!(view.ranges[0].start_token, (i64::MAX / 2).to_string());
        assert_eq!(view.ranges[1].start_token, "-100");
        let total: f64 = view.ranges.iter().map(|r| r.fraction).sum();
        assert!((total - 1.0).abs() < 1e-9, "{total}");
        assert!((view.ranges[1].start_fraction - 0.5).abs() < 1e-9);
        assert_eq!(view.ranges[1].owner, host(2).to_string());
        assert_eq!(view.owners.len(), 2);
        assert_eq!(view.owners[0].rack, "rack1");
        assert_eq!(view.owners[0].address, None, "not in status");
        assert_eq!(view.owners[1].address.as_deref(), Some("127.0.0.12:7100"));
        let owned: f64 = view.owners.iter().map(|o| o.ownership).sum();
        assert!((owned - 1.0).abs() < 1e-9);
        assert!(ring_view(&Ring::empty(0), &status).ranges.is_empty());
    }

    fn ring_view(ring: &Ring, status: &pb::StatusResponse) -> RingView {
        super::ring(ring, status)
    }

    #[test]
    fn node_rows_carry_the_status_letters_and_milliseconds() {
        let row = |up: bool, state: &str, id: &str| pb::NodeStatus {
            host_id: id.into(),
            up,
            state: state.into(),
            clock_offset_micros: Some(-2_500),
            ..Default::default()
        };
        let view = nodes(
            pb::StatusResponse {
                nodes: vec![row(true, "NORMAL", "a"), row(false, "JOINING", "b")],
                ..Default::default()
            },
            "b",
        );
        let letters: Vec<&str> = view.nodes.iter().map(|n| n.status.as_str()).collect();
        assert_eq!(letters, ["UN", "DJ"]);
        assert_eq!(view.nodes[0].clock_offset_ms, Some(-2.5));
        assert_eq!(view.nodes[0].clock_uncertainty_ms, None);
        assert!(!view.nodes[0].local && view.nodes[1].local);
    }

    #[test]
    fn stream_progress_is_by_bytes_then_by_ranges_and_whole_once_done() {
        let stream = |bytes_done, bytes_total, ranges_done, state: &str| pb::StreamProgress {
            bytes_done,
            bytes_total,
            ranges_done,
            ranges_total: 4,
            state: state.into(),
            ..Default::default()
        };
        assert_eq!(progress(&stream(25, 100, 0, "running")), 0.25);
        assert_eq!(progress(&stream(0, 0, 1, "running")), 0.25);
        assert_eq!(progress(&stream(150, 100, 4, "running")), 1.0);
        assert_eq!(progress(&stream(10, 100, 1, "done")), 1.0);
        assert_eq!(progress(&stream(10, 100, 1, "failed: gone")), 0.1);
    }

    #[test]
    fn repair_ages_are_seconds_by_this_nodes_clock() {
        let status = pb::RepairStatusResponse {
            ranges: vec![
                pb::ScheduledRangeStatus {
                    keyspace: "ks".into(),
                    start_token: i64::MIN,
                    end_token: 5,
                    last_repaired_micros: Some(1_000_000),
                    overdue: false,
                },
                pb::ScheduledRangeStatus {
                    last_repaired_micros: None,
                    overdue: true,
                    ..Default::default()
                },
                pb::ScheduledRangeStatus {
                    last_repaired_micros: Some(i64::MAX),
                    ..Default::default()
                },
            ],
            ..Default::default()
        };
        let view = repair(status, Timestamp(91_000_000));
        assert_eq!(view.ranges[0].seconds_since_repair, Some(90.0));
        assert_eq!(view.ranges[0].start_token, i64::MIN.to_string());
        assert_eq!(view.ranges[1].seconds_since_repair, None);
        assert!(view.ranges[1].overdue);
        assert_eq!(view.ranges[2].seconds_since_repair, Some(0.0));
    }
}
