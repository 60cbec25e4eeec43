//! The receiving side: fetching ranges from their sources, verified,
//! checkpointed, retried and failed over.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use ringstore_membership::ClusterView;
use ringstore_placement::{HostId, Token, TokenRange};
use ringstore_proto::v1 as pb;
use ringstore_storage::{Cell, KeyspaceId};

use crate::context::NodeContext;
use crate::convert::cell_from_pb;
use crate::error::{NodeError, Result};
use crate::streaming::checkpoint::{Checkpoints, Position};
use crate::streaming::chunk::EntryChecksum;
use crate::streaming::registry::{Direction, Session, SessionInfo, operation_kind};

/// Attempts per range before the fetch fails.
const MAX_ATTEMPTS: u32 = 30;
/// Failures after which a source gives way to the next one.
const FAILURES_BEFORE_FAILOVER: u32 = 3;
/// The longest wait between attempts.
const MAX_BACKOFF: Duration = Duration::from_secs(3);
/// How long a stream may go without a message before it counts as failed.
const IDLE_TIMEOUT: Duration = Duration::from_secs(60);

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

/// What a fetch moved.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FetchTotals {
    /// Ranges fetched (including ones an earlier run finished).
    pub ranges: u64,
    /// Bytes received by this run ([`entry_bytes`](crate::streaming::chunk::entry_bytes)).
    pub bytes: u64,
    /// Cells received by this run.
    pub entries: u64,
}

impl std::ops::AddAssign for FetchTotals {
    fn add_assign(&mut self, other: FetchTotals) {
        self.ranges += other.ranges;
        self.bytes += other.bytes;
        self.entries += other.entries;
    }
}

