//! The clients of a simulated run: concurrent workers reading and writing
//! a small set of keys through random coordinators, each operation recorded
//! for the history checker. Half the operations are gets; the writes mix
//! plain puts, puts with a short TTL, deletes and batches of a few keys
//! mixing the three ([`Request::draw`]).
//!
//! Every draw (operation, keys, TTL, coordinator) comes from the worker's
//! own generator, seeded from the run's seed, and every value is unique per
//! key and version (`{key}=c{client}n{n}`; a batch writes each key once),
//! so a value read names the write it came from. Times are the
//! simulation's ([`SimTime`]), as offsets from the start of the run.
//!
//! Like a driver's host backoff, a worker avoids for [`SHUN`] a coordinator
//! that failed it (while others remain), so one faulty node slows the load
//! without stalling it. A worker whose write failed (a put, a delete, or a
//! batch's part) puts the same key again next, with a new value (through
//! another coordinator, the failed one being shunned), as an application
//! that retries does: the history checker then sees whether the failed
//! write, applied late, overwrote the acknowledged one (`LateWrite`, or a
//! stale read for a delete).
//!
//! A share of each worker's operations (the run's [`CasSettings`]) are
//! lightweight transactions on keys of their own, recorded for the
//! linearizability checker ([`crate::cas`] says how and why apart).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use ringstore_history::{ClientId, NodeId, Op};
use ringstore_proto::v1::client_client::ClientClient;
use tonic::transport::Channel;

use crate::cas::{CasRecord, CasRequest, CasRequester, CasSettings, cas_key};
use crate::records::{Request, Requester, key_name};
use crate::time::{EPOCH_MICROS, SimTime};

/// The keyspace the workload uses.
pub const KEYSPACE: &str = "ks";

/// How long a worker avoids a coordinator that failed it.
pub const SHUN: Duration = Duration::from_secs(1);

/// What the workers do.
#[derive(Clone, Debug)]
pub struct WorkloadSettings {
    /// Concurrent workers.
    pub clients: usize,
    /// Keys shared by every worker.
    pub keys: usize,
    /// How long a worker waits for an answer.
    pub request_timeout: Duration,
    /// The longest a worker pauses between two operations (drawn
    /// uniformly up to it), so a run's operations stay few enough to
    /// simulate quickly.
    pub think: Duration,
    /// Simulated time at which workers stop starting operations.
    pub until: Duration,
    /// Seeds the workers' draws.
    pub seed: u64,
    /// The lightweight transactions among the operations.
    pub cas: CasSettings,
}

/// What each worker records, shared: plain operations for the history
/// checker, CAS operations for the linearizability checker.
#[derive(Clone, Default)]
pub struct History(Arc<Mutex<Recorded>>);

#[derive(Default)]
struct Recorded {
    ops: Vec<Op>,
    cas: Vec<CasRecord>,
}

impl History {
    fn recorded(&self) -> std::sync::MutexGuard<'_, Recorded> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn push(&self, op: Op) {
        self.recorded().ops.push(op);
    }

    fn push_cas(&self, record: CasRecord) {
        self.recorded().cas.push(record);
    }

    /// Every plain operation so far, in invoke order (ties in the order
    /// recorded).
    pub fn ops(&self) -> Vec<Op> {
        let mut ops = self.recorded().ops.clone();
        ops.sort_by_key(|op| op.invoked);
        ops
    }

    /// Every CAS operation so far, in invoke order (ties in the order
    /// recorded).
    pub fn cas(&self) -> Vec<CasRecord> {
        let mut records = self.recorded().cas.clone();
        records.sort_by_key(|record| record.invoked);
        records
    }
}

/// Which nodes the workers send requests to, by node index: not a node
/// that has not joined yet, nor one being decommissioned.
#[derive(Clone, Debug)]
pub struct Serving(Arc<Mutex<Vec<bool>>>);

impl Serving {
    /// `nodes` nodes, the first `serving` of them in service.
    pub fn first(nodes: usize, serving: usize) -> Serving {
        Serving(Arc::new(Mutex::new(
            (0..nodes).map(|i| i < serving).collect(),
        )))
    }

    /// Puts node `node` in service, or takes it out.
    pub fn set(&self, node: usize, serving: bool) {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)[node] = serving;
    }

    /// The nodes in service.
    pub fn nodes(&self) -> Vec<usize> {
        let serving = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        (0..serving.len()).filter(|&i| serving[i]).collect()
    }
}

