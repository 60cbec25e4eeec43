//! The receiving side: fetching ranges from their sources, verified,
//! checkpointed, retried and failed over — the async shell around
//! [`RangeFetcher`], which makes every one of those decisions. This module
//! only does the I/O it asks for: `StreamRange` calls, applying chunks,
//! recording checkpoints, sleeping.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use futures::future::BoxFuture;
use ringstore_metrics::InternodeRpc;
use ringstore_placement::{HostId, Token, TokenRange};
use ringstore_proto::v1 as pb;
use ringstore_storage::{Cell, KeyspaceId, RunIngest};
use ringstore_streaming::{
    Checkpoints, Direction, FetchAction, FetchConfig, FetchEvent, FetchTotals, Position,
    RangeFetcher, Session, SessionInfo, StreamOperation,
};
use tokio::time::Instant;
use tonic::Streaming;

use crate::convert::{cell_from_pb, range_to_pb};
use crate::error::{RangeStreamError, Result};
use crate::streaming::host::StreamHost;

/// How long a stream may go without a message before it counts as failed.
const IDLE_TIMEOUT: Duration = Duration::from_secs(60);
/// Bytes of cells applied to a range between two durable checkpoints: at
/// most what a receiver that crashed fetches again per range. The
/// checkpoints between them wait for no flush (see [`apply`]).
const DURABLE_CHECKPOINT_BYTES: u64 = 64 << 20;

/// One range to fetch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RangeFetch {
    /// Its keyspace.
    pub keyspace: KeyspaceId,
    /// The range, `(start, end]`.
    pub range: TokenRange,
    /// Where to fetch it from, in order of preference.
    pub sources: Vec<HostId>,
}

/// Fetches every range of `fetches` for `operation`, resuming from the
/// operation's checkpoints. Ranges of one keyspace from one preferred
/// source form a session (a `netstats` line) and go
/// [`ranges_at_once`] at a time; sessions run at once (each source's
/// throttle paces them). Once every
/// range is done the operation's checkpoints are cleared; on an error they
/// are kept for the next attempt.
pub async fn fetch_ranges<H: StreamHost>(
    context: &Arc<H>,
    operation: StreamOperation,
    fetches: Vec<RangeFetch>,
) -> Result<FetchTotals> {
    let checkpoints = Arc::new(Checkpoints::load(context.store(), operation)?);
    // No fold while the ranges stream: it would take their CPU between runs.
    let _no_fold = context.store().hold_fold();
    let mut groups: BTreeMap<(KeyspaceId, HostId), Vec<RangeFetch>> = BTreeMap::new();
    for fetch in fetches {
        let preferred = *fetch
            .sources
            .first()
            .ok_or(RangeStreamError::NoSource(fetch.range))?;
        groups
            .entry((fetch.keyspace, preferred))
            .or_default()
            .push(fetch);
    }
    let sessions =
        groups.into_iter().map(|((keyspace, source), ranges)| {
            let (context, checkpoints) = (context.clone(), checkpoints.clone());
            async move {
                fetch_session(&*context, &checkpoints, operation, keyspace, source, ranges).await
            }
        });
    let mut totals = FetchTotals::default();
    for outcome in futures::future::join_all(sessions).await {
        totals += outcome?;
    }
    checkpoints.clear().await?;
    Ok(totals)
}

