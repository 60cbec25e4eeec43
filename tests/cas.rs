//! Lightweight transactions end to end on in-process clusters: `PutIf`,
//! `DeleteIf` and `GetSerial` through the client API, with rivals racing
//! through every coordinator, a counter built from compare-and-sets, the
//! round trips an uncontended one costs, plain writes mixed in, TTLs,
//! refusals, too few replicas, and Paxos repair collecting the state.
//!
//! The fault runs (kill -9, pauses, partitions) are the simulation's and
//! the process fault suite's; here every node is up unless a test stops
//! one.

mod common;

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

/// The node the client library sends `key`'s compare-and-sets to: its
/// first replica in placement order (all are up here).
async fn first_replica(cluster: &TestCluster, key: &str) -> usize {
    let endpoints = cluster
        .admin(0)
        .await
        .get_endpoints(pb::GetEndpointsRequest {
            keyspace: KS.into(),
            key: key.as_bytes().to_vec(),
        })
        .await
        .unwrap()
        .into_inner()
        .endpoints;
    (0..3)
        .find(|&i| cluster.address(i).to_string() == endpoints[0])
        .expect("the first endpoint is a node of the cluster")
}

/// How a rival's `PutIf` ended.
enum Claim {
    Won,
    Lost { saw: Vec<u8> },
    Unknown,
}

