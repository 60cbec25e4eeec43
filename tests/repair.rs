//! Anti-entropy repair and tombstone garbage collection, on in-process
//! clusters (address blocks 90–92 and 95; see `tests/processes.rs`):
//! - divergence injected three ways (writes at `ONE` missed by a stopped
//!   replica with handoff off, a replica's data lost, deletes missed by a
//!   replica) is gone after `repair`: every replica of every range holds the
//!   same cells, checked by a digest of each replica's rows per range and by
//!   every key on every node; a dry run reports without moving anything;
//! - only what differs moves: 1 % of the keys differing costs < 3 % of the
//!   data, identical replicas < 0.1 %;
//! - garbage collection purges tombstones only once a repair made them safe,
//!   and a replica that missed a delete never brings the value back;
//! - the built-in scheduler repairs every range by itself;
//! - removenode syncs the dead node's ranges from every survivor (block 96).
//!
//! Handoff is off on every node here, so that a replica that missed a write
//! stays stale until repair.

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::{TestCluster, eventually, get, put};
use ringstore_node::NodeConfig;
use ringstore_node::config::RepairSchedule;
use ringstore_placement::{HostId, TokenRange};
use ringstore_proto::v1 as pb;
use ringstore_proto::v1::repair_client::RepairClient;
use ringstore_repair::row_hash;
use ringstore_storage::{Cell, DataTree, Engine, SledEngine, SledOptions, Timestamp};
use tonic::transport::Channel;

use pb::ConsistencyLevel::{All, One, Quorum};

/// Three nodes with handoff off and unthrottled validation, `tweak`ed.
async fn cluster(block: u8, tweak: impl Fn(&mut NodeConfig)) -> TestCluster {
    TestCluster::start_configured(block, 3, 3, |_, config| {
        config.hints.enabled = false;
        config.repair.validation_mib_per_sec = 0;
        tweak(config);
    })
    .await
}

async fn repair_client(cluster: &TestCluster, i: usize) -> RepairClient<Channel> {
    cluster.repair(i).await
}

/// Runs a repair through node `via` and returns its last progress message.
async fn repair(
    cluster: &TestCluster,
    via: usize,
    request: pb::RepairRequest,
) -> pb::RepairProgress {
    let mut progress = repair_client(cluster, via)
        .await
        .repair(request)
        .await
        .expect("the repair starts")
        .into_inner();
    let mut last = None;
    while let Some(message) = progress.message().await.expect("progress") {
        let finished = message.finished;
        last = Some(message);
        if finished {
            break;
        }
    }
    let last = last.expect("at least one progress message");
    assert!(last.finished, "{last:?}");
    last
}

fn whole_keyspace(keyspace: &str) -> pb::RepairRequest {
    pb::RepairRequest {
        keyspace: keyspace.into(),
        ..pb::RepairRequest::default()
    }
}

/// The cell node `i` holds for `key` (its own replica).
fn local_cell(cluster: &TestCluster, i: usize, keyspace: &str, key: &str) -> Option<Cell> {
    let context = cluster.context(i);
    let id = context.keyspace(keyspace).unwrap().id;
    context.store.read(id, key.as_bytes()).unwrap()
}

/// One replica's rows of a range: node, digest (the XOR of the row hashes
/// the repair trees use), row count.
type ReplicaDigest = (usize, u64, u64);

/// For every range of `keyspace`, each replica's digest of its rows.
fn replica_digests(cluster: &TestCluster, keyspace: &str) -> Vec<(TokenRange, Vec<ReplicaDigest>)> {
    let nodes: BTreeMap<HostId, usize> = (0..cluster.nodes.len())
        .map(|i| (cluster.context(i).host_id, i))
        .collect();
    let definition = cluster.context(0).keyspace(keyspace).unwrap();
    let (_, map) = cluster.context(0).placement(&definition);
    map.ranges()
        .map(|replicas| {
            let range = replicas.range();
            let digests = replicas
                .ids()
                .map(|host| {
                    let i = nodes[&host];
                    let (mut digest, mut rows) = (0u64, 0u64);
                    for entry in cluster.context(i).store.scan(definition.id, range).unwrap() {
                        let (_, key, cell) = entry.unwrap();
                        digest ^= row_hash(&key, &cell);
                        rows += 1;
                    }
                    (i, digest, rows)
                })
                .collect();
            (range, digests)
        })
        .collect()
}

