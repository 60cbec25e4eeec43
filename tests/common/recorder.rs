//! A concurrent client load that records its history for
//! `ringstore_history::check`.
//!
//! Each of several clients (tokio tasks, one gRPC client per node each)
//! runs operations one after another: a put or a get, half and half, of a
//! key drawn from one shared set (so writers race each other and readers),
//! through a coordinator drawn from the current set, at `QUORUM`, with the
//! server stamping the write. Every value is unique: `{key}=c{client}n{n}`.
//! The draws come from a seeded RNG per client; what the servers answer,
//! and so the interleaving, is not deterministic.
//!
//! Every operation is recorded with its invoke and complete times (offsets
//! from the run's start, on the monotonic clock), its coordinator and its
//! outcome. A client stops after `max_ops` operations, at its deadline, or
//! when told to.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use ringstore_history::{
    ClientId, Failure, FailureKind, Level, NodeId, Op, OpKind, ReadOutcome, Timestamp, Version,
    WriteOutcome,
};
use ringstore_proto::v1 as pb;
use ringstore_proto::v1::client_client::ClientClient;
use tonic::transport::Channel;

/// What the load does.
#[derive(Clone, Debug)]
pub struct RecorderSettings {
    /// The keyspace (it must exist).
    pub keyspace: String,
    /// Concurrent clients.
    pub clients: usize,
    /// Keys shared by all clients (`k000`, `k001`, …).
    pub keys: usize,
    /// Operations per client at most.
    pub max_ops: u64,
    /// No client starts an operation after this.
    pub deadline: Instant,
    /// How long a client waits for an answer before it gives up.
    pub request_timeout: Duration,
    /// Seeds the clients' draws (client `c` uses `seed + c`).
    pub seed: u64,
}

/// The coordinators clients draw from, by node index.
#[derive(Clone, Default)]
pub struct Coordinators(Arc<Mutex<HashMap<usize, ClientClient<Channel>>>>);

impl Coordinators {
    /// Adds node `node`, reached with `client`.
    pub fn add(&self, node: usize, client: ClientClient<Channel>) {
        self.0.lock().unwrap().insert(node, client);
    }

    /// Takes node `node` out (requests already sent to it go on).
    pub fn remove(&self, node: usize) {
        self.0.lock().unwrap().remove(&node);
    }

    /// A coordinator, avoiding those in `shunned` while others remain.
    fn draw(&self, rng: &mut StdRng, shunned: &[usize]) -> (usize, ClientClient<Channel>) {
        let list = self.0.lock().unwrap();
        let mut nodes: Vec<usize> = list.keys().copied().collect();
        nodes.sort_unstable();
        let healthy: Vec<usize> = nodes
            .iter()
            .copied()
            .filter(|n| !shunned.contains(n))
            .collect();
        let from = if healthy.is_empty() { &nodes } else { &healthy };
        let node = from[rng.random_range(0..from.len())];
        (node, list[&node].clone())
    }
}

/// How long a client avoids a coordinator that did not answer in time or
/// could not be reached (a driver's host backoff): the faulty node keeps
/// getting requests, but the load does not stall on it.
const SHUN: Duration = Duration::from_secs(1);

/// The key with index `i`.
pub fn key_name(i: usize) -> String {
    format!("k{i:03}")
}

/// A running load.
pub struct Recorder {
    stop: Arc<AtomicBool>,
    completed: Arc<AtomicU64>,
    tasks: Vec<tokio::task::JoinHandle<Vec<Op>>>,
}

impl Recorder {
    /// Starts the clients on the current runtime; times count from `start`.
    pub fn start(
        settings: RecorderSettings,
        coordinators: Coordinators,
        start: Instant,
    ) -> Recorder {
        let stop = Arc::new(AtomicBool::new(false));
        let completed = Arc::new(AtomicU64::new(0));
        let tasks = (0..settings.clients)
            .map(|c| {
                let client = Client {
                    id: c,
                    settings: settings.clone(),
                    coordinators: coordinators.clone(),
                    start,
                    stop: stop.clone(),
                    completed: completed.clone(),
                };
                tokio::spawn(client.run())
            })
            .collect();
        Recorder {
            stop,
            completed,
            tasks,
        }
    }

    /// Operations completed so far (failed ones too).
    pub fn completed(&self) -> u64 {
        self.completed.load(Ordering::SeqCst)
    }

    /// Tells the clients to stop; their histories, merged, in invoke order.
    pub async fn stop(self) -> Vec<Op> {
        self.stop.store(true, Ordering::SeqCst);
        let mut history = Vec::new();
        for task in self.tasks {
            history.extend(task.await.expect("a load client panicked"));
        }
        history.sort_by_key(|op| op.invoked);
        history
    }
}