/// 100 rivals race `PutIf(key, absent, own id)`, each through
/// `coordinators[id % len]`; returns each one's id and outcome.
async fn race(coordinators: &[ClientClient<Channel>], key: &'static str) -> Vec<(Vec<u8>, Claim)> {
    let mut rivals = tokio::task::JoinSet::new();
    for id in 0..100usize {
        let mut client = coordinators[id % coordinators.len()].clone();
        rivals.spawn(async move {
            let own = format!("{key}-owner-{id}").into_bytes();
            let claim = match client.put_if(put_if(key, absent(), &own)).await {
                Ok(answer) if answer.get_ref().applied => Claim::Won,
                Ok(answer) => {
                    let answer = answer.into_inner();
                    assert!(answer.found, "a loser is shown the value it lost to");
                    Claim::Lost { saw: answer.value }
                }
                Err(status) if not_applied(&status) => panic!("refused: {status:?}"),
                Err(status) => {
                    assert_eq!(status.code(), Code::DeadlineExceeded, "{status:?}");
                    Claim::Unknown
                }
            };
            (own, claim)
        });
    }
    rivals.join_all().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn of_100_rivals_claiming_one_key_exactly_one_wins() {
    let cluster = TestCluster::start(234, 3, 1).await;
    cluster.create_keyspace(0, KS, 3).await;
    let mut clients = Vec::new();
    for i in 0..3 {
        clients.push(cluster.client(i).await);
    }

    // Routed as the client library routes them: all through the key's
    // first replica, where they queue. Every rival has a definite answer.
    let leader = first_replica(&cluster, "lease").await;
    let claims = race(std::slice::from_ref(&clients[leader]), "lease").await;
    let winners: Vec<&Vec<u8>> = claims
        .iter()
        .filter_map(|(own, claim)| matches!(claim, Claim::Won).then_some(own))
        .collect();
    assert_eq!(winners.len(), 1, "exactly one applied");
    let winner = winners[0].clone();
    for (_, claim) in &claims {
        match claim {
            Claim::Won => {}
            Claim::Lost { saw } => assert_eq!(saw, &winner, "every loser saw the winner"),
            Claim::Unknown => panic!("a rival queued at one coordinator got no answer"),
        }
    }
    for client in &mut clients {
        assert_eq!(read_serial(client, "lease").await, Some(winner.clone()));
    }

    // Through every node: coordinators pre-empt each other, so some rivals
    // may end unknown, but never two winners, and the value every serial
    // read agrees on is the acknowledged winner's, or an unknown one's
    // when none was acknowledged.
    let claims = race(&clients, "lease-2").await;
    let won: Vec<&Vec<u8>> = claims
        .iter()
        .filter_map(|(own, claim)| matches!(claim, Claim::Won).then_some(own))
        .collect();
    assert!(won.len() <= 1, "at most one applied: {}", won.len());
    let held = read_serial(&mut clients[0], "lease-2")
        .await
        .expect("claimed");
    for client in &mut clients {
        assert_eq!(read_serial(client, "lease-2").await.as_ref(), Some(&held));
    }
    match won.first() {
        Some(winner) => assert_eq!(*winner, &held),
        None => assert!(
            claims
                .iter()
                .any(|(own, claim)| own == &held && matches!(claim, Claim::Unknown)),
            "the value held is an unknown rival's"
        ),
    }
    for (own, claim) in &claims {
        if let Claim::Lost { saw } = claim {
            assert_eq!(
                saw,
                &held,
                "{} lost to another value",
                String::from_utf8_lossy(own)
            );
        }
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
    // Through every node, so coordinators contend too.
    for c in 0..CLIENTS {
        let mut client = cluster.client(c % 3).await;
        workers.spawn(async move {
            let (mut acked, mut unknown, mut attempts) = (0u64, 0u64, 0);
            while acked < INCREMENTS {
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
                    Ok(answer) if answer.get_ref().applied => acked += 1,
                    Ok(_) => {}
                    Err(status) if not_applied(&status) => {}
                    Err(status) if status.code() == Code::DeadlineExceeded => unknown += 1,
                    Err(status) => panic!("client {c}: {status:?}"),
                }
            }
            (acked, unknown)
        });
    }
    let (mut acked, mut unknown) = (0, 0);
    for (a, u) in workers.join_all().await {
        acked += a;
        unknown += u;
    }
    let mut client = cluster.client(1).await;
    let total: u64 = String::from_utf8(read_serial(&mut client, "counter").await.unwrap())
        .unwrap()
        .parse()
        .unwrap();
    assert!(
        (acked..=acked + unknown).contains(&total),
        "the counter is {total}: {acked} increments acknowledged, {unknown} unknown"
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

/// The Paxos states node `i` holds for keyspace `KS`.
fn paxos_states(cluster: &TestCluster, i: usize) -> usize {
    let context = cluster.context(i);
    let ks = context.keyspace(KS).unwrap().id;
    context
        .store
        .paxos_page(ks, None, usize::MAX)
        .unwrap()
        .len()
}

/// `repair --paxos-only` of `KS` on node `i`: (finished, failed, purged).
async fn paxos_repair(cluster: &TestCluster, i: usize) -> (u64, u64, u64) {
    let response = cluster
        .repair(i)
        .await
        .paxos_repair(pb::PaxosRepairRequest {
            keyspace: KS.into(),
        })
        .await
        .unwrap()
        .into_inner();
    let k = &response.keyspaces[0];
    (k.keys_finished, k.keys_failed, k.states_purged)
}

/// Paxos repair finishes a proposal a coordinator left accepted on one
/// replica, purges every node's state, and changes no value: every key
/// reads back the same before and after, serially and at `ALL`, and
/// compare-and-sets go on through every coordinator (past the floors).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paxos_repair_finishes_what_is_left_and_purges_state_without_changing_a_value() {
    let cluster = TestCluster::start(239, 3, 1).await;
    cluster.create_keyspace(0, KS, 3).await;
    const KEYS: usize = 30;
    for k in 0..KEYS {
        let mut client = cluster.client(k % 3).await;
        let key = format!("k{k}");
        let first = format!("{key}-v1").into_bytes();
        let answer = client.put_if(put_if(&key, absent(), &first)).await.unwrap();
        assert!(answer.into_inner().applied, "{key}");
        if k % 2 == 0 {
            let second = format!("{key}-v2").into_bytes();
            let answer = client.put_if(put_if(&key, value_is(&first), &second)).await;
            assert!(answer.unwrap().into_inner().applied, "{key}");
        }
    }
    // A coordinator that died after its accept reached node 0 only: the
    // proposal is accepted there, committed nowhere.
    let ks = cluster.context(0).keyspace(KS).unwrap().id;
    let orphan = ringstore_paxos::Proposal {
        ballot: ringstore_paxos::Ballot {
            micros: ringstore_storage::Timestamp::now().0,
            tiebreak: 7,
        },
        cell: Some(ringstore_storage::Cell::live(
            ringstore_storage::Timestamp::now(),
            b"orphan".to_vec(),
        )),
    };
    let accepted =
        ringstore_node::paxos::accept(cluster.context(0).as_ref(), ks, b"orphan", orphan)
            .await
            .unwrap();
    assert_eq!(accepted, ringstore_paxos::AcceptReply::Accepted);
    let expected: Vec<(String, Vec<u8>)> = (0..KEYS)
        .map(|k| {
            let version = if k % 2 == 0 { "v2" } else { "v1" };
            (format!("k{k}"), format!("k{k}-{version}").into_bytes())
        })
        .collect();
    for i in 0..3 {
        assert!(
            paxos_states(&cluster, i) >= KEYS,
            "node {i} holds the keys' state"
        );
    }

    // The compare-and-sets' commits reached node 0 (each waited for a
    // quorum only): the orphan is what it holds unfinished.
    common::eventually(
        Duration::from_secs(10),
        "node 0 saw every commit",
        || async { uncommitted(&cluster, 0) == ["orphan"] },
    )
    .await;
    let (finished, failed, _) = paxos_repair(&cluster, 0).await;
    assert_eq!(
        (finished, failed),
        (1, 0),
        "the orphan proposal is finished"
    );
    // Every node collects its own state; a commit still on its way to a
    // replica when it ran leaves a state for the next run.
    common::eventually(
        Duration::from_secs(20),
        "every node's Paxos state is purged",
        || async {
            let mut left = 0;
            for i in 0..3 {
                let (_, failed, _) = paxos_repair(&cluster, i).await;
                assert_eq!(failed, 0);
                left += paxos_states(&cluster, i);
            }
            left == 0
        },
    )
    .await;

    // The orphan was either finished (chosen) or abandoned: all agree.
    let mut client = cluster.client(1).await;
    let orphan = read_serial(&mut client, "orphan").await;
    assert!(
        matches!(orphan.as_deref(), None | Some(b"orphan")),
        "{orphan:?}"
    );
    for i in 0..3 {
        let mut client = cluster.client(i).await;
        for (key, value) in &expected {
            assert_eq!(
                read_serial(&mut client, key).await.as_ref(),
                Some(value),
                "{key} via {i}"
            );
            let plain = client
                .get(pb::GetRequest {
                    keyspace: KS.into(),
                    key: key.as_bytes().to_vec(),
                    consistency: pb::ConsistencyLevel::All as i32,
                })
                .await
                .unwrap()
                .into_inner();
            assert_eq!(&plain.value, value, "{key} at ALL via {i}");
        }
        // New compare-and-sets through every coordinator, past the floors.
        for (key, value) in expected.iter().take(5) {
            let next = [value.as_slice(), b"+", i.to_string().as_bytes()].concat();
            let answer = client
                .put_if(put_if(key, value_is(value), &next))
                .await
                .unwrap();
            assert!(answer.get_ref().applied, "{key} via {i}");
            let answer = client
                .put_if(put_if(key, value_is(&next), value))
                .await
                .unwrap();
            assert!(answer.get_ref().applied, "{key} back via {i}");
        }
    }
    cluster.shutdown().await;
}

/// A proposal a coordinator left accepted on nodes 0 and 1 (a quorum: the
/// value is chosen) and committed nowhere, planted for two keys.
async fn plant_chosen_orphan(cluster: &TestCluster, key: &str, value: &[u8]) {
    let ks = cluster.context(0).keyspace(KS).unwrap().id;
    let now = ringstore_storage::Timestamp::now();
    let orphan = ringstore_paxos::Proposal {
        ballot: ringstore_paxos::Ballot {
            micros: now.0,
            tiebreak: 7,
        },
        cell: Some(ringstore_storage::Cell::live(now, value.to_vec())),
    };
    for i in [0, 1] {
        let context = cluster.context(i).as_ref();
        let accepted = ringstore_node::paxos::accept(context, ks, key.as_bytes(), orphan.clone())
            .await
            .unwrap();
        assert_eq!(
            accepted,
            ringstore_paxos::AcceptReply::Accepted,
            "{key} on {i}"
        );
    }
}

/// The keys node `i` holds accepted but never saw committed.
fn uncommitted(cluster: &TestCluster, i: usize) -> Vec<String> {
    let context = cluster.context(i);
    let ks = context.keyspace(KS).unwrap().id;
    ringstore_node::paxos::uncommitted(context.as_ref(), ks)
        .unwrap()
        .into_iter()
        .map(|key| String::from_utf8(key).unwrap())
        .collect()
}

/// A node asked to stream a range (the losing replica of a join, the
/// leaving node of a decommission) first finishes the compare-and-sets it
/// holds unfinished in that range: a version a quorum chose, whose commit
/// never landed, is in the data it streams (and on every replica), while a
/// key outside the range keeps its state for a later repair.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_range_is_streamed_only_after_its_unfinished_compare_and_sets_are_finished() {
    let cluster = TestCluster::start(240, 3, 1).await;
    cluster.create_keyspace(0, KS, 3).await;
    let (inside, outside) = ("in-range", "out-of-range");
    plant_chosen_orphan(&cluster, inside, b"chosen-in").await;
    plant_chosen_orphan(&cluster, outside, b"chosen-out").await;
    let mut planted = uncommitted(&cluster, 0);
    planted.sort();
    assert_eq!(planted, [inside, outside]);
    for i in 0..3 {
        assert_eq!(cluster.local_value(i, KS, inside), None, "node {i}");
    }

    // Node 0 streams the range that holds only `inside`'s token.
    let token = |key: &str| {
        ringstore_placement::Murmur3Partitioner::token(key.as_bytes())
            .unwrap()
            .0
    };
    let (t_in, t_out) = (token(inside), token(outside));
    assert_ne!(t_in, t_out);
    let ks = cluster.context(0).keyspace(KS).unwrap().id;
    let mut stream = cluster
        .internode(0)
        .await
        .stream_range(pb::StreamRangeRequest {
            keyspace_id: ks.to_string(),
            range: Some(pb::TokenRangeMessage {
                start: t_in - 1,
                end: t_in,
            }),
            requester_host_id: String::new(),
            operation: "bootstrap".into(),
        })
        .await
        .unwrap()
        .into_inner();
    let mut streamed = Vec::new();
    while let Some(chunk) = stream.message().await.unwrap() {
        for entry in chunk.entries {
            let value = entry.cell.and_then(|c| c.value);
            streamed.push((String::from_utf8(entry.key).unwrap(), value));
        }
    }
    assert_eq!(
        streamed,
        [(inside.to_string(), Some(b"chosen-in".to_vec()))],
        "the chosen version is streamed"
    );
    // Committed at QUORUM, and sent to every replica. A replica applies
    // the cell before it records the commit in its Paxos state, so node 0's
    // state may lag its data for a moment (a CI run once read it between
    // the two).
    common::eventually(
        Duration::from_secs(10),
        "every replica holds the chosen version and only the range is finished",
        || async {
            (0..3).all(|i| cluster.local_value(i, KS, inside).as_deref() == Some(b"chosen-in"))
                && uncommitted(&cluster, 0) == [outside]
        },
    )
    .await;
    assert_eq!(cluster.local_value(0, KS, outside), None);
    cluster.shutdown().await;
}

/// With `repair.paxos_repair_interval_seconds` set, every node repairs its
/// Paxos state on its own: a proposal left chosen but uncommitted reaches
/// every replica's data, and every node's state is purged, with no
/// `repair --paxos-only`; compare-and-sets go on afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_node_repairs_and_purges_its_paxos_state_on_its_own() {
    let cluster = TestCluster::start_configured(241, 3, 1, |_, config| {
        config.repair.paxos_repair_interval_seconds = 1;
    })
    .await;
    cluster.create_keyspace(0, KS, 3).await;
    let mut client = cluster.client(1).await;
    for k in 0..10 {
        let key = format!("k{k}");
        let answer = client.put_if(put_if(&key, absent(), key.as_bytes())).await;
        assert!(answer.unwrap().into_inner().applied, "{key}");
    }
    plant_chosen_orphan(&cluster, "orphan", b"chosen").await;
    assert!(paxos_states(&cluster, 0) > 0);

    common::eventually(
        Duration::from_secs(30),
        "every node has repaired and purged its Paxos state",
        || async {
            (0..3).all(|i| {
                paxos_states(&cluster, i) == 0
                    && cluster.local_value(i, KS, "orphan").as_deref() == Some(b"chosen")
            })
        },
    )
    .await;
    for k in 0..10 {
        let key = format!("k{k}");
        assert_eq!(
            read_serial(&mut client, &key).await.as_deref(),
            Some(key.as_bytes())
        );
        let answer = client
            .put_if(put_if(&key, value_is(key.as_bytes()), b"next"))
            .await;
        assert!(
            answer.unwrap().into_inner().applied,
            "{key} past the floors"
        );
    }
    cluster.shutdown().await;
}