/// Ranges whose replicas differ.
fn differing_ranges(cluster: &TestCluster, keyspace: &str) -> Vec<String> {
    replica_digests(cluster, keyspace)
        .into_iter()
        .filter(|(_, digests)| digests.windows(2).any(|w| w[0].1 != w[1].1))
        .map(|(range, digests)| format!("{range}: {digests:?}"))
        .collect()
}

async fn put_at(
    cluster: &TestCluster,
    via: usize,
    key: &str,
    value: &str,
    level: pb::ConsistencyLevel,
) {
    cluster
        .client(via)
        .await
        .put(put("ks", key, value, level))
        .await
        .unwrap_or_else(|e| panic!("put {key}: {e}"));
}

async fn delete_at(cluster: &TestCluster, via: usize, key: &str, level: pb::ConsistencyLevel) {
    cluster
        .client(via)
        .await
        .delete(pb::DeleteRequest {
            keyspace: "ks".into(),
            key: key.as_bytes().to_vec(),
            consistency: level as i32,
            timestamp_micros: None,
        })
        .await
        .unwrap_or_else(|e| panic!("delete {key}: {e}"));
}

/// Drops node `i`'s data of keyspace `id` while it is stopped: its data
/// files are lost, its identity and tokens are not.
fn lose_data(cluster: &TestCluster, i: usize, id: ringstore_storage::KeyspaceId) {
    let engine = SledEngine::open(
        cluster.configs[i].data_dir.join("db"),
        SledOptions {
            cache_capacity_bytes: 8 << 20,
            flush_every_ms: None,
        },
    )
    .unwrap();
    assert!(engine.drop_tree(&id.data_tree_name()).unwrap());
    engine.flush().unwrap();
}

