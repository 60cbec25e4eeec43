//! A bounded, concurrent client load for "nothing lost" tests.
//!
//! Each of several clients owns its keys (`c{client}-k{i}`) and writes them
//! at QUORUM, one new version per write: write `n` of client `c` stores
//! `{key}-v{n}-c{c}` with timestamp `BASE + n`, so versions of a key only
//! grow and a stale copy is told from a fresh one by its value alone.
//! Between writes, each client reads at QUORUM a key that another client is
//! writing at the same time (reads race writes), through another
//! coordinator, and checks the answer is no older than the version
//! acknowledged to that key before the read began.
//!
//! Every client stops after `max_ops` operations, at `deadline`, or when
//! told to, whichever comes first. The report keeps every acknowledged
//! version, every failure with its status and time, and when each operation
//! completed, so a test can check that the load overlapped an event.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ringstore_proto::v1 as pb;
use ringstore_proto::v1::client_client::ClientClient;
use tonic::transport::Channel;

const QUORUM: pb::ConsistencyLevel = pb::ConsistencyLevel::Quorum;

/// The timestamp of version 0; version `n` is written at `BASE + n`.
const BASE: i64 = 1_700_000_000_000_000;

/// How long one request may take before it counts as failed.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// What the load does.
#[derive(Clone, Debug)]
pub struct LoadSettings {
    /// The keyspace written (it must exist).
    pub keyspace: String,
    /// Concurrent clients, each a tokio task with its own keys (at least 2).
    pub clients: usize,
    /// Keys each client owns.
    pub keys_per_client: usize,
    /// Writes (and as many reads) per client at most.
    pub max_ops: u64,
    /// No client starts an operation after this.
    pub deadline: Instant,
}

/// The coordinators clients send to, by name: tests take a node out before
/// it goes away and add one once it can coordinate. Client `c`'s `n`th
/// write goes to entry `(c + n) % len`, its read to the next entry.
#[derive(Clone, Default)]
pub struct Coordinators(Arc<Mutex<Vec<Coordinator>>>);

/// A coordinator's name and client.
type Coordinator = (String, ClientClient<Channel>);

impl Coordinators {
    /// Adds a coordinator called `name`.
    pub fn add(&self, name: &str, client: ClientClient<Channel>) {
        self.0.lock().unwrap().push((name.to_string(), client));
    }

    /// Takes coordinator `name` out (requests already sent to it go on).
    pub fn remove(&self, name: &str) {
        self.0.lock().unwrap().retain(|(n, _)| n != name);
    }

    fn pick(&self, index: usize) -> Coordinator {
        let list = self.0.lock().unwrap();
        list[index % list.len()].clone()
    }
}

/// A failed operation.
#[derive(Clone, Debug)]
pub struct Failure {
    /// When it failed.
    pub at: Instant,
    /// `write` or `read`.
    pub op: &'static str,
    pub key: String,
    pub coordinator: String,
    /// The gRPC status (code and message), or `timeout`.
    pub status: String,
}

/// What the clients saw.
#[derive(Debug, Default)]
pub struct LoadReport {
    /// The latest acknowledged version of each key.
    pub acked: HashMap<String, u64>,
    pub writes_ok: u64,
    pub reads_ok: u64,
    pub failures: Vec<Failure>,
    /// Reads that returned less than was acknowledged before they began.
    pub stale_reads: Vec<String>,
    /// When each successful write was acknowledged.
    pub write_acks: Vec<Instant>,
    /// When each successful read answered.
    pub read_answers: Vec<Instant>,
}

impl LoadReport {
    /// Writes acknowledged and reads answered within `[from, to]`.
    pub fn completed_between(&self, from: Instant, to: Instant) -> (usize, usize) {
        let within = |times: &Vec<Instant>| times.iter().filter(|&&t| from <= t && t <= to).count();
        (within(&self.write_acks), within(&self.read_answers))
    }

    /// The failures within `[from, to]`.
    pub fn failures_between(&self, from: Instant, to: Instant) -> Vec<&Failure> {
        self.failures
            .iter()
            .filter(|f| from <= f.at && f.at <= to)
            .collect()
    }

    /// One line of figures.
    pub fn summary(&self) -> String {
        format!(
            "{} keys, {} writes acknowledged, {} reads answered, {} failed, {} stale reads",
            self.acked.len(),
            self.writes_ok,
            self.reads_ok,
            self.failures.len(),
            self.stale_reads.len()
        )
    }
}

/// The value of version `n` of `key`, written by `client`.
pub fn value_of(key: &str, n: u64, client: usize) -> String {
    format!("{key}-v{n}-c{client}")
}

/// The owner of `key` (`c{client}-k{i}`).
pub fn owner_of(key: &str) -> usize {
    key[1..key.find('-').unwrap()].parse().unwrap()
}

/// The version a stored value of `key` carries, if it is one its owner wrote.
pub fn version_of(key: &str, value: &[u8]) -> Option<u64> {
    let value = std::str::from_utf8(value).ok()?;
    let rest = value.strip_prefix(key)?.strip_prefix("-v")?;
    let (version, client) = rest.split_once("-c")?;
    (client.parse::<usize>().ok()? == owner_of(key)).then_some(())?;
    version.parse().ok()
}

