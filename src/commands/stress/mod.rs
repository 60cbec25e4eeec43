//! `ringstore stress`: loads a node with puts, gets, compare-and-sets or
//! no-op RPCs and reports throughput and latency, as cassandra-stress.
//!
//! `--concurrency` tokio tasks share one `ringstore-client` handle. By
//! default every request goes to the `--host` node over one channel, and
//! that node coordinates; with `--token-aware` the client learns the ring
//! from `--host` and sends each request to a replica of its key (one
//! channel per node), so the coordinator writes one replica locally
//! instead of forwarding to all of them, and stamps writes itself (which
//! makes them safe to retry on another node). Each task sends one request at a time and claims every operation from a shared
//! counter, so a run does exactly `-n` operations (100,000 by default) or
//! starts new ones until `--duration` has passed. With `--rate R` the load
//! is open loop (`pace.rs`): operation `i` is due at `i / R` seconds and its
//! latency runs from then, so a stalled server is not allowed to hide the
//! requests it delayed (coordinated omission). Keys are `key{N}`, N in
//! `0..--key-count` drawn by `--distribution` (`keys.rs`: uniform, zipf:S,
//! hotspot:P). Every completed operation counts, failed or not; latency is
//! that of the successful ones, in microseconds, in HDR histograms (3
//! significant digits) that the workers share, a few shards under locks of
//! their own (`Tallies`), merged at the end. `--html FILE` also
//! keeps each second's throughput and latencies (`timeline.rs`) and writes
//! them as one self-contained page of charts. `--warmup D` first sends
//! the same load for D, with other keys drawn, and reports none of it.
//!
//! A run reports errors, counted by gRPC code, rather than stopping at the
//! first. But when every one of the first 100 operations fails (the node cannot
//! serve, the keyspace is unusable) there is nothing to measure: the run stops
//! and fails with the first error. A run in which no operation succeeded at
//! all fails the same way. `--expect-errors` turns both off, for a run whose
//! failures are the point (a flood of bad logins, `benches/login_flood.sh`).
//!
//! # Caveats
//! - Without `--rate`, closed loop: a worker waits for each answer before
//!   sending the next request, so an overloaded node slows the offered load
//!   down and the latencies hide the waiting (coordinated omission), as in
//!   cassandra-stress without a rate limit.
//! - With `--rate`, the offered load is capped by `--concurrency` requests in
//!   flight; latencies stay honest (the wait counts), but the rate reached
//!   falls short of the target when every worker is busy.
//! - Workers share one HTTP/2 connection per node by default
//!   (`--connections N` for more). `--hosts A,B,C` spreads them over several
//!   coordinators, worker i on the (i mod 3)-th, without learning the ring.
//! - `--pipeline` sends on one `Client/Pipeline` stream per connection
//!   instead (`target.rs`): the workers' requests share the stream, many in
//!   flight, with no HTTP/2 stream per request; each request still waits
//!   for its own answer, so latencies mean the same.
//! - No sequential key population. Each worker's generator is seeded by its
//!   index, so runs are repeatable.
//! - A `read` of a key never written succeeds (it finds nothing).
//! - `cas` (`cas.rs`) runs compare-and-sets as a counter's increments,
//!   uncontended (keys of each worker's own) or `--contended`, and also
//!   reports how many applied, did not, and ended unknown.

use std::collections::BTreeMap;
use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use anyhow::{Context, anyhow, bail};
use hdrhistogram::Histogram;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use ringstore_client::{Client, ClientError, Routing};
use ringstore_proto::v1 as pb;

mod cas;
mod keys;
mod pace;
mod target;
mod timeline;

pub use keys::KeyDistribution;
pub use pace::Rate;

use keys::KeyChooser;
use target::Target;
use timeline::Timeline;

use crate::cli::{SerialLevel, StressArgs, Workload};
use crate::client::Connection;
use crate::commands::data::level;
use crate::failure::{Failure, Outcome, code_name};

/// Operations when neither `-n` nor `--duration` is given.
const DEFAULT_OPERATIONS: u64 = 100_000;
/// The largest `--value-size`: a node's default `max_value_bytes`.
const MAX_VALUE_SIZE: usize = 16 * 1024 * 1024;
/// If every one of this many first operations fails, the run stops.
const PROBE_OPERATIONS: u64 = 100;
/// The slowest latency the histogram tells apart (one hour, in µs); slower
/// ones are counted as this.
const MAX_LATENCY_MICROS: u64 = 3_600_000_000;
/// How often the progress bar is redrawn.
const PROGRESS_INTERVAL: Duration = Duration::from_millis(250);

