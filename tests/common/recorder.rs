//! A concurrent client load that records its history for
//! `ringstore_history::check`.
//!
//! Each of several clients (tokio tasks, one gRPC client per node each)
//! runs operations one after another, as the simulation's workers do
//! (`ringstore_simulation::records::Request::draw`): half gets, the rest
//! puts, puts with a TTL of a few seconds (so that many expire during the
//! run), deletes and batches, of keys drawn from one shared set (so writers
//! race each other and readers), through a coordinator drawn from the
//! current set, at `QUORUM`, with the server stamping the write. Every
//! value is unique: `{key}=c{client}n{n}`. The draws come from a seeded RNG
//! per client; what the servers answer, and so the interleaving, is not
//! deterministic.
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
use ringstore_history::{ClientId, FailureKind, NodeId, Op};
use ringstore_proto::v1::client_client::ClientClient;
use ringstore_simulation::records::{Request, Requester, key_name};
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

/// This machine's wall clock, µs since the epoch: a write's send time.
fn wall_micros() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX))
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
            let now = || self.start.elapsed();
            let requester = Requester {
                client: ClientId(self.id),
                node: NodeId(node),
                keyspace: &self.settings.keyspace,
                timeout: self.settings.request_timeout,
                now: &now,
                wall: &wall_micros,
            };
            let request = Request::draw(&mut rng, self.settings.keys, key);
            let op = requester.run(client, request, n).await;
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
}
