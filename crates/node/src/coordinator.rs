//! The coordinator: any node runs a client's read or write against the key's
//! replicas at the requested consistency level.
//!
//! Writes go to every live replica at once, each send in its own task so a
//! write keeps reaching every replica after the client has its answer; the
//! coordinator answers when the level's acks are in (or with `UNAVAILABLE`
//! before sending anything, or `DEADLINE_EXCEEDED` after the write timeout,
//! which is indeterminate). Hints, for replicas known down or that failed,
//! are stored by tasks too, so a client that cancels cannot cut them short,
//! and a hint that cannot be stored never fails a write whose level was met.
//! A write's natural and pending replicas come from one snapshot of the
//! cluster view, so a ring switch between two reads of it cannot drop a
//! pending replica. Reads ask the closest replica for data and the
//! next ones for digests, top up from spare replicas when one fails or is
//! slow, and on a digest mismatch fetch full data, reconcile (last write
//! wins) and repair the stale replicas before answering (blocking read
//! repair, as Cassandra 4). A read still waiting after its keyspace's
//! `speculative_retry` delay (fixed, or a percentile of the keyspace's
//! recent replica latency from `read_latencies`) asks one spare more: the
//! tracker decides at its `next_deadline`, this module only arms a timer
//! there and counts the retries. Concurrent reads of one key at one level
//! share replica rounds (`read_flights`: a read arriving during a round
//! queues for the next, so none is answered from a round older than it).
//! A replica whose own copy of the cell does not read back (its answer is
//! `DATA_LOSS`, or this node's store reports corruption; `local_reads`) is
//! no unavailable replica: the tracker reads another one in its place, at
//! every level, and its read repair writes the winner to it, replacing the
//! damaged copy (`ReadTracker::on_damaged`).
//! The bookkeeping is the pure state machines
//! of `ringstore_replication`; this module only moves messages.
//!
//! What it needs of the node (its store, view, queues, clock, metrics,
//! hints, …) comes from a [`CoordinatorHost`]; its functions are generic
//! over it, so the per-request path makes no `dyn` call.

use std::sync::Arc;
use std::time::{Duration, Instant};

use ringstore_membership::ClusterView;
use ringstore_metrics::{CoordinatorOp, LocalOp, Stage};
use ringstore_placement::{
    HostId, Murmur3Partitioner, PlacementError, ReplicaMap, ReplicationStrategy, Ring, Token,
};
use ringstore_proto::v1 as pb;
use ringstore_replication::{
    ConsistencyLevel, Digest, ReadAction, ReadRepair, ReadTracker, RepairAction, ReplicaCandidate,
    ReplicationError, Request, WriteStatus, WriteTimeout, WriteTracker, plan_read, plan_write,
};
use ringstore_storage::Cell;
use tokio::sync::mpsc;

use crate::convert::{cell_from_pb, cell_to_pb};
use crate::coordinator_host::CoordinatorHost;
use crate::deadline;
use crate::error::{CoordinatorError, NodeError, Result};
use crate::local_reads::read_own_copy;
use crate::schema::KeyspaceDef;
use crate::{
    batched_applies, batched_reads, coalesced_reads, empty_ring, read_latencies, ring_lag,
};

/// A replica's answer to a read request.
enum ReadReply {
    Data(Option<Cell>),
    Digest(Digest),
    Failed,
    /// Its copy of the cell does not read back.
    Damaged,
}

/// A replica's answer to a read, with how long it took.
type ReplicaAnswer = (HostId, ReadReply, Duration);

/// What a write's helper tasks report to its coordinator.
enum WriteOutcome {
    /// The replica applied the write.
    Acked(HostId),
    /// The replica failed or did not answer within the write timeout.
    Failed(HostId),
    /// A hint for the replica is stored (durably).
    HintStored,
}

/// One write as its helper tasks share it.
struct ReplicaWrite {
    keyspace: KeyspaceDef,
    key: Vec<u8>,
    cell: Cell,
}

