//! Hinted handoff on a three-node cluster at RF 3: a replica that was down
//! gets every write it missed, without repair; hints survive a coordinator
//! restart; ANY is satisfied by a hint.

mod common;

use std::time::Duration;

use common::{TestCluster, eventually, get, put};
use ringstore_proto::v1 as pb;

use pb::ConsistencyLevel::{Any, One, Quorum};

/// Node `i`'s hints report (pending hints per target, counters).
async fn hints_report(cluster: &TestCluster, i: usize) -> pb::HintsResponse {
    cluster
        .admin(i)
        .await
        .hints(pb::HintsRequest {})
        .await
        .unwrap()
        .into_inner()
}

/// Pending hints on node `i`.
async fn pending(cluster: &TestCluster, i: usize) -> u64 {
    let hints = hints_report(cluster, i).await;
    hints.targets.iter().map(|t| t.hints).sum()
}

/// Waits until nodes `on` hold `expected` pending hints between them.
/// A coordinator stores the hint for a replica known down in a task of its
/// own, so the write's acknowledgement can come before its hint is on disk.
async fn await_pending(cluster: &TestCluster, on: &[usize], expected: u64) {
    let total = || async {
        let mut sum = 0;
        for &i in on {
            sum += pending(cluster, i).await;
        }
        sum
    };
    eventually(
        Duration::from_secs(10),
        &format!("nodes {on:?} hold {expected} hints"),
        || async { total().await == expected },
    )
    .await;
}

/// Writes `count` keys at QUORUM, alternating coordinators among `via`, 64 at a time.
async fn write_keys(cluster: &TestCluster, via: &[usize], count: usize) {
    let mut clients = Vec::new();
    for &i in via {
        clients.push(cluster.client(i).await);
    }
    let mut writes = futures::stream::FuturesUnordered::new();
    for k in 0..count {
        let mut client = clients[k % clients.len()].clone();
        writes.push(async move {
            let request = pb::PutRequest {
                timestamp_micros: Some(1_000_000 + k as i64),
                ..put("ks", &format!("key{k}"), &format!("value{k}"), Quorum)
            };
            client
                .put(request)
                .await
                .expect("QUORUM write with one replica down");
        });
        if writes.len() >= 64 {
            futures::StreamExt::next(&mut writes).await;
        }
    }
    while futures::StreamExt::next(&mut writes).await.is_some() {}
}