async fn fetch_session(
    context: &impl StreamHost,
    checkpoints: &Checkpoints,
    operation: StreamOperation,
    keyspace: KeyspaceId,
    source: HostId,
    ranges: Vec<RangeFetch>,
) -> Result<FetchTotals> {
    let estimate = estimate_remote(context, source, keyspace, &ranges).await;
    let session = context.streams().open(SessionInfo {
        operation: operation.kind().to_string(),
        direction: Direction::Receiving,
        peer: source,
        peer_address: context
            .view()
            .member(source)
            .map(|m| m.metadata.client_addr),
        keyspace: context.keyspace_name(keyspace),
        ranges_total: ranges.len() as u32,
        bytes_total: estimate,
    });
    let mut totals = FetchTotals::default();
    // Collected first: a lazy iterator of futures borrowing the session
    // trips the compiler's check that the whole join is `Send`.
    let fetches: Vec<BoxFuture<'_, Result<FetchTotals>>> = ranges
        .iter()
        .map(|fetch| {
            let fetched: BoxFuture<'_, Result<FetchTotals>> = Box::pin(fetch_range(
                context,
                checkpoints,
                &session,
                operation,
                fetch,
            ));
            fetched
        })
        .collect();
    let mut outcomes = futures::stream::iter(fetches).buffer_unordered(ranges_at_once(context));
    while let Some(outcome) = outcomes.next().await {
        match outcome {
            Ok(range_totals) => {
                session.range_done();
                totals += range_totals;
            }
            Err(error) => {
                session.finish(Err(error.to_string()));
                return Err(error);
            }
        }
    }
    session.finish(Ok(()));
    Ok(totals)
}

/// How many ranges of a session are fetched at once. Two when received
/// cells go to runs, which cost little to write: while one range waits
/// (its stream opening, its run syncing) the other streams. One when they
/// are merged into sled, whose bulk writes are CPU-bound already and write
/// more when two ranges interleave (measured: 5.1 against 4.0 bytes written
/// per byte applied).
fn ranges_at_once(context: &impl StreamHost) -> usize {
    if context.store().keeps_runs() { 2 } else { 1 }
}

/// The source's estimate of the session's bytes (0 when it cannot tell).
async fn estimate_remote(
    context: &impl StreamHost,
    source: HostId,
    keyspace: KeyspaceId,
    ranges: &[RangeFetch],
) -> u64 {
    let Some(address) = context
        .view()
        .member(source)
        .map(|m| m.metadata.internode_addr)
    else {
        return 0;
    };
    let request = pb::RangeStatsRequest {
        keyspace_id: keyspace.to_string(),
        ranges: ranges.iter().map(|f| range_to_pb(f.range)).collect(),
    };
    let answer = tokio::time::timeout(
        Duration::from_secs(10),
        context.peers().client(address).range_stats(request),
    )
    .await;
    match answer {
        Ok(Ok(response)) => response
            .into_inner()
            .ranges
            .iter()
            .map(|r| r.estimated_bytes)
            .sum(),
        _ => 0,
    }
}

