//! Tests of [`NodeMetrics`]: recorded and sampled families on the page, and
//! the Grafana dashboard against the families.

use super::*;
use crate::snapshot::{ClockSample, KeyspaceSample, StageSample, Traffic};

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
    metrics.coordinator_request(CoordinatorOp::Write, true);
    metrics.coordinator_request(CoordinatorOp::Write, true);
    metrics.coordinator_request(CoordinatorOp::Read, false);
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
    let coordinated = |op: &str, local: &str| {
        line(
            &page,
            &format!(
                "ringstore_coordinator_requests_total{{operation=\"{op}\",replica_local=\"{local}\"}}"
            ),
        )
    };
    assert_eq!(coordinated("write", "true"), Some("2"));
    assert_eq!(
        coordinated("write", "false"),
        Some("0"),
        "shown before its first sample"
    );
    assert_eq!(coordinated("read", "false"), Some("1"));
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
#[test]
fn commit_log_damage_found_at_start_shows_on_the_page() {
    let metrics = NodeMetrics::new().unwrap();
    let page = metrics.render(&NodeSnapshot::default()).unwrap();
    assert_eq!(
        line(&page, "ringstore_commitlog_damaged_sections"),
        Some("0")
    );
    metrics.commitlog_damage_found(2);
    let page = metrics.render(&NodeSnapshot::default()).unwrap();
    assert_eq!(
        line(&page, "ringstore_commitlog_damaged_sections"),
        Some("2")
    );
}

#[test]
fn corrupt_reads_count_up_from_the_snapshot() {
    let metrics = NodeMetrics::new().unwrap();
    let page = metrics.render(&NodeSnapshot::default()).unwrap();
    let series = "ringstore_storage_corrupt_reads_total";
    assert_eq!(line(&page, series), Some("0"));
    for (sampled, shown) in [(3, "3"), (5, "5"), (5, "5")] {
        let snapshot = NodeSnapshot {
            corrupt_reads: sampled,
            ..NodeSnapshot::default()
        };
        let page = metrics.render(&snapshot).unwrap();
        assert_eq!(line(&page, series), Some(shown));
    }
}

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

#[test]
fn the_clock_families_follow_the_snapshot() {
    let metrics = NodeMetrics::new().unwrap();
    let mut snapshot = NodeSnapshot {
        clock: ClockSample {
            offset_seconds: 2.5,
            peer_offsets: vec![("b".into(), -2.5)],
            skewed: true,
            refused_writes: 3,
        },
        ..NodeSnapshot::default()
    };
    let page = metrics.render(&snapshot).unwrap();
    assert_eq!(line(&page, "ringstore_clock_offset_seconds"), Some("2.5"));
    assert_eq!(
        line(&page, "ringstore_clock_peer_offset_seconds{peer=\"b\"}"),
        Some("-2.5")
    );
    assert_eq!(line(&page, "ringstore_clock_skewed"), Some("1"));
    assert_eq!(
        line(&page, "ringstore_clock_skew_refused_writes_total"),
        Some("3")
    );
    snapshot.clock = ClockSample {
        refused_writes: 3,
        ..ClockSample::default()
    };
    let page = metrics.render(&snapshot).unwrap();
    assert_eq!(line(&page, "ringstore_clock_skewed"), Some("0"));
    assert_eq!(
        line(&page, "ringstore_clock_peer_offset_seconds{peer=\"b\"}"),
        None,
        "a peer no longer measured goes"
    );
}