/// Reads every key at ONE through node `via` (the only node left running).
async fn assert_all_keys_on(cluster: &TestCluster, via: usize, count: usize) {
    let mut client = cluster.client(via).await;
    for k in 0..count {
        let found = client
            .get(get("ks", &format!("key{k}"), One))
            .await
            .unwrap()
            .into_inner();
        assert!(found.found, "key{k} is missing on node {via}");
        assert_eq!(found.value, format!("value{k}").into_bytes(), "key{k}");
        assert_eq!(
            found.timestamp_micros,
            1_000_000 + k as i64,
            "key{k}'s timestamp"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_that_was_down_gets_every_missed_write_from_hints() {
    const KEYS: usize = 10_000;
    let mut cluster = TestCluster::start(33, 3, 3).await;
    cluster.create_keyspace(0, "ks", 3).await;
    cluster.stop(2).await;
    cluster.wait_until_settled().await;
    write_keys(&cluster, &[0, 1], KEYS).await;
    // One hint per write for the down replica.
    await_pending(&cluster, &[0, 1], KEYS as u64).await;

    cluster.restart(2).await;
    cluster.wait_until_settled().await;
    let replayed_in = tokio::time::Instant::now();
    eventually(
        Duration::from_secs(30),
        "every hint is delivered",
        || async { pending(&cluster, 0).await + pending(&cluster, 1).await == 0 },
    )
    .await;
    println!(
        "{KEYS} hints replayed {:?} after the replica was up",
        replayed_in.elapsed()
    );
    for i in 0..2 {
        assert!(
            cluster.internode_calls(i, 2, "hint_replay").await >= 1,
            "node {i}'s replay shows in its internode latency"
        );
    }

    // Only the once-down replica is left to answer.
    cluster.stop(0).await;
    cluster.stop(1).await;
    assert_all_keys_on(&cluster, 2, KEYS).await;
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hints_survive_a_restart_of_their_coordinator() {
    const KEYS: usize = 500;
    let mut cluster = TestCluster::start(34, 3, 3).await;
    cluster.create_keyspace(0, "ks", 3).await;
    cluster.stop(2).await;
    cluster.wait_until_settled().await;
    write_keys(&cluster, &[0], KEYS).await;
    await_pending(&cluster, &[0], KEYS as u64).await;
    cluster.stop(0).await;
    cluster.restart(2).await;
    cluster.restart(0).await;
    cluster.wait_until_settled().await;
    eventually(
        Duration::from_secs(30),
        "the restarted coordinator delivers its hints",
        || async { pending(&cluster, 0).await == 0 },
    )
    .await;
    cluster.stop(0).await;
    cluster.stop(1).await;
    assert_all_keys_on(&cluster, 2, KEYS).await;
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn any_is_satisfied_by_a_hint_when_the_only_replica_is_down() {
    let mut cluster = TestCluster::start(35, 3, 3).await;
    cluster.create_keyspace(0, "one", 1).await;
    // Find a key whose only replica is node 2.
    let node2 = cluster.address(2).to_string();
    let mut admin = cluster.admin(0).await;
    let mut key = String::new();
    for k in 0.. {
        key = format!("candidate{k}");
        let endpoints = admin
            .get_endpoints(pb::GetEndpointsRequest {
                keyspace: "one".into(),
                key: key.clone().into_bytes(),
            })
            .await
            .unwrap()
            .into_inner()
            .endpoints;
        if endpoints == [node2.clone()] {
            break;
        }
    }
    cluster.stop(2).await;
    cluster.wait_until_settled().await;
    let mut client = cluster.client(0).await;
    let one = client.put(put("one", &key, "v", One)).await.unwrap_err();
    assert_eq!(one.code(), tonic::Code::Unavailable);
    client
        .put(put("one", &key, "hinted", Any))
        .await
        .expect("ANY succeeds with a hint");
    cluster.restart(2).await;
    cluster.wait_until_settled().await;
    eventually(
        Duration::from_secs(30),
        "the hinted write reaches the replica",
        || {
            let mut client = client.clone();
            let key = key.clone();
            async move {
                client
                    .get(get("one", &key, One))
                    .await
                    .is_ok_and(|r| r.into_inner().value == b"hinted")
            }
        },
    )
    .await;
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_down_longer_than_the_hint_window_gets_no_hints() {
    let mut cluster = TestCluster::start_configured(36, 3, 3, |_, config| {
        config.hints.max_hint_window_seconds = 1;
    })
    .await;
    cluster.create_keyspace(0, "ks", 3).await;
    cluster.stop(2).await;
    cluster.wait_until_settled().await;
    let mut client = cluster.client(0).await;
    // Within the window the write is hinted; once the window has passed, the
    // coordinator declines (and counts) each further hint.
    let mut k = 0;
    eventually(
        Duration::from_secs(20),
        "a write past the window is not hinted",
        || {
            k += 1;
            let mut client = client.clone();
            let cluster = &cluster;
            let key = format!("late{k}");
            async move {
                client.put(put("ks", &key, "v", Quorum)).await.unwrap();
                let hints = cluster
                    .admin(0)
                    .await
                    .hints(pb::HintsRequest {})
                    .await
                    .unwrap()
                    .into_inner();
                hints.counters.unwrap().dropped_outside_window > 0
            }
        },
    )
    .await;
    let declined = || async {
        let report = hints_report(&cluster, 0).await;
        report.counters.unwrap().dropped_outside_window
    };
    let before = pending(&cluster, 0).await;
    let declined_before = declined().await;
    client.put(put("ks", "after", "v", Quorum)).await.unwrap();
    // The hint is declined in a task of its own: wait until it is counted.
    eventually(
        Duration::from_secs(10),
        "the write past the window is declined a hint",
        || async { declined().await > declined_before },
    )
    .await;
    assert_eq!(
        pending(&cluster, 0).await,
        before,
        "no new hint past the window"
    );
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operators_pause_resume_disable_and_truncate_handoff_from_the_cli() {
    let mut cluster = TestCluster::start(37, 3, 3).await;
    cluster.create_keyspace(0, "ks", 3).await;
    let host = cluster.address(0).to_string();
    let cli = move |args: &[&str]| {
        let output = std::process::Command::new(env!("CARGO_BIN_EXE_ringstore"))
            .arg("--host")
            .arg(&host)
            .args(args)
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8(output.stdout).unwrap()
    };
    let run = |args: &'static [&'static str]| {
        let cli = cli.clone();
        tokio::task::spawn_blocking(move || cli(args))
    };
    run(&["pausehandoff"]).await.unwrap();
    cluster.stop(2).await;
    cluster.wait_until_settled().await;
    write_keys(&cluster, &[0], 20).await;
    await_pending(&cluster, &[0], 20).await;
    let shown = run(&["hints"]).await.unwrap();
    assert!(
        shown.contains("delivery paused") && shown.contains("20"),
        "{shown}"
    );
    cluster.restart(2).await;
    cluster.wait_until_settled().await;
    assert_eq!(pending(&cluster, 0).await, 20, "paused: nothing delivered");
    run(&["sethintedhandoffthrottlekb", "2048"]).await.unwrap();
    assert!(
        run(&["hints"])
            .await
            .unwrap()
            .contains("throttle 2048 KiB/s")
    );
    let truncated = run(&["truncatehints"]).await.unwrap();
    assert_eq!(truncated.trim(), "removed 20 hints");
    run(&["resumehandoff"]).await.unwrap();
    run(&["disablehandoff"]).await.unwrap();
    assert!(
        run(&["hints"])
            .await
            .unwrap()
            .contains("Hinted handoff: disabled")
    );
    run(&["enablehandoff"]).await.unwrap();
    let info = run(&["info"]).await.unwrap();
    assert!(info.contains("Hints pending          : 0"), "{info}");
    assert!(
        info.contains("stored 20,") && info.contains("truncated 20"),
        "{info}"
    );
    let metrics = run(&["metrics"]).await.unwrap();
    for sample in [
        "ringstore_hints_stored_total 20",
        "ringstore_hints_dropped_total{reason=\"truncated\"} 20",
        "ringstore_hints_replayed_total 0",
        "# TYPE ringstore_gossip_packets_total counter",
    ] {
        assert!(
            metrics.lines().any(|l| l == sample),
            "{sample:?} missing from:\n{metrics}"
        );
    }
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_decommissioned_node_hands_its_hints_to_another_node() {
    let mut cluster = TestCluster::start(47, 4, 1).await;
    cluster.create_keyspace(0, "ks", 2).await;
    let target = cluster.context(3).host_id;
    cluster.stop(3).await;
    eventually(Duration::from_secs(30), "node 3 is seen down", || async {
        !cluster.context(2).view().is_up(target)
    })
    .await;
    // Node 2 coordinates writes while node 3 is down, and holds on to the hints.
    cluster
        .admin(2)
        .await
        .set_handoff(pb::SetHandoffRequest {
            paused: Some(true),
            ..Default::default()
        })
        .await
        .unwrap();
    let mut client = cluster.client(2).await;
    for k in 0..200 {
        client
            .put(put("ks", &format!("key{k}"), &format!("value{k}"), One))
            .await
            .unwrap();
    }
    // Hints are stored by tasks of their own, after the write is answered:
    // wait for one per write that node 3 replicates.
    let definition = cluster.context(2).keyspace("ks").unwrap();
    let (_, map) = cluster.context(2).placement(&definition);
    let held = (0..200)
        .filter(|k| {
            let key = format!("key{k}");
            let token = ringstore_placement::Murmur3Partitioner::token(key.as_bytes()).unwrap();
            map.replicas(token).contains(target)
        })
        .count() as u64;
    assert!(held > 0, "node 3 replicates some keys");
    eventually(
        Duration::from_secs(10),
        "node 2 holds every hint for node 3",
        || async { cluster.hints_for(2, target) == held },
    )
    .await;
    cluster.restart(3).await;
    cluster.wait_until_settled().await;
    assert_eq!(
        cluster.hints_for(2, target),
        held,
        "paused: nothing delivered yet"
    );

    let done = cluster
        .topology(2)
        .await
        .decommission(pb::DecommissionRequest {})
        .await
        .expect("decommission succeeds")
        .into_inner();
    assert_eq!(done.hints_handed_off, held);
    let node = cluster.forget(2).unwrap();
    node.shutdown().await.unwrap();
    // Another node now delivers them: node 3 gets every write it missed.
    eventually(
        Duration::from_secs(30),
        "the handed-off hints reach node 3",
        || async { (0..cluster.nodes.len()).all(|i| cluster.hints_for(i, target) == 0) },
    )
    .await;
    let index = (0..cluster.nodes.len())
        .find(|&i| cluster.context(i).host_id == target)
        .unwrap();
    let context = cluster.context(index).clone();
    let keyspace = context.keyspace("ks").unwrap();
    let map = context.placement(&keyspace).1;
    let mut checked = 0;
    for k in 0..200 {
        let key = format!("key{k}");
        let token = ringstore_placement::Murmur3Partitioner::token(key.as_bytes()).unwrap();
        // Node 3's ranges as they were when the writes were made: it still
        // replicates what it replicated then, or gained it from node 2.
        if map.replicas(token).contains(target) {
            let cell = context.store.read(keyspace.id, key.as_bytes()).unwrap();
            assert_eq!(
                cell.and_then(|c| c.value),
                Some(format!("value{k}").into_bytes()),
                "{key} on node 3"
            );
            checked += 1;
        }
    }
    assert!(checked > 0);
    cluster.shutdown().await;
}

/// Node `i`'s hint counters.
async fn counters(cluster: &TestCluster, i: usize) -> pb::HintCounters {
    hints_report(cluster, i).await.counters.unwrap_or_default()
}

/// Pauses or resumes hint delivery on node `i`.
async fn set_paused(cluster: &TestCluster, i: usize, paused: bool) {
    cluster
        .admin(i)
        .await
        .set_handoff(pb::SetHandoffRequest {
            paused: Some(paused),
            ..Default::default()
        })
        .await
        .unwrap();
}

/// Writes `count` keys of `keyspace` through node `via` at QUORUM.
async fn write_to(cluster: &TestCluster, via: usize, keyspace: &str, count: usize) {
    let mut client = cluster.client(via).await;
    for k in 0..count {
        client
            .put(put(
                keyspace,
                &format!("key{k}"),
                &format!("value{k}"),
                Quorum,
            ))
            .await
            .expect("QUORUM write with one replica down");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hints_of_a_dropped_keyspace_are_dropped_and_counted_and_do_not_block_the_others() {
    let mut cluster = TestCluster::start(138, 3, 3).await;
    cluster.create_keyspace(0, "x", 3).await;
    cluster.stop(2).await;
    cluster.wait_until_settled().await;
    write_to(&cluster, 0, "x", 20).await;
    cluster
        .schema(0)
        .await
        .drop_keyspace(pb::DropKeyspaceRequest { name: "x".into() })
        .await
        .unwrap();
    cluster.create_keyspace(0, "y", 3).await;
    write_to(&cluster, 0, "y", 20).await;
    // x's hints, then y's.
    await_pending(&cluster, &[0], 40).await;

    // Replay starts only once the returning replica knows that x is dropped
    // (so it would refuse x's hints too).
    set_paused(&cluster, 0, true).await;
    cluster.restart(2).await;
    cluster.wait_until_settled().await;
    eventually(
        Duration::from_secs(30),
        "the returning replica learns that x was dropped",
        || async {
            let schema = cluster.context(2).schema.current();
            schema
                .entries()
                .any(|e| e.dropped && e.keyspace.name == "x")
        },
    )
    .await;
    set_paused(&cluster, 0, false).await;
    eventually(
        Duration::from_secs(15),
        "y's hints are delivered and x's dropped",
        || async { pending(&cluster, 0).await == 0 },
    )
    .await;
    let counters = counters(&cluster, 0).await;
    assert_eq!(counters.dropped_keyspace, 20, "{counters:?}");
    assert_eq!(counters.replayed, 20, "{counters:?}");
    for k in 0..20 {
        assert_eq!(
            cluster.local_value(2, "y", &format!("key{k}")),
            Some(format!("value{k}").into_bytes()),
            "y's key{k} on the replica that was down"
        );
    }
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_refuses_only_the_mutations_it_can_never_apply_and_applies_the_rest() {
    let cluster = TestCluster::start(139, 1, 1).await;
    let dropped = cluster.create_keyspace(0, "gone", 1).await;
    cluster
        .schema(0)
        .await
        .drop_keyspace(pb::DropKeyspaceRequest {
            name: "gone".into(),
        })
        .await
        .unwrap();
    let live = cluster.create_keyspace(0, "live", 1).await;
    let cell = || pb::Cell {
        timestamp_micros: 1,
        expires_at_micros: None,
        value: Some(b"v".to_vec()),
    };
    let mutation = |keyspace: &str, key: &str| pb::ReplicaMutation {
        keyspace_id: keyspace.into(),
        key: key.as_bytes().to_vec(),
        cell: Some(cell()),
        deadline_micros: None,
    };
    let request = pb::ApplyRequest {
        mutations: vec![
            mutation(&dropped, "a"),
            mutation(&live, "b"),
            mutation(&live, ""),
            pb::ReplicaMutation {
                cell: None,
                ..mutation(&live, "c")
            },
            mutation("not-a-uuid", "d"),
            mutation(&live, "e"),
        ],
        ring_checksum: 0,
    };
    let response = cluster
        .internode(0)
        .await
        .apply(request)
        .await
        .expect("permanent per-mutation problems do not fail the batch")
        .into_inner();
    let refused: Vec<(u32, pb::RefusalReason)> = response
        .refused
        .iter()
        .map(|r| (r.index, r.reason()))
        .collect();
    assert_eq!(
        refused,
        [
            (0, pb::RefusalReason::KeyspaceDropped),
            (2, pb::RefusalReason::Invalid),
            (3, pb::RefusalReason::Invalid),
            (4, pb::RefusalReason::Invalid),
        ]
    );
    assert!(response.refused.iter().all(|r| !r.message.is_empty()));
    for key in ["b", "e"] {
        assert_eq!(
            cluster.local_value(0, "live", key),
            Some(b"v".to_vec()),
            "{key}"
        );
    }
    cluster.shutdown().await;
}
