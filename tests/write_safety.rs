//! Ways a write or delete could be acknowledged and then silently not kept:
//! a client timestamp poisoning a coordinator's clock, two nodes creating
//! one keyspace at once, hints lost to a cancelled request, unbounded
//! batches, replica writes coalesced into shared internode calls.
//! In-process clusters on address blocks 58 and 70–74.

mod common;

use std::time::Duration;

use futures::future::join_all;

use common::{TestCluster, eventually, get, put};
use ringstore_proto::v1 as pb;
use ringstore_storage::Timestamp;
use tonic::Code;

use pb::ConsistencyLevel::{All, One, Quorum};

fn put_at(key: &str, value: &str, timestamp: i64) -> pb::PutRequest {
    pb::PutRequest {
        timestamp_micros: Some(timestamp),
        ..put("ks", key, value, One)
    }
}

fn delete(key: &str, level: pb::ConsistencyLevel) -> pb::DeleteRequest {
    pb::DeleteRequest {
        keyspace: "ks".into(),
        key: key.as_bytes().to_vec(),
        consistency: level as i32,
        timestamp_micros: None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_timestamp_never_moves_the_coordinators_clock() {
    let cluster = TestCluster::start(70, 3, 3).await;
    cluster.create_keyspace(0, "ks", 3).await;
    let mut node0 = cluster.client(0).await;
    let mut node1 = cluster.client(1).await;

    // A client timestamp a minute ahead is within the allowed skew: accepted.
    let a_minute_ahead = Timestamp::now().0 + 60_000_000;
    node0
        .put(put_at("a", "x", a_minute_ahead))
        .await
        .expect("a timestamp within max_client_timestamp_skew_seconds");
    // It must not drag node 0's own clock along: a server-stamped write
    // through node 0 followed by a delete through node 1 leaves it deleted.
    node0.put(put("ks", "b", "v1", All)).await.unwrap();
    node1.delete(delete("b", All)).await.unwrap();
    let read = node0.get(get("ks", "b", All)).await.unwrap().into_inner();
    assert!(
        !read.found,
        "the delete through node 1 lost to an earlier write (stamped {}): node 0's clock was poisoned",
        read.timestamp_micros
    );

    // Further ahead than the bound, and i64::MAX, are refused, naming it.
    for ahead in [Timestamp::now().0 + 365 * 24 * 3_600_000_000, i64::MAX] {
        let refused = node0.put(put_at("c", "x", ahead)).await.unwrap_err();
        assert_eq!(refused.code(), Code::InvalidArgument, "{refused:?}");
        assert!(
            refused
                .message()
                .contains("max_client_timestamp_skew_seconds"),
            "{}",
            refused.message()
        );
    }
    // And the next server-stamped write is an ordinary one.
    let stamped = node0
        .put(put("ks", "d", "v", Quorum))
        .await
        .unwrap()
        .into_inner()
        .timestamp_micros;
    assert!(stamped <= Timestamp::now().0, "{stamped} is in the future");
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_node_stamps_above_its_last_timestamp() {
    let mut cluster = TestCluster::start(71, 1, 1).await;
    cluster.create_keyspace(0, "ks", 1).await;
    let mut last = 0;
    for i in 0..20 {
        last = cluster
            .client(0)
            .await
            .put(put("ks", &format!("k{i}"), "v", One))
            .await
            .unwrap()
            .into_inner()
            .timestamp_micros;
    }
    cluster.stop(0).await;
    cluster.restart(0).await;
    cluster.wait_until_settled().await;
    let first = cluster
        .client(0)
        .await
        .put(put("ks", "after", "v", One))
        .await
        .unwrap()
        .into_inner()
        .timestamp_micros;
    assert!(first > last, "{first} after the restart, {last} before");
    assert_eq!(
        cluster.context(0).clock.high_water().0,
        first,
        "the clock resumed from its saved mark"
    );
    cluster.shutdown().await;
}

/// Creates keyspace `name` (RF 3) through node `via`; its id, or `None` when
/// the node already knew the keyspace.
async fn try_create(cluster: &TestCluster, via: usize, name: &str) -> Option<String> {
    let created = cluster
        .schema(via)
        .await
        .create_keyspace(pb::CreateKeyspaceRequest {
            name: name.into(),
            replication: Some(pb::Replication {
                strategy: Some(pb::replication::Strategy::Simple(pb::SimpleStrategy {
                    replication_factor: 3,
                })),
            }),
            if_not_exists: false,
            gc_grace_seconds: None,
            speculative_retry: None,
        })
        .await;
    match created {
        Ok(response) => Some(response.into_inner().keyspace.unwrap().id),
        Err(status) if status.code() == Code::AlreadyExists => None,
        Err(status) => panic!("create {name} through node {via}: {status:?}"),
    }
}

/// Creates keyspace `name` through node `via` and at once writes 50 keys of
/// its own through the same node, at ONE: the id it created and the writes
/// it got acknowledged, or `None` when the node already knew the keyspace.
async fn create_and_write(
    cluster: &TestCluster,
    via: usize,
    name: &str,
) -> Option<(String, Vec<(String, String)>)> {
    let id = try_create(cluster, via, name).await?;
    let mut client = cluster.client(via).await;
    let mut acknowledged = Vec::new();
    for k in 0..50 {
        let key = format!("n{via}-k{k}");
        let value = format!("{key}-value");
        if client.put(put(name, &key, &value, One)).await.is_ok() {
            acknowledged.push((key, value));
        }
    }
    Some((id, acknowledged))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_nodes_creating_one_keyspace_at_once_keep_every_write() {
    let cluster = TestCluster::start(72, 3, 3).await;
    // Both creates must succeed for the race to have happened; retry with
    // another name when one node saw the other's create first. Each creator
    // writes as soon as its create returns, while the other's may still be
    // spreading.
    let mut raced = None;
    for attempt in 0..20 {
        let name = format!("ks{attempt}");
        let (first, second) = tokio::join!(
            create_and_write(&cluster, 0, &name),
            create_and_write(&cluster, 1, &name)
        );
        if let (Some((first_id, first)), Some((second_id, second))) = (first, second) {
            assert_eq!(first_id, second_id, "both creates of {name} got one id");
            raced = Some((name, [first, second].concat()));
            break;
        }
    }
    let (name, acknowledged) = raced.expect("two creates raced in 20 attempts");
    assert_eq!(acknowledged.len(), 100, "every write was acknowledged");
    eventually(Duration::from_secs(20), "schemas agree", || async {
        let versions: Vec<_> = (0..3)
            .map(|i| cluster.context(i).schema.current().version())
            .collect();
        versions.windows(2).all(|w| w[0] == w[1])
    })
    .await;
    let mut lost = Vec::new();
    for (key, value) in &acknowledged {
        let read = cluster
            .client(2)
            .await
            .get(get(&name, key, All))
            .await
            .unwrap()
            .into_inner();
        if !read.found || read.value != value.as_bytes() {
            lost.push(key.clone());
        }
    }
    assert!(
        lost.is_empty(),
        "{} of 100 acknowledged writes lost to the schema merge: {lost:?}",
        lost.len()
    );
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hints_are_stored_even_when_the_client_gives_up_early() {
    let mut cluster = TestCluster::start(73, 3, 3).await;
    cluster.create_keyspace(0, "ks", 3).await;
    let targets = [cluster.context(1).host_id, cluster.context(2).host_id];
    cluster.stop(1).await;
    cluster.stop(2).await;
    cluster.wait_until_settled().await;
    // Writes at ONE with two replicas down: node 0 applies each and stores
    // two hints. Clients that cancel after 0–3 ms interrupt some of them
    // part of the way through.
    let mut client = cluster.client(0).await;
    for k in 0..200u64 {
        let mut request = tonic::Request::new(put("ks", &format!("k{k}"), "v", One));
        request.set_timeout(Duration::from_micros(k % 4 * 1000 + 100));
        let _ = client.put(request).await;
    }
    // Every key node 0 holds has a hint for each down replica (the writes'
    // tasks may still be finishing: count again until both agree).
    let id = cluster.context(0).keyspace("ks").unwrap().id;
    let held = || {
        (0..200u64)
            .filter(|k| {
                let key = format!("k{k}");
                let stored = cluster.context(0).store.read(id, key.as_bytes());
                stored.unwrap().is_some()
            })
            .count() as u64
    };
    eventually(
        Duration::from_secs(10),
        "every write node 0 applied has its two hints",
        || async {
            let held = held();
            held > 0 && targets.iter().all(|&t| cluster.hints_for(0, t) == held)
        },
    )
    .await;
    eprintln!("node 0 holds {} of 200 keys, each with two hints", held());
    cluster.shutdown().await;
}

fn mutation(key: String, value_bytes: usize) -> pb::Mutation {
    pb::Mutation {
        key: key.into_bytes(),
        value: Some(vec![b'v'; value_bytes]),
        timestamp_micros: None,
        ttl_seconds: None,
        expires_at_micros: None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batches_beyond_their_caps_are_refused_naming_the_cap() {
    let dirs = tempfile::tempdir().unwrap();
    let config = ringstore_node::NodeConfig {
        max_batch_mutations: 100,
        max_batch_bytes: 64 * 1024,
        batch_concurrency: 4,
        ..TestCluster::config(74, 0, 1, dirs.path())
    };
    let cluster = TestCluster::start_with(vec![config], dirs).await;
    cluster.create_keyspace(0, "ks", 1).await;
    let mut client = cluster.client(0).await;
    let batch = |mutations: Vec<pb::Mutation>| pb::BatchRequest {
        keyspace: "ks".into(),
        mutations,
        consistency: One as i32,
    };

    let too_many = (0..101).map(|i| mutation(format!("k{i}"), 1)).collect();
    let refused = client.batch(batch(too_many)).await.unwrap_err();
    assert_eq!(refused.code(), Code::InvalidArgument);
    assert!(
        refused.message().contains("max_batch_mutations"),
        "{}",
        refused.message()
    );

    let too_big = (0..10)
        .map(|i| mutation(format!("k{i}"), 8 * 1024))
        .collect();
    let refused = client.batch(batch(too_big)).await.unwrap_err();
    assert_eq!(refused.code(), Code::InvalidArgument);
    assert!(
        refused.message().contains("max_batch_bytes"),
        "{}",
        refused.message()
    );

    // At the caps, every mutation is applied, results in request order.
    let full: Vec<_> = (0..100).map(|i| mutation(format!("k{i}"), 100)).collect();
    let results = client
        .batch(batch(full))
        .await
        .unwrap()
        .into_inner()
        .results;
    assert_eq!(results.len(), 100);
    assert!(results.iter().all(|r| r.code == 0), "{results:?}");
    for i in 0..100 {
        assert!(common::is_found(&mut client, "ks", &format!("k{i}"), One).await);
    }
    cluster.shutdown().await;
}

/// Node 0 coordinates QUORUM writes from 48 concurrent clients, so writes
/// bound for nodes 1 and 2 queue behind busy call slots and leave in
/// shared calls; every write must still land on every replica, each key at
/// its last version.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_coalesced_into_shared_calls_all_land_on_every_replica() {
    let cluster = TestCluster::start(58, 3, 3).await;
    cluster.create_keyspace(0, "ks", 3).await;
    let before = cluster.context(0).metrics.coalesced_writes_total();
    const CLIENTS: usize = 48;
    const KEYS: usize = 40;
    let clients = (0..CLIENTS).map(|c| {
        let cluster = &cluster;
        async move {
            let mut client = cluster.client(0).await;
            for version in 1..=2 {
                for k in 0..KEYS {
                    let key = format!("c{c}k{k}");
                    let value = format!("{key}v{version}");
                    client.put(put("ks", &key, &value, Quorum)).await.unwrap();
                }
            }
        }
    });
    join_all(clients).await;
    let coalesced = cluster.context(0).metrics.coalesced_writes_total() - before;
    eprintln!(
        "{coalesced} of {} replica writes to peers left in shared calls",
        CLIENTS * KEYS * 2 * 2
    );
    assert!(coalesced > 0, "no replica write shared a call");

    let id = cluster.context(0).keyspace("ks").unwrap().id;
    let stale = |node: usize| {
        let store = &cluster.context(node).store;
        (0..CLIENTS)
            .flat_map(|c| (0..KEYS).map(move |k| format!("c{c}k{k}")))
            .filter(|key| {
                let held = store.read(id, key.as_bytes()).unwrap();
                let now = ringstore_storage::Timestamp::now();
                let value = held.and_then(|cell| cell.visible_value(now).map(<[u8]>::to_vec));
                value != Some(format!("{key}v2").into_bytes())
            })
            .count()
    };
    eventually(
        Duration::from_secs(10),
        "every replica holds every key at its last version",
        || async { (0..3).all(|node| stale(node) == 0) },
    )
    .await;
    cluster.shutdown().await;
}
