//! `ringstore demo --tls` (and `--auth`) as a real process (issue 14): it
//! makes its certificates, starts TLS-only nodes with a cluster secret and
//! prints how to connect; the printed commands work over mutual TLS, and a
//! plaintext client or one without a client certificate is refused with a
//! hint. With `--auth`, the printed credentials are needed too, and a
//! second run on the same data directory keeps them.
//!
//! Address block 185 (127.185.0.1–3 and 127.185.0.11).

mod common;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::processes::text;
use common::tls::{https_get, plaintext_exchange};

const BIN: &str = env!("CARGO_BIN_EXE_ringstore");

/// A running `ringstore demo`, killed when dropped (the nodes run inside
/// it, so nothing outlives it).
struct Demo {
    child: Child,
    lines: mpsc::Receiver<String>,
    /// Every stdout line seen so far.
    seen: Vec<String>,
    log: PathBuf,
}

impl Drop for Demo {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Demo {
    fn start(dir: &Path, args: &[&str]) -> Demo {
        let log = dir.join("demo.log");
        let mut child = Command::new(BIN)
            .arg("demo")
            .args(["--data-dir", dir.join("data").to_str().unwrap()])
            .args(args)
            .env("RUST_LOG", "warn")
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("the demo starts");
        let stdout = child.stdout.take().unwrap();
        let (send, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if send.send(line).is_err() {
                    return;
                }
            }
        });
        Demo {
            child,
            lines,
            seen: Vec::new(),
            log,
        }
    }

    /// The first stdout line `matches` accepts, waiting up to `within`.
    fn line(&mut self, within: Duration, matches: impl Fn(&str) -> bool) -> String {
        if let Some(line) = self.seen.iter().find(|l| matches(l)) {
            return line.clone();
        }
        let deadline = Instant::now() + within;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    self.seen.push(line.clone());
                    if matches(&line) {
                        return line;
                    }
                }
                Err(_) => panic!(
                    "the demo did not print the line within {within:?}; it printed:\n{}\nand logged:\n{}",
                    self.seen.join("\n"),
                    std::fs::read_to_string(&self.log).unwrap_or_default()
                ),
            }
        }
    }

    /// The printed example command ending with `ending` (after the
    /// ready line), as words without the leading `ringstore`.
    fn command(&mut self, ending: &str) -> Vec<String> {
        let line = self.line(Duration::from_secs(180), |l| {
            l.starts_with("  ringstore ") && l.ends_with(ending)
        });
        let mut words = shlex::split(&line).expect("a shell command line");
        assert_eq!(words.remove(0), "ringstore", "{line}");
        words
    }

    /// The printed `export` of the credentials, sorted by name (password
    /// first).
    fn credentials(&mut self) -> Vec<(String, String)> {
        let export = self.line(Duration::from_secs(180), |l| l.starts_with("  export "));
        let mut credentials: Vec<(String, String)> = shlex::split(&export).unwrap()[1..]
            .iter()
            .map(|pair| {
                let (name, value) = pair.split_once('=').unwrap();
                (name.to_string(), value.to_string())
            })
            .collect();
        credentials.sort();
        let names: Vec<&str> = credentials.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["RINGSTORE_PASSWORD", "RINGSTORE_USER"], "{export}");
        credentials
    }

    /// Stops the demo as ctrl-c does and checks it exits cleanly.
    fn interrupt(mut self) {
        let sent = Command::new("kill")
            .args(["-INT", &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(sent.success());
        let deadline = Instant::now() + Duration::from_secs(60);
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            assert!(
                Instant::now() < deadline,
                "the demo did not stop within 60 s of SIGINT"
            );
            std::thread::sleep(Duration::from_millis(100));
        };
        assert!(status.success(), "the demo exited with {status}");
        self.line(Duration::from_secs(5), |l| l.starts_with("stopping"));
    }
}

fn run(args: &[String], env: &[(&str, &str)]) -> Output {
    Command::new(BIN)
        .args(args)
        .env_remove("RINGSTORE_USER")
        .env_remove("RINGSTORE_PASSWORD")
        .envs(env.iter().copied())
        .output()
        .unwrap()
}

fn assert_success(output: &Output, what: &str) {
    assert!(
        output.status.success(),
        "{what} failed: {}",
        text(&output.stderr)
    );
}

/// The value of `--flag` in `words`.
fn flag<'a>(words: &'a [String], flag: &str) -> &'a str {
    let at = words.iter().position(|w| w == flag).unwrap();
    &words[at + 1]
}

