//! The membership agent over real UDP on loopback (127.31.1.0/24): three
//! nodes form a cluster, share a metadata change, and see a stopped node down.
//! Real time, so every wait polls with a deadline.

use std::net::SocketAddr;
use std::time::Duration;

use ringstore_membership::{
    ClusterSecret, Generation, Liveness, Membership, MembershipConfig, MembershipHandle,
    MetadataStamp, NodeIdentity, NodeMetadata, NodeState,
};
use ringstore_placement::{HostId, Token};

fn addr(i: u8) -> SocketAddr {
    SocketAddr::from(([127, 31, 1, i + 1], 7000))
}

/// A quick preset for a test on loopback.
fn fast_config() -> MembershipConfig {
    let mut config = MembershipConfig::lan("udp-test", vec![addr(0)])
        .with_secret(ClusterSecret::new("udp-secret"));
    config.swim.probe_period = Duration::from_millis(300);
    config.swim.probe_rtt = Duration::from_millis(100);
    config.swim.suspect_to_down_after = Duration::from_secs(1);
    config.metadata_gossip_interval = Duration::from_millis(200);
    config.seed_retry_interval = Duration::from_millis(300);
    config
}

async fn start_node(
    i: u8,
    shutdown: tokio::sync::oneshot::Receiver<()>,
) -> (MembershipHandle, tokio::task::JoinHandle<()>) {
    let host_id = HostId::from_u128(i as u128 + 1);
    let generation = Generation(1);
    let metadata = NodeMetadata {
        host_id,
        stamp: MetadataStamp {
            generation,
            version: 1,
        },
        cluster_name: "udp-test".into(),
        dc: "dc1".into(),
        rack: "rack1".into(),
        client_addr: SocketAddr::from(([127, 31, 1, i + 1], 7100)),
        internode_addr: SocketAddr::from(([127, 31, 1, i + 1], 7101)),
        gossip_addr: addr(i),
        tokens: vec![Token(i as i64 * 1000)],
        state: NodeState::Normal,
        load_bytes: 0,
        schema_version: uuid::Uuid::nil(),
        software_version: "test".into(),
        takeovers: Default::default(),
        keys: Default::default(),
    };
    let identity = NodeIdentity {
        host_id,
        gossip_addr: addr(i),
        generation,
        rejoin: 0,
    };
    let keys = std::sync::Arc::new(ringstore_identity::NodeKeys::for_test(i as u64 + 1));
    let membership = Membership::new(fast_config(), identity, metadata, keys, i as u64);
    let shutdown = async move {
        let _ = shutdown.await;
    };
    ringstore_membership::start(membership, addr(i), shutdown)
        .await
        .expect("binds on loopback")
}

/// Polls `check` every 50 ms until it holds or `deadline` passes.
async fn eventually(deadline: Duration, what: &str, mut check: impl FnMut() -> bool) {
    let end = tokio::time::Instant::now() + deadline;
    while !check() {
        assert!(
            tokio::time::Instant::now() < end,
            "timed out waiting until {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_nodes_gossip_over_loopback_udp() {
    let mut nodes = Vec::new();
    let mut stops = Vec::new();
    for i in 0..3 {
        let (stop, shutdown) = tokio::sync::oneshot::channel();
        stops.push(stop);
        nodes.push(start_node(i, shutdown).await);
    }
    let handles: Vec<MembershipHandle> = nodes.iter().map(|(h, _)| h.clone()).collect();
    eventually(
        Duration::from_secs(15),
        "all three see three up members",
        || {
            let checksum = handles[0].view().ring.checksum();
            handles.iter().all(|h| {
                let view = h.view();
                view.members.len() == 3
                    && view.up_members().count() == 3
                    && view.ring.checksum() == checksum
            })
        },
    )
    .await;

    handles[2]
        .update_local(|m| m.load_bytes = 99)
        .await
        .unwrap();
    eventually(
        Duration::from_secs(10),
        "the metadata change reaches everyone",
        || {
            handles
                .iter()
                .all(|h| h.view().members[&HostId::from_u128(3)].metadata.load_bytes == 99)
        },
    )
    .await;

    let stats = handles[0].stats().await.unwrap();
    assert!(
        stats.packets_received > 0 && stats.dropped() == 0,
        "{stats:?}"
    );

    // Kill node 2 abruptly: the others must detect it.
    let (_, task) = nodes.pop().unwrap();
    task.abort();
    let survivors: Vec<MembershipHandle> = nodes.iter().map(|(h, _)| h.clone()).collect();
    eventually(
        Duration::from_secs(15),
        "the survivors see node 2 down",
        || {
            survivors
                .iter()
                .all(|h| h.view().members[&HostId::from_u128(3)].liveness == Liveness::Down)
        },
    )
    .await;
    for h in &survivors {
        assert_eq!(
            h.view().ring.tokens_of(HostId::from_u128(3)),
            vec![Token(2000)],
            "down keeps its tokens"
        );
    }

    // Shut node 1 down gracefully: its task stops, and node 0 sees it down at once
    // (it announced its departure) — well before failure detection could.
    let (_, task) = nodes.pop().unwrap();
    stops.remove(1).send(()).unwrap();
    tokio::time::timeout(Duration::from_secs(5), task)
        .await
        .expect("the task stops")
        .unwrap();
    eventually(
        Duration::from_millis(900),
        "node 0 sees the departed node down",
        || handles[0].view().members[&HostId::from_u128(2)].liveness == Liveness::Down,
    )
    .await;
}