/// Runs the workload and prints the report.
pub async fn run(connection: &Connection, args: &StressArgs, out: &mut impl Write) -> Outcome {
    let plan = Plan::from_args(args)?;
    // Created only if missing: a user with `write` (not `schema`) on an
    // existing keyspace can stress it.
    let exists = || async {
        let listed = connection
            .schema()
            .list_keyspaces(pb::ListKeyspacesRequest {})
            .await?
            .into_inner();
        Ok::<_, tonic::Status>(listed.keyspaces.iter().any(|k| k.name == plan.keyspace))
    };
    if plan.workload != Workload::Noop && !exists().await? {
        let replication = crate::commands::keyspace::parse_replication(&args.replication)?;
        connection
            .schema()
            .create_keyspace(pb::CreateKeyspaceRequest {
                name: plan.keyspace.clone(),
                replication: Some(replication),
                if_not_exists: true,
                gc_grace_seconds: None,
                speculative_retry: args.speculative_retry.map(|s| s.to_string()),
            })
            .await?;
    }

    let routing = if args.token_aware {
        Routing::TokenAware
    } else {
        Routing::SeedsOnly
    };
    // Connected (and each connection opened by a first request) before
    // the run's clock starts: an open-loop run would count the set-up as
    // its first operations' wait.
    let clients = clients(connection, args, routing).await?;
    let clients = Target::of(&clients, plan.pipeline, plan.connections)
        .await
        .map_err(ClientError::into_status)?;
    for client in &clients {
        let _ = client.noop().await;
    }
    if let Some(warmup) = plan.warmup_phase() {
        let shared = Arc::new(Shared::of(&warmup));
        load(&clients, &Arc::new(warmup), &shared, Seeds::WarmUp).await?;
    }
    let plan = Arc::new(plan);
    let mut shared = Shared::of(&plan);
    if args.html.is_some() {
        shared.timeline = Some(Timeline::default());
    }
    let shared = Arc::new(shared);
    let (tally, elapsed) = load(&clients, &plan, &shared, Seeds::Measured).await?;
    let report = Report {
        plan: &plan,
        tally,
        elapsed,
    };
    if let (Some(path), Some(timeline)) = (&args.html, &shared.timeline) {
        let title = format!("ringstore stress {}", workload_name(plan.workload));
        std::fs::write(path, timeline.html(&title, &report.lines()))
            .with_context(|| format!("writing the HTML report to {}", path.display()))?;
    }
    let text = if args.json {
        format!("{}\n", report.json())
    } else {
        report.text()
    };
    out.write_all(text.as_bytes())
        .map_err(anyhow::Error::from)?;
    Ok(())
}

/// The client handles the workers take in turn: one seeded by every
/// `--hosts` entry when token-aware (the ring decides), else one per
/// coordinator (`--hosts`, or `--host` alone). Token-aware writes carry
/// client timestamps, so a write that met a dead node is retried on the
/// next one.
async fn clients(
    connection: &Connection,
    args: &StressArgs,
    routing: Routing,
) -> Result<Vec<Client>, Failure> {
    let token_aware = args.token_aware;
    let groups: Vec<Vec<String>> = match (args.hosts.is_empty(), token_aware) {
        (true, _) => vec![vec![connection.address().to_string()]],
        (false, true) => vec![args.hosts.clone()],
        (false, false) => args.hosts.iter().map(|h| vec![h.clone()]).collect(),
    };
    let mut clients = Vec::with_capacity(groups.len());
    for seeds in &groups {
        let client = connection
            .cluster_through(seeds, routing, token_aware, args.connections)
            .await?;
        clients.push(client);
    }
    Ok(clients)
}

/// One phase of a run: `plan.concurrency` workers on `clients` (taken in
/// turn) until `shared`'s limit. Returns their merged tally and how long
/// the phase took; fails with the first error if nothing succeeded.
async fn load(
    clients: &[Target],
    plan: &Arc<Plan>,
    shared: &Arc<Shared>,
    seeds: Seeds,
) -> Result<(Tally, Duration), Failure> {
    let bar = progress_bar(plan.limit);
    let ticker = (!bar.is_hidden())
        .then(|| tokio::spawn(show_progress(bar.clone(), plan.limit, shared.clone())));
    let workers: Vec<_> = (0..plan.concurrency)
        .map(|index| {
            let client = clients[index % clients.len()].clone();
            let rng = seeds.worker(index);
            tokio::spawn(worker(index, rng, client, plan.clone(), shared.clone()))
        })
        .collect();
    let mut joined = Ok(());
    for worker in workers {
        if let Err(error) = worker.await {
            joined = Err(error);
        }
    }
    let elapsed = shared.started.elapsed();
    let tally = shared.tallies.merged()?;
    if let Some(ticker) = ticker {
        ticker.abort();
    }
    bar.finish_and_clear();
    joined.context("a stress worker failed")?;

    if tally.latency.is_empty()
        && !plan.expect_errors
        && let Some(status) = shared.first_error.get()
    {
        return Err(Failure::Status(status.clone()));
    }
    Ok((tally, elapsed))
}

/// Which phase a worker's random numbers (keys, values, mixes) are drawn
/// for: each worker's generator is seeded by its index, so runs repeat,
/// and the warm-up draws other keys than the measured run.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Seeds {
    WarmUp,
    Measured,
}

impl Seeds {
    fn worker(self, index: usize) -> StdRng {
        let base: u64 = match self {
            Seeds::WarmUp => 0xA4A4_0000,
            Seeds::Measured => 0x5EED_0000,
        };
        StdRng::seed_from_u64(base + index as u64)
    }
}

/// When a run stops.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Limit {
    /// After this many operations (at least 1).
    Operations(u64),
    /// Once this long has passed; operations in flight then still complete.
    Duration(Duration),
}

/// The validated arguments.
#[derive(Clone, Debug)]
struct Plan {
    workload: Workload,
    limit: Limit,
    /// The same load first for this long, unreported (never zero).
    warmup: Option<Duration>,
    /// Worker tasks, at least 1.
    concurrency: usize,
    /// Bytes per value, at most [`MAX_VALUE_SIZE`].
    value_size: usize,
    /// The fraction of `mixed` operations that are gets, in [0, 1].
    read_ratio: f64,
    keyspace: String,
    consistency: ringstore_replication::ConsistencyLevel,
    /// Requests go to a replica of their key, not to `--host`.
    token_aware: bool,
    /// The coordinators of `--hosts` (empty: `--host`).
    hosts: Vec<String>,
    /// HTTP/2 connections to each node.
    connections: usize,
    /// One `Client/Pipeline` stream per connection instead of unary calls.
    pipeline: bool,
    /// Open loop at this rate; `None`: closed loop.
    rate: Option<Rate>,
    /// How keys `key0` to `key{--key-count - 1}` are drawn.
    keys: KeyChooser,
    distribution: KeyDistribution,
    /// Failures are the point (`--expect-errors`): no probe, no failing
    /// for want of a success.
    expect_errors: bool,
    /// `cas`: workers share the keys (else each has keys of its own).
    contended: bool,
    /// `cas`: the serial level.
    serial: SerialLevel,
    /// `cas`: the commit level (none: the node's `ANY`).
    commit: Option<ringstore_replication::ConsistencyLevel>,
}

