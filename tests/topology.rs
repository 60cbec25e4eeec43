//! Topology changes on in-process loopback clusters: joins and decommissions
//! under client load, plans against what actually moves, interrupted streams,
//! and removenode/replace restoring replicas key by key.

mod common;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::load::{Coordinators, Load, LoadReport, LoadSettings, check_read, version_of};
use common::{TestCluster, eventually, get, put};
use ringstore_node::NodeConfig;
use ringstore_placement::{HostId, Murmur3Partitioner, ReplicaMap, Token, TokenRange};
use ringstore_proto::v1 as pb;

const QUORUM: pb::ConsistencyLevel = pb::ConsistencyLevel::Quorum;

/// Writes `count` keys `{prefix}{i}` at QUORUM through node `via`, 32 at a time.
async fn write_keys(cluster: &TestCluster, via: usize, prefix: &str, count: usize, value: &str) {
    let client = cluster.client(via).await;
    let keys: Vec<usize> = (0..count).collect();
    for batch in keys.chunks(32) {
        let writes = batch.iter().map(|i| {
            let mut client = client.clone();
            let key = format!("{prefix}{i}");
            async move {
                client
                    .put(put("ks", &key, value, QUORUM))
                    .await
                    .expect("write at QUORUM");
            }
        });
        futures::future::join_all(writes).await;
    }
}

/// The replica map of keyspace `ks` on node `i`'s current ring.
fn replica_map(cluster: &TestCluster, i: usize) -> Arc<ReplicaMap> {
    let context = cluster.context(i);
    let keyspace = context.keyspace("ks").unwrap();
    context.placement(&keyspace).1
}

fn token(key: &str) -> Token {
    Murmur3Partitioner::token(key.as_bytes()).unwrap()
}

/// Every cell node `i` stores locally in `ks`: key, value and its size as
/// streaming counts it.
fn local_cells(cluster: &TestCluster, i: usize) -> Vec<(String, Option<Vec<u8>>, u64)> {
    let context = cluster.context(i);
    let id = context.keyspace("ks").unwrap().id;
    context
        .store
        .scan(id, TokenRange::new(Token::MIN, Token::MIN))
        .unwrap()
        .map(|entry| {
            let (_, key, cell) = entry.unwrap();
            let bytes = ringstore_streaming::entry_bytes(&key, &cell);
            (String::from_utf8(key).unwrap(), cell.value, bytes)
        })
        .collect()
}

/// Every key node `i` stores locally in `ks`, with its value.
fn local_keys(cluster: &TestCluster, i: usize) -> HashMap<String, Option<Vec<u8>>> {
    local_cells(cluster, i)
        .into_iter()
        .map(|(key, value, _)| (key, value))
        .collect()
}

/// Checks that each running node holds exactly the keys it replicates.
fn assert_placement_exact(cluster: &TestCluster, keys: &[String]) {
    let running: Vec<usize> = (0..cluster.nodes.len())
        .filter(|&i| cluster.nodes[i].is_some())
        .collect();
    let map = replica_map(cluster, running[0]);
    for &i in &running {
        let me = cluster.context(i).host_id;
        let local = local_keys(cluster, i);
        for key in local.keys() {
            assert!(
                map.replicas(token(key)).contains(me),
                "node {i} still holds {key}, which it does not replicate"
            );
        }
        for key in keys {
            if map.replicas(token(key)).contains(me) {
                assert!(
                    local.contains_key(key),
                    "node {i} misses {key}, which it replicates"
                );
            }
        }
    }
}

