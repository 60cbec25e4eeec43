//! Internode authentication (issue 14): with a cluster secret, a caller
//! without it (no proof, a proof from another secret) or replaying a
//! captured proof gets `UNAUTHENTICATED` on every internode RPC that could
//! drop a keyspace, write cells or read data, and nothing changes; the
//! cluster itself, whose nodes sign their calls, works as before.
//!
//! Address blocks 85 and 204 (in-process nodes).

mod common;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use common::{TestCluster, eventually, get, put};
use ringstore_auth::{InternodeKey, Nonce, PROOF_HEADER, Proof};
use ringstore_placement::HostId;
use ringstore_proto::v1 as pb;
use tonic::metadata::MetadataValue;
use tonic::{Code, Request};

const SECRET: &str = "internode-test-secret-85";

/// How an attacker dresses its calls.
#[derive(Clone, Copy, Debug)]
enum Attacker {
    /// No proof at all (a node or tool without the secret).
    NoSecret,
    /// A proof made with another secret.
    WrongSecret,
    /// The proof of a call a member made, captured and sent again.
    Replay,
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// A fresh proof for `method` by `caller` with `secret`.
fn proof(secret: &str, method: &str, caller: HostId) -> String {
    let key = InternodeKey::from_secret(secret.as_bytes()).unwrap();
    Proof::sign(&key, method, caller, now_ms(), Nonce(rand::random())).to_text()
}

fn with_proof<T>(message: T, proof: Option<&str>) -> Request<T> {
    let mut request = Request::new(message);
    if let Some(proof) = proof {
        request
            .metadata_mut()
            .insert(PROOF_HEADER, MetadataValue::try_from(proof).unwrap());
    }
    request
}

fn method(name: &str) -> String {
    format!("/ringstore.v1.Internode/{name}")
}

fn assert_unauthenticated<T: std::fmt::Debug>(
    result: Result<tonic::Response<T>, tonic::Status>,
    what: &str,
) {
    let status = result.expect_err(what);
    assert_eq!(status.code(), Code::Unauthenticated, "{what}: {status:?}");
    assert!(
        !status.message().contains(SECRET),
        "{what}: the refusal names the secret"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn callers_without_the_secret_or_replaying_a_call_are_refused_and_change_nothing() {
    let dirs = tempfile::tempdir().unwrap();
    let configs = (0..3)
        .map(|i| {
            let mut config = TestCluster::config(85, i, 3, dirs.path());
            config.cluster_secret = Some(SECRET.into());
            config
        })
        .collect();
    let cluster = TestCluster::start_with(configs, dirs).await;

    // The cluster works with its secret: schema pushes and replica writes.
    let ks_id = cluster.create_keyspace(0, "ks", 3).await;
    let mut client = cluster.client(1).await;
    client
        .put(put("ks", "k", "v", pb::ConsistencyLevel::All))
        .await
        .expect("a write at ALL reaches every replica");

    let member = cluster.context(1).host_id;
    let target = cluster.context(2).host_id;
    let mut internode = cluster.internode(0).await;

    // What an attacker sends: a schema with `ks` dropped far in the future,
    // a newer value for `k`, a stream of everything, hints overwriting `k`.
    let snapshot = internode
        .pull_schema(with_proof(
            pb::PullSchemaRequest {},
            Some(&proof(SECRET, &method("PullSchema"), member)),
        ))
        .await
        .expect("a member's signed call is served")
        .into_inner();
    assert!(!snapshot.entries.is_empty());
    let drop_everything = pb::SchemaSnapshot {
        entries: snapshot
            .entries
            .iter()
            .cloned()
            .map(|mut entry| {
                entry.dropped = true;
                entry.timestamp_micros += 1_000_000_000_000;
                entry
            })
            .collect(),
    };
    let evil_cell = || pb::Cell {
        timestamp_micros: i64::MAX / 2,
        expires_at_micros: None,
        value: Some(b"evil".to_vec()),
    };
    let overwrite = pb::ApplyRequest {
        mutations: vec![pb::ReplicaMutation {
            keyspace_id: ks_id.clone(),
            key: b"k".to_vec(),
            cell: Some(evil_cell()),
        }],
        ring_checksum: 0,
    };
    let everything = pb::StreamRangeRequest {
        keyspace_id: ks_id.clone(),
        range: Some(pb::TokenRangeMessage {
            start: i64::MIN,
            end: i64::MIN,
        }),
        requester_host_id: member.to_string(),
        operation: "bootstrap".into(),
    };
    let hints = pb::TakeHintsRequest {
        hints: vec![pb::HandedHint {
            target_host_id: target.to_string(),
            keyspace_id: ks_id.clone(),
            key: b"k".to_vec(),
            cell: Some(evil_cell()),
            created_at_micros: now_ms() as i64 * 1000,
        }],
    };

    // The same calls, signed by a member, are served: so a refusal below is
    // the proof's doing, not the request's.
    let mut stream = internode
        .stream_range(with_proof(
            everything.clone(),
            Some(&proof(SECRET, &method("StreamRange"), member)),
        ))
        .await
        .expect("a member may stream")
        .into_inner();
    let mut streamed = 0;
    while let Some(chunk) = stream.message().await.unwrap() {
        streamed += chunk.entries.len();
    }
    assert_eq!(streamed, 1, "the member's stream holds k");

    for attacker in [Attacker::NoSecret, Attacker::WrongSecret, Attacker::Replay] {
        // A captured proof is one a member made for a harmless call of the
        // same method (served below), sent again with a harmful body.
        let dress = |name: &str| -> Option<String> {
            match attacker {
                Attacker::NoSecret => None,
                Attacker::WrongSecret => Some(proof("not-the-secret", &method(name), member)),
                Attacker::Replay => Some(proof(SECRET, &method(name), member)),
            }
        };
        let push = dress("PushSchema");
        let apply = dress("Apply");
        let apply_stream = dress("ApplyStream");
        let stream = dress("StreamRange");
        let take = dress("TakeHints");
        if let Attacker::Replay = attacker {
            // The originals, harmless, go through once.
            internode
                .push_schema(with_proof(
                    pb::SchemaSnapshot { entries: vec![] },
                    push.as_deref(),
                ))
                .await
                .expect("the original push");
            internode
                .apply(with_proof(
                    pb::ApplyRequest {
                        mutations: vec![],
                        ring_checksum: 0,
                    },
                    apply.as_deref(),
                ))
                .await
                .expect("the original apply");
            let frame = pb::ApplyFrame {
                id: 1,
                request: Some(pb::ApplyRequest::default()),
            };
            let mut answers = internode
                .apply_stream(with_proof(
                    futures::stream::iter([frame]),
                    apply_stream.as_deref(),
                ))
                .await
                .expect("the original apply stream")
                .into_inner();
            while answers.message().await.unwrap().is_some() {}
            let mut original = internode
                .stream_range(with_proof(
                    pb::StreamRangeRequest {
                        range: Some(pb::TokenRangeMessage { start: 0, end: 1 }),
                        ..everything.clone()
                    },
                    stream.as_deref(),
                ))
                .await
                .expect("the original stream")
                .into_inner();
            while original.message().await.unwrap().is_some() {}
            internode
                .take_hints(with_proof(
                    pb::TakeHintsRequest { hints: vec![] },
                    take.as_deref(),
                ))
                .await
                .expect("the original hand-over");
        }
        let what = |rpc: &str| format!("{rpc} by {attacker:?}");
        assert_unauthenticated(
            internode
                .push_schema(with_proof(drop_everything.clone(), push.as_deref()))
                .await,
            &what("PushSchema"),
        );
        assert_unauthenticated(
            internode
                .apply(with_proof(overwrite.clone(), apply.as_deref()))
                .await,
            &what("Apply"),
        );
        let frame = pb::ApplyFrame {
            id: 1,
            request: Some(overwrite.clone()),
        };
        assert_unauthenticated(
            internode
                .apply_stream(with_proof(
                    futures::stream::iter([frame]),
                    apply_stream.as_deref(),
                ))
                .await,
            &what("ApplyStream"),
        );
        assert_unauthenticated(
            internode
                .stream_range(with_proof(everything.clone(), stream.as_deref()))
                .await,
            &what("StreamRange"),
        );
        assert_unauthenticated(
            internode
                .take_hints(with_proof(hints.clone(), take.as_deref()))
                .await,
            &what("TakeHints"),
        );
    }

    // Nothing changed: `ks` is still there on every node, `k` is still `v`
    // on every replica, and no node holds a hint.
    for i in 0..3 {
        assert!(
            cluster.context(i).keyspace("ks").is_ok(),
            "node {i} lost ks"
        );
        assert_eq!(
            cluster.local_value(i, "ks", "k").as_deref(),
            Some(&b"v"[..]),
            "node {i}'s replica of k"
        );
        assert_eq!(cluster.hints_for(i, target), 0, "node {i} took hints");
    }
    let read = client
        .get(get("ks", "k", pb::ConsistencyLevel::All))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(read.value, b"v");

    // And the cluster still works after the attempts.
    client
        .put(put("ks", "k2", "v2", pb::ConsistencyLevel::All))
        .await
        .expect("writes still replicate");
    eventually(Duration::from_secs(10), "k2 on every replica", || async {
        (0..3).all(|i| cluster.local_value(i, "ks", "k2").as_deref() == Some(&b"v2"[..]))
    })
    .await;
    cluster.shutdown().await;
}

/// A stream is authenticated once, when it opens; its caller is checked
/// again at each frame. Node 2's identity opens an `ApplyStream` to node 0
/// and a first write is served; node 2 dies and is removed; the stream's
/// next frame ends it with `UNAUTHENTICATED`, and its write is not applied.
/// Address block 204.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_apply_stream_ends_at_its_next_frame_once_its_caller_is_removed() {
    let dirs = tempfile::tempdir().unwrap();
    let configs = (0..3)
        .map(|i| {
            let mut config = TestCluster::config(204, i, 3, dirs.path());
            config.cluster_secret = Some(SECRET.into());
            config
        })
        .collect();
    let mut cluster = TestCluster::start_with(configs, dirs).await;
    let ks_id = cluster.create_keyspace(0, "ks", 2).await;
    let write = |id: u64, value: &str, timestamp_micros: i64| pb::ApplyFrame {
        id,
        request: Some(pb::ApplyRequest {
            mutations: vec![pb::ReplicaMutation {
                keyspace_id: ks_id.clone(),
                key: b"k".to_vec(),
                cell: Some(pb::Cell {
                    timestamp_micros,
                    expires_at_micros: None,
                    value: Some(value.as_bytes().to_vec()),
                }),
            }],
            ring_checksum: 0,
        }),
    };

    let caller = cluster.context(2).host_id;
    let (frames, outgoing) = futures::channel::mpsc::unbounded();
    frames.unbounded_send(write(1, "before", 1_000)).unwrap();
    let mut answers = cluster
        .internode(0)
        .await
        .apply_stream(with_proof(
            outgoing,
            Some(&proof(SECRET, &method("ApplyStream"), caller)),
        ))
        .await
        .expect("a member's stream opens")
        .into_inner();
    let first = answers
        .message()
        .await
        .unwrap()
        .expect("the first frame's answer");
    assert_eq!((first.id, first.code), (1, 0), "{first:?}");
    assert_eq!(
        cluster.local_value(0, "ks", "k").as_deref(),
        Some(&b"before"[..])
    );

    cluster.stop(2).await;
    let observer = cluster.context(0).clone();
    eventually(Duration::from_secs(30), "node 0 sees node 2 down", || {
        let observer = observer.clone();
        async move { !observer.view().is_up(caller) }
    })
    .await;
    cluster
        .topology(0)
        .await
        .remove_node(pb::RemoveNodeRequest {
            host_id: caller.to_string(),
        })
        .await
        .expect("removenode succeeds");

    frames.unbounded_send(write(2, "after", 2_000)).unwrap();
    let ended = answers
        .message()
        .await
        .expect_err("the removed caller's stream ends");
    assert_eq!(ended.code(), Code::Unauthenticated, "{ended:?}");
    assert_eq!(
        cluster.local_value(0, "ks", "k").as_deref(),
        Some(&b"before"[..]),
        "the removed caller's write was applied"
    );
    cluster.shutdown().await;
}