impl Plan {
    fn from_args(args: &StressArgs) -> anyhow::Result<Plan> {
        if args.concurrency == 0 {
            bail!("--concurrency must be at least 1");
        }
        if args.key_count == 0 {
            bail!("--key-count must be at least 1");
        }
        if !(0.0..=1.0).contains(&args.read_ratio) {
            bail!(
                "--read-ratio must be between 0 and 1 (got {})",
                args.read_ratio
            );
        }
        if args.value_size > MAX_VALUE_SIZE {
            bail!(
                "--value-size must be at most {MAX_VALUE_SIZE} bytes (16 MiB), got {}",
                args.value_size
            );
        }
        if args.workload == Workload::Cas
            && !args.contended
            && args.key_count < args.concurrency as u64
        {
            bail!(
                "uncontended cas gives each worker keys of its own: --key-count ({}) must be at \
                 least --concurrency ({}), or pass --contended",
                args.key_count,
                args.concurrency
            );
        }
        let limit = match (args.operations, args.duration) {
            (Some(0), _) => bail!("-n must be at least 1"),
            (Some(n), _) => Limit::Operations(n),
            (None, Some(duration)) => Limit::Duration(duration),
            (None, None) => Limit::Operations(DEFAULT_OPERATIONS),
        };
        Ok(Plan {
            workload: args.workload,
            limit,
            warmup: args.warmup.filter(|warmup| !warmup.is_zero()),
            concurrency: args.concurrency,
            value_size: args.value_size,
            read_ratio: args.read_ratio,
            keyspace: args.keyspace.clone(),
            consistency: args.consistency,
            token_aware: args.token_aware,
            hosts: args.hosts.clone(),
            connections: args.connections.get(),
            pipeline: args.pipeline,
            rate: args.rate,
            keys: KeyChooser::new(args.distribution, args.key_count).context("--distribution")?,
            distribution: args.distribution,
            expect_errors: args.expect_errors,
            contended: args.contended,
            serial: args.serial,
            commit: args.commit,
        })
    }

    /// The report's line on levels: the consistency level, or for `cas`
    /// the serial and commit levels.
    fn levels(&self) -> String {
        if self.workload != Workload::Cas {
            return self.consistency.to_string();
        }
        let commit = self
            .commit
            .map_or_else(|| "ANY".to_string(), |c| c.to_string());
        format!("{} (commit {commit})", serial_name(self.serial))
    }

    /// The report's line on keys: the distribution, and for `cas` whether
    /// workers share them.
    fn keys_line(&self) -> String {
        match (self.workload, self.contended) {
            (Workload::Cas, true) => {
                format!("{}, contended (shared by every worker)", self.distribution)
            }
            (Workload::Cas, false) => {
                format!("{}, uncontended (each worker's own)", self.distribution)
            }
            _ => self.distribution.to_string(),
        }
    }

    /// The report's line on connections.
    fn connections_line(&self) -> String {
        if self.pipeline {
            format!("{} per node, one pipeline stream each", self.connections)
        } else {
            format!("{} per node", self.connections)
        }
    }

    /// The warm-up: this plan for `--warmup`'s duration, if one was given.
    fn warmup_phase(&self) -> Option<Plan> {
        let warmup = self.warmup?;
        Some(Plan {
            limit: Limit::Duration(warmup),
            warmup: None,
            ..self.clone()
        })
    }

    /// Where requests go, for the report.
    fn routing(&self) -> String {
        match (self.token_aware, self.hosts.is_empty()) {
            (true, _) => "token-aware".into(),
            (false, true) => "--host".into(),
            (false, false) => format!("--hosts in turn: {}", self.hosts.join(", ")),
        }
    }
}

/// What the workers share: the operation counter and how the run is going.
struct Shared {
    limit: Limit,
    /// Open loop at this rate (see `pace.rs`).
    rate: Option<Rate>,
    /// The run's start (tokio's clock, so paused-time tests drive it).
    started: tokio::time::Instant,
    /// Operations claimed so far; an operation's index is its claim.
    claimed: AtomicU64,
    /// Operations completed, failed or not (for the progress bar).
    completed: AtomicU64,
    /// Whether the run stops when its first operations all fail (not with
    /// `--expect-errors`).
    probing: bool,
    /// How many of the first operations failed, up to [`PROBE_OPERATIONS`].
    probe_failures: AtomicU64,
    /// Set when every probe operation failed: workers stop.
    stop: AtomicBool,
    /// The first error any worker saw.
    first_error: OnceLock<tonic::Status>,
    /// The results so far.
    tallies: Tallies,
    /// Each second of the run, for `--html`.
    timeline: Option<Timeline>,
}

impl Shared {
    fn new(limit: Limit, rate: Option<Rate>) -> Shared {
        Shared {
            limit,
            rate,
            started: tokio::time::Instant::now(),
            claimed: AtomicU64::new(0),
            completed: AtomicU64::new(0),
            probing: true,
            probe_failures: AtomicU64::new(0),
            stop: AtomicBool::new(false),
            first_error: OnceLock::new(),
            tallies: Tallies::new(),
            timeline: None,
        }
    }

    /// What the workers of `plan` share.
    fn of(plan: &Plan) -> Shared {
        Shared {
            probing: !plan.expect_errors,
            ..Shared::new(plan.limit, plan.rate)
        }
    }

