//! The clock bound: a node whose clock is off from the majority by more than
//! `max_clock_offset` stops coordinating writes (with `UNAVAILABLE` naming
//! its offset) while the others go on, and resumes once its clock is back;
//! within the bound, writes to a key further apart than the bound are
//! ordered as they happened whichever node coordinated them. The skew is the
//! node's test clock offset (`test_clock_offset_ms` at start, then its
//! `WallClock` stepped at run time). In-process clusters on blocks 180–181;
//! real processes skewed through `RINGSTORE_TEST_CLOCK_OFFSET_MS`, seen
//! through the CLI, on block 182.

mod common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use common::processes::{self, Processes, text};
use common::{TestCluster, eventually, get, put};
use ringstore_proto::v1 as pb;
use tonic::Code;

use pb::ConsistencyLevel::Quorum;

/// Starts a three-node cluster (one rack each) whose node `skewed` starts
/// with its clock `offset_ms` off, and creates keyspace `ks` (RF 3) through
/// node 0.
async fn cluster_with_skew(block: u8, skewed: usize, offset_ms: i64) -> TestCluster {
    let cluster = TestCluster::start_configured(block, 3, 3, |i, config| {
        if i == skewed {
            config.test_clock_offset_ms = offset_ms;
        }
    })
    .await;
    cluster.create_keyspace(0, "ks", 3).await;
    cluster
}

async fn put_via(
    cluster: &TestCluster,
    node: usize,
    key: &str,
    value: &str,
) -> Result<i64, tonic::Status> {
    let mut client = cluster.client(node).await;
    client
        .put(put("ks", key, value, Quorum))
        .await
        .map(|r| r.into_inner().timestamp_micros)
}

async fn get_via(cluster: &TestCluster, node: usize, key: &str) -> Option<String> {
    let mut client = cluster.client(node).await;
    let response = client
        .get(get("ks", key, Quorum))
        .await
        .expect("read")
        .into_inner();
    response
        .found
        .then(|| String::from_utf8(response.value).unwrap())
}

async fn info(cluster: &TestCluster, node: usize) -> pb::ClockStanding {
    let mut admin = cluster.admin(node).await;
    admin
        .info(pb::InfoRequest {})
        .await
        .unwrap()
        .into_inner()
        .clock
        .expect("info has the clock")
}

