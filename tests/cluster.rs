//! A three-node cluster at RF 3, in process on loopback: quorum reads and
//! writes from every node, a node down, read repair, tombstones, TTL,
//! restarts, re-created keyspaces, and replica reads coalesced into shared
//! internode calls.

mod common;

use std::time::Duration;

use common::{TestCluster, eventually, get, is_found, put};
use ringstore_proto::v1 as pb;
use tonic::Code;

use pb::ConsistencyLevel::{All, One, Quorum};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quorum_writes_are_read_at_quorum_from_every_node() {
    let cluster = TestCluster::start(21, 3, 3).await;
    cluster.create_keyspace(0, "ks", 3).await;
    for i in 0..30 {
        let via = i % 3;
        cluster
            .client(via)
            .await
            .put(put("ks", &format!("key{i}"), &format!("value{i}"), Quorum))
            .await
            .unwrap();
    }
    for node in 0..3 {
        let mut client = cluster.client(node).await;
        for i in 0..30 {
            let found = client
                .get(get("ks", &format!("key{i}"), Quorum))
                .await
                .unwrap()
                .into_inner();
            assert!(found.found, "node {node} key{i}");
            assert_eq!(found.value, format!("value{i}").into_bytes());
        }
    }
    // `status` shows the answering node's own load as its store has it now,
    // not as it last gossiped it (every 10 s: 0 this soon after the start).
    let status = cluster
        .admin(0)
        .await
        .status(pb::StatusRequest::default())
        .await
        .unwrap()
        .into_inner();
    let own = status
        .nodes
        .iter()
        .find(|n| n.client_address == cluster.address(0).to_string())
        .expect("node 0 lists itself");
    let stored = cluster.context(0).store.load_bytes();
    assert!(stored > 0, "30 writes stored nothing");
    assert_eq!(own.load_bytes, stored);
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_a_node_down_quorum_still_works_and_all_is_unavailable() {
    let mut cluster = TestCluster::start(22, 3, 3).await;
    cluster.create_keyspace(0, "ks", 3).await;
    cluster.stop(2).await;
    cluster.wait_until_settled().await;
    let mut client = cluster.client(0).await;
    client
        .put(put("ks", "k", "v", Quorum))
        .await
        .expect("QUORUM write with one replica down");
    let found = client
        .get(get("ks", "k", Quorum))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(found.value, b"v");
    let write = client.put(put("ks", "k", "v2", All)).await.unwrap_err();
    assert_eq!(write.code(), Code::Unavailable, "{write:?}");
    assert!(
        write.message().contains("ALL") && write.message().contains("3 replicas required, 2 alive"),
        "{}",
        write.message()
    );
    let read = client.get(get("ks", "k", All)).await.unwrap_err();
    assert_eq!(read.code(), Code::Unavailable);
    cluster.shutdown().await;
}

/// Reads `key` straight from node `node`'s storage, bypassing coordination.
async fn replica_value(
    cluster: &TestCluster,
    node: usize,
    keyspace_id: &str,
    key: &str,
) -> Option<Vec<u8>> {
    let response = cluster
        .internode(node)
        .await
        .read(pb::ReadRequest {
            keyspace_id: keyspace_id.into(),
            key: key.as_bytes().to_vec(),
            digest_only: false,
            ring_checksum: 0,
        })
        .await
        .unwrap()
        .into_inner();
    response.cell.and_then(|c| c.value)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quorum_read_repairs_a_stale_replica() {
    let mut cluster = TestCluster::start(23, 3, 3).await;
    let id = cluster.create_keyspace(0, "ks", 3).await;
    // Node 2 misses a write, and no hint will bring it (handoff is disabled
    // on the coordinator), so only read repair can.
    cluster
        .admin(0)
        .await
        .set_handoff(pb::SetHandoffRequest {
            enabled: Some(false),
            ..Default::default()
        })
        .await
        .unwrap();
    cluster.stop(2).await;
    cluster.wait_until_settled().await;
    cluster
        .client(0)
        .await
        .put(put("ks", "k", "fresh", Quorum))
        .await
        .unwrap();
    cluster.restart(2).await;
    cluster.wait_until_settled().await;
    assert_eq!(
        replica_value(&cluster, 2, &id, "k").await,
        None,
        "node 2 is stale"
    );
    // With node 1 down, a QUORUM read must use nodes 0 and 2, and repair 2.
    cluster.stop(1).await;
    cluster.wait_until_settled().await;
    let found = cluster
        .client(0)
        .await
        .get(get("ks", "k", Quorum))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(found.value, b"fresh");
    assert_eq!(
        replica_value(&cluster, 2, &id, "k").await,
        Some(b"fresh".to_vec()),
        "repaired"
    );
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tombstones_hide_older_values_and_newer_writes_win() {
    let cluster = TestCluster::start(24, 3, 3).await;
    cluster.create_keyspace(0, "ks", 3).await;
    let mut client = cluster.client(1).await;
    let at = |micros: i64, value: &str| pb::PutRequest {
        timestamp_micros: Some(micros),
        ..put("ks", "k", value, Quorum)
    };
    client.put(at(1_000, "first")).await.unwrap();
    client
        .delete(pb::DeleteRequest {
            keyspace: "ks".into(),
            key: b"k".to_vec(),
            consistency: Quorum as i32,
            timestamp_micros: Some(2_000),
        })
        .await
        .unwrap();
    assert!(!is_found(&mut client, "ks", "k", Quorum).await, "deleted");
    client
        .put(at(1_500, "older than the delete"))
        .await
        .unwrap();
    assert!(
        !is_found(&mut client, "ks", "k", Quorum).await,
        "an older write stays hidden"
    );
    client.put(at(3_000, "newest")).await.unwrap();
    let found = client
        .get(get("ks", "k", Quorum))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        (found.value, found.timestamp_micros),
        (b"newest".to_vec(), 3_000)
    );
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_value_with_a_ttl_expires() {
    let cluster = TestCluster::start(25, 3, 3).await;
    cluster.create_keyspace(0, "ks", 3).await;
    let mut client = cluster.client(0).await;
    client
        .put(pb::PutRequest {
            ttl_seconds: Some(1),
            ..put("ks", "short", "lived", Quorum)
        })
        .await
        .unwrap();
    client
        .put(put("ks", "long", "lived", Quorum))
        .await
        .unwrap();
    assert!(
        client
            .get(get("ks", "short", Quorum))
            .await
            .unwrap()
            .into_inner()
            .found
    );
    eventually(Duration::from_secs(10), "the TTL expires", || {
        let mut client = client.clone();
        async move { !is_found(&mut client, "ks", "short", Quorum).await }
    })
    .await;
    assert!(
        client
            .get(get("ks", "long", Quorum))
            .await
            .unwrap()
            .into_inner()
            .found
    );
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ttl_counts_from_the_write_so_a_backdated_write_is_visible() {
    let cluster = TestCluster::start(75, 3, 3).await;
    cluster.create_keyspace(0, "ks", 3).await;
    let an_hour_ago = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_micros() as i64
        - 3_600_000_000;
    cluster
        .client(0)
        .await
        .put(pb::PutRequest {
            timestamp_micros: Some(an_hour_ago),
            ttl_seconds: Some(60),
            ..put("ks", "k", "backdated", Quorum)
        })
        .await
        .unwrap();
    let found = cluster
        .client(1)
        .await
        .get(get("ks", "k", Quorum))
        .await
        .unwrap()
        .into_inner();
    assert!(
        found.found,
        "an acknowledged write with a TTL of 60 s is visible at once"
    );
    assert_eq!(
        (found.value, found.timestamp_micros),
        (b"backdated".to_vec(), an_hour_ago)
    );
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn data_and_keyspaces_survive_a_restart_of_every_node() {
    let mut cluster = TestCluster::start(26, 3, 3).await;
    cluster.create_keyspace(0, "ks", 3).await;
    cluster
        .schema(1)
        .await
        .create_keyspace(pb::CreateKeyspaceRequest {
            name: "short_hints".into(),
            replication: Some(pb::Replication {
                strategy: Some(pb::replication::Strategy::Simple(pb::SimpleStrategy {
                    replication_factor: 1,
                })),
            }),
            if_not_exists: false,
            gc_grace_seconds: Some(3600),
            speculative_retry: None,
        })
        .await
        .unwrap();
    for i in 0..20 {
        cluster
            .client(0)
            .await
            .put(put("ks", &format!("k{i}"), &format!("v{i}"), All))
            .await
            .unwrap();
    }
    for i in 0..3 {
        cluster.stop(i).await;
    }
    for i in 0..3 {
        cluster.restart(i).await;
    }
    cluster.wait_until_settled().await;
    for node in 0..3 {
        let keyspaces = cluster
            .schema(node)
            .await
            .list_keyspaces(pb::ListKeyspacesRequest {})
            .await
            .unwrap()
            .into_inner();
        let gc_grace: Vec<(String, Option<u32>)> = keyspaces
            .keyspaces
            .iter()
            .map(|k| (k.name.clone(), k.gc_grace_seconds))
            .collect();
        assert_eq!(
            gc_grace,
            [
                ("ks".to_string(), Some(864_000)),
                ("short_hints".to_string(), Some(3600))
            ],
            "node {node}: keyspaces with their gc_grace_seconds"
        );
        let mut client = cluster.client(node).await;
        for i in 0..20 {
            let found = client
                .get(get("ks", &format!("k{i}"), One))
                .await
                .unwrap()
                .into_inner();
            assert_eq!(
                found.value,
                format!("v{i}").into_bytes(),
                "node {node} k{i}"
            );
        }
    }
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_and_recreated_keyspace_is_empty() {
    let cluster = TestCluster::start(27, 3, 3).await;
    let first = cluster.create_keyspace(0, "ks", 3).await;
    cluster
        .client(0)
        .await
        .put(put("ks", "k", "old", All))
        .await
        .unwrap();
    cluster
        .schema(1)
        .await
        .drop_keyspace(pb::DropKeyspaceRequest { name: "ks".into() })
        .await
        .unwrap();
    for node in 0..3 {
        let error = cluster
            .client(node)
            .await
            .get(get("ks", "k", One))
            .await
            .unwrap_err();
        assert_eq!(error.code(), Code::NotFound, "node {node}");
    }
    let second = cluster.create_keyspace(2, "ks", 3).await;
    assert_ne!(first, second, "a re-created keyspace has a new id");
    for node in 0..3 {
        let found = cluster
            .client(node)
            .await
            .get(get("ks", "k", All))
            .await
            .unwrap()
            .into_inner();
        assert!(!found.found, "node {node} sees no old data");
    }
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn six_fresh_nodes_started_together_choose_distinct_balanced_tokens() {
    let cluster = TestCluster::start(32, 6, 3).await;
    cluster.create_nts_keyspace(0, "ks", &[("dc1", 3)]).await;
    let status = cluster
        .admin(5)
        .await
        .status(pb::StatusRequest {
            keyspace: "ks".into(),
        })
        .await
        .unwrap()
        .into_inner();
    let mut tokens: Vec<i64> = status.nodes.iter().flat_map(|n| n.tokens.clone()).collect();
    tokens.sort_unstable();
    tokens.dedup();
    assert_eq!(tokens.len(), 6 * 16, "every node has 16 tokens of its own");
    let owns: Vec<f64> = status.nodes.iter().map(|n| n.ownership).collect();
    let (max, min) = owns
        .iter()
        .fold((f64::MIN, f64::MAX), |(a, b), &o| (a.max(o), b.min(o)));
    println!(
        "effective ownership of 6 nodes in 3 racks at RF 3: {owns:?}, max/min {:.3}",
        max / min
    );
    assert!(max / min <= 1.25, "unbalanced: {owns:?}");
    cluster.shutdown().await;
}

/// Node 0 coordinates reads from 48 concurrent clients, so reads bound for
/// nodes 1 and 2 queue behind busy call slots and leave together in
/// `ReadMany` calls. Every read must get its own key's answer: at RF 1 and
/// `ONE` the remote answers are cells (a result handed to the wrong read
/// shows as another key's value), at RF 3 and `QUORUM` digests too. Every
/// key's value is distinct. Address block 199.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_coalesced_into_shared_calls_each_get_their_own_key_s_answer() {
    let cluster = TestCluster::start(199, 3, 3).await;
    let coalesced = concurrent_reads_each_get_their_own_key_s_answer(&cluster).await;
    assert!(coalesced > 0, "no replica read shared a call");
    cluster.shutdown().await;
}

/// A rolling upgrade's mixed cluster: two of the three nodes answer
/// `ReadMany` as a build from before it does (`UNIMPLEMENTED`). The reads
/// node 0 coalesces for them must be sent again alone, as `Read`s, and still
/// get their own key's answer: at RF 1 a failed remote read fails the
/// client's, and at RF 3 `QUORUM` needs one of the two. Node 0 offers each
/// peer `ReadMany` once, then remembers its refusal. Address block 195.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_coalesced_for_peers_without_read_many_are_sent_again_alone() {
    let cluster = TestCluster::start_configured(195, 3, 3, |i, config| {
        config.test_without_read_many = i > 0;
    })
    .await;
    let coalesced = concurrent_reads_each_get_their_own_key_s_answer(&cluster).await;
    assert!(
        coalesced > 0,
        "no replica read was queued for a shared call, so no ReadMany was refused"
    );
    // Each peer is offered ReadMany once: after its refusal, node 0 sends
    // its coalesced reads alone without asking again (for a minute).
    let mut offered = Vec::new();
    for peer in [1, 2] {
        offered.push(cluster.internode_calls(0, peer, "read_many").await);
    }
    assert!(
        offered.iter().all(|&calls| calls <= 1) && offered.iter().sum::<u64>() >= 1,
        "ReadMany calls to peers 1 and 2: {offered:?}"
    );
    cluster.shutdown().await;
}

/// Node 0's replica writes to each peer go on one long-lived apply stream,
/// not a call each: clients write at `ALL` through node 0 at once, so every
/// write reaches both peers, and every replica must hold every key's value.
/// Node 0 opens one stream per peer for all of them. A peer's restart ends
/// its stream (its graceful shutdown must not wait for it: the restart would
/// hang), and node 0's next writes to it open a new one. Address block 202.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replica_writes_share_one_stream_per_peer_which_a_restart_replaces() {
    let mut cluster = TestCluster::start(202, 3, 3).await;
    cluster.create_keyspace(0, "three", 3).await;
    writes_at_all_reach_every_replica(&cluster, "first").await;
    let opened = cluster.context(0).metrics.apply_streams_opened_total();
    assert_eq!(opened, 2, "node 0 opened {opened} streams to its 2 peers");

    cluster.stop(1).await;
    cluster.restart(1).await;
    eventually(
        Duration::from_secs(30),
        "node 0 writes to node 1 again",
        || {
            let cluster = &cluster;
            async move {
                let mut client = cluster.client(0).await;
                client
                    .put(put("three", "probe", "probe", All))
                    .await
                    .is_ok()
            }
        },
    )
    .await;
    writes_at_all_reach_every_replica(&cluster, "second").await;
    let reopened = cluster.context(0).metrics.apply_streams_opened_total();
    assert!(
        reopened > opened,
        "no new stream to the restarted peer ({reopened} opened in all)"
    );
    cluster.shutdown().await;
}

/// A rolling upgrade's mixed cluster: two of the three nodes answer
/// `ApplyStream` as a build from before it does (`UNIMPLEMENTED`). Node 0's
/// replica writes to them must go as unary `Apply` calls instead, each one
/// acknowledged at `ALL` and stored on every replica; node 0 offers each
/// peer a stream once, then remembers its refusal. Address block 203.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replica_writes_to_peers_without_apply_streams_go_as_unary_calls() {
    let cluster = TestCluster::start_configured(203, 3, 3, |i, config| {
        config.test_without_apply_stream = i > 0;
    })
    .await;
    cluster.create_keyspace(0, "three", 3).await;
    writes_at_all_reach_every_replica(&cluster, "unary").await;
    let offered = cluster.context(0).metrics.apply_streams_opened_total();
    assert_eq!(offered, 2, "streams offered to the 2 peers: {offered}");
    for peer in [1, 2] {
        let calls = cluster.internode_calls(0, peer, "apply").await;
        assert!(calls >= 1, "no apply call reached peer {peer}");
    }
    cluster.shutdown().await;
}

/// `CLIENTS` clients write `KEYS` keys each through node 0 at once, at `ALL`,
/// each value naming its key and `round`; every write must succeed, and each
/// of the three replicas must then hold every key's value of this round.
async fn writes_at_all_reach_every_replica(cluster: &TestCluster, round: &str) {
    const CLIENTS: usize = 8;
    const KEYS: usize = 40;
    let key_of = |c: usize, k: usize| format!("c{c}k{k}");
    let value_of = |key: &str| format!("{round}/{key}");
    let clients = (0..CLIENTS).map(|c| async move {
        let mut client = cluster.client(0).await;
        for k in 0..KEYS {
            let key = key_of(c, k);
            client
                .put(put("three", &key, &value_of(&key), All))
                .await
                .unwrap_or_else(|status| panic!("{round}: write of {key} failed: {status}"));
        }
    });
    futures::future::join_all(clients).await;
    let mut missing = Vec::new();
    for node in 0..3 {
        for c in 0..CLIENTS {
            for k in 0..KEYS {
                let key = key_of(c, k);
                let stored = cluster.local_value(node, "three", &key);
                if stored != Some(value_of(&key).into_bytes()) {
                    missing.push((node, key));
                }
            }
        }
    }
    assert!(
        missing.is_empty(),
        "{round}: {} of {} replica copies lack their value, e.g. {:?}",
        missing.len(),
        3 * CLIENTS * KEYS,
        &missing[..missing.len().min(5)]
    );
}

/// Writes `KEYS` keys (distinct values) to keyspaces "one" (RF 1) and
/// "three" (RF 3), then has `CLIENTS` clients read every key through node 0
/// at once, at `ONE` and `QUORUM`, and fails on any read that errs or gets
/// another key's value. Returns how many replica reads node 0 queued for a
/// shared call.
async fn concurrent_reads_each_get_their_own_key_s_answer(cluster: &TestCluster) -> u64 {
    cluster.create_keyspace(0, "one", 1).await;
    cluster.create_keyspace(0, "three", 3).await;
    const KEYS: usize = 150;
    const CLIENTS: usize = 48;
    let value_of = |keyspace: &str, k: usize| format!("{keyspace}/k{k}/value");
    let mut writer = cluster.client(0).await;
    for (keyspace, level) in [("one", All), ("three", All)] {
        for k in 0..KEYS {
            let request = put(keyspace, &format!("k{k}"), &value_of(keyspace, k), level);
            writer.put(request).await.unwrap();
        }
    }
    let before = cluster.context(0).metrics.coalesced_replica_reads_total();
    for (keyspace, level) in [("one", One), ("three", Quorum)] {
        let clients = (0..CLIENTS).map(|c| async move {
            let mut client = cluster.client(0).await;
            let mut wrong = Vec::new();
            // Each client reads every key, starting at its own offset.
            for i in 0..KEYS {
                let k = (i + c * 7) % KEYS;
                let got = client
                    .get(get(keyspace, &format!("k{k}"), level))
                    .await
                    .unwrap_or_else(|status| panic!("{keyspace}: read of k{k} failed: {status}"))
                    .into_inner();
                if got.value != value_of(keyspace, k).into_bytes() {
                    wrong.push((k, String::from_utf8_lossy(&got.value).into_owned()));
                }
            }
            wrong
        });
        let wrong: Vec<_> = futures::future::join_all(clients)
            .await
            .into_iter()
            .flatten()
            .collect();
        assert!(
            wrong.is_empty(),
            "{keyspace}: {} of {} reads got another answer than their key's, e.g. {:?}",
            wrong.len(),
            CLIENTS * KEYS,
            &wrong[..wrong.len().min(5)]
        );
    }
    let coalesced = cluster.context(0).metrics.coalesced_replica_reads_total() - before;
    eprintln!(
        "{coalesced} replica reads left in shared calls, of {} client reads",
        2 * CLIENTS * KEYS
    );
    coalesced
}