    /// How many first operations must not all fail: 100, or all of a shorter run.
    fn probe(&self) -> u64 {
        match self.limit {
            Limit::Operations(n) => n.min(PROBE_OPERATIONS),
            Limit::Duration(_) => PROBE_OPERATIONS,
        }
    }

    /// The next operation's index, or None when the run is over.
    fn claim(&self) -> Option<u64> {
        if self.stop.load(Ordering::Relaxed) {
            return None;
        }
        match self.limit {
            Limit::Operations(n) => {
                let index = self.claimed.fetch_add(1, Ordering::Relaxed);
                (index < n).then_some(index)
            }
            Limit::Duration(duration) => match self.rate {
                // Exactly the operations due before the end.
                Some(rate) => {
                    let index = self.claimed.fetch_add(1, Ordering::Relaxed);
                    (rate.due(index) < duration).then_some(index)
                }
                None => (self.started.elapsed() < duration)
                    .then(|| self.claimed.fetch_add(1, Ordering::Relaxed)),
            },
        }
    }

    /// When operation `index` should be sent: when it is due in an open-loop
    /// run, now in a closed-loop one. Its latency is measured from then.
    fn due(&self, index: u64) -> tokio::time::Instant {
        match self.rate {
            Some(rate) => self.started + rate.due(index),
            None => tokio::time::Instant::now(),
        }
    }

    /// Notes that operation `index` failed; stops the run if every probe
    /// operation has now failed.
    fn failed(&self, index: u64, status: tonic::Status) {
        let _ = self.first_error.set(status);
        if self.probing && index < self.probe() {
            let failures = self.probe_failures.fetch_add(1, Ordering::Relaxed) + 1;
            if failures == self.probe() {
                self.stop.store(true, Ordering::Relaxed);
            }
        }
    }
}

/// One kind of request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Put,
    Get,
    Noop,
    /// A compare-and-set (`cas.rs`).
    Cas,
}

/// How an answered operation went, as the tally counts it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Answered {
    /// A put, get or no-op.
    Done,
    /// A compare-and-set that applied.
    Applied,
    /// A compare-and-set whose condition did not hold.
    NotApplied,
}

/// A failed operation: the status counted by its code, and whether it
/// was a compare-and-set whose outcome is unknown.
#[derive(Debug)]
struct Failed {
    status: tonic::Status,
    cas_unknown: bool,
}

impl Failed {
    /// `error`, of a compare-and-set if `cas`.
    fn of(error: ClientError, cas: bool) -> Failed {
        Failed {
            cas_unknown: cas && error.is_cas_unknown(),
            status: error.into_status(),
        }
    }
}

/// Results: one shard's, or the merged results of all.
struct Tally {
    /// Latency of successful operations, in microseconds.
    latency: Histogram<u64>,
    /// Failed operations by gRPC code name.
    errors: BTreeMap<&'static str, u64>,
    /// Compare-and-sets by outcome.
    cas: cas::CasCounts,
}

impl Tally {
    fn new() -> Tally {
        Tally {
            latency: Histogram::new_with_bounds(1, MAX_LATENCY_MICROS, 3)
                .expect("constant histogram bounds are valid"),
            errors: BTreeMap::new(),
            cas: cas::CasCounts::default(),
        }
    }

    fn merge(&mut self, other: &Tally) -> anyhow::Result<()> {
        self.latency
            .add(&other.latency)
            .map_err(|e| anyhow!("merging latency histograms: {e:?}"))?;
        for (code, count) in &other.errors {
            *self.errors.entry(code).or_default() += count;
        }
        self.cas.add(other.cas);
        Ok(())
    }

    /// Operations completed, failed or not.
    fn operations(&self) -> u64 {
        self.latency.len() + self.errors.values().sum::<u64>()
    }
}

/// The results of a phase, shared by its workers: a few shards (one per
/// core), each under a lock of its own, so that workers seldom wait for one
/// another and memory does not grow with `--concurrency`. (A histogram per
/// worker is about 190 KB: 256 workers allocating theirs at the start of a
/// phase stalled the client on page faults for up to 180 ms, which showed
/// as the first second's latency.)
struct Tallies {
    shards: Vec<Mutex<Tally>>,
}

impl Tallies {
    fn new() -> Tallies {
        let cores = std::thread::available_parallelism().map_or(4, std::num::NonZero::get);
        Tallies {
            shards: (0..cores).map(|_| Mutex::new(Tally::new())).collect(),
        }
    }

    /// The shard worker `worker` records into.
    fn shard(&self, worker: usize) -> MutexGuard<'_, Tally> {
        let shard = &self.shards[worker % self.shards.len()];
        shard.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Every shard's results together.
    fn merged(&self) -> anyhow::Result<Tally> {
        let mut tally = Tally::new();
        for shard in 0..self.shards.len() {
            tally.merge(&self.shard(shard))?;
        }
        Ok(tally)
    }
}

/// One worker: claims operations and sends them one at a time until the run
/// is over.
async fn worker(
    index: usize,
    mut rng: StdRng,
    client: Target,
    plan: Arc<Plan>,
    shared: Arc<Shared>,
) {
    let value: Vec<u8> = (0..plan.value_size).map(|_| rng.random::<u8>()).collect();
    let consistency = level(plan.consistency);
    let seen = Arc::new(cas::Seen::default());
    let cas_settings = Arc::new(cas::CasSettings {
        keyspace: plan.keyspace.clone(),
        value_size: plan.value_size,
        serial: crate::commands::cas::serial(plan.serial),
        commit: plan
            .commit
            .map_or(pb::ConsistencyLevel::Unspecified as i32, level),
    });
    let send = |op: Op, key: Vec<u8>| {
        let (client, keyspace, value) = (client.clone(), plan.keyspace.clone(), value.clone());
        let (seen, cas_settings) = (seen.clone(), cas_settings.clone());
        async move {
            if op == Op::Cas {
                return cas::increment(&client, &seen, &cas_settings, key).await;
            }
            match op {
                Op::Put => {
                    client
                        .put(pb::PutRequest {
                            keyspace,
                            key,
                            value,
                            consistency,
                            timestamp_micros: None,
                            ttl_seconds: None,
                        })
                        .await
                }
                Op::Get => {
                    client
                        .get(pb::GetRequest {
                            keyspace,
                            key,
                            consistency,
                        })
                        .await
                }
                Op::Noop | Op::Cas => client.noop().await,
            }
            .map(|()| Answered::Done)
            .map_err(|error| Failed::of(error, false))
        }
    };
    drive(index, &mut rng, &plan, &shared, send).await
}