#[test]
fn demo_tls_prints_commands_that_work_over_mutual_tls_and_plaintext_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let mut demo = Demo::start(dir.path(), &["--tls", "--first-address", "127.185.0.1"]);

    let status = demo.command(" status demo");
    let shown = run(&status, &[]);
    assert_success(&shown, "the printed status");
    let shown = text(&shown.stdout);
    assert_eq!(shown.matches("\nUN  127.185.0.").count(), 3, "{shown}");
    let put = demo.command(" put demo hello world --consistency QUORUM");
    assert_success(&run(&put, &[]), "the printed put");
    let get = demo.command(" get demo hello --consistency QUORUM");
    assert_eq!(flag(&get, "--host"), "127.185.0.3:7100");
    let got = run(&get, &[]);
    assert_eq!(text(&got.stdout).trim(), "world", "{}", text(&got.stderr));
    // The certificates are where it says, made by `certs create`.
    let certs = dir.path().join("data").join("certs");
    demo.line(Duration::from_secs(5), |l| {
        l.starts_with("TLS on the client and internode ports")
            && l.contains(certs.to_str().unwrap())
    });
    for ip in ["127.185.0.1", "127.185.0.2", "127.185.0.3"] {
        assert!(certs.join(format!("node-{ip}.crt")).exists(), "{ip}");
    }

    // A plaintext client is refused, with the hint to use TLS…
    let host = flag(&status, "--host").to_string();
    let plain = run(&["--host".into(), host.clone(), "status".into()], &[]);
    assert_eq!(plain.status.code(), Some(2));
    let message = text(&plain.stderr);
    assert!(message.contains("--ca-cert"), "{message}");
    // …and so is a TLS client without a client certificate.
    let ca = flag(&status, "--ca-cert").to_string();
    let anonymous = run(
        &[
            "--host".into(),
            host,
            "--ca-cert".into(),
            ca,
            "status".into(),
        ],
        &[],
    );
    assert_eq!(anonymous.status.code(), Some(2));
    let message = text(&anonymous.stderr);
    assert!(message.contains("--client-cert"), "{message}");
    // The web console is served over TLS only, with the node's certificate
    // (which the demo's CA signed): a plaintext request gets no page.
    let ca = flag(&status, "--ca-cert").to_string();
    let console = demo
        .line(Duration::from_secs(5), |l| l.starts_with("  open https://"))
        .trim_start()
        .trim_start_matches("open https://")
        .split_once('/')
        .map(|(address, _)| address.to_string())
        .expect("the console's address");
    assert_eq!(console, "127.185.0.1:7200");
    let (code, page) = https_get(&console, "/", Path::new(&ca), None).expect("HTTPS");
    assert!(
        code == 200 && page.contains("ringstore console"),
        "{code} {page}"
    );
    let clear = plaintext_exchange(&console);
    assert!(!clear.contains("ringstore"), "served in clear: {clear}");
    // The nodes have a cluster secret: none warns of an open internode port.
    let log = std::fs::read_to_string(&demo.log).unwrap();
    assert!(!log.contains("no cluster_secret"), "{log}");

    demo.interrupt();
}

#[test]
fn demo_tls_auth_prints_a_password_that_the_commands_need() {
    let dir = tempfile::tempdir().unwrap();
    let args = &[
        "--tls",
        "--auth",
        "--nodes",
        "1",
        "--first-address",
        "127.185.0.11",
    ];
    let mut demo = Demo::start(dir.path(), args);
    let status = demo.command(" status demo");
    let credentials = demo.credentials();
    assert_ne!(
        credentials[0].1, "cassandra",
        "the default password was kept"
    );
    let env: Vec<(&str, &str)> = credentials
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();

    assert_success(
        &run(&status, &env),
        "the printed status with the credentials",
    );
    let put = demo.command(" put demo hello world --consistency QUORUM");
    assert_success(&run(&put, &env), "the printed put with the credentials");
    // Without them, or with the default password, the node refuses.
    let refused = run(&put, &[]);
    assert_eq!(refused.status.code(), Some(2));
    let message = text(&refused.stderr);
    assert!(message.starts_with("UNAUTHENTICATED"), "{message}");
    let refused = run(
        &put,
        &[
            ("RINGSTORE_USER", "cassandra"),
            ("RINGSTORE_PASSWORD", "cassandra"),
        ],
    );
    assert!(
        text(&refused.stderr).starts_with("UNAUTHENTICATED"),
        "{}",
        text(&refused.stderr)
    );

    demo.interrupt();

    // A second run on the same data logs in with the password it kept,
    // which only its owner can read.
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let kept = dir.path().join("data").join("superuser-password");
        let mode = std::fs::metadata(&kept).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{} is readable by others", kept.display());
    }
    let mut again = Demo::start(dir.path(), args);
    let status = again.command(" status demo");
    assert_eq!(again.credentials(), credentials);
    assert_success(&run(&status, &env), "status after a restart");
    again.interrupt();
}
