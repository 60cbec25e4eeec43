use std::collections::BTreeSet;

use ringstore_placement::{Location, ReplicationStrategy};

use super::*;
use crate::topology::{Keyspace, NodeState};

fn node(i: u8, dc: &str, tokens: &[i64]) -> Node {
    Node {
        host: HostId::from_u128(u128::from(i)),
        address: format!("127.0.0.{i}:7100").parse().unwrap(),
        location: Location::new(dc, format!("rack{i}")),
        state: NodeState::Normal,
        up: true,
        tokens: tokens.iter().copied().map(Token).collect(),
    }
}

fn address(i: u8) -> SocketAddr {
    format!("127.0.0.{i}:7100").parse().unwrap()
}

/// Four nodes of one DC, four tokens each, spread over the ring; keyspace
/// `ks` at SimpleStrategy RF 2, the ring checksum the nodes would report.
fn topology(nodes: Vec<Node>, strategy: ReplicationStrategy) -> Topology {
    let members = nodes
        .iter()
        .filter(|n| n.state.owns_tokens())
        .map(|n| RingMember::new(n.host, n.location.clone(), n.tokens.clone()));
    let checksum = Ring::new(7, members.collect::<Vec<_>>())
        .unwrap()
        .checksum();
    Topology {
        nodes,
        keyspaces: vec![Keyspace {
            name: "ks".into(),
            strategy,
        }],
        ring_checksum: checksum,
    }
}

fn four_nodes() -> Vec<Node> {
    (1..=4u8)
        .map(|i| {
            let tokens: Vec<i64> = (0..4)
                .map(|v| (v * 4 + i64::from(i) - 8) * (i64::MAX / 9))
                .collect();
            node(i, "dc1", &tokens)
        })
        .collect()
}

fn replicas_of(topology: &Topology, key: &[u8]) -> BTreeSet<SocketAddr> {
    let table = RoutingTable::new(topology, None, true);
    let map = &table.maps["ks"];
    let token = Murmur3Partitioner::token(key).unwrap();
    map.replicas(token)
        .ids()
        .map(|id| table.nodes[&id].address)
        .collect()
}

#[test]
fn a_keys_plan_starts_with_its_replicas_as_placement_computes_them() {
    let topology = topology(four_nodes(), ReplicationStrategy::simple(2).unwrap());
    let table = RoutingTable::new(&topology, None, true);
    assert!(table.ring_matches());
    for k in 0..200 {
        let key = format!("key{k}").into_bytes();
        let plan = table.plan_for_key("ks", &key, k);
        assert_eq!(plan.replicas, 2);
        let first: BTreeSet<SocketAddr> = plan.nodes[..2].iter().copied().collect();
        assert_eq!(first, replicas_of(&topology, &key), "key{k}");
        // Every node appears once: the others follow as fallbacks.
        let all: BTreeSet<SocketAddr> = plan.nodes.iter().copied().collect();
        assert_eq!((all.len(), plan.nodes.len()), (4, 4));
    }
}

#[test]
fn turns_rotate_over_the_replicas() {
    let topology = topology(four_nodes(), ReplicationStrategy::simple(3).unwrap());
    let table = RoutingTable::new(&topology, None, true);
    let firsts: BTreeSet<SocketAddr> = (0..3)
        .map(|turn| table.plan_for_key("ks", b"key1", turn).nodes[0])
        .collect();
    assert_eq!(firsts, replicas_of(&topology, b"key1"));
}

#[test]
fn a_down_replica_goes_after_the_up_nodes_but_before_other_down_ones() {
    let mut nodes = four_nodes();
    let all = topology(nodes.clone(), ReplicationStrategy::simple(2).unwrap());
    let table = RoutingTable::new(&all, None, true);
    let plan = table.plan_for_key("ks", b"key7", 0);
    let (replica, other) = (plan.nodes[0], plan.nodes[3]);
    for n in &mut nodes {
        n.up = n.address != replica && n.address != other;
    }
    let table = RoutingTable::new(
        &topology(nodes, ReplicationStrategy::simple(2).unwrap()),
        None,
        true,
    );
    let plan = table.plan_for_key("ks", b"key7", 0);
    assert_eq!(plan.replicas, 1, "only the up replica counts");
    assert_eq!(plan.nodes.len(), 4);
    assert_eq!(&plan.nodes[2..], &[replica, other]);
}