/// Writes `cell` for `key` at `level`, timed and counted in the
/// coordinator metrics (see [`write_unmeasured`]).
pub(crate) async fn write<H: CoordinatorHost>(
    context: &Arc<H>,
    keyspace: &KeyspaceDef,
    key: Vec<u8>,
    cell: Cell,
    level: ConsistencyLevel,
) -> Result<()> {
    let started = Instant::now();
    let write = Arc::new(ReplicaWrite {
        keyspace: keyspace.clone(),
        key,
        cell,
    });
    let within = Duration::from_millis(context.write_timeout_ms());
    let result = ring_lag::retry_when_caught_up(
        context.ring_lag(),
        || context.views(),
        || context.view().ring.checksum(),
        within,
        || write_unmeasured(context, &write, level),
    )
    .await;
    measured(context, CoordinatorOp::Write, started, &result);
    result
}

/// Records a coordinated read or write that began at `started` and ended
/// with `result`: its latency, and whether it was unavailable or timed out.
fn measured<T>(
    context: &impl CoordinatorHost,
    op: CoordinatorOp,
    started: Instant,
    result: &Result<T>,
) {
    let metrics = context.metrics();
    metrics.coordinated(op, started.elapsed());
    if let Err(error) = result {
        match error.code() {
            tonic::Code::Unavailable => metrics.unavailable(op),
            tonic::Code::DeadlineExceeded => metrics.timed_out(op),
            _ => {}
        }
    }
}

/// Writes `write` at `level`, placed with the node's current view.
///
/// Every send to a replica and every hint runs in a task of its own that
/// outlives the request: a client that cancels or times out cannot stop a
/// hint from being stored once the write has gone out. A hint that cannot be
/// stored is logged and counted, never turned into an error of a write whose
/// level was met.
async fn write_unmeasured<H: CoordinatorHost>(
    context: &Arc<H>,
    write: &Arc<ReplicaWrite>,
    level: ConsistencyLevel,
) -> Result<()> {
    let keyspace = &write.keyspace;
    let view = context.view();
    empty_ring::refuse_while_starting(&view)?;
    let (natural, pending) = write_candidates(context, &view, keyspace, &write.key)?;
    let local = natural
        .iter()
        .chain(&pending)
        .any(|c| c.host == context.host_id());
    context
        .metrics()
        .coordinator_request(CoordinatorOp::Write, local);
    let plan = plan_write(
        level,
        &keyspace.strategy,
        &dc_of(context),
        &natural,
        &pending,
    )
    .map_err(ReplicationError::from)?;
    let mut tracker = WriteTracker::new(&plan);
    let (outcomes, mut replies) = mpsc::unbounded_channel();
    for target in plan.targets() {
        tokio::spawn(send_to_replica(
            context.clone(),
            target.host,
            write.clone(),
            outcomes.clone(),
            view.clone(),
        ));
    }
    // Replicas known down get hints; at ANY a stored hint counts as an ack.
    for &host in plan.down() {
        tokio::spawn(store_hint(
            context.clone(),
            host,
            write.clone(),
            Some(outcomes.clone()),
        ));
    }
    drop(outcomes);
    let timeout = Duration::from_millis(context.write_timeout_ms());
    let deadline = tokio::time::sleep(timeout);
    tokio::pin!(deadline);
    let mut status = tracker.status();
    loop {
        match status {
            WriteStatus::Pending => {}
            WriteStatus::Satisfied => return Ok(()),
            WriteStatus::Failed => {
                return Err(CoordinatorError::WriteFailed {
                    level: tracker.level(),
                    acked: tracker.acked(),
                    required: tracker.required(),
                }
                .into());
            }
        }
        status = tokio::select! {
            reply = replies.recv() => match reply {
                Some(WriteOutcome::Acked(host)) => tracker.on_ack(host),
                Some(WriteOutcome::Failed(host)) => tracker.on_failure(host),
                Some(WriteOutcome::HintStored) => tracker.on_hint_stored(),
                None => WriteStatus::Failed,
            },
            () = &mut deadline => return Err(timeout_of(&tracker)),
        };
    }
}

