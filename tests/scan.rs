//! Client scans on in-process clusters: every key exactly once in token
//! order across pages with a node down, read repair of a stale replica,
//! tombstones and expired cells hidden, and bad requests refused.
//!
//! Address blocks: 160 (the scan with a node down; the 100,000-key version,
//! ignored in CI, uses 127.160.0.11-15), 161 (bad input), 162 (read
//! repair), 163 (tombstones). `tests/export_import.rs` uses 164.

mod common;

use std::collections::BTreeSet;

use common::TestCluster;
use ringstore_node::NodeConfig;
use ringstore_placement::{Murmur3Partitioner, Token};
use ringstore_proto::v1 as pb;
use ringstore_proto::v1::client_client::ClientClient;
use ringstore_storage::{Cell, Timestamp};
use tonic::Code;
use tonic::transport::Channel;

use pb::ConsistencyLevel as Cl;

fn key(i: usize) -> Vec<u8> {
    format!("key-{i:06}").into_bytes()
}

fn value(i: usize, version: u32) -> Vec<u8> {
    format!("value-{i}-v{version}").into_bytes()
}

/// Writes keys `0..n` (version `version`) through `Batch` at ALL.
async fn write_keys(client: &mut ClientClient<Channel>, keyspace: &str, n: usize, version: u32) {
    write_range(client, keyspace, 0..n, version, Cl::All).await;
}

/// Writes `keys` (version `version`) through `Batch` at `level`.
async fn write_range(
    client: &mut ClientClient<Channel>,
    keyspace: &str,
    keys: std::ops::Range<usize>,
    version: u32,
    level: Cl,
) {
    let mutations = keys.map(|i| pb::Mutation {
        key: key(i),
        value: Some(value(i, version)),
        ..pb::Mutation::default()
    });
    common::write_batches(client, keyspace, mutations, level).await;
}

/// Deletes `keys` through `Batch` at ALL.
async fn delete_keys(
    client: &mut ClientClient<Channel>,
    keyspace: &str,
    keys: impl Iterator<Item = usize>,
) {
    let tombstones = keys.map(|i| pb::Mutation {
        key: key(i),
        ..pb::Mutation::default()
    });
    common::write_batches(client, keyspace, tombstones, Cl::All).await;
}

fn scan_request(keyspace: &str, level: Cl, page_size: u32) -> pb::ScanRequest {
    pb::ScanRequest {
        keyspace: keyspace.into(),
        page_size: Some(page_size),
        consistency: level as i32,
        ..pb::ScanRequest::default()
    }
}

/// Follows a scan to its end: every row, and the size of every page.
async fn scan_all(
    client: &mut ClientClient<Channel>,
    mut request: pb::ScanRequest,
) -> (Vec<pb::ScanRow>, Vec<usize>) {
    let mut rows = Vec::new();
    let mut pages = Vec::new();
    loop {
        let page = client
            .scan(request.clone())
            .await
            .expect("scan")
            .into_inner();
        pages.push(page.rows.len());
        rows.extend(page.rows);
        if page.resume_token.is_empty() {
            return (rows, pages);
        }
        assert!(pages.len() < 100_000, "the scan does not end");
        request.resume_token = page.resume_token;
    }
}

/// Checks `rows` are in strictly ascending (token, key) order with the
/// right tokens.
fn assert_token_order(rows: &[pb::ScanRow]) {
    for row in rows {
        assert_eq!(
            Murmur3Partitioner::token(&row.key).unwrap(),
            Token(row.token)
        );
    }
    for pair in rows.windows(2) {
        assert!(
            (pair[0].token, &pair[0].key) < (pair[1].token, &pair[1].key),
            "rows out of order: {:?} then {:?}",
            String::from_utf8_lossy(&pair[0].key),
            String::from_utf8_lossy(&pair[1].key)
        );
    }
}