#[test]
fn local_replicas_come_first_then_remote_ones() {
    let mut nodes = four_nodes();
    for n in &mut nodes[2..] {
        n.location = Location::new("dc2", n.location.rack.as_str());
    }
    let strategy = ReplicationStrategy::network_topology([("dc1", 1), ("dc2", 1)]).unwrap();
    let topology = topology(nodes, strategy);
    let table = RoutingTable::new(&topology, Some("dc2".into()), true);
    for turn in 0..10 {
        let plan = table.plan_for_key("ks", format!("k{turn}").as_bytes(), turn);
        assert_eq!(plan.replicas, 2);
        assert!(
            [address(3), address(4)].contains(&plan.nodes[0]),
            "a dc2 replica first: {plan:?}"
        );
        assert!([address(1), address(2)].contains(&plan.nodes[1]));
    }
    // Without a key, the local DC's nodes still come first, in turn.
    let any = table.plan_any(1);
    assert_eq!(&any.nodes[..2], &[address(4), address(3)]);
    assert_eq!(any.replicas, 0);
}

#[test]
fn an_unknown_keyspace_or_routing_turned_off_gives_the_plain_round_robin() {
    let topology = topology(four_nodes(), ReplicationStrategy::simple(2).unwrap());
    let table = RoutingTable::new(&topology, None, true);
    assert!(!table.knows_keyspace("other"));
    let plan = table.plan_for_key("other", b"key1", 2);
    assert_eq!(plan.replicas, 0);
    assert_eq!(plan.nodes, [address(3), address(4), address(1), address(2)]);
    let off = RoutingTable::new(&topology, None, false);
    assert_eq!(off.plan_for_key("ks", b"key1", 2), plan);
    assert_eq!(off.plan_for_key("ks", b"", 0).replicas, 0);
}

#[test]
fn joining_members_coordinate_last_among_the_up_and_a_foreign_checksum_is_noticed() {
    let mut nodes = four_nodes();
    nodes[3].state = NodeState::Joining;
    nodes[2].up = false;
    let mut topology = topology(nodes, ReplicationStrategy::simple(1).unwrap());
    let table = RoutingTable::new(&topology, None, true);
    assert!(table.ring_matches());
    for k in 0..100 {
        for turn in 0..3 {
            let plan = table.plan_for_key("ks", format!("key{k}").as_bytes(), turn);
            // Nodes 1 and 2 own tokens and are up; 4 joins; 3 is down.
            assert_eq!(plan.nodes.len(), 4);
            assert_eq!(
                plan.nodes[2],
                address(4),
                "{plan:?}: a joiner after the owners"
            );
            assert_eq!(plan.nodes[3], address(3), "{plan:?}: the down node last");
        }
    }
    let any = table.plan_any(1);
    assert_eq!(any.nodes, [address(2), address(1), address(4), address(3)]);
    topology.ring_checksum ^= 1;
    assert!(!RoutingTable::new(&topology, None, true).ring_matches());
}

#[test]
fn suspects_go_last_and_stop_counting_as_replicas() {
    let mut plan = QueryPlan {
        nodes: vec![address(1), address(2), address(3), address(4)],
        replicas: 2,
    };
    plan.demote(&[address(1), address(3)]);
    assert_eq!(plan.nodes, [address(2), address(4), address(1), address(3)]);
    assert_eq!(plan.replicas, 1);
    plan.demote(&[]);
    assert_eq!(plan.replicas, 1);
}

/// The key's replicas' addresses in placement order.
fn placement_order(table: &RoutingTable, key: &[u8]) -> Vec<SocketAddr> {
    let token = Murmur3Partitioner::token(key).unwrap();
    table.maps["ks"]
        .replicas(token)
        .ids()
        .map(|id| table.nodes[&id].address)
        .collect()
}