/// The loop of worker `worker`, whatever `send` sends: claim an operation,
/// wait until it is due, send it, record its latency from the due time.
async fn drive<F: Future<Output = Result<Answered, Failed>>>(
    worker: usize,
    rng: &mut StdRng,
    plan: &Plan,
    shared: &Shared,
    mut send: impl FnMut(Op, Vec<u8>) -> F,
) {
    while let Some(operation) = shared.claim() {
        let op = match plan.workload {
            Workload::Write => Op::Put,
            Workload::Read => Op::Get,
            Workload::Mixed if rng.random::<f64>() < plan.read_ratio => Op::Get,
            Workload::Mixed => Op::Put,
            Workload::Noop => Op::Noop,
            Workload::Cas => Op::Cas,
        };
        let drawn = plan.keys.next(rng);
        let key = match op {
            Op::Cas => cas::key_of(drawn, worker, plan.concurrency, plan.contended),
            _ => drawn,
        };
        let key = format!("key{key}").into_bytes();
        let due = shared.due(operation);
        let timed_from = match shared.rate {
            Some(_) => pace::until_due(due).await,
            None => due,
        };
        let result = send(op, key).await;
        let micros = u64::try_from(timed_from.elapsed().as_micros()).unwrap_or(u64::MAX);
        if let Some(timeline) = &shared.timeline {
            timeline.record(shared.started.elapsed(), result.is_ok().then_some(micros));
        }
        {
            let mut tally = shared.tallies.shard(worker);
            match &result {
                Ok(answered) => {
                    tally.latency.saturating_record(micros);
                    match answered {
                        Answered::Done => {}
                        Answered::Applied => tally.cas.applied += 1,
                        Answered::NotApplied => tally.cas.not_applied += 1,
                    }
                }
                Err(failed) => {
                    *tally
                        .errors
                        .entry(code_name(failed.status.code()))
                        .or_default() += 1;
                    if failed.cas_unknown {
                        tally.cas.unknown += 1;
                    }
                }
            }
        }
        if let Err(failed) = result {
            shared.failed(operation, failed.status);
        }
        shared.completed.fetch_add(1, Ordering::Relaxed);
    }
}

/// A progress bar on stderr, hidden when stderr is not a terminal.
fn progress_bar(limit: Limit) -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let (length, template) = match limit {
        Limit::Operations(n) => (n, "[{elapsed_precise}] {wide_bar} {pos}/{len} ops  {msg}"),
        Limit::Duration(d) => (
            d.as_secs().max(1),
            "[{elapsed_precise}] {wide_bar} {pos}/{len} s  {msg}",
        ),
    };
    let style =
        ProgressStyle::with_template(template).unwrap_or_else(|_| ProgressStyle::default_bar());
    ProgressBar::with_draw_target(Some(length), ProgressDrawTarget::stderr()).with_style(style)
}

/// Redraws the bar with operations done and the current rate, until aborted.
async fn show_progress(bar: ProgressBar, limit: Limit, shared: Arc<Shared>) {
    let mut ticker = tokio::time::interval_at(
        tokio::time::Instant::now() + PROGRESS_INTERVAL,
        PROGRESS_INTERVAL,
    );
    let (mut last_time, mut last_done) = (Instant::now(), 0);
    loop {
        ticker.tick().await;
        let (now, done) = (Instant::now(), shared.completed.load(Ordering::Relaxed));
        let rate = (done - last_done) as f64 / (now - last_time).as_secs_f64();
        (last_time, last_done) = (now, done);
        match limit {
            Limit::Operations(_) => {
                bar.set_position(done);
                bar.set_message(format!("{rate:.0} ops/s"));
            }
            Limit::Duration(_) => {
                bar.set_position(shared.started.elapsed().as_secs());
                bar.set_message(format!("{done} ops  {rate:.0} ops/s"));
            }
        }
    }
}

/// The final report.
struct Report<'a> {
    plan: &'a Plan,
    tally: Tally,
    elapsed: Duration,
}

/// The latency percentiles reported: JSON key, text label, quantile.
const PERCENTILES: [(&str, &str, f64); 4] = [
    ("p50", "p50", 0.50),
    ("p95", "p95", 0.95),
    ("p99", "p99", 0.99),
    ("p999", "p99.9", 0.999),
];