/// Sends `write`, placed with `placed`, to replica `host` within the write
/// timeout and reports the outcome; a replica that failed or did not answer
/// in time gets a hint.
async fn send_to_replica<H: CoordinatorHost>(
    context: Arc<H>,
    host: HostId,
    write: Arc<ReplicaWrite>,
    outcomes: mpsc::UnboundedSender<WriteOutcome>,
    placed: Arc<ClusterView>,
) {
    let timeout = Duration::from_millis(context.write_timeout_ms());
    let deadline = deadline::replica_deadline(context.now(), timeout);
    let applied = apply_on(
        &context,
        host,
        &write.keyspace,
        &write.key,
        write.cell.clone(),
        deadline,
        &placed,
    );
    let ok = match tokio::time::timeout(timeout, applied).await {
        Ok(Ok(())) => true,
        Ok(Err(error)) => {
            tracing::debug!(%host, %error, "replica write failed");
            false
        }
        Err(_) => false,
    };
    let outcome = if ok {
        WriteOutcome::Acked(host)
    } else {
        WriteOutcome::Failed(host)
    };
    // The coordinator may have answered already: nobody listening is fine.
    let _ = outcomes.send(outcome);
    if !ok && host != context.host_id() {
        store_hint(context, host, write, None).await;
    }
}

/// Stores a hint of `write` for `host`; reports it to `outcomes` if stored.
/// A failure is logged and counted: the write's fate is the replicas'.
/// None for a node that has left the cluster: it would never be delivered.
async fn store_hint<H: CoordinatorHost>(
    context: Arc<H>,
    host: HostId,
    write: Arc<ReplicaWrite>,
    outcomes: Option<mpsc::UnboundedSender<WriteOutcome>>,
) {
    if context.view().has_left(host) {
        tracing::debug!(%host, "no hint for a node that has left the cluster");
        return;
    }
    let stored = context
        .handoff()
        .hint(
            context.store(),
            host,
            write.keyspace.id,
            &write.key,
            &write.cell,
        )
        .await;
    match stored {
        Ok(true) => {
            if let Some(outcomes) = outcomes {
                let _ = outcomes.send(WriteOutcome::HintStored);
            }
        }
        Ok(false) => {}
        Err(error) => {
            context.handoff().note_store_failure();
            tracing::warn!(%host, %error, "could not store a hint; the replica will need a repair");
        }
    }
}

fn timeout_of(tracker: &WriteTracker) -> NodeError {
    ReplicationError::from(WriteTimeout {
        level: tracker.level(),
        acked: tracker.acked(),
        required: tracker.required(),
    })
    .into()
}

/// Reads `key` at `level`: the winning cell (possibly a tombstone), if any;
/// timed and counted in the coordinator metrics.
pub(crate) async fn read<H: CoordinatorHost>(
    context: &Arc<H>,
    keyspace: &KeyspaceDef,
    key: Vec<u8>,
    level: ConsistencyLevel,
) -> Result<Option<Cell>> {
    let started = Instant::now();
    let result = coalesced_reads::coalesced(context, keyspace, key, level, Round).await;
    measured(context, CoordinatorOp::Read, started, &result);
    result
}

/// One replica round of a read, as a flight of `read_flights` runs it.
struct Round;

impl<H: CoordinatorHost> coalesced_reads::AsyncRound<H> for Round {
    async fn run(
        &self,
        context: Arc<H>,
        keyspace: KeyspaceDef,
        key: Vec<u8>,
        level: ConsistencyLevel,
    ) -> Result<Option<Cell>> {
        let key = Arc::new(key);
        let within = Duration::from_millis(context.read_timeout_ms());
        ring_lag::retry_when_caught_up(
            context.ring_lag(),
            || context.views(),
            || context.view().ring.checksum(),
            within,
            || read_unmeasured(&context, &keyspace, &key, level),
        )
        .await
    }
}