/// How a dead node leaves the ring.
#[derive(Clone, Copy, Debug)]
enum Departure {
    RemoveNode,
    Replace,
}

/// A removenode or a replace has every survivor of the dead node's ranges
/// finish its compare-and-sets there, not only the survivor each range
/// streams from (`topology/proposals.rs`): a value accepted by the dead
/// node and one survivor (the holder) was chosen, and the other survivor
/// (the stream's source) and the new replica, a quorum of the new replica
/// set, never heard of it. The change finishes the value, and a `SERIAL`
/// read through that quorum (the holder stopped once the change is done)
/// returns it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_removenode_finishes_what_the_dead_node_helped_choose_on_every_survivor() {
    finishes_what_the_dead_node_helped_choose(247, Departure::RemoveNode).await;
}

/// As above, for a replacement.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replacement_finishes_what_the_dead_node_helped_choose_on_every_survivor() {
    finishes_what_the_dead_node_helped_choose(248, Departure::Replace).await;
}

async fn finishes_what_the_dead_node_helped_choose(block: u8, departure: Departure) {
    use ringstore_placement::{HostId, MovementPlan, Murmur3Partitioner, ReplicaMap, RingMember};
    use std::sync::Arc;

    // A removal needs a fourth node to gain the key; a replacement brings it.
    let nodes = match departure {
        Departure::RemoveNode => 4,
        Departure::Replace => 3,
    };
    let mut cluster = TestCluster::start(block, nodes, 1).await;
    cluster.create_keyspace(0, KS, 3).await;
    let key = "chosen-with-the-dead";

    // Who is who: the key's replicas, the dead one (not node 0: it is the
    // seed a replacement reaches the cluster through), and the survivor the
    // new replica will stream the key's range from (the first source
    // `MovementPlan::fetches_for` ranks after the dead node).
    let def = cluster.context(0).keyspace(KS).unwrap();
    let (_, before) = cluster.context(0).placement(&def);
    let token = Murmur3Partitioner::token(key.as_bytes()).unwrap();
    let replicas: Vec<HostId> = before.replicas(token).ids().collect();
    let index = |host: HostId| {
        (0..nodes)
            .find(|&i| cluster.context(i).host_id == host)
            .unwrap()
    };
    let dead = *replicas
        .iter()
        .find(|&&r| r != cluster.context(0).host_id)
        .unwrap();
    let outsider = (0..nodes).find(|&i| !replicas.contains(&cluster.context(i).host_id));
    let ring = before.ring();
    let without = ring.without_host(ring.epoch() + 1, dead);
    let (after, receiver) = match departure {
        Departure::RemoveNode => (without, cluster.context(outsider.unwrap()).host_id),
        Departure::Replace => {
            // The replacement's host id is not known yet: any new one places
            // the same way, on the dead node's tokens.
            let stand_in = HostId(uuid::Uuid::new_v4());
            let location = ring.host(dead).unwrap().location.clone();
            let member = RingMember::new(stand_in, location, ring.tokens_of(dead));
            (
                without.with_member(ring.epoch() + 2, member).unwrap(),
                stand_in,
            )
        }
    };
    let after = ReplicaMap::new(Arc::new(after), &def.strategy);
    let (_, sources) = MovementPlan::between(&before, &after)
        .fetches_for(receiver)
        .into_iter()
        .find(|(range, _)| range.contains(token))
        .expect("the new replica fetches the key's range");
    let source = *sources.iter().find(|&&s| s != dead).unwrap();
    let holder = *replicas
        .iter()
        .find(|&&r| r != dead && r != source)
        .unwrap();
    let (dead_i, holder_i, source_i) = (index(dead), index(holder), index(source));

    // The value is chosen by {dead, holder}: accepted there, never committed.
    let now = ringstore_storage::Timestamp::now();
    let chosen = ringstore_paxos::Proposal {
        ballot: ringstore_paxos::Ballot {
            micros: now.0,
            tiebreak: 7,
        },
        cell: Some(ringstore_storage::Cell::live(now, b"chosen".to_vec())),
    };
    for i in [dead_i, holder_i] {
        let replica = cluster.context(i).as_ref();
        let accepted =
            ringstore_node::paxos::accept(replica, def.id, key.as_bytes(), chosen.clone())
                .await
                .unwrap();
        assert_eq!(accepted, ringstore_paxos::AcceptReply::Accepted, "node {i}");
    }
    cluster.stop(dead_i).await;
    seen(&cluster, source_i, dead, false).await;

    let new_replica = match departure {
        Departure::RemoveNode => {
            let gainer = outsider.unwrap();
            cluster
                .topology(gainer)
                .await
                .remove_node(pb::RemoveNodeRequest {
                    host_id: dead.to_string(),
                })
                .await
                .expect("removenode succeeds");
            gainer
        }
        Departure::Replace => {
            let config = ringstore_node::NodeConfig {
                replace_address: Some(format!("127.{block}.0.{}", dead_i + 1)),
                ..TestCluster::config(block, nodes, 1, cluster.dir())
            };
            let replacement = cluster.add(config).await;
            let context = cluster.context(source_i).clone();
            common::eventually(
                Duration::from_secs(60),
                "the replacement is NORMAL and the dead node removed",
                move || {
                    let context = context.clone();
                    async move {
                        let view = context.view();
                        view.removed.contains(&dead) && view.pending_ring.is_none()
                    }
                },
            )
            .await;
            replacement
        }
    };
    common::eventually(
        Duration::from_secs(10),
        "the holder saw the value committed",
        || async { uncommitted(&cluster, holder_i).is_empty() },
    )
    .await;
    cluster.stop(holder_i).await;
    seen(&cluster, new_replica, holder, false).await;
    let mut client = cluster.client(new_replica).await;
    assert_eq!(
        read_serial(&mut client, key).await.as_deref(),
        Some(&b"chosen"[..]),
        "a SERIAL read through {{source, new replica}} sees the chosen value"
    );
    cluster.shutdown().await;
}

/// Waits until node `observer` sees `host` up (`up`) or down.
async fn seen(cluster: &TestCluster, observer: usize, host: ringstore_placement::HostId, up: bool) {
    let context = cluster.context(observer).clone();
    common::eventually(
        Duration::from_secs(30),
        "the node is seen up or down",
        move || {
            let context = context.clone();
            async move { context.view().is_up(host) == up }
        },
    )
    .await;
}