/// The acknowledged writes (`key → version`) that some replica the
/// placement names does not hold at that version or later, as
/// `(node, key)`.
fn replicas_behind(cluster: &TestCluster, acked: &HashMap<String, u64>) -> Vec<(usize, String)> {
    let running: Vec<usize> = (0..cluster.nodes.len())
        .filter(|&i| cluster.nodes[i].is_some())
        .collect();
    let map = replica_map(cluster, running[0]);
    let mut behind = Vec::new();
    for &i in &running {
        let me = cluster.context(i).host_id;
        for (key, &version) in acked {
            if !map.replicas(token(key)).contains(me) {
                continue;
            }
            let held = cluster
                .local_value(i, "ks", key)
                .and_then(|value| version_of(key, &value));
            if held.is_none_or(|held| held < version) {
                behind.push((i, key.clone()));
            }
        }
    }
    behind
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn growing_and_shrinking_under_load_loses_no_acknowledged_write() {
    let began = Instant::now();
    let mut cluster = TestCluster::start(41, 3, 1).await;
    cluster.create_keyspace(0, "ks", 3).await;
    write_keys(&cluster, 0, "pre-", 1500, "preloaded").await;

    // Four clients through every node that is not leaving.
    let coordinators = Coordinators::default();
    for i in 0..3 {
        coordinators.add(&format!("node{i}"), cluster.client(i).await);
    }
    let settings = LoadSettings {
        keyspace: "ks".into(),
        clients: 4,
        keys_per_client: 75,
        max_ops: 20_000,
        deadline: Instant::now() + Duration::from_secs(90),
    };
    let load = Load::start(settings, coordinators.clone());

    // Grow: 3 → 4 while the load runs.
    let join_began = Instant::now();
    let config = TestCluster::config(41, 3, 1, cluster.dir());
    let joiner = cluster.add(config).await;
    cluster.wait_until_settled().await;
    let join_ended = Instant::now();
    let joined_host = cluster.context(joiner).host_id;
    let (received, _) = bootstrap_bytes(&cluster, joiner).await;
    assert!(received > 0, "the joining node streamed its ranges");
    coordinators.add("node3", cluster.client(joiner).await);

    // Shrink: 4 → 3, decommissioning one of the original nodes (clients
    // stop sending to it first; what is in flight completes).
    let leaving = 2;
    coordinators.remove("node2");
    let decommission_began = Instant::now();
    let done = cluster
        .topology(leaving)
        .await
        .decommission(pb::DecommissionRequest {})
        .await
        .expect("decommission succeeds")
        .into_inner();
    let decommission_ended = Instant::now();
    assert!(
        done.ranges_streamed > 0 && done.bytes_streamed > 0,
        "{done:?}"
    );
    let node = cluster.nodes[leaving].take().unwrap();
    tokio::time::timeout(Duration::from_secs(10), node.stop_requested())
        .await
        .expect("a decommissioned node asks to stop");
    node.shutdown().await.unwrap();
    let refused = ringstore_node::start(cluster.configs[leaving].clone())
        .await
        .err()
        .expect("a decommissioned node does not start again on its old data");
    assert!(
        refused.to_string().contains("was decommissioned"),
        "{refused}"
    );
    cluster.forget(leaving);
    cluster.wait_until_settled().await;

    let report = load.stop().await;
    let during_join = report.completed_between(join_began, join_ended);
    let during_decommission = report.completed_between(decommission_began, decommission_ended);
    eprintln!(
        "load: {}; (writes, reads) during the join ({:?}): {during_join:?}, during the decommission ({:?}): {during_decommission:?}",
        report.summary(),
        join_ended - join_began,
        decommission_ended - decommission_began,
    );
    for failure in &report.failures {
        eprintln!("failed: {failure:?}");
    }
    // The load overlapped both movements...
    assert!(
        during_join.0 >= 20 && during_join.1 >= 20,
        "operations during the join: {during_join:?}"
    );
    assert!(
        during_decommission.0 >= 20 && during_decommission.1 >= 20,
        "operations during the decommission: {during_decommission:?}"
    );
    // ...and with RF 3 and one node moving, QUORUM kept succeeding.
    assert_no_failure_or_stale_read(&report);

    // Every replica of the new ring holds every acknowledged version: writes
    // went to pending replicas too and the rest was streamed (checked before
    // any QUORUM read can repair a replica; a hint may still be landing, so
    // poll).
    eventually(
        Duration::from_secs(30),
        "every replica holds every acknowledged version",
        || async { replicas_behind(&cluster, &report.acked).is_empty() },
    )
    .await;

    // Every acknowledged write is readable at QUORUM afterwards, and every
    // preloaded key.
    let mut client = cluster.client(0).await;
    for (key, &version) in &report.acked {
        let response = client
            .get(get("ks", key, QUORUM))
            .await
            .unwrap()
            .into_inner();
        if let Err(stale) = check_read(key, Some(version), response.found, &response.value) {
            panic!("after both changes: {stale}");
        }
    }
    for i in 0..1500 {
        let response = client
            .get(get("ks", &format!("pre-{i}"), QUORUM))
            .await
            .unwrap()
            .into_inner();
        assert!(response.found, "pre-{i} survived both changes");
    }

    // After cleanup, each node holds exactly the ranges the placement gives it.
    for i in 0..cluster.nodes.len() {
        cluster
            .topology(i)
            .await
            .cleanup(pb::CleanupRequest::default())
            .await
            .unwrap();
    }
    let mut keys: Vec<String> = report.acked.keys().cloned().collect();
    keys.extend((0..1500).map(|i| format!("pre-{i}")));
    assert_placement_exact(&cluster, &keys);
    assert!(replica_map(&cluster, 0).ring().contains_host(joined_host));
    cluster.shutdown().await;
    eprintln!("{:?} in all", began.elapsed());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_join_at_rf_3_moves_what_its_plan_estimates() {
    join_moves_what_its_plan_estimates(42, 3).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_join_at_rf_1_moves_a_quarter_of_the_primary_ranges() {
    join_moves_what_its_plan_estimates(46, 1).await;
}

/// Grows 3 nodes to 4 with a keyspace of replication factor `rf` (and the
/// allocator balancing for it): the bytes moved match the plan's estimate,
/// and the new node takes min(1, rf/4) of one copy of the data. At rf 1 that
/// is a quarter of the primary ranges (at rf 3 the allocator balances
/// replica ownership, not primary ranges).
async fn join_moves_what_its_plan_estimates(block: u8, rf: u32) {
    let dirs = tempfile::tempdir().unwrap();
    let config = |i: usize, dir: &std::path::Path| NodeConfig {
        allocate_tokens_for_local_replication_factor: rf,
        ..TestCluster::config(block, i, 1, dir)
    };
    let configs = (0..3).map(|i| config(i, dirs.path())).collect();
    let mut cluster = TestCluster::start_with(configs, dirs).await;
    cluster.create_keyspace(0, "ks", rf).await;
    write_keys(&cluster, 0, "key-", 3000, &"x".repeat(200)).await;
    // One copy of the data: every node's bytes over the replication factor.
    let single_copy: u64 = (0..3)
        .flat_map(|i| local_cells(&cluster, i))
        .map(|(_, _, bytes)| bytes)
        .sum::<u64>()
        / u64::from(rf);

    let plan = cluster
        .topology(0)
        .await
        .plan(pb::PlanRequest {
            change: Some(pb::plan_request::Change::Join(pb::PlanJoin {
                datacenter: "dc1".into(),
                rack: "rack1".into(),
                num_tokens: 0,
            })),
        })
        .await
        .unwrap()
        .into_inner();
    let joiner = cluster.add(config(3, cluster.dir())).await;
    cluster.wait_until_settled().await;
    let (moved, _) = bootstrap_bytes(&cluster, joiner).await;
    // The joiner wrote what it received as runs (each keyspace's directory
    // stays) and then folded them into sled.
    let runs_dir = cluster.dir().join(format!("node{joiner}")).join("runs");
    let keyspaces_with_runs = std::fs::read_dir(&runs_dir).unwrap().count();
    assert!(
        keyspaces_with_runs > 0,
        "nothing was written to {runs_dir:?}"
    );
    eventually(
        Duration::from_secs(30),
        "the joiner's runs are folded",
        || async {
            let metrics = cluster.metrics(joiner).await;
            metrics.contains("ringstore_storage_runs_pending 0\n")
                && metrics.contains("ringstore_storage_runs_pending_cells 0\n")
        },
    )
    .await;
    let metrics = cluster.metrics(joiner).await;
    assert!(
        metrics.contains(&format!(
            "ringstore_stream_bytes_total{{direction=\"received\"}} {moved}\n"
        )),
        "{metrics}"
    );
    let mut streams_opened = 0;
    for source in 0..3 {
        streams_opened += cluster
            .internode_calls(joiner, source, "stream_range")
            .await;
    }
    assert!(
        streams_opened > 0,
        "the joiner's streams show in its internode latency"
    );
    let estimate = plan.estimated_bytes as f64;
    eprintln!(
        "plan: {estimate} bytes, moved {moved}; one copy {single_copy}; replica fraction {:.3}, primary {:.3}",
        plan.replica_fraction_moved, plan.primary_fraction_moved
    );
    assert!(
        (moved as f64 - estimate).abs() / estimate < 0.10,
        "moved {moved}, planned {estimate}"
    );
    // The new node takes min(1, rf/(N+1)) of one copy of the data, which is
    // a quarter of all replica data.
    let expected = (f64::from(rf) / 4.0).min(1.0);
    let fraction = moved as f64 / single_copy as f64;
    assert!(
        (fraction - expected).abs() < 0.08,
        "moved {fraction:.3} of the data"
    );
    assert!(
        (plan.replica_fraction_moved - 0.25).abs() < 0.03,
        "{}",
        plan.replica_fraction_moved
    );
    if rf == 1 {
        assert!(
            (plan.primary_fraction_moved - 0.25).abs() < 0.05,
            "{}",
            plan.primary_fraction_moved
        );
    }
    cluster.shutdown().await;
}

/// Fills the nodes' stores directly (fast, no coordination) with `count`
/// keys of 1 KiB, each on exactly the replicas the placement names.
async fn fill_directly(cluster: &TestCluster, count: usize) {
    let map = replica_map(cluster, 0);
    for i in 0..cluster.nodes.len() {
        let context = cluster.context(i);
        let id = context.keyspace("ks").unwrap().id;
        let writes: Vec<_> = (0..count)
            .map(|k| format!("bulk-{k}"))
            .filter(|key| map.replicas(token(key)).contains(context.host_id))
            .map(|key| {
                let k: usize = key["bulk-".len()..].parse().unwrap();
                let cell = ringstore_storage::Cell::live(
                    ringstore_storage::Timestamp(1),
                    format!("{k:01024}").into_bytes(),
                );
                (id, key.into_bytes(), cell)
            })
            .collect();
        for batch in writes.chunks(1000) {
            context.store.apply_many(batch).await.unwrap();
        }
    }
}

/// The bytes node `i` has received in its bootstrap sessions so far, and
/// the total expected (estimated while running, exact once done); zeros
/// when the node does not answer.
async fn bootstrap_bytes(cluster: &TestCluster, i: usize) -> (u64, u64) {
    let Ok(stats) = cluster
        .topology(i)
        .await
        .net_stats(pb::NetStatsRequest {})
        .await
    else {
        return (0, 0);
    };
    let sessions = stats.into_inner().streams;
    let receiving = sessions
        .iter()
        .filter(|s| s.operation == "bootstrap" && s.direction == "receiving");
    let done = receiving.clone().map(|s| s.bytes_done).sum();
    let total = receiving.map(|s| s.bytes_total).sum();
    (done, total)
}

/// Checks that node 0's `status` shows node `moving` up and in `state`, that
/// node `refuser` refuses to decommission and to clean up meanwhile, naming
/// the movement (`what`), and that the moving node refuses to drain.
async fn assert_moving_and_blocking(
    cluster: &TestCluster,
    moving: usize,
    state: &str,
    refuser: usize,
    what: &str,
) {
    let status = cluster
        .admin(0)
        .await
        .status(pb::StatusRequest::default())
        .await
        .unwrap()
        .into_inner();
    let node = status
        .nodes
        .iter()
        .find(|n| n.client_address == cluster.address(moving).to_string())
        .unwrap();
    assert_eq!((node.up, node.state.as_str()), (true, state));
    let refused = cluster
        .topology(refuser)
        .await
        .decommission(pb::DecommissionRequest {})
        .await
        .unwrap_err();
    assert_eq!(refused.code(), tonic::Code::FailedPrecondition);
    assert!(refused.message().contains(what), "{}", refused.message());
    // Cleanup deletes without tombstones: never while ranges move.
    let refused = cluster
        .topology(refuser)
        .await
        .cleanup(pb::CleanupRequest::default())
        .await
        .unwrap_err();
    assert_eq!(refused.code(), tonic::Code::FailedPrecondition);
    assert!(
        refused.message().contains("cleanup is refused") && refused.message().contains(what),
        "{}",
        refused.message()
    );
    // Draining the moving node would abort its movement and stop it.
    let refused = cluster
        .admin(moving)
        .await
        .drain(pb::DrainRequest {})
        .await
        .unwrap_err();
    assert_eq!(refused.code(), tonic::Code::FailedPrecondition);
    assert!(
        refused.message().contains(&state.to_lowercase()),
        "{}",
        refused.message()
    );
}

/// Bulk keys of 1 KiB for the slow-stream tests: 12 MiB a node.
const BULK_KEYS: usize = 12_000;

/// Three nodes on `block` that stream at 1 MiB/s, holding [`BULK_KEYS`] at
/// RF 3, and a fourth node joining, returned once it has received
/// 1/`fraction` of its bytes.
async fn slowly_joining_cluster(block: u8, fraction: u64) -> (TestCluster, usize) {
    let dirs = tempfile::tempdir().unwrap();
    let configs: Vec<NodeConfig> = (0..3)
        .map(|i| NodeConfig {
            stream_throughput_mib_per_sec: 1,
            ..TestCluster::config(block, i, 1, dirs.path())
        })
        .collect();
    let mut cluster = TestCluster::start_with(configs, dirs).await;
    cluster.create_keyspace(0, "ks", 3).await;
    fill_directly(&cluster, BULK_KEYS).await;
    let joiner = cluster
        .add(TestCluster::config(block, 3, 1, cluster.dir()))
        .await;
    eventually(
        Duration::from_secs(60),
        "the joining node is part of the way through",
        || async {
            let (done, total) = bootstrap_bytes(&cluster, joiner).await;
            total > 0 && done * fraction > total
        },
    )
    .await;
    (cluster, joiner)
}

/// Checks that node `i` holds every bulk key it replicates, with its value.
fn assert_has_its_bulk_keys(cluster: &TestCluster, i: usize, count: usize) {
    let map = replica_map(cluster, 0);
    let me = cluster.context(i).host_id;
    let mut checked = 0;
    for k in 0..count {
        let key = format!("bulk-{k}");
        if map.replicas(token(&key)).contains(me) {
            let value = cluster.local_value(i, "ks", &key);
            assert_eq!(
                value,
                Some(format!("{k:01024}").into_bytes()),
                "node {i}: {key}"
            );
            checked += 1;
        }
    }
    assert!(checked > count / 2, "node {i} replicates {checked} keys");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_whose_source_is_killed_fails_over_and_completes() {
    let (mut cluster, joiner) = slowly_joining_cluster(43, 4).await;
    // Meanwhile the joining node shows as UJ, and no other movement may start.
    assert_moving_and_blocking(&cluster, joiner, "JOINING", 0, "is joining").await;
    // Writes already reach it as a pending replica: at ALL, every natural and
    // pending replica has acknowledged.
    let joining_host = cluster.context(joiner).host_id;
    let view = cluster.context(0).view();
    let pending = ReplicaMap::new(
        view.pending_ring
            .clone()
            .expect("a pending ring while joining"),
        &cluster.context(0).keyspace("ks").unwrap().strategy,
    );
    let mut client = cluster.client(0).await;
    let mut probed = 0;
    for k in 0..40 {
        let key = format!("probe-{k}");
        client
            .put(put("ks", &key, "pending", pb::ConsistencyLevel::All))
            .await
            .expect("a write at ALL while a node joins");
        if pending.replicas(token(&key)).contains(joining_host) {
            assert_eq!(
                cluster.local_value(joiner, "ks", &key).as_deref(),
                Some(b"pending".as_slice()),
                "{key} reached the joining node"
            );
            probed += 1;
        }
    }
    assert!(probed > 0);
    cluster.stop(1).await;
    // Node 1 is down for good here: the joining node must finish from the others.
    let joined = cluster.context(joiner).clone();
    eventually(
        Duration::from_secs(90),
        "the joining node is NORMAL",
        || {
            let joined = joined.clone();
            async move {
                joined.view().member(joined.host_id).is_some_and(|m| {
                    m.metadata.state == ringstore_node::membership::NodeState::Normal
                })
            }
        },
    )
    .await;
    assert_has_its_bulk_keys(&cluster, joiner, BULK_KEYS);
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_killed_mid_bootstrap_resumes_where_it_stopped() {
    let (mut cluster, joiner) = slowly_joining_cluster(45, 3).await;
    let (_, first_total) = bootstrap_bytes(&cluster, joiner).await;
    cluster.stop(joiner).await;
    cluster.restart(joiner).await;
    cluster.wait_until_settled().await;
    let (resumed, _) = bootstrap_bytes(&cluster, joiner).await;
    eprintln!("first run planned {first_total} bytes; the resumed run fetched {resumed}");
    assert!(
        (resumed as f64) < first_total as f64 * 0.8,
        "the restarted bootstrap resumed instead of starting over ({resumed} of {first_total})"
    );
    assert_has_its_bulk_keys(&cluster, joiner, BULK_KEYS);
    cluster.shutdown().await;
}

/// Checks key by key that each key has `rf` copies among the running nodes,
/// on exactly the replicas the placement names.
fn assert_every_key_has_its_replicas(cluster: &TestCluster, keys: usize) {
    let running: Vec<usize> = (0..cluster.nodes.len())
        .filter(|&i| cluster.nodes[i].is_some())
        .collect();
    let map = replica_map(cluster, running[0]);
    let hosts: HashMap<HostId, usize> = running
        .iter()
        .map(|&i| (cluster.context(i).host_id, i))
        .collect();
    for k in 0..keys {
        let key = format!("key-{k}");
        let replicas: Vec<HostId> = map.replicas(token(&key)).ids().collect();
        assert_eq!(replicas.len(), 3);
        for host in replicas {
            let i = *hosts
                .get(&host)
                .unwrap_or_else(|| panic!("replica {host} of {key} is not running"));
            assert_eq!(
                cluster.local_value(i, "ks", &key).as_deref(),
                Some(b"value".as_slice()),
                "{key} on its replica {i}"
            );
        }
    }
}

/// Keys written in the late rounds (while a node is down).
const LATE: usize = 100;

/// Writes round `round` of late keys: `key-{first + n}` for the round's share
/// of the `LATE` keys, through node 0 at QUORUM.
async fn write_late_keys(cluster: &TestCluster, first: usize, round: usize) {
    let mut client = cluster.client(0).await;
    let share = LATE / 2;
    for n in round * share..(round + 1) * share {
        client
            .put(put("ks", &format!("key-{}", first + n), "value", QUORUM))
            .await
            .expect("QUORUM write with one node down");
    }
}

async fn wait_until_down(cluster: &TestCluster, observer: usize, host: HostId) {
    let context = cluster.context(observer).clone();
    eventually(Duration::from_secs(30), "the node is seen down", || {
        let context = context.clone();
        async move { !context.view().is_up(host) }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn removenode_and_replace_restore_every_key_to_three_copies() {
    const KEYS: usize = 1500;
    let mut cluster = TestCluster::start(44, 5, 1).await;
    cluster.create_keyspace(0, "ks", 3).await;
    // A keyspace whose ranges only the dead nodes hold must not block them.
    cluster.create_keyspace(0, "single", 1).await;
    write_keys(&cluster, 0, "key-", KEYS, "value").await;

    // removenode: node 4 dies; node 0 restores its replicas from the survivors.
    let dead = cluster.context(4).host_id;
    cluster.stop(4).await;
    wait_until_down(&cluster, 0, dead).await;
    // Writes while it is down leave hints for it on node 0: removal drops them.
    write_late_keys(&cluster, KEYS, 0).await;
    assert!(cluster.hints_for(0, dead) > 0);
    let refused = cluster
        .topology(0)
        .await
        .remove_node(pb::RemoveNodeRequest {
            host_id: cluster.context(1).host_id.to_string(),
        })
        .await
        .unwrap_err();
    assert_eq!(
        refused.code(),
        tonic::Code::FailedPrecondition,
        "a live node cannot be removed"
    );
    cluster
        .topology(0)
        .await
        .remove_node(pb::RemoveNodeRequest {
            host_id: dead.to_string(),
        })
        .await
        .expect("removenode succeeds");
    // Brought back on its old data, the removed node stops itself.
    cluster.restart(4).await;
    tokio::time::timeout(
        Duration::from_secs(30),
        cluster.nodes[4].as_ref().unwrap().stop_requested(),
    )
    .await
    .expect("a removed node stops itself");
    cluster.stop(4).await;
    cluster.forget(4);
    cluster.wait_until_settled().await;
    assert_every_key_has_its_replicas(&cluster, KEYS + LATE / 2);
    eventually(
        Duration::from_secs(10),
        "the removed node's hints are dropped",
        || async { cluster.hints_for(0, dead) == 0 },
    )
    .await;

    // replace: node 3 dies; a new node takes over its tokens and its data.
    let dead = cluster.context(3).host_id;
    let dead_tokens = replica_map(&cluster, 0).ring().tokens_of(dead);
    cluster.stop(3).await;
    wait_until_down(&cluster, 0, dead).await;
    // Hints for the dead node go to its replacement.
    write_late_keys(&cluster, KEYS, 1).await;
    assert!(cluster.hints_for(0, dead) > 0);
    let replayed = cluster.context(0).handoff.counters().replayed;
    let config = NodeConfig {
        replace_address: Some("127.44.0.4".into()),
        ..TestCluster::config(44, 5, 1, cluster.dir())
    };
    let replacement = cluster.add(config).await;
    let new_host = cluster.context(replacement).host_id;
    let observer = cluster.context(0).clone();
    eventually(
        Duration::from_secs(60),
        "the replacement owns the dead node's tokens",
        || {
            let observer = observer.clone();
            let dead_tokens = dead_tokens.clone();
            async move {
                let view = observer.view();
                view.removed.contains(&dead) && view.ring.tokens_of(new_host) == dead_tokens
            }
        },
    )
    .await;
    cluster.forget(3);
    cluster.wait_until_settled().await;
    assert_every_key_has_its_replicas(&cluster, KEYS + LATE);
    eventually(
        Duration::from_secs(30),
        "the dead node's hints reach its replacement",
        || async { cluster.hints_for(0, dead) == 0 && cluster.hints_for(0, new_host) == 0 },
    )
    .await;
    assert!(cluster.context(0).handoff.counters().replayed > replayed);
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_with_initial_tokens_bootstraps_too() {
    let mut cluster = TestCluster::start(48, 3, 1).await;
    cluster.create_keyspace(0, "ks", 2).await;
    write_keys(&cluster, 0, "key-", 600, "value").await;
    let tokens: Vec<Token> = (0..16i64)
        .map(|i| Token((i64::MIN + 12_345).wrapping_add(i.wrapping_mul(1 << 60))))
        .collect();
    let config = NodeConfig {
        initial_token: Some(tokens.clone()),
        ..TestCluster::config(48, 3, 1, cluster.dir())
    };
    let joiner = cluster.add(config).await;
    cluster.wait_until_settled().await;
    let (received, _) = bootstrap_bytes(&cluster, joiner).await;
    assert!(received > 0, "it streamed its ranges");
    let map = replica_map(&cluster, 0);
    let me = cluster.context(joiner).host_id;
    let mut sorted = tokens;
    sorted.sort();
    assert_eq!(map.ring().tokens_of(me), sorted);
    let local = local_keys(&cluster, joiner);
    let mine: Vec<String> = (0..600)
        .map(|k| format!("key-{k}"))
        .filter(|key| map.replicas(token(key)).contains(me))
        .collect();
    assert!(!mine.is_empty());
    for key in mine {
        assert_eq!(local.get(&key), Some(&Some(b"value".to_vec())), "{key}");
    }
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_join_waits_for_the_first() {
    let (mut cluster, first) = slowly_joining_cluster(49, 10).await;
    let second = cluster
        .add(TestCluster::config(49, 4, 1, cluster.dir()))
        .await;
    let second_host = cluster.context(second).host_id;
    let observer = cluster.context(0).clone();
    let seen = tokio::time::Instant::now();
    // Give the second node time to take its turn, were it allowed to: it
    // reaches the cluster and waits out two ring delays of quiet gossip.
    eventually(
        Duration::from_secs(30),
        "the second node has had its chance",
        || {
            let observer = observer.clone();
            async move {
                observer.view().is_up(second_host) && seen.elapsed() > Duration::from_secs(2)
            }
        },
    )
    .await;
    let view = observer.view();
    let (done, total) = bootstrap_bytes(&cluster, first).await;
    assert!(done < total, "the first node is still streaming");
    let waiting = view.member(second_host).unwrap();
    assert!(
        waiting.metadata.tokens.is_empty(),
        "the second node has not announced tokens while the first joins"
    );
    cluster.wait_until_settled().await;
    let (received, _) = bootstrap_bytes(&cluster, second).await;
    assert!(received > 0, "the second node bootstrapped after the first");
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_decommission_shows_as_leaving_and_blocks_other_movements() {
    let dirs = tempfile::tempdir().unwrap();
    let configs: Vec<NodeConfig> = (0..4)
        .map(|i| NodeConfig {
            stream_throughput_mib_per_sec: 1,
            ..TestCluster::config(52, i, 1, dirs.path())
        })
        .collect();
    let mut cluster = TestCluster::start_with(configs, dirs).await;
    cluster.create_keyspace(0, "ks", 3).await;
    fill_directly(&cluster, BULK_KEYS / 2).await;

    let mut topology = cluster.topology(3).await;
    let decommission =
        tokio::spawn(async move { topology.decommission(pb::DecommissionRequest {}).await });
    eventually(
        Duration::from_secs(30),
        "the leaving node sends its ranges",
        || async {
            let stats = cluster
                .topology(3)
                .await
                .net_stats(pb::NetStatsRequest {})
                .await;
            stats.is_ok_and(|s| {
                let s = s.into_inner();
                s.mode == "LEAVING"
                    && s.streams
                        .iter()
                        .any(|s| s.direction == "sending" && s.bytes_done > 0)
            })
        },
    )
    .await;
    assert_moving_and_blocking(&cluster, 3, "LEAVING", 1, "is leaving").await;

    decommission
        .await
        .unwrap()
        .expect("the slow decommission completes");
    let node = cluster.forget(3).unwrap();
    node.shutdown().await.unwrap();
    cluster.wait_until_settled().await;
    // The leaving node's ranges now live on the three others, in full.
    for i in 0..3 {
        assert_has_its_bulk_keys(&cluster, i, BULK_KEYS / 2);
    }
    cluster.shutdown().await;
}

/// Alters keyspace `ks` to SimpleStrategy `rf` through node `via`; returns
/// the response and when the call began and ended.
async fn alter_to(
    cluster: &TestCluster,
    via: usize,
    rf: u32,
) -> (pb::AlterKeyspaceResponse, Instant, Instant) {
    let began = Instant::now();
    let response = cluster
        .schema(via)
        .await
        .alter_keyspace(pb::AlterKeyspaceRequest {
            name: "ks".into(),
            replication: Some(pb::Replication {
                strategy: Some(pb::replication::Strategy::Simple(pb::SimpleStrategy {
                    replication_factor: rf,
                })),
            }),
            return_at_once: false,
        })
        .await
        .expect("the alter succeeds")
        .into_inner();
    (response, began, Instant::now())
}

/// The estimated bytes of `plan alter ks` to SimpleStrategy `rf`.
async fn planned_alter_bytes(cluster: &TestCluster, rf: u32) -> u64 {
    let plan = cluster
        .topology(0)
        .await
        .plan(pb::PlanRequest {
            change: Some(pb::plan_request::Change::Alter(pb::PlanAlter {
                keyspace: "ks".into(),
                replication: Some(pb::Replication {
                    strategy: Some(pb::replication::Strategy::Simple(pb::SimpleStrategy {
                        replication_factor: rf,
                    })),
                }),
            })),
        })
        .await
        .expect("plan alter")
        .into_inner();
    eprintln!("{}: {} bytes", plan.description, plan.estimated_bytes);
    plan.estimated_bytes
}

/// Checks that no operation of a load failed and no read missed a write
/// acknowledged before it began.
fn assert_no_failure_or_stale_read(report: &LoadReport) {
    assert!(
        report.failures.is_empty(),
        "{} operations failed",
        report.failures.len()
    );
    assert!(
        report.stale_reads.is_empty(),
        "a read missed an acknowledged write: {:#?}",
        report.stale_reads
    );
}

/// Runs `alter_to(via, rf)` under a QUORUM load through every node, which
/// stops as soon as the alter returns; checks that the load overlapped the
/// alter and that no operation failed or read stale data.
async fn alter_under_load(
    cluster: &TestCluster,
    via: usize,
    rf: u32,
    min_ops: usize,
) -> (pb::AlterKeyspaceResponse, LoadReport) {
    let coordinators = Coordinators::default();
    for i in 0..cluster.nodes.len() {
        coordinators.add(&format!("node{i}"), cluster.client(i).await);
    }
    let settings = LoadSettings {
        keyspace: "ks".into(),
        clients: 4,
        keys_per_client: 500,
        max_ops: 50_000,
        deadline: Instant::now() + Duration::from_secs(90),
    };
    let load = Load::start(settings, coordinators);
    eventually(Duration::from_secs(10), "the load is running", || async {
        load.writes_ok() >= 20
    })
    .await;
    let (response, began, ended) = alter_to(cluster, via, rf).await;
    let report = load.stop().await;
    let during = report.completed_between(began, ended);
    eprintln!(
        "alter to RF {rf} took {:?}: {response:?}; load: {}; (writes, reads) during it: {during:?}",
        ended - began,
        report.summary(),
    );
    for failure in &report.failures {
        eprintln!("failed: {failure:?}");
    }
    assert!(
        during.0 >= min_ops && during.1 >= min_ops,
        "operations during the alter to RF {rf}: {during:?}"
    );
    assert_no_failure_or_stale_read(&report);
    (response, report)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn altering_rf_1_to_3_and_back_to_2_under_load_moves_the_data_and_loses_no_write() {
    let cluster = TestCluster::start(205, 3, 1).await;
    cluster.create_keyspace(0, "ks", 1).await;
    const BULK: usize = 4000;
    fill_directly(&cluster, BULK).await;
    // Slow streams (1 MiB/s per sending node) so the load overlaps the move.
    for i in 0..3 {
        cluster
            .topology(i)
            .await
            .set_stream_throughput(pb::SetStreamThroughputRequest { mib_per_sec: 1 })
            .await
            .unwrap();
    }
    let planned = planned_alter_bytes(&cluster, 3).await;
    assert!(
        planned > BULK as u64 * 1024,
        "two new copies of ~4 MiB planned, got {planned}"
    );

    let (up, up_load) = alter_under_load(&cluster, 1, 3, 20).await;
    for i in 0..3 {
        let local = local_keys(&cluster, i);
        let missing = (0..BULK).filter(|k| !local.contains_key(&format!("bulk-{k}")));
        assert_eq!(
            missing.count(),
            0,
            "node {i} holds every preloaded key at RF 3"
        );
    }
    assert!(up.bytes_streamed > 0 && up.ranges_streamed > 0, "{up:?}");
    assert_eq!(
        up.keys_removed, 0,
        "raising the replication deletes nothing"
    );
    let keyspace = cluster.context(2).keyspace("ks").unwrap();
    assert_eq!(keyspace.strategy.to_string(), "SimpleStrategy:3");
    assert_eq!(keyspace.pending_strategy, None);
    // All 3 replicas hold every version acknowledged during the move: the
    // ones written before a range was streamed came with it, the later ones
    // were written to the pending replicas too. Checked at once, before any
    // other read could repair a replica (no hint is due: nothing failed).
    let behind = replicas_behind(&cluster, &up_load.acked);
    assert!(
        behind.is_empty(),
        "{} acknowledged versions missing on their new replicas, e.g. {:?}",
        behind.len(),
        &behind[..behind.len().min(5)]
    );

    let (down, down_load) = alter_under_load(&cluster, 2, 2, 5).await;
    assert_eq!(
        down.bytes_streamed, 0,
        "lowering the replication moves nothing"
    );
    assert!(
        down.keys_removed > 0,
        "the dropped replicas clean up: {down:?}"
    );

    // Each of the 2 replicas the placement names holds the newest
    // acknowledged version of every key and every preloaded key, and no
    // other node holds any of them.
    let mut acked = up_load.acked.clone();
    for (key, &version) in &down_load.acked {
        let newest = acked.entry(key.clone()).or_insert(version);
        *newest = (*newest).max(version);
    }
    eventually(
        Duration::from_secs(30),
        "every replica holds every acknowledged version",
        || async { replicas_behind(&cluster, &acked).is_empty() },
    )
    .await;
    let mut keys: Vec<String> = acked.keys().cloned().collect();
    keys.extend((0..BULK).map(|k| format!("bulk-{k}")));
    assert_placement_exact(&cluster, &keys);
    let copies: usize = (0..3).map(|i| local_keys(&cluster, i).len()).sum();
    assert_eq!(copies, 2 * keys.len(), "two copies of every key in all");
    cluster.shutdown().await;
}

/// A node that has only just started to join does not know the cluster's
/// keyspaces yet. A client that reaches it (a driver's retry, a load
/// balancer) must never hear "no such keyspace" for one that exists: the
/// node pulls the schema from peers gossiping another version, and while it
/// is `Joining` without schema agreement it answers `UNAVAILABLE`, which a
/// client retries elsewhere. Address block 54.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_joining_node_never_says_an_existing_keyspace_does_not_exist() {
    let mut cluster = TestCluster::start(54, 3, 1).await;
    cluster.create_keyspace(0, "ks", 2).await;
    cluster
        .client(0)
        .await
        .put(put("ks", "k", "v1", pb::ConsistencyLevel::Quorum))
        .await
        .unwrap();
    // A long ring delay keeps the joiner `Joining` for the whole test.
    let config = NodeConfig {
        ring_delay_ms: 60_000,
        ..TestCluster::config(54, 3, 1, cluster.dir())
    };
    let joiner = cluster.add(config).await;
    let mut client = cluster.client(joiner).await;
    let deadline = Instant::now() + Duration::from_secs(20);
    let (mut unavailable, mut answered) = (0, 0);
    while answered < 20 {
        assert!(Instant::now() < deadline, "the joiner never answered");
        match client
            .get(get("ks", "k", pb::ConsistencyLevel::Quorum))
            .await
        {
            Ok(found) => {
                let found = found.into_inner();
                assert!(found.found && found.value == b"v1", "{found:?}");
                answered += 1;
            }
            Err(status) => {
                assert_eq!(status.code(), tonic::Code::Unavailable, "{status:?}");
                assert!(status.message().contains("joining"), "{status:?}");
                unavailable += 1;
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    }
    let state = cluster
        .context(joiner)
        .view()
        .member(cluster.context(joiner).host_id)
        .map(|m| m.metadata.state);
    assert_eq!(state, Some(ringstore_membership::NodeState::Joining));
    eprintln!("the joiner answered UNAVAILABLE {unavailable} times before it knew the keyspace");
    // A keyspace that does not exist is still NOT_FOUND once the schema agrees.
    let missing = client
        .get(get("nope", "k", pb::ConsistencyLevel::Quorum))
        .await
        .unwrap_err();
    assert_eq!(missing.code(), tonic::Code::NotFound, "{missing:?}");
    cluster.shutdown().await;
}

/// A node that joins while a member is down computes its ranges on the
/// whole ring, the down member's tokens included. Simulation seed 5491
/// found a joiner that did not yet hold a down member's record: it streamed
/// what a ring without that member gave it, turned `Normal`, and read an
/// acknowledged `QUORUM` write back as missing. Here metadata digests — the
/// only way gossip spreads a down member's record — are an hour apart, so
/// the joiner learns it only by catching up with its peers before it chooses
/// tokens and moves data (`topology::catch_up`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_joining_while_a_member_is_down_streams_against_the_whole_ring() {
    const KEYS: usize = 400;
    const DIGESTS_AN_HOUR_APART: u64 = 3600;
    let mut cluster = TestCluster::start_configured(246, 4, 1, |_, config| {
        config.test_metadata_digest_interval_seconds = DIGESTS_AN_HOUR_APART;
    })
    .await;
    cluster.create_keyspace(0, "ks", 2).await;
    write_keys(&cluster, 0, "key-", KEYS, "before").await;
    let down = cluster.context(3).host_id;
    cluster.stop(3).await;
    for observer in 0..3 {
        wait_until_down(&cluster, observer, down).await;
    }

    let joiner = cluster
        .add(NodeConfig {
            test_metadata_digest_interval_seconds: DIGESTS_AN_HOUR_APART,
            ..TestCluster::config(246, 4, 1, cluster.dir())
        })
        .await;
    let context = cluster.context(joiner).clone();
    let me = context.host_id;
    eventually(Duration::from_secs(60), "the joiner turns Normal", || {
        let context = context.clone();
        async move { !context.view().ring.tokens_of(me).is_empty() }
    })
    .await;
    let view = context.view();
    assert!(
        view.member(down).is_some(),
        "the joiner bootstrapped without the down member's record"
    );
    assert_eq!(
        view.ring.checksum(),
        cluster.context(0).view().ring.checksum(),
        "the joiner's ring differs from the others'"
    );
    // Every key the whole ring gives the joiner was streamed to it.
    let map = replica_map(&cluster, 0);
    let mine: Vec<String> = (0..KEYS)
        .map(|i| format!("key-{i}"))
        .filter(|key| map.replicas(token(key)).contains(me))
        .collect();
    assert!(
        mine.len() > KEYS / 10,
        "the joiner replicates {} keys",
        mine.len()
    );
    for key in &mine {
        assert_eq!(
            cluster.local_value(joiner, "ks", key),
            Some(b"before".to_vec()),
            "the joiner lacks {key}"
        );
    }
}