/// One client of the load.
struct Client {
    id: usize,
    settings: RecorderSettings,
    coordinators: Coordinators,
    start: Instant,
    stop: Arc<AtomicBool>,
    completed: Arc<AtomicU64>,
}

impl Client {
    async fn run(self) -> Vec<Op> {
        let mut rng = StdRng::seed_from_u64(self.settings.seed.wrapping_add(self.id as u64));
        let mut history = Vec::new();
        let mut shunned: HashMap<usize, Instant> = HashMap::new();
        for n in 0..self.settings.max_ops {
            if self.stop.load(Ordering::SeqCst) || Instant::now() >= self.settings.deadline {
                break;
            }
            let key = key_name(rng.random_range(0..self.settings.keys));
            shunned.retain(|_, until| *until > Instant::now());
            let avoid: Vec<usize> = shunned.keys().copied().collect();
            let (node, client) = self.coordinators.draw(&mut rng, &avoid);
            let op = if rng.random_bool(0.5) {
                let value = format!("{key}=c{}n{n}", self.id);
                self.write(client, node, key, value).await
            } else {
                self.read(client, node, key).await
            };
            self.completed.fetch_add(1, Ordering::SeqCst);
            if op.failure().is_some_and(|f| {
                matches!(
                    f.kind,
                    FailureKind::ClientTimeout | FailureKind::Unreachable
                )
            }) {
                shunned.insert(node, Instant::now() + SHUN);
            }
            history.push(op);
        }
        history
    }

    fn op(&self, node: usize, key: String, invoked: Instant, kind: OpKind) -> Op {
        Op {
            client: ClientId(self.id),
            coordinator: NodeId(node),
            key,
            level: Level::Quorum,
            invoked: invoked - self.start,
            completed: Instant::now() - self.start,
            kind,
        }
    }

    async fn write(
        &self,
        mut client: ClientClient<Channel>,
        node: usize,
        key: String,
        value: String,
    ) -> Op {
        let request = pb::PutRequest {
            keyspace: self.settings.keyspace.clone(),
            key: key.as_bytes().to_vec(),
            value: value.as_bytes().to_vec(),
            consistency: pb::ConsistencyLevel::Quorum as i32,
            timestamp_micros: None,
            ttl_seconds: None,
        };
        let invoked = Instant::now();
        let answer = tokio::time::timeout(self.settings.request_timeout, client.put(request)).await;
        let outcome = match flatten(answer) {
            Ok(put) => WriteOutcome::Acked(Timestamp(put.timestamp_micros)),
            Err(failure) => WriteOutcome::Failed(failure),
        };
        let kind = OpKind::Write {
            value: value.into_bytes(),
            outcome,
        };
        self.op(node, key, invoked, kind)
    }

    async fn read(&self, mut client: ClientClient<Channel>, node: usize, key: String) -> Op {
        let request = pb::GetRequest {
            keyspace: self.settings.keyspace.clone(),
            key: key.as_bytes().to_vec(),
            consistency: pb::ConsistencyLevel::Quorum as i32,
        };
        let invoked = Instant::now();
        let answer = tokio::time::timeout(self.settings.request_timeout, client.get(request)).await;
        let outcome = match flatten(answer) {
            Ok(get) if get.found => ReadOutcome::Found(Version {
                timestamp: Timestamp(get.timestamp_micros),
                value: get.value,
            }),
            Ok(_) => ReadOutcome::NotFound,
            Err(failure) => ReadOutcome::Failed(failure),
        };
        self.op(node, key, invoked, OpKind::Read { outcome })
    }
}

/// A request's answer, or its failure classified.
fn flatten<T>(
    answer: Result<Result<tonic::Response<T>, tonic::Status>, tokio::time::error::Elapsed>,
) -> Result<T, Failure> {
    match answer {
        Ok(Ok(response)) => Ok(response.into_inner()),
        Ok(Err(status)) => Err(failure_of(&status)),
        Err(_) => Err(Failure {
            kind: FailureKind::ClientTimeout,
            message: "no answer within the client's timeout".into(),
        }),
    }
}

/// What kind of failure `status` is: one the server sent carries no
/// source error; a transport failure (refused, reset) does.
pub fn failure_of(status: &tonic::Status) -> Failure {
    let from_transport = std::error::Error::source(status).is_some();
    let kind = match status.code() {
        _ if from_transport => FailureKind::Unreachable,
        tonic::Code::Unavailable => FailureKind::Unavailable,
        tonic::Code::DeadlineExceeded => FailureKind::Timeout,
        _ => FailureKind::Other,
    };
    Failure {
        kind,
        message: format!("{:?}: {}", status.code(), status.message()),
    }
}