impl Report<'_> {
    fn ops_per_second(&self) -> f64 {
        let seconds = self.elapsed.as_secs_f64();
        if seconds > 0.0 {
            self.tally.operations() as f64 / seconds
        } else {
            0.0
        }
    }

    /// A latency in milliseconds (microsecond resolution, so 3 decimals).
    fn millis(micros: u64) -> f64 {
        micros as f64 / 1000.0
    }

    fn quantile_ms(&self, quantile: f64) -> f64 {
        Self::millis(self.tally.latency.value_at_quantile(quantile))
    }

    /// The summary, as (label, value) lines.
    fn lines(&self) -> Vec<(&'static str, String)> {
        let plan = self.plan;
        let errors: u64 = self.tally.errors.values().sum();
        let mut errors = errors.to_string();
        if !self.tally.errors.is_empty() {
            let by_code: Vec<String> = self
                .tally
                .errors
                .iter()
                .map(|(code, count)| format!("{code} {count}"))
                .collect();
            errors += &format!(" ({})", by_code.join(", "));
        }
        let mut lines = vec![
            ("workload", workload_name(plan.workload).to_string()),
            ("concurrency", plan.concurrency.to_string()),
            ("consistency", plan.levels()),
            ("routing", plan.routing()),
            ("connections", plan.connections_line()),
            ("keys", plan.keys_line()),
            (
                "rate",
                match plan.rate {
                    Some(rate) => format!(
                        "{} ops/s target, open loop (latency from the due time)",
                        rate.per_second()
                    ),
                    None => "closed loop".to_string(),
                },
            ),
            (
                "warm-up",
                match plan.warmup {
                    Some(warmup) => format!("{:.3} s, not counted", warmup.as_secs_f64()),
                    None => "none".to_string(),
                },
            ),
            ("operations", self.tally.operations().to_string()),
            ("errors", errors),
            (
                "cas",
                format!(
                    "applied {}, not applied {}, unknown {}",
                    self.tally.cas.applied, self.tally.cas.not_applied, self.tally.cas.unknown
                ),
            ),
            ("elapsed", format!("{:.3} s", self.elapsed.as_secs_f64())),
            ("throughput", format!("{:.0} ops/s", self.ops_per_second())),
        ];
        if plan.workload != Workload::Cas {
            lines.retain(|(name, _)| *name != "cas");
        }
        if plan.workload != Workload::Noop {
            lines.insert(3, ("value size", format!("{} bytes", plan.value_size)));
        }
        for (_, label, quantile) in PERCENTILES {
            let value = format!("{:.3} ms", self.quantile_ms(quantile));
            lines.push((label, value));
        }
        let max = format!("{:.3} ms", Self::millis(self.tally.latency.max()));
        lines.push(("max", max));
        lines
    }

    fn text(&self) -> String {
        self.lines()
            .iter()
            .map(|(name, value)| {
                let name = if name.starts_with('p') || *name == "max" {
                    format!("latency {name}")
                } else {
                    name.to_string()
                };
                format!("{name:<14}{value}\n")
            })
            .collect()
    }

    fn json(&self) -> serde_json::Value {
        let mut latency = serde_json::Map::new();
        for (key, _, quantile) in PERCENTILES {
            latency.insert(key.into(), self.quantile_ms(quantile).into());
        }
        latency.insert("max".into(), Self::millis(self.tally.latency.max()).into());
        let mut json = serde_json::json!({
            "workload": workload_name(self.plan.workload),
            "operations": self.tally.operations(),
            "errors": self.tally.errors,
            "elapsed_seconds": self.elapsed.as_secs_f64(),
            "ops_per_second": self.ops_per_second(),
            "latency_ms": latency,
            "concurrency": self.plan.concurrency,
            "consistency": self.plan.consistency.to_string(),
            "value_size": self.plan.value_size,
            "token_aware": self.plan.token_aware,
            "hosts": self.plan.hosts,
            "connections": self.plan.connections,
            "pipeline": self.plan.pipeline,
            "rate": self.plan.rate.map(Rate::per_second),
            "warmup_seconds": self.plan.warmup.map_or(0.0, |warmup| warmup.as_secs_f64()),
            "distribution": self.plan.distribution.to_string(),
        });
        if self.plan.workload == Workload::Cas {
            let cas = self.tally.cas;
            json["cas"] = serde_json::json!({
                "applied": cas.applied,
                "not_applied": cas.not_applied,
                "unknown": cas.unknown,
                "contended": self.plan.contended,
                "serial": serial_name(self.plan.serial),
                "commit": self.plan.commit.map_or_else(|| "ANY".to_string(), |c| c.to_string()),
            });
        }
        json
    }
}

/// A workload's command-line name.
fn workload_name(workload: Workload) -> &'static str {
    match workload {
        Workload::Write => "write",
        Workload::Read => "read",
        Workload::Mixed => "mixed",
        Workload::Noop => "noop",
        Workload::Cas => "cas",
    }
}