async fn read_unmeasured<H: CoordinatorHost>(
    context: &Arc<H>,
    keyspace: &KeyspaceDef,
    key: &Arc<Vec<u8>>,
    level: ConsistencyLevel,
) -> Result<Option<Cell>> {
    let view = context.view();
    empty_ring::refuse_while_starting(&view)?;
    let natural = candidates(context, &view, keyspace, token_of(key)?);
    let local = natural.iter().any(|c| c.host == context.host_id());
    context
        .metrics()
        .coordinator_request(CoordinatorOp::Read, local);
    let plan = plan_read(level, &keyspace.strategy, &dc_of(context), &natural)?;
    let mut tracker = ReadTracker::new(&plan);
    let latencies = context.read_latencies();
    let before_estimate = Duration::from_millis(context.read_timeout_ms() / 2);
    let setting = keyspace.speculative_retry;
    if let Some(delay) = latencies.speculation_delay(keyspace.id, setting, before_estimate) {
        tracker = tracker.with_speculative_retry(read_latencies::now() + delay);
    }
    let (sender, mut replies) = mpsc::channel::<ReplicaAnswer>(16);
    let round = Duration::from_millis(context.read_timeout_ms());
    let send_reads = |requests| send_reads(context, keyspace, key, requests, &sender, &view);
    send_reads(plan.requests());
    let deadline = tokio::time::sleep(round);
    tokio::pin!(deadline);
    // Armed at the tracker's speculation deadline while it has one.
    let speculation = tokio::time::sleep_until(tokio::time::Instant::now());
    tokio::pin!(speculation);
    loop {
        let speculate_at = tracker.next_deadline();
        if let Some(at) = speculate_at {
            speculation
                .as_mut()
                .reset(tokio::time::Instant::from_std(at));
        }
        let (action, speculative) = tokio::select! {
            reply = replies.recv() => {
                let (host, reply, latency) = reply.expect("the coordinator holds a sender");
                if !matches!(reply, ReadReply::Failed | ReadReply::Damaged) {
                    latencies.record(keyspace.id, latency);
                }
                let action = match reply {
                    ReadReply::Data(cell) => tracker.on_data(host, cell),
                    ReadReply::Digest(digest) => tracker.on_digest(host, digest),
                    ReadReply::Failed => tracker.on_failure(host),
                    ReadReply::Damaged => tracker.on_damaged(host),
                };
                (action, false)
            },
            () = &mut deadline => (tracker.on_timeout(), false),
            () = &mut speculation, if speculate_at.is_some() => {
                (tracker.on_timer(read_latencies::now()), true)
            },
        };
        match action {
            ReadAction::Wait => {}
            // A speculation adds a replica to the round; it does not restart it.
            ReadAction::Contact(requests) if speculative => {
                context.metrics().speculative_retry();
                send_reads(requests);
            }
            ReadAction::Contact(requests) => {
                send_reads(requests);
                deadline.as_mut().reset(tokio::time::Instant::now() + round);
            }
            ReadAction::Done(outcome) => {
                if let Some(repair) = tracker.read_repair() {
                    read_repair(context, keyspace, key, repair, &view).await?;
                }
                return Ok(outcome.winner);
            }
            ReadAction::Failed(failure) => {
                return Err(ringstore_replication::ReplicationError::from(failure).into());
            }
        }
    }
}