/// Checks a read of `key` against `floor`, the version acknowledged before
/// the read began: an error describing the stale answer.
pub fn check_read(key: &str, floor: Option<u64>, found: bool, value: &[u8]) -> Result<(), String> {
    let Some(floor) = floor else { return Ok(()) };
    match found.then(|| version_of(key, value)).flatten() {
        Some(version) if version >= floor => Ok(()),
        _ => Err(format!(
            "{key}: read {:?} (found {found}), acknowledged v{floor}",
            String::from_utf8_lossy(value)
        )),
    }
}

/// What the clients share while they run.
#[derive(Default)]
struct Shared {
    acked: Mutex<HashMap<String, u64>>,
    writes_ok: AtomicU64,
    stop: AtomicBool,
}

/// A running load.
pub struct Load {
    shared: Arc<Shared>,
    tasks: Vec<tokio::task::JoinHandle<LoadReport>>,
}

impl Load {
    /// Starts `settings.clients` clients on `coordinators`.
    pub fn start(settings: LoadSettings, coordinators: Coordinators) -> Load {
        assert!(settings.clients >= 2, "reads race another client's writes");
        let shared = Arc::new(Shared::default());
        let tasks = (0..settings.clients)
            .map(|c| {
                let settings = settings.clone();
                let coordinators = coordinators.clone();
                let shared = Arc::clone(&shared);
                tokio::spawn(async move { run_client(c, &settings, &coordinators, &shared).await })
            })
            .collect();
        Load { shared, tasks }
    }

    /// Writes acknowledged so far.
    pub fn writes_ok(&self) -> u64 {
        self.shared.writes_ok.load(Ordering::SeqCst)
    }

    /// Tells the clients to stop and merges their reports.
    pub async fn stop(self) -> LoadReport {
        self.shared.stop.store(true, Ordering::SeqCst);
        let mut report = LoadReport::default();
        for task in self.tasks {
            let part = task.await.expect("a load client panicked");
            report.writes_ok += part.writes_ok;
            report.reads_ok += part.reads_ok;
            report.failures.extend(part.failures);
            report.stale_reads.extend(part.stale_reads);
            report.write_acks.extend(part.write_acks);
            report.read_answers.extend(part.read_answers);
        }
        report.acked = self.shared.acked.lock().unwrap().clone();
        report.failures.sort_by_key(|f| f.at);
        report
    }
}

async fn run_client(
    c: usize,
    settings: &LoadSettings,
    coordinators: &Coordinators,
    shared: &Shared,
) -> LoadReport {
    let mut report = LoadReport::default();
    let keys = settings.keys_per_client as u64;
    for n in 0..settings.max_ops {
        if shared.stop.load(Ordering::SeqCst) || Instant::now() >= settings.deadline {
            break;
        }
        let key = format!("c{c}-k{}", n % keys);
        let (name, mut client) = coordinators.pick(c + n as usize);
        let request = pb::PutRequest {
            keyspace: settings.keyspace.clone(),
            key: key.as_bytes().to_vec(),
            value: value_of(&key, n, c).into_bytes(),
            consistency: QUORUM as i32,
            timestamp_micros: Some(BASE + n as i64),
            ttl_seconds: None,
        };
        match outcome(tokio::time::timeout(REQUEST_TIMEOUT, client.put(request)).await) {
            Ok(_) => {
                shared.acked.lock().unwrap().insert(key, n);
                shared.writes_ok.fetch_add(1, Ordering::SeqCst);
                report.writes_ok += 1;
                report.write_acks.push(Instant::now());
            }
            Err(status) => report.failures.push(Failure {
                at: Instant::now(),
                op: "write",
                key,
                coordinator: name,
                status,
            }),
        }

        // Read a key another client is writing meanwhile.
        let others = settings.clients as u64 - 1;
        let owner = (c as u64 + 1 + n % others) % settings.clients as u64;
        let key = format!("c{owner}-k{}", (n * 7919) % keys);
        let floor = shared.acked.lock().unwrap().get(&key).copied();
        let (name, mut client) = coordinators.pick(c + n as usize + 1);
        let request = pb::GetRequest {
            keyspace: settings.keyspace.clone(),
            key: key.as_bytes().to_vec(),
            consistency: QUORUM as i32,
        };
        match outcome(tokio::time::timeout(REQUEST_TIMEOUT, client.get(request)).await) {
            Ok(answer) => {
                report.reads_ok += 1;
                report.read_answers.push(Instant::now());
                if let Err(stale) = check_read(&key, floor, answer.found, &answer.value) {
                    report.stale_reads.push(format!("{stale} (via {name})"));
                }
            }
            Err(status) => report.failures.push(Failure {
                at: Instant::now(),
                op: "read",
                key,
                coordinator: name,
                status,
            }),
        }
    }
    report
}

/// A request's answer, or its status as text.
fn outcome<T>(
    answer: Result<Result<tonic::Response<T>, tonic::Status>, tokio::time::error::Elapsed>,
) -> Result<T, String> {
    match answer {
        Ok(Ok(response)) => Ok(response.into_inner()),
        Ok(Err(status)) => Err(format!("{:?}: {}", status.code(), status.message())),
        Err(_) => Err("timeout".to_string()),
    }
}
