//! New clusters on real processes: started all at once (block 186), the
//! fresh nodes choose their tokens as one cohort instead of one turn each,
//! so they are all `UN` soon, with balanced effective ownership; and before
//! its first node is `UN` (block 187), a new cluster tells its clients that
//! it is still starting.

mod common;

use std::time::{Duration, Instant};

use common::processes::{Processes, eventually, text};

/// How many nodes start together, over three racks.
const NODES: usize = 9;
/// How soon all of them must be `UN` (debug build, a two-core machine):
/// they took 3 to 4.5 s together; one turn each took 16 s.
const ALL_UN_WITHIN: Duration = Duration::from_secs(10);

/// The effective ownership column of `status KEYSPACE` on node `host`, in %.
fn effective_ownership(servers: &Processes, host: usize, keyspace: &str) -> Vec<f64> {
    let status = text(&servers.cli(host, &["status", keyspace]).stdout);
    assert!(status.contains("Owns (effective)"), "{status}");
    status
        .lines()
        .filter(|l| l.starts_with("UN  ") || l.starts_with("DN  "))
        .map(|row| {
            let owns = row
                .split_whitespace()
                .find(|f| f.ends_with('%'))
                .unwrap_or_else(|| panic!("no ownership in {row:?}"));
            owns.trim_end_matches('%').parse().unwrap()
        })
        .collect()
}

#[test]
fn a_new_cluster_started_at_once_is_all_up_and_normal_soon_with_balanced_ownership() {
    let mut servers = Processes::new(186);
    servers.set_racks(3);
    let seeds: Vec<String> = (0..3).map(|i| servers.address(i, 7000)).collect();
    servers.set_seeds(&seeds.join(","));
    let started = Instant::now();
    for i in 0..NODES {
        servers.start(i, &[]);
    }
    let prefix = "UN  127.186.0.";
    eventually(2 * ALL_UN_WITHIN, "every node is UN", || {
        let rows = servers.status_rows(0);
        rows.len() == NODES && rows.iter().all(|r| r.starts_with(prefix))
    });
    let took = started.elapsed();
    eprintln!("{NODES} fresh nodes all UN after {took:?}");
    assert!(
        took < ALL_UN_WITHIN,
        "{NODES} fresh nodes took {took:?} to be all UN"
    );
    // Every node chose as one of the cohort, none had to choose again.
    for i in 0..NODES {
        let log = servers.log(i);
        assert!(!log.contains("choosing again"), "node {i}: {log}");
    }

    servers.create_keyspace("ks", "NetworkTopologyStrategy:dc1=3");
    let owned = effective_ownership(&servers, 0, "ks");
    assert_eq!(owned.len(), NODES);
    let total: f64 = owned.iter().sum();
    assert!(
        (total - 300.0).abs() < 1.0,
        "RF 3 owns 300 % in all: {owned:?}"
    );
    let (min, max) = owned
        .iter()
        .fold((f64::MAX, 0.0_f64), |(lo, hi), &o| (lo.min(o), hi.max(o)));
    assert!(max / min <= 1.25, "effective ownership {owned:?}");
}

/// A client of a brand-new one-node cluster, in the seconds before the node
/// has chosen its tokens (block 187): its writes and reads are refused with
/// `UNAVAILABLE` saying the cluster is still starting, not with a
/// consistency level's arithmetic ("2 replicas required, 1 alive", the
/// joining node counted as pending), and they succeed once the node is `UN`.
#[test]
fn a_new_cluster_refuses_requests_as_still_starting_until_a_node_is_up_and_normal() {
    let mut servers = Processes::new(187);
    // A ring delay long enough that the keyspace is created well before the
    // node chooses tokens, even on a loaded machine.
    servers.start(0, &[("RINGSTORE_RING_DELAY_MS", "8000")]);
    eventually(
        Duration::from_secs(20),
        "the schema service answers",
        || {
            let create = servers.cli(
                0,
                &[
                    "keyspace",
                    "create",
                    "ks",
                    "--replication",
                    "SimpleStrategy:1",
                ],
            );
            create.status.success()
        },
    );
    let mut refused_as_starting = 0;
    for (i, args) in [
        &["put", "ks", "k", "v1", "--consistency", "ONE"][..],
        &["get", "ks", "k", "--consistency", "ONE"][..],
    ]
    .into_iter()
    .enumerate()
    {
        let before = servers.status_rows(0);
        let answer = servers.cli(0, args);
        let stderr = text(&answer.stderr);
        if answer.status.success() {
            // Only possible if the node went UN in between.
            let after = servers.status_rows(0);
            assert!(after.iter().any(|r| r.starts_with("UN ")), "{after:?}");
            continue;
        }
        assert!(
            stderr.contains("UNAVAILABLE") && stderr.contains("the cluster is still starting"),
            "request {i} before the node is UN ({before:?}): {stderr}"
        );
        assert!(!stderr.contains("replicas required"), "{stderr}");
        refused_as_starting += 1;
    }
    assert!(
        refused_as_starting > 0,
        "the node was UN before any request: nothing was checked"
    );
    servers.wait_until_all_un(0, 1);
    let put = servers.cli(0, &["put", "ks", "k", "v2", "--consistency", "ONE"]);
    assert!(put.status.success(), "{}", text(&put.stderr));
    let get = servers.cli(0, &["get", "ks", "k", "--consistency", "ONE"]);
    assert!(get.status.success(), "{}", text(&get.stderr));
    assert!(text(&get.stdout).contains("v2"), "{}", text(&get.stdout));
}