#[test]
fn a_keys_serial_plan_starts_with_its_first_replica_on_every_turn() {
    let topology = topology(four_nodes(), ReplicationStrategy::simple(3).unwrap());
    let table = RoutingTable::new(&topology, None, true);
    let mut coordinators = BTreeSet::new();
    for k in 0..100 {
        let key = format!("key{k}").into_bytes();
        let order = placement_order(&table, &key);
        for turn in 0..5 {
            let plan = table.plan_for_serial("ks", &key, SerialConsistency::Serial, turn);
            assert_eq!(plan.replicas, 3);
            assert_eq!(&plan.nodes[..3], &order[..], "key{k} on turn {turn}");
            assert_eq!(plan.nodes.len(), 4, "the other node follows as a fallback");
        }
        coordinators.insert(order[0]);
    }
    assert_eq!(coordinators.len(), 4, "keys spread their coordinators");
}

#[test]
fn a_down_first_replica_hands_the_key_to_the_next_live_one_and_goes_last() {
    let mut nodes = four_nodes();
    let table = RoutingTable::new(
        &topology(nodes.clone(), ReplicationStrategy::simple(2).unwrap()),
        None,
        true,
    );
    let order = placement_order(&table, b"key3");
    let other = nodes
        .iter()
        .map(|n| n.address)
        .find(|a| !order.contains(a))
        .unwrap();
    for n in &mut nodes {
        n.up = n.address != order[0] && n.address != other;
    }
    let table = RoutingTable::new(
        &topology(nodes, ReplicationStrategy::simple(2).unwrap()),
        None,
        true,
    );
    let plan = table.plan_for_serial("ks", b"key3", SerialConsistency::Serial, 7);
    assert_eq!(plan.nodes[0], order[1], "{plan:?}");
    assert_eq!(plan.replicas, 1);
    assert_eq!(plan.nodes.len(), 4);
    assert_eq!(
        &plan.nodes[2..],
        &[order[0], other],
        "the down replica before the other down node"
    );
}

#[test]
fn local_serial_names_only_the_local_data_centers_nodes_first_replica_first() {
    let mut nodes = four_nodes();
    for n in &mut nodes[2..] {
        n.location = Location::new("dc2", n.location.rack.as_str());
    }
    let strategy = ReplicationStrategy::network_topology([("dc1", 2), ("dc2", 2)]).unwrap();
    let topology = topology(nodes, strategy);
    for (dc, local) in [
        ("dc1", [address(1), address(2)]),
        ("dc2", [address(3), address(4)]),
    ] {
        let table = RoutingTable::new(&topology, Some(dc.into()), true);
        for k in 0..50 {
            let key = format!("key{k}").into_bytes();
            let first_local = placement_order(&table, &key)
                .into_iter()
                .find(|a| local.contains(a))
                .unwrap();
            let plan = table.plan_for_serial("ks", &key, SerialConsistency::LocalSerial, k);
            assert_eq!(plan.nodes[0], first_local, "{dc} key{k}");
            assert_eq!(plan.replicas, 2);
            let named: BTreeSet<SocketAddr> = plan.nodes.iter().copied().collect();
            assert_eq!(named, local.into_iter().collect(), "{dc} key{k}: {plan:?}");
            // SERIAL ignores the client's data center: every client picks
            // the same coordinator.
            let serial = table.plan_for_serial("ks", &key, SerialConsistency::Serial, k);
            assert_eq!(serial.nodes[0], placement_order(&table, &key)[0]);
            assert_eq!(serial.replicas, 4);
        }
    }
}

#[test]
fn a_serial_plan_without_routing_is_the_round_robin_kept_to_the_local_dc_for_local_serial() {
    let mut nodes = four_nodes();
    nodes[3].location = Location::new("dc2", "rack4");
    let topology = topology(nodes, ReplicationStrategy::simple(2).unwrap());
    let table = RoutingTable::new(&topology, Some("dc2".into()), true);
    let unknown = table.plan_for_serial("other", b"key1", SerialConsistency::Serial, 1);
    assert_eq!(unknown, table.plan_any(1));
    let local = table.plan_for_serial("other", b"key1", SerialConsistency::LocalSerial, 1);
    assert_eq!(local.nodes, [address(4)]);
    let off = RoutingTable::new(&topology, Some("dc2".into()), false);
    assert_eq!(
        off.plan_for_serial("ks", b"key1", SerialConsistency::Serial, 2),
        off.plan_any(2)
    );
    assert_eq!(
        table
            .plan_for_serial("ks", b"", SerialConsistency::Serial, 0)
            .replicas,
        0
    );
}
