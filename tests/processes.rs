//! Real `ringstore server` processes on 127.30.0.0/24, driven through the
//! CLI as an operator would: status, keyspaces, put/get/delete with exit
//! statuses, a join planned and a node added and decommissioned, a node
//! stopped with SIGTERM, and the CLI's errors.

use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_ringstore");

/// Server processes, killed when dropped (so a failing test leaves none behind).
struct Servers(Vec<Option<Child>>);

impl Drop for Servers {
    fn drop(&mut self) {
        for child in self.0.iter_mut().flatten() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn address(i: usize, port: u16) -> String {
    format!("127.30.0.{}:{port}", i + 1)
}

fn start(i: usize, dir: &Path) -> Child {
    Command::new(BIN)
        .args([
            "server",
            "--cluster-name",
            "processes",
            "--data-dir",
            dir.join(format!("node{i}")).to_str().unwrap(),
            "--listen-address",
            &address(i, 7100),
            "--internode-address",
            &address(i, 7101),
            "--gossip-address",
            &address(i, 7000),
            "--seeds",
            &address(0, 7000),
            "--rack",
            &format!("rack{}", i + 1),
        ])
        .env("RINGSTORE_RING_DELAY_MS", "300")
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.join(format!("node{i}.log"))).unwrap())
        .spawn()
        .expect("the server starts")
}

fn cli(host: usize, args: &[&str]) -> Output {
    Command::new(BIN)
        .arg("--host")
        .arg(address(host, 7100))
        .args(args)
        .output()
        .unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Polls `check` every 200 ms until it holds, failing after `limit`.
fn eventually(limit: Duration, what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !check() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn status_rows(host: usize) -> Vec<String> {
    let output = cli(host, &["status"]);
    text(&output.stdout)
        .lines()
        .filter(|l| {
            let b = l.as_bytes();
            b.len() > 4 && b"UD".contains(&b[0]) && b"NJL".contains(&b[1]) && &b[2..4] == b"  "
        })
        .map(String::from)
        .collect()
}

#[test]
fn an_operator_runs_a_three_process_cluster_from_the_cli() {
    let dir = tempfile::tempdir().unwrap();
    let mut servers = Servers((0..3).map(|i| Some(start(i, dir.path()))).collect());
    eventually(Duration::from_secs(60), "all three nodes are UN", || {
        let rows = status_rows(0);
        rows.len() == 3 && rows.iter().all(|r| r.starts_with("UN  127.30.0."))
    });

    let create = cli(
        0,
        &[
            "keyspace",
            "create",
            "ks",
            "--replication",
            "SimpleStrategy:3",
        ],
    );
    assert!(create.status.success(), "{}", text(&create.stderr));
    let put = cli(
        0,
        &["put", "ks", "greeting", "hello", "--consistency", "QUORUM"],
    );
    assert!(put.status.success(), "{}", text(&put.stderr));
    let get = cli(2, &["get", "ks", "greeting", "--consistency", "quorum"]);
    assert_eq!(
        (get.status.code(), text(&get.stdout)),
        (Some(0), "hello\n".to_string())
    );
    let hex = cli(
        1,
        &[
            "get",
            "ks",
            "6772656574696e67",
            "--hex",
            "--consistency",
            "ALL",
        ],
    );
    assert_eq!(text(&hex.stdout), "68656c6c6f\n");
    assert!(
        cli(1, &["delete", "ks", "greeting", "--consistency", "QUORUM"])
            .status
            .success()
    );
    let gone = cli(2, &["get", "ks", "greeting", "--consistency", "QUORUM"]);
    assert_eq!(
        (gone.status.code(), text(&gone.stderr)),
        (Some(1), "not found\n".to_string())
    );

    // Grow and shrink from the CLI: plan a join, add a fourth node, see its
    // stream in netstats, then decommission it — the process exits by itself.
    let plan = cli(0, &["plan", "join", "--dc", "dc1", "--rack", "rack4"]);
    assert!(plan.status.success(), "{}", text(&plan.stderr));
    assert!(
        text(&plan.stdout).contains("Estimated data to stream"),
        "{}",
        text(&plan.stdout)
    );
    for i in 0..40 {
        let key = format!("grow-{i}");
        assert!(
            cli(0, &["put", "ks", &key, "v", "--consistency", "QUORUM"])
                .status
                .success()
        );
    }
    servers.0.push(Some(start(3, dir.path())));
    eventually(Duration::from_secs(60), "four nodes are UN", || {
        let rows = status_rows(0);
        rows.len() == 4 && rows.iter().all(|r| r.starts_with("UN  127.30.0."))
    });
    let netstats = cli(3, &["netstats"]);
    assert!(
        text(&netstats.stdout).starts_with("Mode: NORMAL\n")
            && text(&netstats.stdout).contains("receiving"),
        "{}",
        text(&netstats.stdout)
    );
    let decommission = cli(3, &["decommission"]);
    assert!(
        decommission.status.success(),
        "{}",
        text(&decommission.stderr)
    );
    assert!(
        text(&decommission.stdout).starts_with("decommissioned: "),
        "{}",
        text(&decommission.stdout)
    );
    let mut fourth = servers.0[3].take().unwrap();
    let exit = fourth.wait().unwrap();
    assert!(
        exit.success(),
        "a decommissioned node exits cleanly: {exit:?}"
    );
    eventually(Duration::from_secs(30), "three nodes remain", || {
        status_rows(0).len() == 3
    });
    for i in 0..40 {
        let get = cli(
            1,
            &["get", "ks", &format!("grow-{i}"), "--consistency", "QUORUM"],
        );
        assert_eq!(text(&get.stdout), "v\n");
    }

    // SIGTERM stops a node cleanly; the others see it down.
    let mut third = servers.0[2].take().unwrap();
    Command::new("kill")
        .args(["-TERM", &third.id().to_string()])
        .status()
        .unwrap();
    let exit = third.wait().unwrap();
    assert!(exit.success(), "a SIGTERM'd node exits cleanly: {exit:?}");
    eventually(Duration::from_secs(30), "node 3 is DN", || {
        status_rows(0)
            .iter()
            .any(|r| r.starts_with("DN  127.30.0.3:7100"))
    });
    let all = cli(0, &["put", "ks", "k", "v", "--consistency", "ALL"]);
    assert_eq!(all.status.code(), Some(2));
    assert!(
        text(&all.stderr).starts_with("UNAVAILABLE: cannot achieve consistency level ALL"),
        "{}",
        text(&all.stderr)
    );
    let refused = cli(2, &["status"]);
    assert_eq!(refused.status.code(), Some(2));
    assert!(
        text(&refused.stderr).contains("cannot connect to a node at 127.30.0.3:7100"),
        "{}",
        text(&refused.stderr)
    );
    let quorum = cli(1, &["put", "ks", "k", "v", "--consistency", "QUORUM"]);
    assert!(quorum.status.success(), "{}", text(&quorum.stderr));
}
