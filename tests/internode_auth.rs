//! Internode authentication (issues 14 and 40): with a cluster secret, only
//! members may call the internode port, each call proven with the key the
//! caller shares with the callee and every message of its body tagged. A
//! caller without a proof, a node outside the cluster, a node posing as a
//! member, a replayed call, a captured proof carrying another body or sent
//! to another node, and a frame injected into an open stream all get
//! `UNAUTHENTICATED`, and nothing changes; the cluster itself, whose nodes
//! sign their calls, works as before.
//!
//! Address blocks 85, 204 and 211 (in-process nodes).

mod common;

use std::time::Duration;

use bytes::Bytes;
use common::member::{Ended, Member, plain_frame, send};
use common::{TestCluster, eventually, get, put};
use prost::Message;
use ringstore_proto::v1 as pb;
use tonic::Code;

const SECRET: &str = "internode-test-secret-85";

fn method(name: &str) -> String {
    format!("/ringstore.v1.Internode/{name}")
}

fn assert_refused(ended: &Ended, what: &str) {
    assert_eq!(ended.code, Some(Code::Unauthenticated), "{what}: {ended:?}");
    assert!(
        !ended.message.contains(SECRET),
        "{what}: the refusal names the secret"
    );
}

fn secured(block: u8, dirs: &tempfile::TempDir) -> Vec<ringstore_node::NodeConfig> {
    (0..3)
        .map(|i| {
            let mut config = TestCluster::config(block, i, 3, dirs.path());
            config.cluster_secret = Some(SECRET.into());
            config
        })
        .collect()
}