/// A serial level's name, as Cassandra spells it.
fn serial_name(serial: SerialLevel) -> &'static str {
    match serial {
        SerialLevel::Serial => "SERIAL",
        SerialLevel::LocalSerial => "LOCAL_SERIAL",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ringstore_replication::ConsistencyLevel;

    fn args(workload: Workload) -> StressArgs {
        StressArgs {
            workload,
            operations: None,
            duration: None,
            warmup: None,
            concurrency: 64,
            key_count: 100_000,
            value_size: 100,
            consistency: ConsistencyLevel::One,
            keyspace: "stress".into(),
            replication: "SimpleStrategy:1".into(),
            read_ratio: 0.5,
            json: false,
            html: None,
            token_aware: false,
            hosts: Vec::new(),
            connections: std::num::NonZeroUsize::MIN,
            pipeline: false,
            rate: None,
            distribution: KeyDistribution::Uniform,
            speculative_retry: None,
            threads: None,
            expect_errors: false,
            contended: false,
            serial: SerialLevel::Serial,
            commit: None,
        }
    }

    fn error(args: &StressArgs) -> String {
        format!("{:#}", Plan::from_args(args).unwrap_err())
    }

    #[test]
    fn bad_arguments_are_refused_naming_the_flag() {
        let mut bad = args(Workload::Write);
        bad.concurrency = 0;
        assert!(error(&bad).contains("--concurrency"));
        let mut bad = args(Workload::Write);
        bad.key_count = 0;
        assert!(error(&bad).contains("--key-count"));
        for ratio in [-0.1, 1.5, f64::NAN] {
            let mut bad = args(Workload::Mixed);
            bad.read_ratio = ratio;
            assert!(error(&bad).contains("--read-ratio"), "{ratio}");
        }
        let mut bad = args(Workload::Write);
        bad.value_size = MAX_VALUE_SIZE + 1;
        assert!(error(&bad).contains("--value-size"));
        let mut bad = args(Workload::Write);
        bad.operations = Some(0);
        assert!(error(&bad).contains("-n"));
    }

    #[test]
    fn uncontended_cas_needs_a_key_for_every_worker() {
        let mut few = args(Workload::Cas);
        few.key_count = 8;
        assert!(error(&few).contains("--contended"), "{}", error(&few));
        few.contended = true;
        assert!(Plan::from_args(&few).is_ok());
    }

    #[test]
    fn a_cas_report_counts_applied_not_applied_and_unknown_with_its_levels() {
        let mut contended = args(Workload::Cas);
        contended.contended = true;
        contended.key_count = 1;
        contended.commit = Some(ConsistencyLevel::Quorum);
        let plan = Plan::from_args(&contended).unwrap();
        let mut tally = Tally::new();
        for micros in [1000, 2000, 3000] {
            tally.latency.record(micros).unwrap();
        }
        tally.errors.insert("DEADLINE_EXCEEDED", 1);
        tally.cas = cas::CasCounts {
            applied: 2,
            not_applied: 1,
            unknown: 1,
        };
        let report = Report {
            plan: &plan,
            tally,
            elapsed: Duration::from_secs(1),
        };
        let text = report.text();
        assert!(
            text.contains("cas           applied 2, not applied 1, unknown 1\n"),
            "{text}"
        );
        assert!(
            text.contains("consistency   SERIAL (commit QUORUM)\n"),
            "{text}"
        );
        assert!(text.contains("contended"), "{text}");
        let json = report.json();
        assert_eq!(json["workload"], "cas");
        assert_eq!(json["cas"]["applied"], 2);
        assert_eq!(json["cas"]["not_applied"], 1);
        assert_eq!(json["cas"]["unknown"], 1);
        assert_eq!(json["cas"]["contended"], true);
        assert_eq!(json["cas"]["commit"], "QUORUM");

        let write = Plan::from_args(&args(Workload::Write)).unwrap();
        let report = Report {
            plan: &write,
            tally: Tally::new(),
            elapsed: Duration::from_secs(1),
        };
        assert!(!report.text().contains("cas "), "{}", report.text());
        assert!(report.json().get("cas").is_none());
    }

    #[test]
    fn a_run_without_a_limit_does_a_hundred_thousand_operations() {
        let plan = Plan::from_args(&args(Workload::Read)).unwrap();
        assert_eq!(plan.limit, Limit::Operations(100_000));
        let mut timed = args(Workload::Read);
        timed.duration = Some(Duration::from_secs(5));
        let plan = Plan::from_args(&timed).unwrap();
        assert_eq!(plan.limit, Limit::Duration(Duration::from_secs(5)));
    }

    #[test]
    fn a_warm_up_is_the_same_load_for_its_duration_and_only_when_asked() {
        let mut warm = args(Workload::Mixed);
        warm.operations = Some(500);
        warm.rate = Some("100".parse().unwrap());
        warm.warmup = Some(Duration::from_secs(3));
        let plan = Plan::from_args(&warm).unwrap();
        let warmup = plan.warmup_phase().unwrap();
        assert_eq!(warmup.limit, Limit::Duration(Duration::from_secs(3)));
        assert_eq!(warmup.warmup, None);
        assert_eq!(warmup.rate, plan.rate);
        assert_eq!(warmup.workload, plan.workload);
        assert_eq!(plan.limit, Limit::Operations(500));
        let text = Report {
            plan: &plan,
            tally: Tally::new(),
            elapsed: Duration::from_secs(1),
        }
        .text();
        assert!(
            text.contains("warm-up       3.000 s, not counted\n"),
            "{text}"
        );

        for none in [None, Some(Duration::ZERO)] {
            warm.warmup = none;
            assert!(Plan::from_args(&warm).unwrap().warmup_phase().is_none());
        }
        let (mut warm_up, mut measured) = (Seeds::WarmUp.worker(0), Seeds::Measured.worker(0));
        assert_ne!(warm_up.random::<u64>(), measured.random::<u64>());
    }

    #[test]
    fn every_worker_s_results_are_in_the_merged_tally_whatever_its_shard() {
        let tallies = Tallies::new();
        for worker in 0..100 {
            tallies
                .shard(worker)
                .latency
                .record(1000 + worker as u64)
                .unwrap();
            if worker % 10 == 0 {
                *tallies
                    .shard(worker)
                    .errors
                    .entry("UNAVAILABLE")
                    .or_default() += 1;
            }
        }
        let merged = tallies.merged().unwrap();
        assert_eq!(merged.latency.len(), 100);
        assert_eq!(merged.latency.min(), 1000);
        assert_eq!(merged.errors["UNAVAILABLE"], 10);
        assert_eq!(merged.operations(), 110);
    }

    #[test]
    fn exactly_n_operations_are_claimed() {
        let shared = Shared::new(Limit::Operations(3), None);
        let claims: Vec<_> = std::iter::from_fn(|| shared.claim()).collect();
        assert_eq!(claims, [0, 1, 2]);
    }

    #[test]
    fn the_run_stops_only_when_every_probe_operation_failed() {
        let shared = Shared::new(Limit::Operations(1000), None);
        for index in 0..99 {
            shared.failed(index, tonic::Status::unavailable("down"));
        }
        shared.failed(500, tonic::Status::unavailable("down"));
        assert!(shared.claim().is_some(), "one probe operation is left");
        shared.failed(99, tonic::Status::internal("late"));
        assert!(shared.claim().is_none());
        assert_eq!(shared.first_error.get().unwrap().message(), "down");

        let short = Shared::new(Limit::Operations(2), None);
        short.failed(0, tonic::Status::unavailable("down"));
        short.failed(1, tonic::Status::unavailable("down"));
        assert!(
            short.stop.load(Ordering::Relaxed),
            "all of a short run failed"
        );
    }

    #[test]
    fn a_run_that_expects_errors_goes_on_when_every_operation_fails() {
        let mut flood = args(Workload::Noop);
        flood.operations = Some(1000);
        flood.expect_errors = true;
        let plan = Plan::from_args(&flood).unwrap();
        assert!(plan.expect_errors);
        let shared = Shared::of(&plan);
        for index in 0..200 {
            shared.failed(index, tonic::Status::unauthenticated("wrong password"));
        }
        assert_eq!(shared.claim(), Some(0), "the run goes on");
    }

    /// Runs one worker of `plan` against a server whose first answer takes
    /// a second and every other a millisecond; the latencies recorded.
    async fn against_a_server_that_stalls_once(plan: &Plan) -> Histogram<u64> {
        let shared = Shared::new(plan.limit, plan.rate);
        let mut answered = 0;
        let send = |_: Op, _: Vec<u8>| {
            answered += 1;
            let took = if answered == 1 { 1000 } else { 1 };
            async move {
                tokio::time::sleep(Duration::from_millis(took)).await;
                Ok(Answered::Done)
            }
        };
        let mut rng = StdRng::seed_from_u64(1);
        drive(0, &mut rng, plan, &shared, send).await;
        shared.tallies.merged().unwrap().latency
    }

    #[tokio::test(start_paused = true)]
    async fn an_open_loop_run_counts_the_wait_behind_a_stall_and_a_closed_one_hides_it() {
        let mut open = args(Workload::Write);
        open.operations = Some(10);
        open.rate = Some("100".parse().unwrap());
        let open = Plan::from_args(&open).unwrap();
        let latency = against_a_server_that_stalls_once(&open).await;
        assert_eq!(latency.len(), 10);
        // Operation 9 was due at 90 ms and answered at about 1009 ms.
        assert!(
            latency.value_at_quantile(0.5) >= 900_000,
            "{}",
            latency.value_at_quantile(0.5)
        );
        assert!(latency.min() >= 900_000, "{}", latency.min());

        let mut closed = args(Workload::Write);
        closed.operations = Some(10);
        let closed = Plan::from_args(&closed).unwrap();
        let latency = against_a_server_that_stalls_once(&closed).await;
        assert!(
            latency.value_at_quantile(0.5) <= 2_000,
            "{}",
            latency.value_at_quantile(0.5)
        );
        assert!(latency.max() >= 1_000_000);
    }

    #[tokio::test(start_paused = true)]
    async fn an_open_loop_run_sends_on_schedule_and_claims_the_operations_due_in_its_duration() {
        let mut rated = args(Workload::Write);
        rated.duration = Some(Duration::from_secs(2));
        rated.rate = Some("50".parse().unwrap());
        let plan = Plan::from_args(&rated).unwrap();
        let shared = Shared::new(plan.limit, plan.rate);
        let mut sent = Vec::new();
        let send = |_: Op, _: Vec<u8>| {
            sent.push(shared.started.elapsed());
            async { Ok(Answered::Done) }
        };
        let mut rng = StdRng::seed_from_u64(1);
        drive(0, &mut rng, &plan, &shared, send).await;
        assert_eq!(shared.tallies.merged().unwrap().operations(), 100);
        assert_eq!(sent[0], Duration::ZERO);
        assert_eq!(sent[50], Duration::from_secs(1));
        assert_eq!(sent[99], Duration::from_millis(1980));
    }

    #[test]
    fn bad_rates_and_distributions_are_refused_by_the_command_line() {
        use clap::Parser;
        for bad in [
            vec!["--rate", "0"],
            vec!["--rate", "fast"],
            vec!["--distribution", "zipf:abc"],
            vec!["--distribution", "hotspot:2"],
            vec!["--speculative-retry", "soon"],
        ] {
            let argv = [&["ringstore", "stress", "write"][..], &bad[..]].concat();
            let error = crate::cli::Cli::try_parse_from(argv)
                .unwrap_err()
                .to_string();
            assert!(error.contains(bad[1]), "{bad:?}: {error}");
        }
    }

    #[test]
    fn the_report_shows_counts_errors_and_latency_in_milliseconds() {
        let plan = Plan::from_args(&args(Workload::Write)).unwrap();
        let mut tally = Tally::new();
        for micros in [1000, 2000, 3000, 250_000] {
            tally.latency.record(micros).unwrap();
        }
        tally.errors.insert("UNAVAILABLE", 2);
        let report = Report {
            plan: &plan,
            tally,
            elapsed: Duration::from_secs(2),
        };
        let text = report.text();
        assert!(text.contains("operations    6\n"), "{text}");
        assert!(text.contains("errors        2 (UNAVAILABLE 2)\n"), "{text}");
        assert!(text.contains("throughput    3 ops/s\n"), "{text}");
        assert!(text.contains("latency p50   2.000 ms\n"), "{text}");
        let json = report.json();
        assert_eq!(json["operations"], 6);
        assert_eq!(json["errors"]["UNAVAILABLE"], 2);
        assert_eq!(json["ops_per_second"], 3.0);
        assert_eq!(json["latency_ms"]["p50"], 2.0);
        assert_eq!(json["consistency"], "ONE");
        let max = json["latency_ms"]["max"].as_f64().unwrap();
        assert!((249.9..=250.2).contains(&max), "{max}");
    }
}