/// Writes the read's winner to its stale replicas (and, should some of them
/// fail, to others) until enough hold it for the read's level (blocking read
/// repair); each write runs in its own task, as a write's do, so repairs
/// still in flight when the client gets its answer carry on.
async fn read_repair<H: CoordinatorHost>(
    context: &Arc<H>,
    keyspace: &KeyspaceDef,
    key: &Arc<Vec<u8>>,
    mut repair: ReadRepair,
    placed: &Arc<ClusterView>,
) -> Result<()> {
    let _stage = context.metrics().stage(Stage::ReadRepair);
    let write = Arc::new(ReplicaWrite {
        keyspace: keyspace.clone(),
        key: key.as_ref().clone(),
        cell: repair.winner().clone(),
    });
    let (outcomes, mut replies) = mpsc::unbounded_channel();
    let send = |hosts: Vec<HostId>| {
        for host in hosts {
            let (write, outcomes, placed) = (write.clone(), outcomes.clone(), placed.clone());
            let task = send_to_replica(context.clone(), host, write, outcomes, placed);
            tokio::spawn(task);
        }
    };
    send(repair.targets());
    let round = Duration::from_millis(context.write_timeout_ms());
    let deadline = tokio::time::sleep(round);
    tokio::pin!(deadline);
    let mut action = repair.status();
    loop {
        match action {
            RepairAction::Wait => {}
            RepairAction::Send(hosts) => {
                tracing::debug!(count = hosts.len(), "read repair writes to more replicas");
                send(hosts);
                deadline.as_mut().reset(tokio::time::Instant::now() + round);
            }
            RepairAction::Done => return Ok(()),
            RepairAction::Failed(failure) => return Err(CoordinatorError::from(failure).into()),
        }
        action = tokio::select! {
            reply = replies.recv() => match reply.expect("the coordinator holds a sender") {
                WriteOutcome::Acked(host) => {
                    context.metrics().read_repaired(1);
                    repair.on_ack(host)
                }
                WriteOutcome::Failed(host) => repair.on_failure(host),
                WriteOutcome::HintStored => RepairAction::Wait,
            },
            () = &mut deadline => repair.on_timeout(),
        };
    }
}

fn send_reads<H: CoordinatorHost>(
    context: &Arc<H>,
    keyspace: &KeyspaceDef,
    key: &Arc<Vec<u8>>,
    requests: Vec<(HostId, Request)>,
    replies: &mpsc::Sender<ReplicaAnswer>,
    placed: &Arc<ClusterView>,
) {
    for (host, request) in requests {
        let (context, keyspace, key, replies, placed) = (
            context.clone(),
            keyspace.clone(),
            key.clone(),
            replies.clone(),
            placed.clone(),
        );
        tokio::spawn(async move {
            let sent = tokio::time::Instant::now();
            let reply = match read_on(&context, host, &keyspace, &key, request, &placed).await {
                Ok(reply) => reply,
                // Logged by the replica, with the keyspace and the key.
                Err(error) if error.is_damaged_replica() => ReadReply::Damaged,
                Err(error) => {
                    tracing::debug!(%host, %error, "replica read failed");
                    ReadReply::Failed
                }
            };
            // A read that finished no longer listens: its late answers are
            // dropped here, unrecorded (see `read_latencies`).
            let _ = replies.send((host, reply, sent.elapsed())).await;
        });
    }
}

/// The key's natural replicas in `view`, with their DCs and liveness.
fn candidates(
    context: &impl CoordinatorHost,
    view: &ClusterView,
    keyspace: &KeyspaceDef,
    token: Token,
) -> Vec<ReplicaCandidate> {
    let map = context
        .replica_maps()
        .replica_map(&view.ring, keyspace.id, &keyspace.strategy);
    replica_candidates(view, &map, token, |_| true)
}

/// What a write goes to: the key's natural replicas and, during a range
/// movement or a keyspace alter, its pending replicas (those the pending
/// ring or the pending replication adds, on either ring), all from the one
/// `view`, so a ring switch cannot fall between them; and for `ring_delay`
/// after a switch, the live replicas only the replaced ring has (see
/// [`crate::settling_ring`]).
fn write_candidates(
    context: &impl CoordinatorHost,
    view: &ClusterView,
    keyspace: &KeyspaceDef,
    key: &[u8],
) -> Result<(Vec<ReplicaCandidate>, Vec<ReplicaCandidate>)> {
    let token = token_of(key)?;
    let natural = candidates(context, view, keyspace, token);
    let mut pending: Vec<ReplicaCandidate> = Vec::new();
    let mut add = |ring: &Arc<Ring>, strategy: &ReplicationStrategy, only_live: bool| {
        let map = context
            .replica_maps()
            .replica_map(ring, keyspace.id, strategy);
        let extra = replica_candidates(view, &map, token, |host| {
            let known = natural.iter().chain(&pending).any(|n| n.host == host);
            !known && (!only_live || view.is_up(host))
        });
        pending.extend(extra);
    };
    let rings = std::iter::once(&view.ring).chain(&view.pending_ring);
    for (ring_index, ring) in rings.enumerate() {
        for (strategy_index, strategy) in keyspace.write_strategies().enumerate() {
            if ring_index == 0 && strategy_index == 0 {
                continue; // the natural replicas
            }
            add(ring, strategy, false);
        }
    }
    let settle = Duration::from_millis(context.ring_delay_ms());
    if let Some(replaced) = context.settling_ring().previous(&view.ring, settle) {
        for strategy in keyspace.write_strategies() {
            add(&replaced, strategy, true);
        }
    }
    Ok((natural, pending))
}

