//! A member that holds the cluster secret forges gossip against a running
//! cluster (issue 40): a record for another host id (two ways), a removal
//! of a live node, a claim on a live node's tokens, and a genuine old
//! record of a node replayed after its restart. Every forgery is refused:
//! every node stays `UN`, keeps its tokens, and none stops; the honest nodes
//! count the forgeries. Then the forger is removed, and the same forgeries
//! from it are dropped unread.
//!
//! Nodes 0-2 are honest, node 3 is the forger: a real member, whose keys
//! the test reads from its data directory, sending crafted datagrams sealed
//! with the secret. Address block 215.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use common::{TestCluster, eventually, get, put};
use ringstore_identity::{NodeKeys, key_file};
use ringstore_membership::envelope::Envelope;
use ringstore_membership::{
    ClusterSecret, Generation, MembershipStats, MetadataStamp, NodeMetadata, NodeState,
    metadata_bodies,
};
use ringstore_placement::{HostId, Token};
use ringstore_proto::v1 as pb;

const SECRET: &str = "gossip-forgery-secret-215";
const VICTIM: usize = 1;
const FORGER: usize = 3;

fn keys_of(cluster: &TestCluster, i: usize) -> NodeKeys {
    key_file::load_or_create(&cluster.node_config(i).data_dir)
        .expect("the node's key file")
        .0
}

/// Sends `record` (encoded, of `subject` at `stamp`) to every honest node,
/// sealed with the secret as `sender` would seal it.
async fn send(
    cluster: &TestCluster,
    sender: HostId,
    record: &[u8],
    stamp: MetadataStamp,
    subject: HostId,
) {
    // Generations above any node's own (unix seconds), growing from one
    // send to the next, so the replay window lets each in.
    static NEXT: AtomicU64 = AtomicU64::new(3_000_000_000);
    let mut envelope = Envelope::new(
        &cluster.node_config(0).cluster_name,
        ClusterSecret::new(SECRET).as_ref(),
        sender,
        Generation(NEXT.fetch_add(1, Ordering::Relaxed)),
    );
    let socket = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
    for body in metadata_bodies(subject, stamp, record) {
        let packet = envelope.seal(&body);
        for i in 0..FORGER {
            socket
                .send_to(&packet, cluster.node_config(i).gossip_address)
                .await
                .unwrap();
        }
    }
}

/// `host`'s metadata as node 0 holds it.
fn of(cluster: &TestCluster, host: HostId) -> NodeMetadata {
    NodeMetadata::clone(&cluster.context(0).view().member(host).unwrap().metadata)
}

async fn stats(cluster: &TestCluster, i: usize) -> MembershipStats {
    cluster.context(i).membership().stats().await.unwrap()
}

