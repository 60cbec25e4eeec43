//! `ringstore repair` with real processes (address blocks 93, 94 and 97;
//! see `tests/processes.rs`): a repair whose coordinator is killed with
//! SIGKILL half-way continues after the restart from the last finished
//! range and completes; a repair with a replica down fails naming the
//! ranges; one with a replica paused for a while waits for it and
//! completes.

mod common;

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::processes::{Processes, eventually, text};
use ringstore_proto::v1 as pb;

/// Writes `count` keys of 1 KiB at ALL through node 0.
async fn load(servers: &Processes, count: usize) {
    let mut writes = Vec::new();
    for n in 0..count {
        let mut client = servers.client(n % 3);
        writes.push(async move {
            let request = pb::PutRequest {
                keyspace: "ks".into(),
                key: format!("key{n:05}").into_bytes(),
                value: vec![b'a' + (n % 26) as u8; 1024],
                consistency: pb::ConsistencyLevel::All as i32,
                timestamp_micros: None,
                ttl_seconds: None,
            };
            client.put(request).await.unwrap();
        });
        if writes.len() == 32 || n == count - 1 {
            futures::future::join_all(writes.drain(..)).await;
        }
    }
}

/// `repair status` of node `i`: its first line.
fn status_line(servers: &Processes, i: usize) -> String {
    let output = servers.cli(i, &["repair", "status"]);
    text(&output.stdout)
        .lines()
        .next()
        .unwrap_or_default()
        .to_string()
}

/// The `D/T ranges done` of a status line.
fn ranges_done(line: &str) -> Option<(u32, u32)> {
    let field = line.split(", ").find(|f| f.ends_with(" ranges done"))?;
    let (done, total) = field.trim_end_matches(" ranges done").split_once('/')?;
    Some((done.parse().ok()?, total.parse().ok()?))
}

/// Tree building reads at this rate (MiB/s) in the tests that interrupt a
/// repair: it then takes seconds, long enough to act in the middle.
const SLOW_VALIDATION: [(&str, &str); 1] = [("RINGSTORE_REPAIR__VALIDATION_MIB_PER_SEC", "1")];

/// Three nodes on `block` validating slowly, keyspace `ks` at RF 3 loaded
/// with 6,000 keys, and `ringstore repair ks` started through node 0 once
/// `num/den` of its ranges are repaired: the servers, the running CLI and
/// the `ranges done` seen then.
async fn a_repair_under_way(block: u8, num: u32, den: u32) -> (Processes, Child, (u32, u32)) {
    let mut servers = Processes::new(block);
    for i in 0..3 {
        servers.start(i, &SLOW_VALIDATION);
    }
    servers.wait_until_all_un(0, 3);
    servers.create_keyspace("ks", "SimpleStrategy:3");
    load(&servers, 6000).await;
    let repair = Command::new(env!("CARGO_BIN_EXE_ringstore"))
        .args(["--host", &servers.address(0, 7100), "repair", "ks"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut seen = (0, 0);
    eventually(Duration::from_secs(60), "the repair is under way", || {
        seen = ranges_done(&status_line(&servers, 0)).unwrap_or((0, 0));
        seen.1 > 0 && seen.0 * den >= seen.1 * num
    });
    (servers, repair, seen)
}

/// Node 0's log lines about repair.
fn repair_log(servers: &Processes) -> String {
    servers
        .log(0)
        .lines()
        .filter(|l| l.contains("repair"))
        .collect::<Vec<_>>()
        .join("\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repair_interrupted_by_sigkill_resumes_after_the_restart_and_finishes() {
    let (mut servers, repair, seen) = a_repair_under_way(93, 1, 2).await;
    assert!(
        seen.0 < seen.1,
        "the repair ended before the kill: {seen:?}"
    );
    servers.kill(0);
    let cli = repair.wait_with_output().unwrap();
    assert!(!cli.status.success(), "the CLI saw its node die");

    servers.start(0, &SLOW_VALIDATION);
    servers.wait_until_all_un(0, 3);
    let mut line = String::new();
    eventually(Duration::from_secs(120), "the resumed repair ends", || {
        line = status_line(&servers, 0);
        line.contains(": finished") || line.contains(": failed")
    });
    eprintln!("before the kill: {seen:?}; after: {line}");
    if line.contains(": failed") {
        let status = text(&servers.cli(0, &["repair", "status"]).stdout);
        let log = repair_log(&servers);
        panic!("the resumed repair failed:\n{status}\nnode 0 logged:\n{log}");
    }
    let total = seen.1;
    assert!(
        line.contains(&format!("{total}/{total} ranges done, 0 failed")),
        "{line}"
    );
    // It resumed past every range seen done before the kill: at most the
    // range in flight was repaired again.
    let resumed: u32 = line
        .split("resumed after a restart at ")
        .nth(1)
        .and_then(|rest| rest.split(')').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("not resumed: {line}"));
    assert!(
        resumed >= seen.0,
        "resumed at {resumed}, {} were done",
        seen.0
    );
    // Node 0's primary ranges are all recorded as repaired.
    let status = text(&servers.cli(0, &["repair", "status"]).stdout);
    assert!(
        status.contains("(0 never repaired, 0 unrepaired"),
        "{status}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repair_with_a_replica_down_fails_naming_the_ranges() {
    let mut servers = Processes::new(94);
    for i in 0..3 {
        servers.start(i, &[]);
    }
    servers.wait_until_all_un(0, 3);
    servers.create_keyspace("ks", "SimpleStrategy:2");
    servers.kill(2);
    eventually(Duration::from_secs(30), "node 2 is seen down", || {
        servers.status_rows(0).iter().any(|r| r.starts_with("DN"))
    });
    let started = Instant::now();
    let output = servers.cli(0, &["repair", "ks"]);
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("ranges were not repaired"), "{stderr}");
    assert!(
        stderr.contains("is down: every replica must take part"),
        "{stderr}"
    );
    assert!(started.elapsed() < Duration::from_secs(30));
    // A dry run of an unknown keyspace is refused clearly.
    let unknown = servers.cli(0, &["repair", "nope", "--dry-run"]);
    assert!(text(&unknown.stderr).contains("keyspace \"nope\" does not exist"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_paused_mid_repair_holds_the_repair_up_but_does_not_fail_it() {
    // Address block 97. Node 2 is paused (SIGSTOP) a quarter of the way, until node
    // 0, the coordinator, sees it down, then continued. The units under way
    // and those that start while it is down wait for it and are repaired
    // again: nothing fails.
    let (servers, repair, seen) = a_repair_under_way(97, 1, 4).await;
    servers.signal(2, "STOP");
    eventually(Duration::from_secs(30), "node 0 sees node 2 down", || {
        servers.status_rows(0).iter().any(|r| r.starts_with("DN"))
    });
    let during = ranges_done(&status_line(&servers, 0)).unwrap_or((0, 0));
    servers.signal(2, "CONT");
    let cli = repair.wait_with_output().unwrap();
    let line = status_line(&servers, 0);
    eprintln!("paused at {seen:?}, seen down at {during:?}; {line}");
    assert!(
        during.0 < during.1,
        "the repair ended before node 2 was seen down: {line}"
    );
    assert!(
        cli.status.success(),
        "the repair failed:\n{}\nnode 0 logged:\n{}",
        text(&cli.stderr),
        repair_log(&servers)
    );
    let total = seen.1;
    assert!(
        line.contains(&format!("{total}/{total} ranges done, 0 failed")),
        "{line}"
    );
}
