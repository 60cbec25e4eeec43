//! Lightweight transactions end to end on in-process clusters: `PutIf`,
//! `DeleteIf` and `GetSerial` through the client API, with rivals racing
//! through every coordinator, a counter built from compare-and-sets, the
//! round trips an uncontended one costs, plain writes mixed in, TTLs,
//! refusals, and too few replicas.
//!
//! The fault runs (kill -9, pauses, partitions) are the simulation's and
//! the process fault suite's; here every node is up unless a test stops
//! one.

mod common;

use std::collections::BTreeSet;
use std::time::Duration;

use common::TestCluster;
use ringstore_proto::v1 as pb;
use ringstore_proto::v1::client_client::ClientClient;
use tonic::Code;
use tonic::transport::Channel;

const KS: &str = "lwt";

fn absent() -> Option<pb::Expected> {
    Some(pb::Expected {
        condition: Some(pb::expected::Condition::Absent(pb::ExpectAbsent {})),
    })
}

fn value_is(value: &[u8]) -> Option<pb::Expected> {
    Some(pb::Expected {
        condition: Some(pb::expected::Condition::Value(value.to_vec())),
    })
}

fn put_if(key: &str, expected: Option<pb::Expected>, value: &[u8]) -> pb::PutIfRequest {
    pb::PutIfRequest {
        keyspace: KS.into(),
        key: key.as_bytes().to_vec(),
        expected,
        value: value.to_vec(),
        ..Default::default()
    }
}

fn get_serial(key: &str) -> pb::GetSerialRequest {
    pb::GetSerialRequest {
        keyspace: KS.into(),
        key: key.as_bytes().to_vec(),
        ..Default::default()
    }
}

async fn read_serial(client: &mut ClientClient<Channel>, key: &str) -> Option<Vec<u8>> {
    let read = client
        .get_serial(get_serial(key))
        .await
        .unwrap()
        .into_inner();
    read.found.then_some(read.value)
}

