//! Real `ringstore server` processes on loopback, started from the built
//! binary: each test its own `127.<block>.0.0/24` block (see the block list
//! in `tests/processes.rs`), killed when dropped, driven through the CLI and,
//! for client load, through gRPC clients.

use std::path::Path;
use std::process::{Child, Command, Output, Stdio};

use ringstore_proto::v1::client_client::ClientClient;
use ringstore_proto::v1::internode_client::InternodeClient;
use std::time::{Duration, Instant};
use tonic::transport::Channel;

const BIN: &str = env!("CARGO_BIN_EXE_ringstore");

/// Server processes on one address block, killed when dropped (so a failing
/// test leaves none behind).
pub struct Processes {
    block: u8,
    dir: tempfile::TempDir,
    servers: Vec<Option<Child>>,
    /// Given to every CLI run before the command (TLS flags).
    cli_args: Vec<String>,
    /// The servers' seeds, if not node 0's gossip address.
    seeds: Option<String>,
    /// Set in every CLI run's environment (credentials).
    cli_env: Vec<(String, String)>,
    /// Server `i` is in rack `i % racks + 1`; `None`: each in its own.
    racks: Option<usize>,
}

impl Drop for Processes {
    fn drop(&mut self) {
        for child in self.servers.iter_mut().flatten() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Processes {
    pub fn new(block: u8) -> Processes {
        Processes {
            block,
            dir: tempfile::tempdir().unwrap(),
            servers: Vec::new(),
            cli_args: Vec::new(),
            seeds: None,
            cli_env: Vec::new(),
            racks: None,
        }
    }

    /// Every later server start gets `seeds` (e.g. a proxy's address).
    pub fn set_seeds(&mut self, seeds: &str) {
        self.seeds = Some(seeds.to_string());
    }

    /// Every later server start goes into one of `racks` racks, in turn
    /// (server `i` in `rack{i % racks + 1}`), not into a rack of its own.
    pub fn set_racks(&mut self, racks: usize) {
        self.racks = Some(racks);
    }

    /// The directory the servers' data and logs are in (for test files too).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Every later CLI run gets `args` first (e.g. `--ca-cert FILE`).
    pub fn set_cli_args(&mut self, args: &[&str]) {
        self.cli_args = args.iter().map(|a| a.to_string()).collect();
    }

    /// Every later CLI run gets these environment variables (e.g.
    /// `RINGSTORE_USER`, `RINGSTORE_PASSWORD`).
    pub fn set_cli_env(&mut self, env: &[(&str, &str)]) {
        self.cli_env = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
    }

    /// Node `i`'s address on `port`.
    pub fn address(&self, i: usize, port: u16) -> String {
        format!("127.{}.0.{}:{port}", self.block, i + 1)
    }

    /// Starts server `i` (again, on its data directory) with extra
    /// environment settings.
    pub fn start(&mut self, i: usize, env: &[(&str, &str)]) {
        let dir: &Path = self.dir.path();
        let child = Command::new(BIN)
            .args([
                "server",
                "--cluster-name",
                "processes",
                "--data-dir",
                dir.join(format!("node{i}")).to_str().unwrap(),
                "--listen-address",
                &self.address(i, 7100),
                "--internode-address",
                &self.address(i, 7101),
                "--gossip-address",
                &self.address(i, 7000),
                "--seeds",
                &self.seeds.clone().unwrap_or_else(|| self.address(0, 7000)),
                "--rack",
                &format!("rack{}", self.racks.map_or(i, |racks| i % racks) + 1),
            ])
            .env("RINGSTORE_RING_DELAY_MS", "300")
            .env("RUST_LOG", "warn")
            // The fault suite's own knob: the server reads `RINGSTORE_*` as
            // settings and refuses one it does not know, so a replay with
            // the seed set would never start.
            .env_remove("RINGSTORE_FAULT_SEED")
            .envs(env.iter().copied())
            .stdout(Stdio::null())
            .stderr(
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(dir.join(format!("node{i}.log")))
                    .unwrap(),
            )
            .spawn()
            .expect("the server starts");
        if self.servers.len() <= i {
            self.servers.resize_with(i + 1, || None);
        }
        assert!(self.servers[i].is_none(), "server {i} is running");
        self.servers[i] = Some(child);
    }

    /// Server `i`'s data directory.
    pub fn data_dir(&self, i: usize) -> std::path::PathBuf {
        self.dir.path().join(format!("node{i}"))
    }

    /// Takes server `i`'s process out of the set (to signal it and wait).
    pub fn take(&mut self, i: usize) -> Child {
        self.servers[i].take().expect("server is running")
    }

    /// What server `i` has logged so far (its stderr).
    pub fn log(&self, i: usize) -> String {
        std::fs::read_to_string(self.dir.path().join(format!("node{i}.log"))).unwrap_or_default()
    }

    /// Creates keyspace `name` with `replication` (as the CLI takes it)
    /// through node 0; its id, as `keyspace list` shows it.
    pub fn create_keyspace(&self, name: &str, replication: &str) -> String {
        self.create_keyspace_with(name, replication, &[])
    }

    /// [`Processes::create_keyspace`] with more options for `keyspace
    /// create` (e.g. `--gc-grace-seconds 2`); its id.
    pub fn create_keyspace_with(&self, name: &str, replication: &str, options: &[&str]) -> String {
        let mut args = vec!["keyspace", "create", name, "--replication", replication];
        args.extend_from_slice(options);
        let create = self.cli(0, &args);
        assert!(create.status.success(), "{}", text(&create.stderr));
        let list = text(&self.cli(0, &["keyspace", "list"]).stdout);
        let line = list
            .lines()
            .find(|l| l.starts_with(&format!("{name} ")))
            .unwrap_or_else(|| panic!("{name} is not listed: {list}"));
        line.split_whitespace().last().unwrap().to_string()
    }

    /// Runs the CLI against node `host`.
    pub fn cli(&self, host: usize, args: &[&str]) -> Output {
        self.cli_env(host, &[], args)
    }

    /// Runs the CLI against node `host` with `env` besides (and over) the
    /// environment of [`Processes::set_cli_env`].
    pub fn cli_env(&self, host: usize, env: &[(&str, &str)], args: &[&str]) -> Output {
        self.cli_at_env(&self.address(host, 7100), env, args)
    }

    /// Runs the CLI against `address` (a relay in front of a node).
    pub fn cli_at(&self, address: &str, args: &[&str]) -> Output {
        self.cli_at_env(address, &[], args)
    }

    fn cli_at_env(&self, address: &str, env: &[(&str, &str)], args: &[&str]) -> Output {
        Command::new(BIN)
            .arg("--host")
            .arg(address)
            .args(&self.cli_args)
            .args(args)
            .envs(self.cli_env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .output()
            .unwrap()
    }

    /// Runs the CLI against node `host`, writing `input` to its stdin.
    pub fn cli_stdin(&self, host: usize, input: &str, args: &[&str]) -> Output {
        use std::io::Write;
        let mut child = Command::new(BIN)
            .arg("--host")
            .arg(self.address(host, 7100))
            .args(&self.cli_args)
            .args(args)
            .envs(self.cli_env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(input.as_bytes())
            .unwrap();
        child.wait_with_output().unwrap()
    }

    /// The node rows of `status` on node `host`.
    pub fn status_rows(&self, host: usize) -> Vec<String> {
        let output = self.cli(host, &["status"]);
        text(&output.stdout)
            .lines()
            .filter(|l| {
                let b = l.as_bytes();
                b.len() > 4 && b"UD".contains(&b[0]) && b"NJL".contains(&b[1]) && &b[2..4] == b"  "
            })
            .map(String::from)
            .collect()
    }

    /// Waits until node `host` shows `count` nodes, all `UN`.
    pub fn wait_until_all_un(&self, host: usize, count: usize) {
        let prefix = format!("UN  127.{}.0.", self.block);
        eventually(Duration::from_secs(60), "every node is UN", || {
            let rows = self.status_rows(host);
            rows.len() == count && rows.iter().all(|r| r.starts_with(&prefix))
        });
    }
    /// Kills server `i` with SIGKILL and reaps it.
    pub fn kill(&mut self, i: usize) {
        let mut child = self.take(i);
        child.kill().expect("SIGKILL");
        child.wait().unwrap();
    }

    /// Sends `signal` (`STOP`, `CONT`, …) to server `i`.
    pub fn signal(&self, i: usize, signal: &str) {
        let pid = self.servers[i].as_ref().expect("server is running").id();
        let sent = Command::new("kill")
            .args([&format!("-{signal}"), &pid.to_string()])
            .status()
            .expect("kill runs");
        assert!(sent.success(), "kill -{signal} {pid}");
    }

    /// Kills every running server with SIGKILL, as close to at once as one
    /// thread can: the signals go out back to back before any is reaped.
    pub fn kill_all(&mut self) {
        let mut children: Vec<Child> = self.servers.iter_mut().filter_map(Option::take).collect();
        for child in &mut children {
            child.kill().expect("SIGKILL");
        }
        for child in &mut children {
            child.wait().unwrap();
        }
    }

    /// A gRPC channel to node `i`'s `port` (connects on first use).
    pub fn channel(&self, i: usize, port: u16) -> Channel {
        Channel::from_shared(format!("http://{}", self.address(i, port)))
            .unwrap()
            .connect_lazy()
    }

    /// A gRPC `Client` client of node `i`.
    pub fn client(&self, i: usize) -> ClientClient<Channel> {
        ClientClient::new(self.channel(i, 7100))
    }

    /// A gRPC `Internode` client of node `i`, to read its own replica.
    pub fn internode(&self, i: usize) -> InternodeClient<Channel> {
        InternodeClient::new(self.channel(i, 7101))
    }

    /// Node `host`'s `info` line `name`, e.g. its `ID` or `Durability`.
    pub fn info(&self, host: usize, name: &str) -> String {
        let output = self.cli(host, &["info"]);
        assert!(output.status.success(), "{}", text(&output.stderr));
        text(&output.stdout)
            .lines()
            .filter_map(|l| l.split_once(':'))
            .find(|(n, _)| n.trim() == name)
            .map(|(_, value)| value.trim().to_string())
            .unwrap_or_else(|| panic!("no {name} in info"))
    }
}

pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Polls `check` every 200 ms until it holds, failing after `limit`.
pub fn eventually(limit: Duration, what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !check() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// An HTTP answer, as the tests read it.
pub struct HttpAnswer {
    /// The status code.
    pub status: u16,
    /// The status line and the headers, lower-cased.
    pub head: String,
    /// The body.
    pub body: String,
}

/// Sends `GET path` over `stream` to the server at `address`, with
/// `Authorization: Bearer <token>` when given and `Connection: close`, and
/// reads the whole answer.
pub fn http_exchange(
    stream: &mut (impl std::io::Read + std::io::Write),
    address: &str,
    path: &str,
    token: Option<&str>,
) -> Result<HttpAnswer, String> {
    let authorization = token.map_or(String::new(), |t| format!("Authorization: Bearer {t}\r\n"));
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {address}\r\n{authorization}Connection: close\r\n\r\n"
    )
    .map_err(|e| format!("sending to {address}: {e}"))?;
    let mut response = Vec::new();
    match stream.read_to_end(&mut response) {
        Ok(_) => {}
        // A TLS server closing without close_notify: the answer is whole.
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof && !response.is_empty() => {}
        Err(e) => return Err(format!("reading from {address}: {e}")),
    }
    let response = String::from_utf8_lossy(&response);
    let (head, body) = response
        .split_once("\r\n\r\n")
        .ok_or_else(|| format!("not an HTTP response: {response:?}"))?;
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .ok_or_else(|| format!("no status in {head:?}"))?;
    Ok(HttpAnswer {
        status,
        head: head.to_lowercase(),
        body: body.to_string(),
    })
}

/// `GET path` from the plaintext HTTP server at `address` (one request,
/// closed after), with a bearer token when given.
pub fn http_request(address: &str, path: &str, token: Option<&str>) -> HttpAnswer {
    let mut stream = std::net::TcpStream::connect(address)
        .unwrap_or_else(|e| panic!("cannot connect to {address}: {e}"));
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    http_exchange(&mut stream, address, path, token).unwrap_or_else(|e| panic!("{e}"))
}

/// `GET path` from the HTTP server at `address`: the status code and the
/// body.
pub fn http_get(address: &str, path: &str) -> (u16, String) {
    let answer = http_request(address, path, None);
    (answer.status, answer.body)
}

/// The value of the sample `name{labels}` (given exactly as the page
/// spells it) on a Prometheus text page.
pub fn sample(page: &str, series: &str) -> Option<f64> {
    page.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .and_then(|v| v.trim().parse().ok())
}