/// Fetches one range, from its checkpoint on: feeds a [`RangeFetcher`] and
/// does what it asks until it is done or gives up.
async fn fetch_range(
    context: &impl StreamHost,
    checkpoints: &Checkpoints,
    session: &Session,
    operation: StreamOperation,
    fetch: &RangeFetch,
) -> Result<FetchTotals> {
    let (keyspace, range) = (fetch.keyspace, fetch.range);
    let started = Instant::now();
    let now = || started.elapsed();
    let mut fetcher = RangeFetcher::new(
        FetchConfig::default(),
        range,
        fetch.sources.clone(),
        checkpoints.position(keyspace, range),
    );
    let mut stream: Option<Streaming<pb::StreamChunk>> = None;
    let mut run: Option<RunIngest> = None;
    let mut unflushed_bytes = 0u64;
    let mut action = next_attempt(context, &mut fetcher, &fetch.sources, now());
    loop {
        let event = match action {
            FetchAction::Open {
                source,
                remaining,
                failover,
            } => {
                if failover {
                    tracing::warn!(
                        %range,
                        preferred = %fetch.sources[0],
                        %source,
                        "the preferred source of the range is down or failing; fetching from another replica"
                    );
                }
                match open_stream(context, operation, keyspace, source, remaining).await {
                    Ok(opened) => receive(stream.insert(opened)).await,
                    Err(error) => FetchEvent::SourceFailed(error),
                }
            }
            FetchAction::Receive => match stream.as_mut() {
                Some(open) => receive(open).await,
                None => FetchEvent::SourceFailed("no stream is open".into()),
            },
            FetchAction::Apply {
                entries,
                bytes,
                checkpoint,
            } => {
                unflushed_bytes += bytes;
                let flush = unflushed_bytes >= DURABLE_CHECKPOINT_BYTES;
                if flush {
                    unflushed_bytes = 0;
                }
                let applied = apply(
                    context,
                    checkpoints,
                    fetch,
                    &mut run,
                    entries,
                    checkpoint,
                    flush,
                );
                match applied.await {
                    Ok(()) => {
                        session.add_bytes(bytes);
                        FetchEvent::Applied
                    }
                    // The unsealed part of the run is lost with it, but the
                    // fetcher counts those chunks as applied: only a fetch
                    // from the last sealed checkpoint is safe.
                    Err(error) if context.store().keeps_runs() => return Err(error),
                    Err(error) => FetchEvent::ApplyFailed(Box::new(error)),
                }
            }
            FetchAction::Rewind(position) => {
                // The pass was corrupt: start it over; its cells may be
                // incomplete, but each chunk was verified, so they are kept.
                warn_failed(&fetcher, range);
                stream = None;
                seal(context, &mut run).await?;
                checkpoints.record(keyspace, range, position).await?;
                FetchEvent::Tick
            }
            FetchAction::WaitUntil(until) => {
                stream = None;
                tokio::time::sleep_until(started + until).await;
                action = next_attempt(context, &mut fetcher, &fetch.sources, now());
                continue;
            }
            FetchAction::Continue => FetchEvent::Tick,
            FetchAction::Done { record, totals } => {
                if record {
                    record_done(context, checkpoints, fetch, &mut run).await?;
                }
                return Ok(totals);
            }
            FetchAction::GiveUp(error) => return Err(error.into()),
        };
        let failed = matches!(
            event,
            FetchEvent::SourceFailed(_) | FetchEvent::ApplyFailed(_)
        );
        action = fetcher.step(event, now());
        if failed {
            warn_failed(&fetcher, range);
        }
    }
}

/// Tells the fetcher which sources are up now, then lets it begin the next
/// attempt if one is due.
fn next_attempt(
    context: &impl StreamHost,
    fetcher: &mut RangeFetcher,
    sources: &[HostId],
    now: Duration,
) -> FetchAction {
    let view = context.view();
    for &source in sources {
        let event = if view.is_up(source) {
            FetchEvent::SourceSeenUp(source)
        } else {
            FetchEvent::SourceSeenDown(source)
        };
        fetcher.step(event, now);
    }
    fetcher.step(FetchEvent::Tick, now)
}

fn warn_failed(fetcher: &RangeFetcher, range: TokenRange) {
    if let Some(error) = fetcher.last_failure() {
        let attempt = fetcher.attempts();
        tracing::warn!(%range, attempt, %error, "range stream failed; retrying");
    }
}

/// Opens a stream of `remaining` of `keyspace` from `source`.
async fn open_stream(
    context: &impl StreamHost,
    operation: StreamOperation,
    keyspace: KeyspaceId,
    source: HostId,
    remaining: TokenRange,
) -> std::result::Result<Streaming<pb::StreamChunk>, Box<dyn std::error::Error + Send + Sync>> {
    let address = match context.view().member(source) {
        Some(member) => member.metadata.internode_addr,
        None => return Err(format!("no address known for {source}").into()),
    };
    let request = pb::StreamRangeRequest {
        keyspace_id: keyspace.to_string(),
        range: Some(range_to_pb(remaining)),
        requester_host_id: context.host_id().to_string(),
        operation: operation.to_string(),
    };
    let started = Instant::now();
    let opened = context.peers().client(address).stream_range(request).await;
    context
        .metrics()
        .internode(address, InternodeRpc::StreamRange, started.elapsed());
    match opened {
        Ok(response) => Ok(response.into_inner()),
        Err(status) => Err(status.message().into()),
    }
}