/// Whether a failed status says the operation was certainly not applied.
fn not_applied(status: &tonic::Status) -> bool {
    status
        .metadata()
        .get("x-ringstore-cas")
        .is_some_and(|v| v == "not-applied")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn of_100_rivals_claiming_one_key_through_every_node_exactly_one_wins() {
    let cluster = TestCluster::start(234, 3, 1).await;
    cluster.create_keyspace(0, KS, 3).await;
    let mut clients = Vec::new();
    for i in 0..3 {
        clients.push(cluster.client(i).await);
    }
    let mut rivals = tokio::task::JoinSet::new();
    for id in 0..100usize {
        let mut client = clients[id % 3].clone();
        rivals.spawn(async move {
            let own = format!("owner-{id}").into_bytes();
            let answer = client.put_if(put_if("lease", absent(), &own)).await;
            (own, answer)
        });
    }
    let mut winners = Vec::new();
    let mut seen_by_losers = BTreeSet::new();
    let mut failures = Vec::new();
    while let Some(joined) = rivals.join_next().await {
        let (own, answer) = joined.unwrap();
        match answer {
            Ok(answer) => {
                let answer = answer.into_inner();
                if answer.applied {
                    winners.push(own);
                } else {
                    assert!(answer.found, "a loser is shown the winner's value");
                    seen_by_losers.insert(answer.value);
                }
            }
            Err(status) => failures.push(status),
        }
    }
    assert!(
        failures.is_empty(),
        "every rival gets an answer with all nodes up: {failures:?}"
    );
    assert_eq!(winners.len(), 1, "exactly one applied");
    let winner = winners.pop().unwrap();
    assert_eq!(
        seen_by_losers,
        BTreeSet::from([winner.clone()]),
        "every loser saw the one winner"
    );
    for client in &mut clients {
        assert_eq!(read_serial(client, "lease").await, Some(winner.clone()));
    }
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_counter_made_of_compare_and_sets_loses_no_increment() {
    let cluster = TestCluster::start(235, 3, 1).await;
    cluster.create_keyspace(0, KS, 3).await;
    const CLIENTS: usize = 8;
    const INCREMENTS: u64 = 15;
    let mut workers = tokio::task::JoinSet::new();
    for c in 0..CLIENTS {
        let mut client = cluster.client(c % 3).await;
        workers.spawn(async move {
            let mut done = 0;
            let mut attempts = 0;
            while done < INCREMENTS {
                attempts += 1;
                assert!(attempts < 2_000, "client {c} made no progress");
                let current = read_serial(&mut client, "counter").await;
                let n: u64 = current
                    .as_deref()
                    .map_or(0, |v| std::str::from_utf8(v).unwrap().parse().unwrap());
                let expected = match &current {
                    Some(value) => value_is(value),
                    None => absent(),
                };
                let next = (n + 1).to_string().into_bytes();
                match client.put_if(put_if("counter", expected, &next)).await {
                    Ok(answer) if answer.get_ref().applied => done += 1,
                    Ok(_) => {}
                    Err(status) => panic!("client {c}: {status:?}"),
                }
            }
        });
    }
    while let Some(worker) = workers.join_next().await {
        worker.unwrap();
    }
    let mut client = cluster.client(1).await;
    let total = read_serial(&mut client, "counter").await.unwrap();
    assert_eq!(
        String::from_utf8(total).unwrap(),
        (CLIENTS as u64 * INCREMENTS).to_string()
    );
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_uncontended_compare_and_set_takes_two_round_trips_and_a_serial_read_one() {
    let cluster = TestCluster::start(236, 3, 1).await;
    cluster.create_keyspace(0, KS, 3).await;
    let mut client = cluster.client(0).await;
    let calls = |rpc: &'static str| {
        let cluster = &cluster;
        async move {
            let mut total = 0;
            for peer in 1..3 {
                total += cluster.internode_calls(0, peer, rpc).await;
            }
            total
        }
    };
    let counts = || async { (calls("paxos_prepare").await, calls("paxos_accept").await) };
    let before = counts().await;
    let answer = client.put_if(put_if("k", absent(), b"v1")).await.unwrap();
    assert!(answer.into_inner().applied);
    // The answer comes with a quorum; the third replica's calls are
    // counted when they complete.
    let expected = (before.0 + 2, before.1 + 2);
    common::eventually(
        Duration::from_secs(5),
        "both peers' calls are counted",
        || async { counts().await >= expected },
    )
    .await;
    assert_eq!(
        counts().await,
        expected,
        "one prepare and one accept to each of the two other replicas"
    );
    // Wait for the background commit, so the read finds nothing in progress.
    common::eventually(
        Duration::from_secs(5),
        "the commit reached both peers",
        || async { calls("paxos_commit").await >= 2 },
    )
    .await;
    let before = counts().await;
    assert_eq!(read_serial(&mut client, "k").await, Some(b"v1".to_vec()));
    let expected = (before.0 + 2, before.1);
    common::eventually(
        Duration::from_secs(5),
        "the read's calls are counted",
        || async { counts().await >= expected },
    )
    .await;
    assert_eq!(
        counts().await,
        expected,
        "a serial read is one round: prepares only"
    );
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_writes_deletes_and_ttls_mix_with_compare_and_sets() {
    let cluster = TestCluster::start(237, 3, 1).await;
    cluster.create_keyspace(0, KS, 3).await;
    let mut client = cluster.client(0).await;
    let mut other = cluster.client(2).await;

    // A plain QUORUM write after a compare-and-set is never lost to it.
    assert!(
        client
            .put_if(put_if("mixed", absent(), b"cas-1"))
            .await
            .unwrap()
            .into_inner()
            .applied
    );
    other
        .put(common::put(
            KS,
            "mixed",
            "plain-2",
            pb::ConsistencyLevel::Quorum,
        ))
        .await
        .unwrap();
    assert_eq!(
        read_serial(&mut client, "mixed").await,
        Some(b"plain-2".to_vec())
    );
    let stale = client
        .put_if(put_if("mixed", value_is(b"cas-1"), b"cas-3"))
        .await
        .unwrap()
        .into_inner();
    assert!(!stale.applied);
    assert_eq!(stale.value, b"plain-2");
    let fresh = client
        .put_if(put_if("mixed", value_is(b"plain-2"), b"cas-3"))
        .await
        .unwrap()
        .into_inner();
    assert!(fresh.applied);
    let plain = other
        .get(common::get(KS, "mixed", pb::ConsistencyLevel::Quorum))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        plain.value, b"cas-3",
        "a plain read sees the compare-and-set"
    );
    assert_eq!(plain.timestamp_micros, fresh.timestamp_micros);

    // A conditional delete, then the key is free to claim again.
    let wrong = client
        .delete_if(pb::DeleteIfRequest {
            keyspace: KS.into(),
            key: b"mixed".to_vec(),
            expected: value_is(b"nope"),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert!(!wrong.applied && wrong.found);
    let deleted = client
        .delete_if(pb::DeleteIfRequest {
            keyspace: KS.into(),
            key: b"mixed".to_vec(),
            expected: value_is(b"cas-3"),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert!(deleted.applied);
    assert_eq!(read_serial(&mut other, "mixed").await, None);
    assert!(
        client
            .put_if(put_if("mixed", absent(), b"again"))
            .await
            .unwrap()
            .into_inner()
            .applied
    );

    // A TTL on the new value: it expires, and the key is absent again.
    let mut lease = put_if("ttl", absent(), b"held");
    lease.ttl_seconds = Some(1);
    assert!(client.put_if(lease).await.unwrap().into_inner().applied);
    assert_eq!(
        read_serial(&mut client, "ttl").await,
        Some(b"held".to_vec())
    );
    common::eventually(Duration::from_secs(10), "the lease expired", || {
        let mut client = client.clone();
        async move { read_serial(&mut client, "ttl").await.is_none() }
    })
    .await;
    assert!(
        client
            .put_if(put_if("ttl", absent(), b"next"))
            .await
            .unwrap()
            .into_inner()
            .applied
    );
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_are_refused_and_too_few_replicas_is_certainly_not_applied() {
    let mut cluster = TestCluster::start(238, 3, 1).await;
    cluster.create_keyspace(0, KS, 3).await;
    let mut client = cluster.client(0).await;

    let refused = client.put_if(put_if("k", None, b"v")).await.unwrap_err();
    assert_eq!(refused.code(), Code::InvalidArgument);
    assert!(
        refused.message().contains("expected"),
        "{}",
        refused.message()
    );
    let mut unknown = put_if("k", absent(), b"v");
    unknown.keyspace = "nope".into();
    assert_eq!(
        client.put_if(unknown).await.unwrap_err().code(),
        Code::NotFound
    );
    let mut level = put_if("k", absent(), b"v");
    level.serial_consistency = 42;
    assert_eq!(
        client.put_if(level).await.unwrap_err().code(),
        Code::InvalidArgument
    );
    let empty = client.put_if(put_if("", absent(), b"v")).await.unwrap_err();
    assert_eq!(empty.code(), Code::InvalidArgument);
    let mut local = put_if("k", absent(), b"local");
    local.serial_consistency = pb::SerialConsistency::LocalSerial as i32;
    assert!(client.put_if(local).await.unwrap().into_inner().applied);

    cluster.stop(1).await;
    cluster.stop(2).await;
    common::eventually(Duration::from_secs(30), "node 0 sees two down", || {
        let mut client = client.clone();
        async move {
            match client.put_if(put_if("k2", absent(), b"v")).await {
                Err(status) => status.code() == Code::Unavailable,
                Ok(_) => false,
            }
        }
    })
    .await;
    let down = client
        .put_if(put_if("k2", absent(), b"v"))
        .await
        .unwrap_err();
    assert_eq!(down.code(), Code::Unavailable);
    assert!(not_applied(&down), "{down:?}");
    assert!(down.message().contains("not applied"), "{}", down.message());
    cluster.shutdown().await;
}
