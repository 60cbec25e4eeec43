//! `getendpoints` on a live six-node, three-rack cluster started with
//! `initial_token`s agrees with the placement crate for random keys, and the
//! real binary prints the same.

mod common;

use std::sync::Arc;

use common::TestCluster;
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use ringstore_placement::allocation::random_tokens;
use ringstore_placement::{
    HostId, Location, Murmur3Partitioner, ReplicaMap, ReplicationStrategy, Ring, RingMember,
};
use ringstore_proto::v1 as pb;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn getendpoints_agrees_with_the_placement_crate() {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = StdRng::seed_from_u64(6);
    let mut ring = Ring::empty(0);
    let mut configs = Vec::new();
    for i in 0..6 {
        let mut config = TestCluster::config(29, i, 3, dir.path());
        let tokens = random_tokens(&ring, 8, &mut rng).unwrap();
        config.num_tokens = 8;
        config.initial_token = Some(tokens.clone());
        // Host ids are chosen by the nodes; the expected ring uses the client
        // address's last byte as a stand-in and maps back below.
        let stand_in = HostId::from_u128(i as u128 + 1);
        ring = ring
            .with_member(
                0,
                RingMember::new(stand_in, Location::new("dc1", config.rack.as_str()), tokens),
            )
            .unwrap();
        configs.push(config);
    }
    let cluster = TestCluster::start_with(configs, dir).await;
    let strategy = ReplicationStrategy::network_topology([("dc1", 3)]).unwrap();
    cluster.create_nts_keyspace(0, "ks", &[("dc1", 3)]).await;
    let expected = ReplicaMap::new(Arc::new(ring), &strategy);
    let address_of = |host: HostId| cluster.address(host.0.as_u128() as usize - 1).to_string();

    let mut admin = cluster.admin(3).await;
    for _ in 0..200 {
        let key: Vec<u8> = (0..rng.random_range(1..24)).map(|_| rng.random()).collect();
        let token = Murmur3Partitioner::token(&key).unwrap();
        let want: Vec<String> = expected.replicas(token).ids().map(address_of).collect();
        let got = admin
            .get_endpoints(pb::GetEndpointsRequest {
                keyspace: "ks".into(),
                key: key.clone(),
            })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(got.token, token.0);
        assert_eq!(got.endpoints, want, "key {}", hex::encode(&key));
    }

    // The binary prints one address per line, in the same order.
    let key = b"user:42";
    let want: Vec<String> = expected
        .replicas(Murmur3Partitioner::token(key).unwrap())
        .ids()
        .map(address_of)
        .collect();
    let host = cluster.address(0).to_string();
    let output = tokio::task::spawn_blocking(move || {
        std::process::Command::new(env!("CARGO_BIN_EXE_ringstore"))
            .args(["--host", &host, "getendpoints", "ks", "user:42"])
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let lines: Vec<String> = String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .map(String::from)
        .collect();
    assert_eq!(lines, want);
    cluster.shutdown().await;
}
