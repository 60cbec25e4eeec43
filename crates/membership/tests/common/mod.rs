//! Building simulated clusters for the membership tests.

// Each test file uses a part of these.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::time::Duration;

use rand::SeedableRng;
use rand::rngs::StdRng;
use ringstore_membership::sim::{LinkModel, Simulation};
use ringstore_membership::{
    ClusterSecret, Generation, MembershipConfig, MetadataStamp, NodeMetadata, NodeState,
};
use ringstore_placement::allocation::random_tokens;
use ringstore_placement::{HostId, Ring};

/// The failure-detection bound the default preset promises.
pub const DETECTION_BOUND: Duration = Duration::from_secs(10);

/// Node `i`'s gossip address.
pub fn addr(i: usize) -> SocketAddr {
    SocketAddr::from(([10, 0, (i / 250) as u8, (i % 250) as u8 + 1], 7000))
}

/// Metadata of node `i` with `tokens` random tokens, three racks round-robin.
pub fn metadata(i: usize, tokens: usize, cluster: &str) -> NodeMetadata {
    let mut rng = StdRng::seed_from_u64(i as u64 + 1000);
    NodeMetadata {
        host_id: HostId::from_u128(i as u128 + 1),
        stamp: MetadataStamp {
            generation: Generation(100),
            version: 1,
        },
        cluster_name: cluster.into(),
        dc: "dc1".into(),
        rack: format!("rack{}", i % 3 + 1).into(),
        client_addr: SocketAddr::from(([10, 1, 0, i as u8], 7100)),
        internode_addr: SocketAddr::from(([10, 1, 0, i as u8], 7101)),
        gossip_addr: addr(i),
        tokens: random_tokens(&Ring::empty(0), tokens, &mut rng).unwrap(),
        state: NodeState::Normal,
        load_bytes: 0,
        schema_version: uuid::Uuid::nil(),
        software_version: "test".into(),
        takeovers: Default::default(),
        keys: Default::default(),
    }
}

/// The default LAN preset, seeded with node 0.
pub fn config(cluster: &str, secret: Option<&str>) -> MembershipConfig {
    MembershipConfig::lan(cluster, vec![addr(0)]).with_secret(secret.and_then(ClusterSecret::new))
}

/// Starts `n` nodes of cluster "test" (16 tokens each) and waits for convergence.
/// Returns the simulation and how long convergence took after the last start.
pub fn cluster(n: usize, seed: u64) -> (Simulation, Duration) {
    cluster_with(n, seed, 16, LinkModel::lan())
}

/// Like [`cluster`], with a token count and link model.
pub fn cluster_with(n: usize, seed: u64, tokens: usize, link: LinkModel) -> (Simulation, Duration) {
    let mut sim = Simulation::new(seed, link);
    for i in 0..n {
        sim.add_node(config("test", None), metadata(i, tokens, "test"));
    }
    let all: Vec<usize> = (0..n).collect();
    let took = sim
        .run_until(Duration::from_secs(120), |s| s.converged(&all))
        .unwrap_or_else(|| panic!("{n} nodes did not converge within 120 s"));
    (sim, took)
}

/// A LAN that loses 1 % of the packets.
pub fn lossy_lan() -> LinkModel {
    LinkModel {
        drop_probability: 0.01,
        ..LinkModel::lan()
    }
}

/// Starts `n` nodes of cluster "test" (16 tokens each) at once, each
/// remembering the others' records as after a whole-cluster restart, each
/// with `config()`; does not wait for them to converge.
pub fn restarted_cluster(
    n: usize,
    seed: u64,
    link: LinkModel,
    config: impl Fn() -> MembershipConfig,
) -> Simulation {
    let mut sim = Simulation::new(seed, link);
    sim.add_nodes_remembering(
        (0..n)
            .map(|i| (config(), metadata(i, 16, "test")))
            .collect(),
    );
    sim
}