/// `n` keys on five nodes (RF 3), one node stopped: a QUORUM scan in pages
/// of `page` rows returns every key exactly once, in token order, with its
/// value.
/// Node 3 missed the last fifth of the keys (written while it was down,
/// hints off), so replicas' pages differ and end at different keys.
async fn scan_with_a_node_down(
    mut configs: Vec<NodeConfig>,
    dirs: tempfile::TempDir,
    n: usize,
    page: u32,
) {
    for config in &mut configs {
        config.hints.enabled = false;
    }
    let mut cluster = TestCluster::start_with(configs, dirs).await;
    cluster.create_keyspace(0, "ks", 3).await;
    let mut client = cluster.client(0).await;
    let missed = n / 5;
    write_keys(&mut client, "ks", n - missed, 1).await;
    // Every third key deleted: pages of tombstones show fewer rows than the
    // replicas returned, so the merge runs up to its bound.
    delete_keys(&mut client, "ks", (0..n - missed).step_by(3)).await;
    cluster.stop(3).await;
    cluster.wait_until_settled().await;
    write_range(&mut client, "ks", n - missed..n, 1, Cl::Quorum).await;
    cluster.restart(3).await;
    cluster.wait_until_settled().await;
    cluster.stop(1).await;
    cluster.wait_until_settled().await;

    let (rows, pages) = scan_all(&mut client, scan_request("ks", Cl::Quorum, page)).await;
    assert!(pages.iter().all(|&p| p <= page as usize), "{pages:?}");
    assert_token_order(&rows);
    let keys: BTreeSet<Vec<u8>> = rows.iter().map(|r| r.key.clone()).collect();
    let expected: BTreeSet<Vec<u8>> = (0..n)
        .filter(|&i| i >= n - missed || i % 3 != 0)
        .map(key)
        .collect();
    assert_eq!(
        rows.len(),
        expected.len(),
        "a key was returned twice or missed"
    );
    let full = expected.len() / page as usize;
    assert!(
        pages.len() >= full,
        "{} pages for {} rows",
        pages.len(),
        rows.len()
    );
    assert_eq!(keys, expected);
    for row in &rows {
        let i: usize = String::from_utf8_lossy(&row.key[4..]).parse().unwrap();
        assert_eq!(row.value, value(i, 1));
        assert!(row.timestamp_micros > 0 && row.expires_at_micros.is_none());
    }
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_quorum_scan_returns_every_key_once_in_token_order_with_one_of_five_nodes_down() {
    // 10,000 keys keep CI fast in debug builds; the 100,000-key run of the
    // issue, in pages of 1,000, is the ignored test below. Here pages of 100
    // rows: a piece holds about 125 keys (5 nodes of 16 vnodes), so replicas'
    // pages stop at their limit at different keys, as 1,000 do with 100,000.
    let dirs = tempfile::tempdir().unwrap();
    let configs = (0..5)
        .map(|i| TestCluster::config(160, i, 1, dirs.path()))
        .collect();
    scan_with_a_node_down(configs, dirs, 10_000, 100).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "100,000 keys: about a minute in release builds; run by hand"]
async fn a_quorum_scan_of_100_000_keys_returns_every_key_once_with_one_of_five_nodes_down() {
    let dirs = tempfile::tempdir().unwrap();
    let configs = TestCluster::configs_from(160, 10, 5, dirs.path());
    scan_with_a_node_down(configs, dirs, 100_000, 1000).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_quorum_scan_repairs_the_stale_replica_it_reads() {
    let cluster = TestCluster::start(162, 3, 1).await;
    cluster.create_keyspace(0, "ks", 3).await;
    let mut client = cluster.client(0).await;
    let n = 600;
    write_keys(&mut client, "ks", n, 2).await;
    // Node 2 goes stale: an older version of even keys, no cell of odd ones.
    let stale = cluster.context(2);
    let id = stale.keyspace("ks").unwrap().id;
    let all_keys: Vec<Vec<u8>> = (0..n).map(key).collect();
    stale.store.purge(id, &all_keys).await.unwrap();
    for i in (0..n).step_by(2) {
        let old = Cell::live(Timestamp(1), value(i, 1));
        stale.store.apply(id, &key(i), old).await.unwrap();
    }
    let repaired_before = stale_repairs(&cluster);

    let (rows, _) = scan_all(&mut client, scan_request("ks", Cl::Quorum, 100)).await;
    assert_token_order(&rows);
    assert_eq!(rows.len(), n);
    assert!(rows.iter().all(|r| r.value.ends_with(b"-v2")));

    // QUORUM asks the first two replicas of each range, in placement order:
    // where node 2 is one of them it now holds the newest version.
    let (_, map) = cluster
        .context(0)
        .placement(&cluster.context(0).keyspace("ks").unwrap());
    let mut asked = 0;
    for i in 0..n {
        let token = Murmur3Partitioner::token(&key(i)).unwrap();
        let replicas: Vec<_> = map.replicas(token).ids().take(2).collect();
        let held = stale.store.read(id, &key(i)).unwrap();
        if replicas.contains(&stale.host_id) {
            asked += 1;
            assert_eq!(held.and_then(|c| c.value), Some(value(i, 2)), "key {i}");
        } else {
            assert_ne!(held.and_then(|c| c.value), Some(value(i, 2)), "key {i}");
        }
    }
    assert!(asked > n / 4, "node 2 was asked for only {asked} keys");
    assert!(stale_repairs(&cluster) > repaired_before);
    cluster.shutdown().await;
}

/// Read repairs node 0 (the coordinator) completed, by its read repair stage.
fn stale_repairs(cluster: &TestCluster) -> u64 {
    let (_, _, completed) = cluster
        .context(0)
        .metrics
        .stage_numbers(ringstore_metrics::Stage::ReadRepair);
    completed
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn tombstones_and_expired_cells_hide_their_keys_but_win_over_older_values() {
    let cluster = TestCluster::start(163, 3, 1).await;
    cluster.create_keyspace(0, "ks", 3).await;
    let mut client = cluster.client(0).await;
    write_keys(&mut client, "ks", 100, 1).await;
    // Keys 0..30 deleted, 30..40 written again already expired.
    let now = Timestamp::now().0;
    let mut mutations: Vec<pb::Mutation> = (0..30)
        .map(|i| pb::Mutation {
            key: key(i),
            ..pb::Mutation::default()
        })
        .collect();
    mutations.extend((30..40).map(|i| pb::Mutation {
        key: key(i),
        value: Some(value(i, 2)),
        expires_at_micros: Some(now - 1),
        ..pb::Mutation::default()
    }));
    common::write_batches(&mut client, "ks", mutations, Cl::All).await;
    // Node 1 holds an older live value of deleted key 0: the tombstone wins.
    let node1 = cluster.context(1);
    let id = node1.keyspace("ks").unwrap().id;
    node1.store.purge(id, &[key(0)]).await.unwrap();
    let old = Cell::live(Timestamp(1), value(0, 0));
    node1.store.apply(id, &key(0), old).await.unwrap();

    let (rows, _) = scan_all(&mut client, scan_request("ks", Cl::All, 7)).await;
    assert_token_order(&rows);
    let keys: BTreeSet<Vec<u8>> = rows.iter().map(|r| r.key.clone()).collect();
    assert_eq!(keys, (40..100).map(key).collect::<BTreeSet<_>>());
    let repaired = node1.store.read(id, &key(0)).unwrap().unwrap();
    assert!(repaired.is_tombstone(), "{repaired:?}");
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn bad_scan_requests_are_refused_with_clear_errors() {
    let cluster = TestCluster::start(161, 1, 1).await;
    cluster.create_keyspace(0, "ks", 1).await;
    let mut client = cluster.client(0).await;
    write_keys(&mut client, "ks", 50, 1).await;
    let refusing = client.clone();
    let refused = |request: pb::ScanRequest| {
        let mut client = refusing.clone();
        async move { client.scan(request).await.unwrap_err() }
    };
    let base = scan_request("ks", Cl::One, 10);

    let status = refused(scan_request("nope", Cl::One, 10)).await;
    assert_eq!(status.code(), Code::NotFound, "{status:?}");
    for (page_size, expected) in [(0, "at least 1"), (10_001, "exceeds the maximum")] {
        let status = refused(pb::ScanRequest {
            page_size: Some(page_size),
            ..base.clone()
        })
        .await;
        assert_eq!(status.code(), Code::InvalidArgument);
        assert!(status.message().contains(expected), "{status:?}");
    }
    for (start, end) in [(10, -10), (5, 5)] {
        let status = refused(pb::ScanRequest {
            start_token: Some(start),
            end_token: Some(end),
            ..base.clone()
        })
        .await;
        assert_eq!(status.code(), Code::InvalidArgument);
        assert!(status.message().contains("must be below"), "{status:?}");
    }
    let status = refused(pb::ScanRequest {
        resume_token: b"garbage!garbage!".to_vec(),
        ..base.clone()
    })
    .await;
    assert_eq!(status.code(), Code::InvalidArgument);
    assert!(status.message().contains("resume_token"), "{status:?}");
    // A resume token of one range is refused for another.
    let first = client.scan(base.clone()).await.unwrap().into_inner();
    assert_eq!(first.rows.len(), 10);
    let last_token = first.rows.last().unwrap().token;
    let status = refused(pb::ScanRequest {
        start_token: Some(last_token),
        resume_token: first.resume_token,
        ..base.clone()
    })
    .await;
    assert_eq!(status.code(), Code::InvalidArgument);
    assert!(status.message().contains("outside the range"), "{status:?}");
    let status = refused(scan_request("ks", Cl::Any, 10)).await;
    assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");

    // Absolute expiries are checked like client timestamps.
    let far = Timestamp::now().plus_seconds(21 * 365 * 24 * 3600).0;
    let bad = [
        (Some(far), None, Some(b"v".to_vec()), "at most"),
        (Some(far / 2), Some(10), Some(b"v".to_vec()), "not both"),
        (Some(1), None, None, "only for values"),
        (Some(-5), None, Some(b"v".to_vec()), "positive"),
    ];
    for (expires_at_micros, ttl_seconds, value, expected) in bad {
        let result = client
            .batch(pb::BatchRequest {
                keyspace: "ks".into(),
                mutations: vec![pb::Mutation {
                    key: b"k".to_vec(),
                    value,
                    ttl_seconds,
                    expires_at_micros,
                    ..pb::Mutation::default()
                }],
                consistency: Cl::One as i32,
            })
            .await
            .unwrap()
            .into_inner()
            .results
            .remove(0);
        assert_eq!(result.code, Code::InvalidArgument as i32, "{result:?}");
        assert!(result.message.contains(expected), "{result:?}");
    }

    // The replica RPC checks its limits too.
    let id = cluster.context(0).keyspace("ks").unwrap().id.to_string();
    let mut internode = cluster.internode(0).await;
    for (limit, after, last) in [(0, 0, 10), (10_001, 0, 10), (10, 10, 0)] {
        let status = internode
            .read_range(pb::ReadRangeRequest {
                keyspace_id: id.clone(),
                after_token: after,
                after_key: None,
                last_token: last,
                limit,
                max_bytes: 1 << 20,
            })
            .await
            .unwrap_err();
        assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
    }
    // The node still serves a whole scan after all that.
    let (rows, _) = scan_all(&mut client, base).await;
    assert_eq!(rows.len(), 50);
    cluster.shutdown().await;
}
