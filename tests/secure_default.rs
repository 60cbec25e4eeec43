//! Secure by default (issue 40): a node whose internode or gossip address —
//! bound (`0.0.0.0` counts) or advertised — is not loopback refuses to
//! start without a cluster secret, exiting non-zero with an error that names
//! the choices; a short secret is refused everywhere; with `--insecure` the
//! node starts and logs that it is open.
//!
//! Address block 213. A refused node binds nothing (the check comes first);
//! the insecure one binds loopback only and merely advertises another
//! address.

mod common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::processes::{Processes, eventually, text};

const BIN: &str = env!("CARGO_BIN_EXE_ringstore");

/// Runs `ringstore server` with `args`, its bind addresses loopback ones of
/// block 213 unless `args` sets them, and waits (at most 20 s) for it to
/// exit; its exit success and stderr. A server that starts instead of
/// exiting is killed, and fails the test.
fn server_exit(args: &[&str]) -> (bool, String) {
    let dir = tempfile::tempdir().unwrap();
    let mut command = Command::new(BIN);
    command.args(["server", "--data-dir", dir.path().to_str().unwrap()]);
    for (flag, address) in [
        ("--listen-address", "127.213.0.9:7100"),
        ("--internode-address", "127.213.0.9:7101"),
        ("--gossip-address", "127.213.0.9:7000"),
    ] {
        if !args.contains(&flag) {
            command.args([flag, address]);
        }
    }
    let mut child = command
        .args(args)
        .env_remove("RINGSTORE_CLUSTER_SECRET")
        .env_remove("RINGSTORE_INSECURE")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let output = child.wait_with_output().unwrap();
            return (status.success(), text(&output.stderr));
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("ringstore server {args:?} started instead of refusing to");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_reachable_node_without_a_secret_refuses_to_start_and_names_the_choices() {
    for args in [
        &[
            "--gossip-address",
            "0.0.0.0:7000",
            "--broadcast-gossip-address",
            "127.213.0.9:7000",
        ][..],
        &[
            "--internode-address",
            "0.0.0.0:7101",
            "--broadcast-internode-address",
            "127.213.0.9:7101",
        ],
        &["--broadcast-gossip-address", "10.213.0.9:7000"],
        &["--broadcast-internode-address", "10.213.0.9:7101"],
    ] {
        let (success, stderr) = server_exit(args);
        assert!(!success, "{args:?} started");
        for needle in [
            "is not a loopback address",
            "cluster_secret_file",
            "RINGSTORE_CLUSTER_SECRET",
            "--insecure",
        ] {
            assert!(
                stderr.contains(needle),
                "{args:?}: no {needle:?} in {stderr}"
            );
        }
    }
}

#[test]
fn an_empty_or_short_secret_is_refused_even_on_loopback() {
    for secret in ["", "only-15-bytes!!"] {
        let (success, stderr) = server_exit(&["--cluster-secret", secret]);
        assert!(!success, "{secret:?} was accepted");
        assert!(stderr.contains("at least 16"), "{secret:?}: {stderr}");
    }
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("secret");
    std::fs::write(&file, "# no secret here\n").unwrap();
    let (success, stderr) = server_exit(&["--cluster-secret-file", file.to_str().unwrap()]);
    assert!(!success);
    assert!(stderr.contains("holds no secret"), "{stderr}");
}

#[test]
fn with_insecure_a_reachable_node_starts_and_says_it_is_open() {
    let mut servers = Processes::new(213);
    servers.start(
        0,
        &[
            ("RINGSTORE_BROADCAST_GOSSIP_ADDRESS", "10.213.0.1:7000"),
            ("RINGSTORE_INSECURE", "true"),
        ],
    );
    eventually(Duration::from_secs(30), "the node serves", || {
        servers.cli(0, &["status"]).status.success()
    });
    let log = servers.log(0);
    assert!(log.contains("INSECURE (started with --insecure)"), "{log}");
    assert!(
        log.contains("10.213.0.1:7000"),
        "it names the open address: {log}"
    );
}