/// The offset node `asked` estimates for node `of`'s clock, in ms.
async fn offset_seen(cluster: &TestCluster, asked: usize, of: usize) -> Option<f64> {
    let mut admin = cluster.admin(asked).await;
    let status = admin
        .status(pb::StatusRequest::default())
        .await
        .unwrap()
        .into_inner();
    let address = cluster.address(of).to_string();
    let node = status.nodes.iter().find(|n| n.client_address == address)?;
    node.clock_offset_micros.map(|m| m as f64 / 1000.0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_skewed_node_refuses_to_coordinate_writes_until_its_clock_is_back() {
    let cluster = cluster_with_skew(180, 2, 2000).await;

    // It stops coordinating writes, with the status naming its offset.
    eventually(
        Duration::from_secs(20),
        "the skewed node refuses writes",
        || async {
            matches!(put_via(&cluster, 2, "probe", "x").await,
                Err(s) if s.code() == Code::Unavailable)
        },
    )
    .await;
    let refusal = put_via(&cluster, 2, "probe", "x").await.unwrap_err();
    assert_eq!(refusal.code(), Code::Unavailable);
    let message = refusal.message().to_string();
    assert!(
        message.contains("clock is ahead of the majority")
            && message.contains("max_clock_offset = 0.500 s")
            && message.contains("2 of the 3 live members"),
        "{message}"
    );
    let offset: f64 = message
        .split(" by ")
        .nth(1)
        .and_then(|s| s.split(" s ").next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no offset in {message:?}"));
    assert!((offset - 2.0).abs() < 0.1, "{message}");
    let standing = info(&cluster, 2).await;
    assert!(standing.skewed, "{standing:?}");
    assert!((standing.offset_micros - 2_000_000).abs() < 100_000);
    assert_eq!(standing.test_offset_ms, 2000);
    let seen = offset_seen(&cluster, 0, 2)
        .await
        .expect("node 0 measured 2");
    assert!(
        (seen - 2000.0).abs() < 100.0,
        "node 0 sees node 2 at {seen} ms"
    );
    // Schema changes are stamped by the coordinator too.
    let mut schema = cluster.schema(2).await;
    let drop = schema
        .drop_keyspace(pb::DropKeyspaceRequest { name: "ks".into() })
        .await
        .unwrap_err();
    assert_eq!(drop.code(), Code::Unavailable, "{drop:?}");
    // It is counted and exposed.
    let page = cluster.metrics(2).await;
    assert!(page.contains("\nringstore_clock_skewed 1\n"), "{page}");
    assert!(cluster.context(2).clock_guard.refused() >= 2);

    // The others coordinate writes (replicated to the skewed node too), and
    // the skewed node still coordinates reads.
    for (i, node) in [0, 1, 0, 1].into_iter().enumerate() {
        let value = format!("v{i}-via{node}");
        put_via(&cluster, node, "k", &value)
            .await
            .expect("a good node coordinates");
        assert_eq!(get_via(&cluster, 2, "k").await.as_deref(), Some(&*value));
        assert!(!info(&cluster, node).await.skewed);
    }
    assert_eq!(
        cluster.local_value(2, "ks", "k").as_deref(),
        Some(&b"v3-via1"[..]),
        "replica writes coordinated by others are applied"
    );

    // Its clock comes back: it coordinates again, by itself.
    cluster.context(2).clock.wall_clock().set_offset_ms(0);
    let back = Instant::now();
    eventually(
        Duration::from_secs(20),
        "the node coordinates writes again",
        || async { put_via(&cluster, 2, "k", "after").await.is_ok() },
    )
    .await;
    assert!(
        back.elapsed() < Duration::from_secs(15),
        "{:?}",
        back.elapsed()
    );
    assert!(!info(&cluster, 2).await.skewed);
    assert_eq!(get_via(&cluster, 0, "k").await.as_deref(), Some("after"));

    // A clock behind is caught too, at run time.
    cluster.context(2).clock.wall_clock().set_offset_ms(-1500);
    eventually(
        Duration::from_secs(20),
        "the node refuses writes again",
        || async {
            matches!(put_via(&cluster, 2, "k", "late").await,
                Err(s) if s.code() == Code::Unavailable && s.message().contains("behind the majority"))
        },
    )
    .await;
    // (Writes it took before it noticed are kept: a node's own timestamps
    // never go back.) The others still coordinate.
    put_via(&cluster, 1, "k", "final")
        .await
        .expect("node 1 coordinates");
    assert_eq!(get_via(&cluster, 2, "k").await.as_deref(), Some("final"));
    cluster.shutdown().await;
}

/// One key's history: writes alternate between the skewed and a good
/// coordinator, each invoked `gap` after the previous one was acknowledged;
/// after each, a QUORUM read through the other node. Returns the versions
/// whose read showed an older value (lost to the skew).
async fn alternate_writes(
    cluster: &TestCluster,
    key: String,
    versions: usize,
    gap: Duration,
) -> Vec<(usize, usize, Option<String>)> {
    let mut lost = Vec::new();
    for version in 0..versions {
        let coordinator = if version % 2 == 0 { 0 } else { 2 };
        let value = format!("{key}-v{version}-via{coordinator}");
        put_via(cluster, coordinator, &key, &value)
            .await
            .unwrap_or_else(|s| panic!("{key} v{version} via {coordinator}: {s:?}"));
        let reader = 2 - coordinator;
        let read = get_via(cluster, reader, &key).await;
        if read.as_deref() != Some(&*value) {
            lost.push((version, coordinator, read));
        }
        tokio::time::sleep(gap).await;
    }
    lost
}

/// Runs `alternate_writes` on `keys` keys at once (one client each).
async fn run_clients(
    cluster: &TestCluster,
    prefix: &str,
    keys: usize,
    gap: Duration,
) -> BTreeMap<String, Vec<(usize, usize, Option<String>)>> {
    let histories = (0..keys).map(|k| {
        let key = format!("{prefix}{k}");
        async move {
            let lost = alternate_writes(cluster, key.clone(), 4, gap).await;
            (key, lost)
        }
    });
    futures::future::join_all(histories)
        .await
        .into_iter()
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn within_the_bound_a_later_write_wins_whichever_node_coordinates_it() {
    // Node 2's clock is 400 ms behind: within the 500 ms bound, so it
    // coordinates, and its writes carry timestamps 400 ms early.
    let cluster = cluster_with_skew(181, 2, -400).await;
    eventually(
        Duration::from_secs(20),
        "the others measure node 2's clock",
        || async {
            offset_seen(&cluster, 0, 2)
                .await
                .is_some_and(|ms| (ms + 400.0).abs() < 50.0)
        },
    )
    .await;
    assert!(!info(&cluster, 2).await.skewed);

    // Writes closer together than the skew: the skew is real, and the
    // checker sees later writes through node 2 lose.
    let close = run_clients(&cluster, "close", 4, Duration::from_millis(100)).await;
    let lost: Vec<_> = close.values().flatten().collect();
    assert!(
        !lost.is_empty() && lost.iter().all(|(_, via, _)| *via == 2),
        "writes 100 ms apart through a clock 400 ms behind: {close:?}"
    );

    // Writes further apart than the bound: every later write wins.
    let apart = run_clients(&cluster, "apart", 8, Duration::from_millis(600)).await;
    assert!(
        apart.values().all(Vec::is_empty),
        "writes 600 ms apart lost to a 400 ms skew: {apart:?}"
    );
    for key in apart.keys() {
        let last = format!("{key}-v3-via2");
        for node in 0..3 {
            assert_eq!(
                get_via(&cluster, node, key).await.as_deref(),
                Some(&*last),
                "{key} via {node}"
            );
        }
    }
    cluster.shutdown().await;
}

/// The `Clock` column of node `of`'s row in `status` asked of node `asked`,
/// in ms (`None` for `?`).
fn status_clock_ms(servers: &Processes, asked: usize, of: usize) -> Option<f64> {
    let address = servers.address(of, 7100);
    let row = servers
        .status_rows(asked)
        .into_iter()
        .find(|r| r.contains(&address))?;
    // The last column: `+3000.1 ms ±0.2`, or `?`.
    let clock = row.rsplit("  ").next()?;
    clock.split_whitespace().next()?.parse().ok()
}

#[test]
fn a_process_with_a_skewed_clock_shows_it_refuses_and_recovers_after_a_restart() {
    let mut servers = Processes::new(182);
    servers.start(0, &[]);
    servers.start(1, &[]);
    servers.start(2, &[("RINGSTORE_TEST_CLOCK_OFFSET_MS", "3000")]);
    servers.wait_until_all_un(0, 3);
    servers.create_keyspace("ks", "SimpleStrategy:3");

    processes::eventually(Duration::from_secs(30), "status shows node 2 +3 s", || {
        status_clock_ms(&servers, 0, 2).is_some_and(|ms| (ms - 3000.0).abs() < 100.0)
    });
    let status = text(&servers.cli(0, &["status"]).stdout);
    assert!(
        status.contains("Clock: each node's clock minus this node's"),
        "{status}"
    );
    let gossip = text(&servers.cli(0, &["gossipinfo"]).stdout);
    // Node 2's estimate: `CLOCK_OFFSET:+2999.9 ms ±0.3` or `+3000.2 ms …`.
    let offsets: Vec<f64> = gossip
        .lines()
        .filter_map(|l| l.trim().strip_prefix("CLOCK_OFFSET:"))
        .filter_map(|v| v.split_whitespace().next()?.parse().ok())
        .collect();
    assert!(
        offsets.iter().any(|ms| (ms - 3000.0).abs() < 100.0),
        "{gossip}"
    );
    processes::eventually(Duration::from_secs(20), "node 2 says it is skewed", || {
        servers.info(2, "Clock status").starts_with("SKEWED")
    });
    assert!(servers.info(2, "Clock test offset").starts_with("+3000 ms"));

    // Its writes are refused with the offset named, and the exit status says so.
    for i in 0..20 {
        let put = servers.cli(
            2,
            &[
                "put",
                "ks",
                &format!("k{i}"),
                "v",
                "--consistency",
                "QUORUM",
            ],
        );
        assert!(!put.status.success());
        let error = text(&put.stderr);
        assert!(
            error.contains("UNAVAILABLE")
                || error.contains("Unavailable")
                || error.contains("unavailable"),
            "{error}"
        );
        assert!(error.contains("max_clock_offset"), "{error}");
    }
    // The others coordinate writes; it still coordinates reads.
    let ok = servers.cli(0, &["put", "ks", "k0", "from-0", "--consistency", "QUORUM"]);
    assert!(ok.status.success(), "{}", text(&ok.stderr));
    let read = servers.cli(2, &["get", "ks", "k0", "--consistency", "QUORUM"]);
    assert!(
        text(&read.stdout).contains("from-0"),
        "{}",
        text(&read.stderr)
    );
    // Logged at the change and rate-limited after: not once per refusal.
    let log = servers.log(2);
    assert!(log.contains("max_clock_offset"), "{log}");
    let refusals = log.matches("refusing writes: clock skew").count();
    assert!(
        (1..=3).contains(&refusals),
        "{refusals} refusal lines for 20 refusals"
    );

    // Restarted with its clock right, it coordinates again.
    servers.kill(2);
    servers.start(2, &[("RINGSTORE_TEST_CLOCK_OFFSET_MS", "0")]);
    servers.wait_until_all_un(0, 3);
    processes::eventually(
        Duration::from_secs(30),
        "node 2 coordinates writes again",
        || {
            servers
                .cli(2, &["put", "ks", "k0", "from-2", "--consistency", "QUORUM"])
                .status
                .success()
        },
    );
    let read = servers.cli(0, &["get", "ks", "k0", "--consistency", "QUORUM"]);
    assert!(
        text(&read.stdout).contains("from-2"),
        "{}",
        text(&read.stdout)
    );
    assert!(servers.info(2, "Clock status").starts_with("ok"));
    servers.kill_all();
}