/// The victim, as every honest node sees it: up, `Normal`, not removed,
/// owning `tokens`; and no honest node has asked to stop.
async fn all_intact(cluster: &TestCluster, victim: HostId, tokens: &[Token]) {
    for i in 0..FORGER {
        let view = cluster.context(i).view();
        let member = view.member(victim).expect("the victim is known");
        assert!(view.is_up(victim), "node {i} sees the victim down");
        assert_eq!(member.metadata.state, NodeState::Normal, "node {i}");
        assert!(
            !view.removed.contains(&victim),
            "node {i} removed the victim"
        );
        assert_eq!(
            view.ring.tokens_of(victim),
            tokens,
            "node {i}: the victim's tokens"
        );
        let stopping = tokio::time::timeout(
            Duration::from_millis(10),
            cluster.nodes[i].as_ref().expect("running").stop_requested(),
        )
        .await;
        assert!(stopping.is_err(), "node {i} asked to stop");
        let status = cluster
            .admin(i)
            .await
            .status(pb::StatusRequest::default())
            .await
            .unwrap()
            .into_inner();
        for node in &status.nodes {
            assert!(node.up && node.state == "NORMAL", "node {i} shows {node:?}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn forged_gossip_from_a_member_or_a_removed_node_changes_nothing() {
    let mut cluster = TestCluster::start_configured(215, 4, 3, |_, config| {
        config.cluster_secret = Some(SECRET.into());
    })
    .await;
    cluster.create_keyspace(0, "ks", 3).await;
    let mut client = cluster.client(0).await;
    client
        .put(put("ks", "k", "v", pb::ConsistencyLevel::All))
        .await
        .expect("a write at ALL");

    let victim = cluster.context(VICTIM).host_id;
    let forger = cluster.context(FORGER).host_id;
    let forger_keys = keys_of(&cluster, FORGER);
    let victim_keys = keys_of(&cluster, VICTIM);
    let tokens = cluster.context(0).view().ring.tokens_of(victim);

    // A genuine record of the victim from before its restart, newer than
    // anything it sent then (version 1000, Leaving), as a forger who
    // recorded it would hold it.
    let mut old = of(&cluster, victim);
    old.state = NodeState::Leaving;
    old.stamp.version = 1000;
    let old_stamp = old.stamp;
    let old_record = old.sign(&victim_keys).encode().unwrap();
    cluster.stop(VICTIM).await;
    cluster.restart(VICTIM).await;
    cluster.wait_until_settled().await;
    assert!(of(&cluster, victim).stamp > old_stamp);
    let before: Vec<MembershipStats> =
        futures::future::join_all((0..FORGER).map(|i| stats(&cluster, i))).await;

    // 1. The victim's record, Left, far newer, naming the forger's keys.
    let mut left = of(&cluster, victim);
    left.state = NodeState::Left;
    left.stamp.generation = Generation(left.stamp.generation.0 + 1000);
    left.keys = forger_keys.public();
    let stamp = left.stamp;
    send(
        &cluster,
        forger,
        &left.sign(&forger_keys).encode().unwrap(),
        stamp,
        victim,
    )
    .await;
    // 2. The same naming the victim's keys, signed by the forger.
    let mut posing = of(&cluster, victim);
    posing.state = NodeState::Left;
    posing.stamp.generation = Generation(posing.stamp.generation.0 + 1001);
    let stamp = posing.stamp;
    let bytes = posing.sign(&forger_keys).encode().unwrap();
    send(&cluster, forger, &bytes, stamp, victim).await;
    // 3. The forger's own record, signed by it: the victim removed, and the
    //    victim's tokens claimed.
    let mut claim = of(&cluster, forger);
    claim.stamp.version += 100;
    claim.takeovers.removed.push(victim);
    claim.tokens.extend(tokens.iter().copied());
    claim.tokens.sort_unstable();
    let stamp = claim.stamp;
    send(
        &cluster,
        forger,
        &claim.sign(&forger_keys).encode().unwrap(),
        stamp,
        forger,
    )
    .await;
    // 4. The victim's genuine old record, replayed after its restart.
    send(&cluster, forger, &old_record, old_stamp, victim).await;

    // Every honest node has judged every forgery (counted it)...
    eventually(Duration::from_secs(10), "every forgery judged", || async {
        let mut judged = true;
        for (i, before) in before.iter().enumerate() {
            let after = stats(&cluster, i).await;
            judged &= after.metadata_forged >= before.metadata_forged + 2
                && after.claims_refused > before.claims_refused;
        }
        judged
    })
    .await;
    // ...the victim among them (it refused the claim about itself, and
    // asked the others), which kept serving: it does not ask to stop
    // within its asking round and then some.
    let victim_node = cluster.nodes[VICTIM].as_ref().expect("running");
    assert!(
        tokio::time::timeout(Duration::from_secs(4), victim_node.stop_requested())
            .await
            .is_err(),
        "the victim asked to stop"
    );
    all_intact(&cluster, victim, &tokens).await;
    let read = client
        .get(get("ks", "k", pb::ConsistencyLevel::All))
        .await
        .expect("a read at ALL")
        .into_inner();
    assert_eq!(read.value, b"v");

    // The forger dies and is removed; its forgeries are dropped unread.
    cluster.stop(FORGER).await;
    let observer = Arc::clone(cluster.context(0));
    eventually(
        Duration::from_secs(30),
        "node 0 sees the forger down",
        || {
            let observer = observer.clone();
            async move { !observer.view().is_up(forger) }
        },
    )
    .await;
    cluster
        .topology(0)
        .await
        .remove_node(pb::RemoveNodeRequest {
            host_id: forger.to_string(),
        })
        .await
        .expect("removenode");
    eventually(
        Duration::from_secs(30),
        "every node counts the forger removed",
        || async { (0..FORGER).all(|i| cluster.context(i).view().removed.contains(&forger)) },
    )
    .await;
    let before: Vec<MembershipStats> =
        futures::future::join_all((0..FORGER).map(|i| stats(&cluster, i))).await;
    let mut claim = of(&cluster, forger);
    claim.stamp.version += 1000;
    claim.takeovers.removed.push(victim);
    let stamp = claim.stamp;
    send(
        &cluster,
        forger,
        &claim.sign(&forger_keys).encode().unwrap(),
        stamp,
        forger,
    )
    .await;
    eventually(
        Duration::from_secs(10),
        "the removed forger's packets dropped",
        || async {
            let mut all = true;
            for (i, before) in before.iter().enumerate() {
                all &= stats(&cluster, i).await.dropped_removed > before.dropped_removed;
            }
            all
        },
    )
    .await;
    cluster.forget(FORGER);
    all_intact(&cluster, victim, &tokens).await;
    cluster.shutdown().await;
}