/// The harmful calls an attacker would make, as encoded messages.
struct Harm {
    drop_everything: Vec<u8>,
    overwrite: Vec<u8>,
    everything: Vec<u8>,
    hints: Vec<u8>,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn callers_that_are_not_members_or_replay_a_call_are_refused_and_change_nothing() {
    let dirs = tempfile::tempdir().unwrap();
    let cluster = TestCluster::start_with(secured(85, &dirs), dirs).await;

    // The cluster works with its secret: schema pushes and replica writes.
    let ks_id = cluster.create_keyspace(0, "ks", 3).await;
    let mut client = cluster.client(1).await;
    client
        .put(put("ks", "k", "v", pb::ConsistencyLevel::All))
        .await
        .expect("a write at ALL reaches every replica");

    let member = Member::of(&cluster, 1);
    let target = cluster.context(2).host_id;
    let address = cluster.node_config(0).internode_address;

    // What an attacker sends: a schema with `ks` dropped far in the future,
    // a newer value for `k`, a stream of everything, hints overwriting `k`.
    let snapshot = member
        .client(&cluster, 0)
        .pull_schema(pb::PullSchemaRequest {})
        .await
        .expect("a member's signed call is served")
        .into_inner();
    assert!(!snapshot.entries.is_empty());
    let evil_cell = || pb::Cell {
        timestamp_micros: i64::MAX / 2,
        expires_at_micros: None,
        value: Some(b"evil".to_vec()),
    };
    let harm = Harm {
        drop_everything: pb::SchemaSnapshot {
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
        }
        .encode_to_vec(),
        overwrite: pb::ApplyRequest {
            mutations: vec![pb::ReplicaMutation {
                keyspace_id: ks_id.clone(),
                key: b"k".to_vec(),
                cell: Some(evil_cell()),
                deadline_micros: None,
            }],
            ring_checksum: 0,
        }
        .encode_to_vec(),
        everything: pb::StreamRangeRequest {
            keyspace_id: ks_id.clone(),
            range: Some(pb::TokenRangeMessage {
                start: i64::MIN,
                end: i64::MIN,
            }),
            requester_host_id: member.host.to_string(),
            operation: "bootstrap".into(),
        }
        .encode_to_vec(),
        hints: pb::TakeHintsRequest {
            hints: vec![pb::HandedHint {
                target_host_id: target.to_string(),
                keyspace_id: ks_id.clone(),
                key: b"k".to_vec(),
                cell: Some(evil_cell()),
                created_at_micros: 1,
            }],
        }
        .encode_to_vec(),
    };

    // A member's own stream of everything is served: so a refusal below is
    // the proof's doing, not the request's.
    let call = member.call(
        &cluster,
        0,
        &method("StreamRange"),
        std::slice::from_ref(&harm.everything),
    );
    let served = send(
        address,
        &method("StreamRange"),
        Some(&call.proof),
        &call.frames,
    )
    .await;
    assert_eq!(served.code, Some(Code::Ok), "{served:?}");
    assert!(!served.answered.is_empty(), "the member's stream holds k");

    let calls: [(&str, &[u8]); 4] = [
        ("PushSchema", &harm.drop_everything),
        ("Apply", &harm.overwrite),
        ("StreamRange", &harm.everything),
        ("TakeHints", &harm.hints),
    ];
    for (name, body) in calls {
        let path = method(name);
        let what = |who: &str| format!("{name} by {who}");
        // No proof at all: a node or tool without the secret.
        let bare = send(address, &path, None, &[plain_frame(body)]).await;
        assert_refused(&bare, &what("a caller without a proof"));
        // A node outside the cluster, with keys of its own.
        let stranger = Member::stranger(0);
        let call = stranger.call(&cluster, 0, &path, &[body.to_vec()]);
        let refused = send(address, &path, Some(&call.proof), &call.frames).await;
        assert_refused(&refused, &what("a stranger"));
        assert!(refused.message.contains("not a member"), "{refused:?}");
        // A node posing as the member, with keys of its own.
        let impostor = Member::stranger(0).posing_as(member.host);
        let call = impostor.call(&cluster, 0, &path, &[body.to_vec()]);
        let refused = send(address, &path, Some(&call.proof), &call.frames).await;
        assert_refused(&refused, &what("an impostor"));
        // The member's harmless call of the same method (an empty request,
        // which the service may find invalid, but the layer lets through),
        // captured as it went by and sent again.
        let harmless = member.call(&cluster, 0, &path, &[Vec::new()]);
        let original = send(address, &path, Some(&harmless.proof), &harmless.frames).await;
        assert!(
            original.code.is_some() && original.code != Some(Code::Unauthenticated),
            "{name}: the original {original:?}"
        );
        let replay = send(address, &path, Some(&harmless.proof), &harmless.frames).await;
        assert_refused(&replay, &what("a replay"));
        assert!(replay.message.contains("already used"), "{replay:?}");
    }

    // Nothing changed: `ks` is still there on every node, `k` is still `v`
    // on every replica, and no node holds a hint.
    assert_nothing_changed(&cluster, target).await;
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

async fn assert_nothing_changed(cluster: &TestCluster, target: ringstore_placement::HostId) {
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
}

/// A proof captured on its way (and held back) is bound to its body and
/// its destination: sent with another body — changed, unsealed, or the
/// sealed messages of another call — or to another node, it is refused.
/// A frame injected into an open `ApplyStream` ends the stream, after the
/// genuine frame before it was answered. Address block 211.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_captured_proof_carries_no_other_body_nor_reaches_another_node() {
    let dirs = tempfile::tempdir().unwrap();
    let cluster = TestCluster::start_with(secured(211, &dirs), dirs).await;
    let ks_id = cluster.create_keyspace(0, "ks", 3).await;
    let mut client = cluster.client(0).await;
    client
        .put(put("ks", "k", "v", pb::ConsistencyLevel::All))
        .await
        .expect("a write at ALL");
    let target = cluster.context(2).host_id;
    let member = Member::of(&cluster, 1);
    let at = |i: usize| cluster.node_config(i).internode_address;
    let write = |value: &str| pb::ApplyRequest {
        mutations: vec![pb::ReplicaMutation {
            keyspace_id: ks_id.clone(),
            key: b"k".to_vec(),
            cell: Some(pb::Cell {
                timestamp_micros: i64::MAX / 2,
                expires_at_micros: None,
                value: Some(value.as_bytes().to_vec()),
            }),
            deadline_micros: None,
        }],
        ring_checksum: 0,
    };
    let apply = method("Apply");
    let harmless = pb::ApplyRequest::default().encode_to_vec();
    let evil = write("evil").encode_to_vec();

    // Each attempt captures a fresh call (harmless, to node 0) and sends its
    // proof first, with something else.
    let fresh = || member.call(&cluster, 0, &apply, std::slice::from_ref(&harmless));
    // 1. The harmful message, unsealed.
    let captured = fresh();
    let ended = send(at(0), &apply, Some(&captured.proof), &[plain_frame(&evil)]).await;
    assert_refused(&ended, "the captured proof with an unsealed body");
    assert!(ended.message.contains("message 0"), "{ended:?}");
    // 2. The captured sealed message, changed into the harmful one's bytes
    //    (the tag kept).
    let captured = fresh();
    let mut bent = captured.frames[0].to_vec();
    let tag = bent.split_off(bent.len() - 32);
    let mut changed = plain_frame(&evil).to_vec();
    changed[1..5].copy_from_slice(&((evil.len() + 32) as u32).to_be_bytes());
    changed.extend_from_slice(&tag);
    let ended = send(
        at(0),
        &apply,
        Some(&captured.proof),
        &[Bytes::from(changed)],
    )
    .await;
    assert_refused(&ended, "the captured proof with a changed message");
    // 3. The harmful message as the member sealed it for another call.
    let captured = fresh();
    let other = member.call(&cluster, 0, &apply, std::slice::from_ref(&evil));
    let ended = send(at(0), &apply, Some(&captured.proof), &other.frames).await;
    assert_refused(&ended, "the captured proof with another call's message");
    // 4. The whole captured call, to another node.
    let captured = member.call(&cluster, 0, &apply, std::slice::from_ref(&evil));
    let ended = send(at(2), &apply, Some(&captured.proof), &captured.frames).await;
    assert_refused(&ended, "the captured call sent to another node");
    assert!(ended.message.contains("not this one"), "{ended:?}");

    // 5. A frame injected into an open stream: the member's first frame is
    //    genuine and answered; the injected one (unsealed, or sealed for
    //    another call) ends the stream.
    let stream = method("ApplyStream");
    let frame = |id: u64, value: &str| {
        pb::ApplyFrame {
            id,
            request: Some(write(value)),
        }
        .encode_to_vec()
    };
    let other = member.call(&cluster, 0, &stream, &[frame(1, "x"), frame(2, "evil")]);
    for injected in [plain_frame(&frame(2, "evil")), other.frames[1].clone()] {
        let opened = member.call(&cluster, 0, &stream, &[frame(1, "before")]);
        let ended = send(
            at(0),
            &stream,
            Some(&opened.proof),
            &[opened.frames[0].clone(), injected],
        )
        .await;
        assert_refused(&ended, "a frame injected into an open ApplyStream");
        let answers = pb::ApplyAnswer::decode(&ended.answered[5..]).expect("the first answer");
        assert_eq!(
            (answers.id, answers.code),
            (1, 0),
            "the genuine frame was answered"
        );
    }
    for i in 0..3 {
        let value = cluster.local_value(i, "ks", "k");
        assert_ne!(value.as_deref(), Some(&b"evil"[..]), "node {i} took evil");
        assert_eq!(cluster.hints_for(i, target), 0);
    }
    assert_eq!(
        cluster.local_value(0, "ks", "k").as_deref(),
        Some(&b"before"[..]),
        "the genuine stream frame was applied"
    );
    cluster.shutdown().await;
}

/// A stream's proof is checked when it opens and each of its messages as it
/// arrives; its caller is checked again at each frame. Node 2 opens an
/// `ApplyStream` to node 0 and a first write is served; node 2 dies and is
/// removed; the stream's next frame ends it with `UNAUTHENTICATED`, and its
/// write is not applied. Address block 204.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_apply_stream_ends_at_its_next_frame_once_its_caller_is_removed() {
    let dirs = tempfile::tempdir().unwrap();
    let mut cluster = TestCluster::start_with(secured(204, &dirs), dirs).await;
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
                deadline_micros: None,
            }],
            ring_checksum: 0,
        }),
    };

    let caller = Member::of(&cluster, 2);
    let removed = caller.host;
    let (frames, outgoing) = futures::channel::mpsc::unbounded();
    frames.unbounded_send(write(1, "before", 1_000)).unwrap();
    let mut answers = caller
        .client(&cluster, 0)
        .apply_stream(outgoing)
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
        async move { !observer.view().is_up(removed) }
    })
    .await;
    cluster
        .topology(0)
        .await
        .remove_node(pb::RemoveNodeRequest {
            host_id: removed.to_string(),
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
    // A new call by the removed node is refused too, with the secret.
    let refused = caller
        .client(&cluster, 0)
        .pull_schema(pb::PullSchemaRequest {})
        .await
        .expect_err("a removed node's call");
    assert_eq!(refused.code(), Code::Unauthenticated, "{refused:?}");
    cluster.shutdown().await;
}