/// The stream's next message, as the fetcher takes it: the wire converted to
/// cells here, at the node's edge.
async fn receive(stream: &mut Streaming<pb::StreamChunk>) -> FetchEvent {
    let message = match tokio::time::timeout(IDLE_TIMEOUT, stream.message()).await {
        Ok(Ok(Some(message))) => message,
        Ok(Ok(None)) => return FetchEvent::SourceFailed("the stream ended early".into()),
        Ok(Err(status)) => return FetchEvent::SourceFailed(status.message().into()),
        Err(_) => {
            return FetchEvent::SourceFailed(format!("no data for {IDLE_TIMEOUT:?}").into());
        }
    };
    if message.last {
        return FetchEvent::StreamEnded {
            total_entries: message.total_entries,
            total_checksum: message.total_checksum,
        };
    }
    let entries = message
        .entries
        .into_iter()
        // An entry without a cell is counted by neither sum: the checksums catch it.
        .filter_map(|entry| Some((entry.key, cell_from_pb(entry.cell?))))
        .collect();
    FetchEvent::ChunkReceived {
        entries,
        checksum: message.checksum,
        last_token: Token(message.last_token),
    }
}

/// Applies a verified chunk, then records its checkpoint.
///
/// On a store that keeps runs (see `Store::start_run`), the chunk is
/// appended to the range's run, and the checkpoint waits: the run is
/// sealed (synced and made readable) and the checkpoint recorded, durably,
/// once `flush` says, at the range's end, and before a rewind. A crash
/// loses the unsealed part of the run and the range is fetched again from
/// the last sealed checkpoint.
///
/// Otherwise the cells are merged into the engine and neither waits for a
/// flush unless `flush`: the next flush makes both durable, the cells
/// first (see [`Checkpoints::advance`]), so a flush per chunk, which cost
/// more than its cells, is not needed for a correct resume. A durable
/// checkpoint now and then bounds what a crash makes the range fetch
/// again, and the range's `Done` record, durable too, makes every cell of
/// the range durable before the operation goes on.
async fn apply(
    context: &impl StreamHost,
    checkpoints: &Checkpoints,
    fetch: &RangeFetch,
    run: &mut Option<RunIngest>,
    entries: Vec<(Vec<u8>, Cell)>,
    checkpoint: Position,
    flush: bool,
) -> Result<()> {
    let (keyspace, range) = (fetch.keyspace, fetch.range);
    let started = match run.take() {
        Some(started) => Some(started),
        None => context.store().start_run(keyspace)?,
    };
    if let Some(started) = started {
        let appended = context.store().append_run(started, entries).await?;
        if flush {
            context.store().seal_run(appended).await?;
            checkpoints
                .record(keyspace, range, Some(checkpoint))
                .await?;
        } else {
            *run = Some(appended);
        }
        return Ok(());
    }
    let writes: Vec<(KeyspaceId, Vec<u8>, Cell)> = entries
        .into_iter()
        .map(|(key, cell)| (keyspace, key, cell))
        .collect();
    context.store().apply_many_unflushed(writes).await?;
    if flush {
        checkpoints
            .record(keyspace, range, Some(checkpoint))
            .await?;
    } else {
        checkpoints.advance(keyspace, range, checkpoint).await?;
    }
    Ok(())
}

/// Records the range done, durably, after sealing its run (which makes its
/// cells durable) if one is being written; without runs, the durable
/// record makes the range's cells durable too. Either way a crash after
/// this never fetches the range again. (A non-durable record, flushed with
/// the store's next flush, was lost to a SIGKILL once nothing else flushed
/// during a join: the restarted joiner fetched every range again.)
async fn record_done(
    context: &impl StreamHost,
    checkpoints: &Checkpoints,
    fetch: &RangeFetch,
    run: &mut Option<RunIngest>,
) -> Result<()> {
    seal(context, run).await?;
    checkpoints
        .record(fetch.keyspace, fetch.range, Some(Position::Done))
        .await?;
    Ok(())
}

/// Seals the range's run, if one is being written.
async fn seal(context: &impl StreamHost, run: &mut Option<RunIngest>) -> Result<()> {
    if let Some(run) = run.take() {
        context.store().seal_run(run).await?;
    }
    Ok(())
}
