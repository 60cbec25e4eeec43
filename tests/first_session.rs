//! A newcomer's first session (issue 45), on real processes: the CLI finds
//! its node without `--host` (through `RINGSTORE_HOST`, or at the default
//! address where the demo passes connections to its first node), and the
//! demo prints its own lines first, keeps its nodes' log lines in a file it
//! names, and leaves the terminal to warnings; among its lines is the
//! address of the web console, which serves the page there.
//!
//! Address block 220: the demo on 127.220.0.1, its door at 127.220.0.100
//! (the real default, 127.0.0.1:7100, may be taken on a test machine),
//! nothing at all on 127.220.0.8 and .9.

mod common;

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::processes::{http_request, text};

const BIN: &str = env!("CARGO_BIN_EXE_ringstore");

fn cli(env: &[(&str, &str)], args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .env_remove("RINGSTORE_HOST")
        .envs(env.iter().copied())
        .output()
        .unwrap()
}

#[test]
fn ringstore_host_names_the_node_and_the_flag_overrides_it() {
    let unreachable = "127.220.0.9:7100";
    let output = cli(&[("RINGSTORE_HOST", unreachable)], &["status"]);
    assert_eq!(output.status.code(), Some(2));
    let message = text(&output.stderr);
    assert!(message.contains(unreachable), "{message}");

    let output = cli(
        &[("RINGSTORE_HOST", unreachable)],
        &["--host", "127.220.0.8:7100", "status"],
    );
    let message = text(&output.stderr);
    assert!(message.contains("127.220.0.8:7100"), "{message}");
    assert!(!message.contains(unreachable), "{message}");

    // A bad value is refused as the flag's would be, naming it.
    let output = cli(&[("RINGSTORE_HOST", "no-port")], &["status"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(text(&output.stderr).contains("no-port"));
}

/// A running `ringstore demo`, killed when dropped.
struct Demo {
    child: Child,
    lines: mpsc::Receiver<String>,
}

impl Drop for Demo {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Demo {
    /// Every stdout line up to and including the first `last` accepts.
    fn lines_until(&self, within: Duration, last: impl Fn(&str) -> bool) -> Vec<String> {
        let deadline = Instant::now() + within;
        let mut seen = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    let done = last(&line);
                    seen.push(line);
                    if done {
                        return seen;
                    }
                }
                Err(_) => panic!("the demo printed only:\n{}", seen.join("\n")),
            }
        }
    }
}

#[test]
fn the_demo_prints_its_lines_first_logs_to_a_file_and_answers_at_its_cli_address() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let door = "127.220.0.100:7100";
    let mut child = Command::new(BIN)
        .args(["demo", "--nodes", "1", "--first-address", "127.220.0.1"])
        .args(["--cli-address", door])
        .args(["--data-dir", data.to_str().unwrap()])
        .env_remove("RUST_LOG")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the demo starts");
    let stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let (send, lines) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if send.send(line).is_err() {
                return;
            }
        }
    });
    let terminal = std::thread::spawn(move || {
        let mut all = String::new();
        let _ = stderr.read_to_string(&mut all);
        all
    });
    let demo = Demo { child, lines };

    let printed = demo.lines_until(Duration::from_secs(180), |l| l.starts_with("Press ctrl-c"));
    let log = data.join("demo.log");
    assert!(
        printed[0].starts_with("ringstore demo: starting 1 node on loopback"),
        "{printed:#?}"
    );
    assert!(printed[1].contains(log.to_str().unwrap()), "{printed:#?}");
    let tries: Vec<&String> = printed
        .iter()
        .filter(|l| l.starts_with("  ringstore "))
        .collect();
    assert!(tries.len() >= 5, "{printed:#?}");
    assert!(
        tries.iter().all(|l| !l.contains("--host")),
        "the commands to try need no --host: {printed:#?}"
    );
    assert!(printed.iter().any(|l| l.contains(door)), "{printed:#?}");
    // The web console's address is among the lines to try, and it serves
    // the page there.
    let console = printed
        .iter()
        .find_map(|l| l.strip_prefix("  open http://"))
        .and_then(|l| l.split_once('/'))
        .map(|(address, _)| address.to_string())
        .unwrap_or_else(|| panic!("no console address: {printed:#?}"));
    assert_eq!(console, "127.220.0.1:7200", "{printed:#?}");
    let page = http_request(&console, "/", None);
    assert!(
        page.status == 200 && page.body.contains("ringstore console"),
        "{} {}",
        page.head,
        page.body
    );

    // The door reaches the node: the printed commands work with the door as
    // the CLI's host (as they do at the real default).
    let env = [("RINGSTORE_HOST", door)];
    let status = cli(&env, &["status", "demo"]);
    assert!(status.status.success(), "{}", text(&status.stderr));
    assert!(
        text(&status.stdout).contains("UN  127.220.0.1:7100"),
        "{}",
        text(&status.stdout)
    );
    let put = cli(&env, &["put", "demo", "hello", "world"]);
    assert!(put.status.success(), "{}", text(&put.stderr));
    let got = cli(&env, &["get", "demo", "hello"]);
    assert_eq!(text(&got.stdout).trim(), "world", "{}", text(&got.stderr));

    // The nodes' info lines are in the file, not on the terminal.
    let logged = std::fs::read_to_string(&log).unwrap();
    assert!(logged.contains(" INFO "), "{logged}");
    drop(demo);
    let shown = terminal.join().unwrap();
    assert!(!shown.contains(" INFO "), "{shown}");
}