/// The replicas of `token` in `map` that pass `keep`, with their DCs and
/// their liveness in `view`.
fn replica_candidates(
    view: &ClusterView,
    map: &ReplicaMap,
    token: Token,
    keep: impl Fn(HostId) -> bool,
) -> Vec<ReplicaCandidate> {
    map.replicas(token)
        .hosts()
        .filter(|h| keep(h.id))
        .map(|h| ReplicaCandidate::new(h.id, h.location.dc.clone(), view.is_up(h.id)))
        .collect()
}

fn token_of(key: &[u8]) -> Result<Token> {
    Murmur3Partitioner::token(key).map_err(|error| match error {
        PlacementError::EmptyKey => NodeError::EmptyKey,
        source => NodeError::Placement {
            doing: "hashing the key",
            source,
        },
    })
}

fn dc_of(context: &impl CoordinatorHost) -> ringstore_placement::Datacenter {
    context.dc().into()
}

/// Applies `cell` on replica `host` (locally when it is this node; through
/// the peer's queue of coalesced writes otherwise, `apply_queues.rs`). A
/// peer gets `deadline` (µs, this node's clock), when this node stops
/// waiting: it drops the write if it reads it later ([`deadline`]).
async fn apply_on<H: CoordinatorHost>(
    context: &Arc<H>,
    host: HostId,
    keyspace: &KeyspaceDef,
    key: &[u8],
    cell: Cell,
    deadline: i64,
    placed: &ClusterView,
) -> Result<()> {
    if host == context.host_id() {
        let started = Instant::now();
        context.store().apply(keyspace.id, key, cell).await?;
        let elapsed = started.elapsed();
        context.served_locally(keyspace.id, &keyspace.name, LocalOp::Write, key, elapsed);
        return Ok(());
    }
    let mutation = pb::ReplicaMutation {
        keyspace_id: keyspace.id.to_string(),
        key: key.to_vec(),
        cell: Some(cell_to_pb(&cell)),
        deadline_micros: Some(deadline),
    };
    let address = context.internode_address(host)?;
    batched_applies::apply(context, address, mutation, placed).await
}

/// Reads `key` on replica `host` (locally when it is this node; through
/// the peer's queue of coalesced reads otherwise, `read_queues.rs`).
async fn read_on<H: CoordinatorHost>(
    context: &Arc<H>,
    host: HostId,
    keyspace: &KeyspaceDef,
    key: &[u8],
    request: Request,
    placed: &ClusterView,
) -> Result<ReadReply> {
    let digest_only = request == Request::Digest;
    if host == context.host_id() {
        let cell = read_own_copy(context.as_ref(), keyspace.id, &keyspace.name, key)?;
        return Ok(if digest_only {
            ReadReply::Digest(Digest::of(cell.as_ref()))
        } else {
            ReadReply::Data(cell)
        });
    }
    let address = context.internode_address(host)?;
    let (cell, digest) =
        batched_reads::read(context, address, keyspace.id, key, digest_only, placed).await?;
    Ok(if digest_only {
        ReadReply::Digest(Digest(digest))
    } else {
        ReadReply::Data(cell.map(cell_from_pb))
    })
}
