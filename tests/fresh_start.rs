//! A new cluster started all at once, on real processes (block 186): the
//! fresh nodes choose their tokens as one cohort instead of one turn each,
//! so they are all `UN` soon, with balanced effective ownership.

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
