//! Speculative read retry on real processes (block 197): with one of three
//! replicas stopped (SIGSTOP), a QUORUM read of a keyspace whose
//! `speculative_retry` is a fixed delay finishes well before the read
//! timeout, by asking the third replica, while the same read of a keyspace
//! with `speculative_retry none` waits out the timeout.

mod common;

use std::time::{Duration, Instant};

use common::processes::{Processes, eventually, sample, text};

/// The nodes' read round timeout (`timeouts.read_ms`).
const READ_TIMEOUT: Duration = Duration::from_millis(2000);

/// Keys whose QUORUM reads through node 0 contact node `stopped`: it is
/// first or second of their replicas (the read plan asks those two).
fn keys_reading_from(servers: &Processes, keyspace: &str, stopped: usize) -> Vec<String> {
    let address = servers.address(stopped, 7100);
    let keys: Vec<String> = (0..40)
        .map(|n| format!("k{n}"))
        .filter(|key| {
            let listed = servers.cli(0, &["getendpoints", keyspace, key]);
            assert!(listed.status.success(), "{}", text(&listed.stderr));
            text(&listed.stdout)
                .lines()
                .take(2)
                .any(|line| line.trim() == address)
        })
        .take(4)
        .collect();
    assert!(
        keys.len() == 4,
        "too few keys read from node {stopped}: {keys:?}"
    );
    keys
}

/// Reads `key` at QUORUM through node 0: how long the CLI took.
fn timed_quorum_read(servers: &Processes, keyspace: &str, key: &str) -> Duration {
    let started = Instant::now();
    let read = servers.cli(0, &["get", keyspace, key, "--consistency", "QUORUM"]);
    let took = started.elapsed();
    assert!(read.status.success(), "{key}: {}", text(&read.stderr));
    assert_eq!(text(&read.stdout).trim(), format!("value-{key}"));
    took
}

fn speculative_retries(servers: &Processes) -> f64 {
    let (status, page) = common::processes::http_get(&servers.address(0, 7200), "/metrics");
    assert_eq!(status, 200);
    sample(&page, "ringstore_speculative_retries_total").unwrap_or(0.0)
}

#[test]
fn a_quorum_read_with_a_stopped_replica_asks_a_third_one_instead_of_waiting_out_the_timeout() {
    let mut servers = Processes::new(197);
    let timeout = READ_TIMEOUT.as_millis().to_string();
    for i in 0..3 {
        servers.start(i, &[("RINGSTORE_TIMEOUTS__READ_MS", &timeout)]);
    }
    servers.wait_until_all_un(0, 3);
    for (keyspace, setting) in [("fast", "50ms"), ("patient", "none")] {
        let create = servers.cli(
            0,
            &[
                "keyspace",
                "create",
                keyspace,
                "--replication",
                "SimpleStrategy:3",
                "--speculative-retry",
                setting,
            ],
        );
        assert!(create.status.success(), "{}", text(&create.stderr));
    }
    let listed = text(&servers.cli(0, &["keyspace", "list"]).stdout);
    assert!(listed.contains("speculative_retry=50ms"), "{listed}");
    assert!(listed.contains("speculative_retry=none"), "{listed}");
    let bad = servers.cli(
        0,
        &[
            "keyspace",
            "create",
            "bad",
            "--replication",
            "SimpleStrategy:3",
            "--speculative-retry",
            "p100",
        ],
    );
    assert!(!bad.status.success());
    assert!(
        text(&bad.stderr).contains("percentile"),
        "{}",
        text(&bad.stderr)
    );

    let stopped = 2;
    let keys = keys_reading_from(&servers, "fast", stopped);
    for keyspace in ["fast", "patient"] {
        for key in &keys {
            let value = format!("value-{key}");
            let put = servers.cli(0, &["put", keyspace, key, &value, "--consistency", "ALL"]);
            assert!(put.status.success(), "{}", text(&put.stderr));
        }
    }
    // Every node has applied the schema and the writes: reads work at ALL.
    eventually(Duration::from_secs(20), "reads at ALL succeed", || {
        servers
            .cli(0, &["get", "fast", &keys[0], "--consistency", "ALL"])
            .status
            .success()
    });
    let before = speculative_retries(&servers);

    servers.signal(stopped, "STOP");
    let fast: Vec<Duration> = keys
        .iter()
        .map(|key| timed_quorum_read(&servers, "fast", key))
        .collect();
    let patient = timed_quorum_read(&servers, "patient", &keys[0]);
    // Still up as node 0 sees it, so every read above did contact it.
    let stopped_row = format!("UN  {}", servers.address(stopped, 7100));
    let still_up = servers
        .status_rows(0)
        .iter()
        .any(|r| r.starts_with(&stopped_row));
    servers.signal(stopped, "CONT");
    eprintln!("node {stopped} stopped: QUORUM reads took {fast:?} (50ms), {patient:?} (none)");

    for (key, took) in keys.iter().zip(&fast) {
        assert!(
            *took < READ_TIMEOUT / 2,
            "{key} took {took:?} with speculative_retry 50ms (timeout {READ_TIMEOUT:?})"
        );
    }
    assert!(
        patient >= READ_TIMEOUT,
        "without speculative retry the read took {patient:?}: it should wait out {READ_TIMEOUT:?}"
    );
    // Checked after the timings, which fail first if reads did not speculate
    // (slow reads keep node 2 stopped long enough to be seen down).
    assert!(
        still_up,
        "node {stopped} was seen down: the reads may have skipped it"
    );
    let retries = speculative_retries(&servers) - before;
    assert!(
        retries >= keys.len() as f64,
        "{retries} speculative retries counted"
    );
}
