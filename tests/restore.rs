//! Restoring a snapshot onto a node that replaced a dead one (the book's
//! `docs/src/operations/backups.md`,
//! "Restore", step 2 with `replace_address`), on real processes (block 120).
//! At RF 1 the dead node's data has no other copy: the replacement takes its
//! tokens with nothing to stream, and only the snapshot brings the data back.

mod common;

use std::time::Duration;

use common::processes::{Processes, eventually, text};

/// The CLI's stdout against node `host`, which must succeed.
fn ok(servers: &Processes, host: usize, args: &[&str]) -> String {
    let output = servers.cli(host, args);
    assert!(
        output.status.success(),
        "{args:?}: {}",
        text(&output.stderr)
    );
    text(&output.stdout)
}

/// The keys (of `keys`) that a `get` through `host` does not find.
fn missing(servers: &Processes, host: usize, keys: &[String]) -> Vec<String> {
    keys.iter()
        .filter(|key| servers.cli(host, &["get", "ks", key]).status.code() == Some(1))
        .cloned()
        .collect()
}

#[test]
fn a_snapshot_restored_onto_the_node_that_replaced_a_dead_one_gives_back_its_data() {
    let mut servers = Processes::new(120);
    servers.start(0, &[]);
    servers.wait_until_all_un(0, 1);
    servers.start(1, &[]);
    servers.wait_until_all_un(0, 2);
    servers.create_keyspace("ks", "SimpleStrategy:1");
    let keys: Vec<String> = (0..40).map(|i| format!("key-{i}")).collect();
    for (i, key) in keys.iter().enumerate() {
        ok(&servers, 0, &["put", "ks", key, &format!("value-{i}")]);
    }
    ok(&servers, 1, &["snapshot", "-t", "nightly", "ks"]);
    let snapshot = std::fs::read(servers.data_dir(1).join("snapshots/nightly/ks.cells")).unwrap();

    // Node 1 dies with its disk; a fresh node replaces it.
    servers.kill(1);
    eventually(Duration::from_secs(30), "node 0 sees node 1 down", || {
        servers
            .status_rows(0)
            .iter()
            .any(|row| row.starts_with("DN  127.120.0.2"))
    });
    std::fs::remove_dir_all(servers.data_dir(1)).unwrap();
    servers.start(2, &[("RINGSTORE_REPLACE_ADDRESS", "127.120.0.2")]);
    eventually(
        Duration::from_secs(60),
        "the replacement is UN in node 1's place",
        || {
            let rows = servers.status_rows(0);
            rows.len() == 2
                && rows.iter().all(|row| row.starts_with("UN  "))
                && rows.iter().any(|row| row.starts_with("UN  127.120.0.3"))
        },
    );
    // Node 1's keys had no other copy: they are gone.
    let lost = missing(&servers, 0, &keys);
    assert!(!lost.is_empty(), "node 1 held none of the 40 keys");

    // The snapshot, copied into the replacement's data directory, brings
    // them back.
    let copied = servers.data_dir(2).join("snapshots/nightly");
    std::fs::create_dir_all(&copied).unwrap();
    std::fs::write(copied.join("ks.cells"), &snapshot).unwrap();
    assert_eq!(
        ok(&servers, 2, &["restore", "-t", "nightly"]),
        format!("restored {} keys of ks from snapshot nightly\n", lost.len())
    );
    for (i, key) in keys.iter().enumerate() {
        assert_eq!(
            ok(&servers, 0, &["get", "ks", key]),
            format!("value-{i}\n"),
            "{key}"
        );
    }
}