/// Runs the workers until `settings.until`, each through a client of every
/// node in `coordinators` (by node index) that is `serving`, recording into
/// `history`.
pub async fn run(
    settings: WorkloadSettings,
    coordinators: Vec<ClientClient<Channel>>,
    serving: Serving,
    time: SimTime,
    history: History,
) {
    let workers: Vec<_> = (0..settings.clients)
        .map(|id| {
            let worker = Worker {
                id,
                settings: settings.clone(),
                coordinators: coordinators.clone(),
                serving: serving.clone(),
                time: time.clone(),
                history: history.clone(),
            };
            tokio::spawn(worker.run())
        })
        .collect();
    for worker in workers {
        let _ = worker.await;
    }
}

/// One worker.
struct Worker {
    id: usize,
    settings: WorkloadSettings,
    coordinators: Vec<ClientClient<Channel>>,
    serving: Serving,
    time: SimTime,
    history: History,
}

impl Worker {
    async fn run(self) {
        let seed = self.settings.seed.wrapping_mul(1_000_003) ^ self.id as u64;
        let mut rng = StdRng::seed_from_u64(seed);
        let mut shunned = vec![Duration::ZERO; self.coordinators.len()];
        let mut n = 0u64;
        // The key of a write that failed, written again next.
        let mut rewrite: Option<String> = None;
        // The CAS key whose last operation's outcome is unknown: read
        // serially next, as an application must.
        let mut reread: Option<String> = None;
        // What this worker last saw each CAS key hold.
        let mut seen: BTreeMap<String, Option<Vec<u8>>> = BTreeMap::new();
        while self.time.elapsed() < self.settings.until {
            let serving = self.serving.nodes();
            let node = draw_coordinator(&mut rng, &serving, &shunned, self.time.elapsed());
            let coordinator = self.coordinators[node].clone();
            let now = || self.time.elapsed();
            let cas = reread.is_some() || (rewrite.is_none() && self.settings.cas.draw(&mut rng));
            let failed = if cas {
                let (key, request) = match reread.take() {
                    Some(key) => (key, CasRequest::GetSerial),
                    None => {
                        let key = cas_key(rng.random_range(0..self.settings.cas.keys));
                        let request = CasRequest::draw(&mut rng, seen.get(&key));
                        (key, request)
                    }
                };
                let requester = CasRequester {
                    client: ClientId(self.id),
                    node: NodeId(node),
                    keyspace: KEYSPACE,
                    timeout: self.settings.request_timeout,
                    now: &now,
                };
                let record = requester.run(coordinator, key, request, n).await;
                if let Some(observed) = record.observed() {
                    seen.insert(record.key.clone(), observed);
                } else if record.is_unknown() {
                    seen.remove(&record.key);
                    reread = Some(record.key.clone());
                }
                let failed = !record.succeeded();
                self.history.push_cas(record);
                failed
            } else {
                let rewriting = rewrite.is_some();
                let drawn = key_name(rng.random_range(0..self.settings.keys));
                let key = rewrite.take().unwrap_or(drawn);
                let wall = || EPOCH_MICROS + i64::try_from(now().as_micros()).unwrap_or(i64::MAX);
                let requester = Requester {
                    client: ClientId(self.id),
                    node: NodeId(node),
                    keyspace: KEYSPACE,
                    timeout: self.settings.request_timeout,
                    now: &now,
                    wall: &wall,
                };
                let request = if rewriting {
                    Request::Put(key, None)
                } else {
                    Request::draw(&mut rng, self.settings.keys, key)
                };
                let op = requester.run(coordinator, request, n).await;
                rewrite = op
                    .writes()
                    .iter()
                    .find(|w| w.acked().is_none())
                    .map(|w| w.key.clone());
                let failed = op.failure().is_some();
                self.history.push(op);
                failed
            };
            let mut pause = rng.random_range(Duration::ZERO..=self.settings.think);
            if failed {
                shunned[node] = self.time.elapsed() + SHUN;
                pause += Duration::from_millis(50);
            }
            tokio::time::sleep(pause).await;
            n += 1;
        }
    }
}

/// A coordinator among `serving` not shunned at `now`, drawn uniformly
/// (any of `serving`, if all are shunned).
fn draw_coordinator(
    rng: &mut StdRng,
    serving: &[usize],
    shunned_until: &[Duration],
    now: Duration,
) -> usize {
    let usable: Vec<usize> = serving
        .iter()
        .copied()
        .filter(|&node| shunned_until[node] <= now)
        .collect();
    let from = if usable.is_empty() { serving } else { &usable };
    from[rng.random_range(0..from.len())]
}