/// Fetches every range of `fetches` for `operation`, resuming from the
/// operation's checkpoints. Ranges of one keyspace from one preferred
/// source form a session (a `netstats` line) and go one after another;
/// sessions run at once (each source's throttle paces them). Once every
/// range is done the operation's checkpoints are cleared; on an error they
/// are kept for the next attempt.
pub async fn fetch_ranges(
    context: &Arc<NodeContext>,
    operation: &str,
    fetches: Vec<RangeFetch>,
) -> Result<FetchTotals> {
    let checkpoints = Arc::new(Checkpoints::load(&context.store, operation)?);
    let mut groups: BTreeMap<(KeyspaceId, HostId), Vec<RangeFetch>> = BTreeMap::new();
    for fetch in fetches {
        let preferred = *fetch.sources.first().ok_or_else(|| {
            NodeError::Unavailable(format!("no replica to fetch range {} from", fetch.range))
        })?;
        groups
            .entry((fetch.keyspace, preferred))
            .or_default()
            .push(fetch);
    }
    let sessions =
        groups.into_iter().map(|((keyspace, source), ranges)| {
            let (context, checkpoints) = (context.clone(), checkpoints.clone());
            let operation = operation.to_string();
            async move {
                fetch_session(&context, &checkpoints, &operation, keyspace, source, ranges).await
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
    context: &Arc<NodeContext>,
    checkpoints: &Checkpoints,
    operation: &str,
    keyspace: KeyspaceId,
    source: HostId,
    ranges: Vec<RangeFetch>,
) -> Result<FetchTotals> {
    let estimate = estimate_remote(context, source, keyspace, &ranges).await;
    let session = context.streams.open(SessionInfo {
        operation: operation_kind(operation).to_string(),
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
    for fetch in &ranges {
        match fetch_range(context, checkpoints, &session, operation, fetch).await {
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

/// The source's estimate of the session's bytes (0 when it cannot tell).
async fn estimate_remote(
    context: &NodeContext,
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
        context.peers.client(address).range_stats(request),
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

/// Fetches one range, from its checkpoint on, retrying and failing over.
async fn fetch_range(
    context: &Arc<NodeContext>,
    checkpoints: &Checkpoints,
    session: &Session,
    operation: &str,
    fetch: &RangeFetch,
) -> Result<FetchTotals> {
    let mut totals = FetchTotals {
        ranges: 1,
        ..FetchTotals::default()
    };
    let mut failures: HashMap<HostId, u32> = HashMap::new();
    let mut warned = false;
    let mut last_error = String::from("no source was up");
    for attempt in 1..=MAX_ATTEMPTS {
        let position = checkpoints.position(fetch.keyspace, fetch.range);
        let start = match position {
            Some(Position::Done) => return Ok(totals),
            Some(Position::After(token)) if token == fetch.range.end => {
                checkpoints
                    .record(fetch.keyspace, fetch.range, Some(Position::Done))
                    .await?;
                return Ok(totals);
            }
            Some(Position::After(token)) => token,
            None => fetch.range.start,
        };
        let view = context.view();
        let Some(source) = choose_source(&view, &fetch.sources, &failures) else {
            tokio::time::sleep(backoff(attempt)).await;
            continue;
        };
        if source != fetch.sources[0] && !warned {
            warned = true;
            tracing::warn!(
                range = %fetch.range,
                preferred = %fetch.sources[0],
                %source,
                "the preferred source of the range is down or failing; fetching from another replica"
            );
        }
        let remaining = TokenRange::new(start, fetch.range.end);
        match stream_once(
            context,
            checkpoints,
            session,
            operation,
            fetch,
            source,
            remaining,
        )
        .await
        {
            Ok(received) => {
                totals.bytes += received.bytes;
                totals.entries += received.entries;
                checkpoints
                    .record(fetch.keyspace, fetch.range, Some(Position::Done))
                    .await?;
                return Ok(totals);
            }
            Err((received, error)) => {
                totals.bytes += received.bytes;
                totals.entries += received.entries;
                if let StreamError::Corrupt(_) = &error {
                    // Start this range's pass over: its cells may be incomplete.
                    checkpoints
                        .record(fetch.keyspace, fetch.range, position)
                        .await?;
                }
                *failures.entry(source).or_default() += 1;
                last_error = format!("{source}: {error}");
                tracing::warn!(range = %fetch.range, %source, attempt, %error, "range stream failed; retrying");
                tokio::time::sleep(backoff(attempt)).await;
            }
        }
    }
    Err(NodeError::Internal(format!(
        "could not fetch range {} after {MAX_ATTEMPTS} attempts; last error: {last_error}",
        fetch.range
    )))
}

/// The first live source, preferring those that have not failed
/// [`FAILURES_BEFORE_FAILOVER`] times (then those that failed fewer rounds).
fn choose_source(
    view: &ClusterView,
    sources: &[HostId],
    failures: &HashMap<HostId, u32>,
) -> Option<HostId> {
    sources
        .iter()
        .enumerate()
        .filter(|(_, h)| view.is_up(**h))
        .min_by_key(|(i, h)| {
            (
                failures.get(h).copied().unwrap_or(0) / FAILURES_BEFORE_FAILOVER,
                *i,
            )
        })
        .map(|(_, h)| *h)
}

fn backoff(attempt: u32) -> Duration {
    (Duration::from_millis(100) * 2u32.pow(attempt.min(5))).min(MAX_BACKOFF)
}

/// Why one pass over a range failed.
#[derive(Debug, thiserror::Error)]
enum StreamError {
    /// The source or the network failed.
    #[error("{0}")]
    Transport(String),
    /// A checksum did not match: the pass is discarded.
    #[error("checksum mismatch: {0}")]
    Corrupt(String),
    /// Storing failed.
    #[error("storing: {0}")]
    Local(#[from] NodeError),
}

/// One pass over `remaining` of the range from `source`: stores each verified
/// chunk, then checkpoints it. What it received, and how it ended.
async fn stream_once(
    context: &NodeContext,
    checkpoints: &Checkpoints,
    session: &Session,
    operation: &str,
    fetch: &RangeFetch,
    source: HostId,
    remaining: TokenRange,
) -> std::result::Result<FetchTotals, (FetchTotals, StreamError)> {
    let mut received = FetchTotals::default();
    let address = match context.view().member(source) {
        Some(member) => member.metadata.internode_addr,
        None => {
            return Err((
                received,
                StreamError::Transport(format!("no address known for {source}")),
            ));
        }
    };
    let request = pb::StreamRangeRequest {
        keyspace_id: fetch.keyspace.to_string(),
        range: Some(range_to_pb(remaining)),
        requester_host_id: context.host_id.to_string(),
        operation: operation.to_string(),
    };
    let transport = |status: tonic::Status| StreamError::Transport(status.message().to_string());
    let mut stream = match context.peers.client(address).stream_range(request).await {
        Ok(response) => response.into_inner(),
        Err(status) => return Err((received, transport(status))),
    };
    let mut total = EntryChecksum::default();
    loop {
        let message = match tokio::time::timeout(IDLE_TIMEOUT, stream.message()).await {
            Ok(Ok(Some(message))) => message,
            Ok(Ok(None)) => {
                let error = StreamError::Transport("the stream ended early".into());
                return Err((received, error));
            }
            Ok(Err(status)) => return Err((received, transport(status))),
            Err(_) => {
                let error = StreamError::Transport(format!("no data for {IDLE_TIMEOUT:?}"));
                return Err((received, error));
            }
        };
        if message.last {
            if message.total_entries != total.entries() || message.total_checksum != total.value() {
                let error = StreamError::Corrupt(format!(
                    "the source sent {} entries with CRC {:08x}, {} arrived with CRC {:08x}",
                    message.total_entries,
                    message.total_checksum,
                    total.entries(),
                    total.value()
                ));
                return Err((received, error));
            }
            return Ok(received);
        }
        // Each cell is encoded once, for the chunk's and the stream's checksums.
        let mut chunk = EntryChecksum::default();
        let mut writes: Vec<(KeyspaceId, Vec<u8>, Cell)> =
            Vec::with_capacity(message.entries.len());
        for entry in message.entries {
            let Some(cell) = entry.cell.map(cell_from_pb) else {
                continue; // counted by neither sum: the checksums catch it
            };
            let encoded = cell.encode();
            chunk.add(&entry.key, &encoded);
            total.add(&entry.key, &encoded);
            writes.push((fetch.keyspace, entry.key, cell));
        }
        if chunk.value() != message.checksum {
            let error = StreamError::Corrupt(format!(
                "a chunk's CRC is {:08x}, its entries' {:08x}",
                message.checksum,
                chunk.value()
            ));
            return Err((received, error));
        }
        let bytes = chunk.bytes();
        if let Err(error) = context.store.apply_many(&writes).await {
            return Err((received, StreamError::Local(error.into())));
        }
        let position = Position::After(Token(message.last_token));
        if let Err(error) = checkpoints
            .record(fetch.keyspace, fetch.range, Some(position))
            .await
        {
            return Err((received, StreamError::Local(error)));
        }
        received.bytes += bytes;
        received.entries += writes.len() as u64;
        session.add_bytes(bytes);
    }
}

/// A range as the internode messages carry it.
pub fn range_to_pb(range: TokenRange) -> pb::TokenRangeMessage {
    pb::TokenRangeMessage {
        start: range.start.0,
        end: range.end.0,
    }
}

/// A range from an internode message.
pub fn range_from_pb(range: Option<pb::TokenRangeMessage>) -> Result<TokenRange> {
    let range =
        range.ok_or_else(|| NodeError::InvalidArgument("a token range is required".into()))?;
    Ok(TokenRange::new(Token(range.start), Token(range.end)))
}