fn key(n: usize) -> String {
    format!("key{n:04}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repair_leaves_every_replica_identical_after_missed_writes_lost_data_and_missed_deletes() {
    let mut cluster = cluster(90, |_| {}).await;
    cluster.create_keyspace(0, "ks", 3).await;
    let id = cluster.context(0).keyspace("ks").unwrap().id;
    for n in 0..300 {
        put_at(&cluster, 0, &key(n), &format!("v1-{}", key(n)), All).await;
    }
    assert!(differing_ranges(&cluster, "ks").is_empty());

    // Node 2 misses 100 new versions written at ONE and 50 deletes at
    // QUORUM (handoff is off, so nothing replays them).
    cluster.stop(2).await;
    for n in 0..100 {
        put_at(&cluster, 0, &key(n), &format!("v2-{}", key(n)), One).await;
    }
    for n in 100..150 {
        delete_at(&cluster, 1, &key(n), Quorum).await;
    }
    cluster.restart(2).await;
    // Node 1 loses its data of the keyspace.
    cluster.stop(1).await;
    lose_data(&cluster, 1, id);
    cluster.restart(1).await;
    cluster.wait_until_settled().await;
    assert_eq!(
        local_cell(&cluster, 1, "ks", &key(200)),
        None,
        "node 1 lost its data"
    );
    assert_eq!(
        local_cell(&cluster, 2, "ks", &key(0))
            .unwrap()
            .value
            .unwrap(),
        b"v1-key0000",
        "node 2 missed the new version"
    );
    assert!(
        !local_cell(&cluster, 2, "ks", &key(100))
            .unwrap()
            .is_tombstone()
    );
    let before = differing_ranges(&cluster, "ks");
    assert!(!before.is_empty());

    // A dry run reports the differences and moves nothing.
    let dry = repair(
        &cluster,
        0,
        pb::RepairRequest {
            dry_run: true,
            ..whole_keyspace("ks")
        },
    )
    .await;
    assert_eq!(dry.ranges_failed, 0, "{dry:?}");
    assert!(dry.mismatched_keys >= 300, "{dry:?}");
    assert_eq!(dry.rows_sent, 0);
    assert!(
        !dry.ranges.is_empty(),
        "the dry run names the differing ranges"
    );
    assert_eq!(
        differing_ranges(&cluster, "ks"),
        before,
        "a dry run changed data"
    );

    let repaired = repair(&cluster, 0, whole_keyspace("ks")).await;
    eprintln!("repair: {repaired:?}");
    assert_eq!(repaired.ranges_failed, 0, "{repaired:?}");
    assert_eq!(repaired.ranges_done, repaired.ranges_total);
    // Node 1 lacked all 300 keys; node 2 held 150 stale ones.
    assert_eq!(repaired.mismatched_keys, 300, "{repaired:?}");
    assert_eq!(repaired.rows_sent, 450, "{repaired:?}");
    for peer in 1..3 {
        assert!(
            cluster.internode_calls(0, peer, "repair").await > 0,
            "the repair's calls to node {peer} show in the coordinator's internode latency"
        );
    }

    let after = differing_ranges(&cluster, "ks");
    assert!(after.is_empty(), "replicas still differ: {after:#?}");
    for i in 0..3 {
        for n in 0..300 {
            let cell = local_cell(&cluster, i, "ks", &key(n))
                .unwrap_or_else(|| panic!("node {i} lacks {}", key(n)));
            match n {
                0..100 => assert_eq!(cell.value.unwrap(), format!("v2-{}", key(n)).as_bytes()),
                100..150 => assert!(cell.is_tombstone(), "node {i}: {} came back", key(n)),
                _ => assert_eq!(cell.value.unwrap(), format!("v1-{}", key(n)).as_bytes()),
            }
        }
    }
    let again = repair(&cluster, 2, whole_keyspace("ks")).await;
    assert_eq!(
        (again.mismatched_keys, again.rows_sent),
        (0, 0),
        "{again:?}"
    );
    cluster.shutdown().await;
}

/// The bytes of `count` values of `size` bytes.
fn value(n: usize, size: usize, version: u8) -> String {
    let mut text = format!("{version}-{n}-");
    while text.len() < size {
        text.push((b'a' + (n % 26) as u8) as char);
    }
    text
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repair_moves_only_the_rows_that_differ() {
    const KEYS: usize = 2000;
    const SIZE: usize = 16 * 1024;
    let mut cluster = cluster(91, |config| config.num_tokens = 4).await;
    cluster.create_keyspace(0, "ks", 3).await;
    let mut writes = Vec::new();
    for n in 0..KEYS {
        let mut client = cluster.client(n % 3).await;
        writes.push(async move {
            client
                .put(put("ks", &key(n), &value(n, SIZE, 1), All))
                .await
                .unwrap()
        });
        if writes.len() == 32 || n == KEYS - 1 {
            futures::future::join_all(writes.drain(..)).await;
        }
    }
    let data = (KEYS * (SIZE + key(0).len())) as u64;

    // Identical replicas: the trees' roots agree, almost nothing moves.
    let identical = repair(&cluster, 0, whole_keyspace("ks")).await;
    eprintln!("identical: {identical:?}, data {data} bytes");
    assert_eq!(identical.mismatched_keys, 0);
    assert!(
        identical.bytes * 1000 < data,
        "{} bytes exchanged for identical replicas of {data} bytes",
        identical.bytes
    );

    // 1 % of the keys missed by node 2.
    cluster.stop(2).await;
    for n in (0..KEYS).step_by(100) {
        put_at(&cluster, 0, &key(n), &value(n, SIZE, 2), One).await;
    }
    cluster.restart(2).await;
    cluster.wait_until_settled().await;
    let one_percent = repair(&cluster, 0, whole_keyspace("ks")).await;
    eprintln!("1 %: {one_percent:?}");
    assert_eq!(one_percent.mismatched_keys, (KEYS / 100) as u64);
    assert_eq!(one_percent.rows_sent, (KEYS / 100) as u64);
    assert!(
        one_percent.bytes * 100 < data * 3,
        "{} bytes exchanged for 1 % of {data} bytes",
        one_percent.bytes
    );
    assert!(differing_ranges(&cluster, "ks").is_empty());
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tombstones_are_purged_only_after_a_repair_and_deleted_data_never_returns() {
    let mut cluster = cluster(92, |config| {
        config.repair.propagation_delay_seconds = 0;
        config.repair.gc_interval_seconds = 0;
    })
    .await;
    // gc_grace_seconds of 1 second.
    cluster
        .schema(0)
        .await
        .create_keyspace(pb::CreateKeyspaceRequest {
            name: "ks".into(),
            replication: Some(pb::Replication {
                strategy: Some(pb::replication::Strategy::Simple(pb::SimpleStrategy {
                    replication_factor: 3,
                })),
            }),
            if_not_exists: false,
            gc_grace_seconds: Some(1),
            speculative_retry: None,
        })
        .await
        .unwrap();
    let doomed = "doomed ".repeat(150);
    for n in 0..200 {
        put_at(&cluster, 0, &key(n), &doomed, All).await;
    }
    // Every node's `Load` (as `status` shows it, through gossip) counts the
    // 200 values of about 1 KiB.
    let full = 200 * doomed.len() as u64;
    eventually(
        Duration::from_secs(30),
        "every Load shows the values",
        || async { loads(&cluster).await.iter().all(|&load| load >= full) },
    )
    .await;
    // Node 2 misses the delete of key 0; the others are deleted everywhere.
    cluster.stop(2).await;
    delete_at(&cluster, 0, &key(0), Quorum).await;
    cluster.restart(2).await;
    cluster.wait_until_settled().await;
    for n in 1..200 {
        delete_at(&cluster, 0, &key(n), All).await;
    }
    let deleted_at = Timestamp::now();
    eventually(Duration::from_secs(10), "gc_grace has passed", || async {
        Timestamp::now().0 > deleted_at.0 + 1_100_000
    })
    .await;

    // Without a repair nothing may go: node 2 still holds key 0's value.
    let collected = garbage_collect(&cluster, 0).await;
    assert_eq!(
        (collected.cells_purged, collected.deleted_kept),
        (0, 200),
        "{collected:?}"
    );

    let repaired = repair(&cluster, 1, whole_keyspace("ks")).await;
    assert_eq!(repaired.ranges_failed, 0, "{repaired:?}");
    assert_eq!(
        repaired.mismatched_keys, 1,
        "only key 0 differed: {repaired:?}"
    );
    // The repair began after the deletes: gc_grace over, everything goes.
    for i in 0..3 {
        let collected = garbage_collect(&cluster, i).await;
        assert_eq!(collected.cells_purged, 200, "node {i}: {collected:?}");
        let id = cluster.context(i).keyspace("ks").unwrap().id;
        let whole = TokenRange::new(
            ringstore_placement::Token::MIN,
            ringstore_placement::Token::MIN,
        );
        assert_eq!(cluster.context(i).store.scan(id, whole).unwrap().count(), 0);
    }
    // `Load` falls to nothing on every node (sled's files do not shrink;
    // `Load` counts live bytes).
    eventually(
        Duration::from_secs(30),
        "every Load falls to zero",
        || async { loads(&cluster).await.iter().all(|&load| load == 0) },
    )
    .await;
    // The metrics count the repair (by its coordinator) and the purges.
    let page = cluster.metrics(1).await;
    let repaired = sample(&page, "ringstore_repair_ranges_total{outcome=\"repaired\"}");
    assert!(repaired >= 48.0, "{page}");
    assert_eq!(sample(&page, "ringstore_repair_mismatched_keys_total"), 1.0);
    for i in 0..3 {
        let page = cluster.metrics(i).await;
        assert_eq!(
            sample(&page, "ringstore_gc_purged_total"),
            200.0,
            "node {i}"
        );
        assert_eq!(sample(&page, "ringstore_repair_running"), 0.0);
    }
    // Nothing comes back: not through a read, not through another repair.
    let again = repair(&cluster, 2, whole_keyspace("ks")).await;
    assert_eq!(again.mismatched_keys, 0, "{again:?}");
    let mut client = cluster.client(2).await;
    for n in 0..200 {
        let answer = client
            .get(get("ks", &key(n), All))
            .await
            .unwrap()
            .into_inner();
        assert!(!answer.found, "{} came back", key(n));
    }
    cluster.shutdown().await;
}

/// Every node's `Load` as node 0's `status` shows it.
async fn loads(cluster: &TestCluster) -> Vec<u64> {
    let status = cluster
        .admin(0)
        .await
        .status(pb::StatusRequest::default())
        .await
        .unwrap()
        .into_inner();
    status.nodes.iter().map(|node| node.load_bytes).collect()
}

/// Runs `garbagecollect` of `ks` on node `i`.
async fn garbage_collect(cluster: &TestCluster, i: usize) -> pb::GarbageCollected {
    let response = repair_client(cluster, i)
        .await
        .garbage_collect(pb::GarbageCollectRequest {
            keyspace: "ks".into(),
        })
        .await
        .unwrap()
        .into_inner();
    response.keyspaces.into_iter().next().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_scheduler_repairs_every_range_by_itself() {
    let mut cluster = cluster(95, |config| {
        config.repair.schedule = RepairSchedule::Continuous;
        config.repair.interval_seconds = 2;
    })
    .await;
    cluster.create_keyspace(0, "ks", 3).await;
    for n in 0..50 {
        put_at(&cluster, 0, &key(n), "v1", All).await;
    }
    cluster.stop(2).await;
    for n in 0..50 {
        put_at(&cluster, 1, &key(n), "v2", One).await;
    }
    cluster.restart(2).await;
    cluster.wait_until_settled().await;
    let restarted = std::time::Instant::now();
    eventually(
        Duration::from_secs(60),
        "the scheduler repaired node 2",
        || async { differing_ranges(&cluster, "ks").is_empty() },
    )
    .await;
    eprintln!(
        "repaired by the scheduler {:?} after the restart",
        restarted.elapsed()
    );
    for n in 0..50 {
        assert_eq!(
            local_cell(&cluster, 2, "ks", &key(n))
                .unwrap()
                .value
                .unwrap(),
            b"v2"
        );
    }
    // Each node goes on through its own primary ranges, one at a time.
    for i in 0..3 {
        let client = repair_client(&cluster, i).await;
        eventually(
            Duration::from_secs(30),
            "every primary range is repaired",
            || {
                let mut client = client.clone();
                async move {
                    let status = client
                        .repair_status(pb::RepairStatusRequest {})
                        .await
                        .unwrap()
                        .into_inner();
                    assert_eq!(status.schedule, "continuous");
                    assert!(!status.ranges.is_empty(), "node {i} is a primary replica");
                    status
                        .ranges
                        .iter()
                        .all(|r| r.last_repaired_micros.is_some())
                }
            },
        )
        .await;
    }
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn removenode_syncs_the_dead_nodes_ranges_from_every_survivor() {
    let mut cluster = TestCluster::start_configured(96, 4, 4, |_, config| {
        config.hints.enabled = false;
        config.repair.validation_mib_per_sec = 0;
    })
    .await;
    cluster.create_keyspace(0, "ks", 3).await;
    for n in 0..200 {
        put_at(&cluster, 0, &key(n), "v1", All).await;
    }
    // Node 2 misses the second version of every key (no hints).
    cluster.stop(2).await;
    for n in 0..200 {
        put_at(&cluster, 0, &key(n), "v2", Quorum).await;
    }
    cluster.restart(2).await;
    cluster.wait_until_settled().await;
    // Node 3 dies; node 0 removes it. Each of its ranges is streamed from
    // one survivor, possibly node 2.
    let dead = cluster.context(3).host_id;
    let definition = cluster.context(0).keyspace("ks").unwrap();
    let (_, map) = cluster.context(0).placement(&definition);
    let held_by_dead: Vec<usize> = (0..200)
        .filter(|&n| {
            let token = ringstore_placement::Murmur3Partitioner::token(key(n).as_bytes()).unwrap();
            map.replicas(token).contains(dead)
        })
        .collect();
    cluster.stop(3).await;
    cluster.wait_until_settled().await;
    cluster
        .topology(0)
        .await
        .remove_node(pb::RemoveNodeRequest {
            host_id: dead.to_string(),
        })
        .await
        .expect("removenode");
    cluster.forget(3);
    cluster.wait_until_settled().await;

    // Every key the dead node held now has three copies of v2.
    let nodes: BTreeMap<HostId, usize> = (0..3).map(|i| (cluster.context(i).host_id, i)).collect();
    let (_, map) = cluster.context(0).placement(&definition);
    let mut stale = Vec::new();
    for &n in &held_by_dead {
        let token = ringstore_placement::Murmur3Partitioner::token(key(n).as_bytes()).unwrap();
        let replicas: Vec<HostId> = map.replicas(token).ids().collect();
        assert_eq!(replicas.len(), 3);
        for host in replicas {
            let cell = local_cell(&cluster, nodes[&host], "ks", &key(n));
            if cell.and_then(|c| c.value) != Some(b"v2".to_vec()) {
                stale.push(format!("{} on node {}", key(n), nodes[&host]));
            }
        }
    }
    eprintln!(
        "{} keys the dead node held; {} stale copies",
        held_by_dead.len(),
        stale.len()
    );
    assert!(!held_by_dead.is_empty());
    assert!(
        stale.is_empty(),
        "stale copies after removenode: {stale:#?}"
    );
    cluster.shutdown().await;
}

/// The value of the sample `name` (with its labels) on a metrics page.
fn sample(page: &str, name: &str) -> f64 {
    page.lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or_else(|| panic!("no {name} in:\n{page}"))
}
