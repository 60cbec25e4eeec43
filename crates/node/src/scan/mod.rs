//! Client scans: a keyspace's rows in token order over a token range, one
//! page per request, at a consistency level.
//!
//! A page walks the range from its resume point, one *piece* at a time: the
//! part of the ring range holding the next token that lies in the scan's
//! range, which has one replica set (ranges are cut where the replica sets
//! change). For each piece the coordinator plans a read at the level
//! ([`plan_read`]), asks the planned replicas for a page of their cells
//! (`ReadRange`, at most the rows still wanted and the bytes still allowed),
//! topping up from spares on failure or timeout ([`RangeReadTracker`]),
//! checks and merges their pages ([`check_page`], [`merge_pages`]: only rows
//! up to the smallest last row of the pages that stopped at a limit are
//! final), writes the winners to the stale replicas and waits for them
//! (blocking read repair, as point reads), and goes on after the last row
//! consumed. The page ends when it holds `page_size` rows, about
//! [`MAX_PAGE_BYTES`], after [`MAX_ROUNDS`] replica rounds (a range of
//! tombstones or empty pieces returns a short page rather than running
//! long), or at the end of the range.
//!
//! A scan is coordinated as a point read is, with the same parts of the
//! node: its functions take the coordinator's host ([`CoordinatorHost`]:
//! the view, the replica maps, the peers, the store, the clock, the
//! metrics), and the replica's side ([`replica::read_range`]) only the
//! store.
//!
//! # Invariants
//! - Memory is bounded whatever the range: one round holds at most one
//!   page per replica asked (each bounded in rows and bytes) and the page
//!   being built; nothing is kept between requests (the resume token is
//!   the whole state).
//! - A page's resume point is strictly after every row it consumed, so
//!   following resume tokens returns each live row once, in order.
//!
//! # Caveats
//! - Not a snapshot: writes during a scan may or may not be seen.
//! - The ring is read per piece: a topology change during a scan is seen
//!   from the next piece on. Pending replicas are not asked (as reads).
//! - Keys and values of a page are copied once more into the response.

pub mod replica;
pub mod resume;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ringstore_metrics::{InternodeRpc, Stage};
use ringstore_placement::{HostId, Murmur3Partitioner, Token};
use ringstore_proto::v1 as pb;
use ringstore_replication::{
    ConsistencyLevel, PageEnd, RangeReadAction, RangeReadTracker, RangeRow, ReplicaCandidate,
    ReplicaPage, ScanPoint, check_page, merge_pages, plan_read,
};
use tokio::sync::mpsc;

use crate::convert::{cell_from_pb, cell_to_pb};
use crate::coordinator::CoordinatorHost;
use crate::coordinator::peer_calls::write_call;
use crate::empty_ring;
use crate::error::{NodeError, Result, ScanError};
use crate::schema::KeyspaceDef;

/// Rows per page when the client names none.
pub const DEFAULT_PAGE_SIZE: usize = 1000;
/// The most rows a page may ask for.
pub const MAX_PAGE_SIZE: usize = 10_000;
/// About the most bytes of keys and values in a page: a replica's page and
/// the client's page stop once past it (always with at least one row).
pub const MAX_PAGE_BYTES: usize = 2 << 20;
/// The most replica rounds one page runs before it returns what it has.
pub const MAX_ROUNDS: usize = 64;

/// One page of a scan.
#[derive(Debug)]
pub struct Page {
    /// The live rows, in `(token, key)` order.
    pub rows: Vec<RangeRow>,
    /// Where the next page starts; `None` when the range is done.
    pub resume: Option<ScanPoint>,
}

/// Reads the page of `keyspace` that starts strictly after `from` and ends
/// at most at token `end`: up to `page_size` live rows, at `level`.
pub(crate) async fn scan_page<H: CoordinatorHost>(
    context: &Arc<H>,
    keyspace: &KeyspaceDef,
    from: ScanPoint,
    end: Token,
    page_size: usize,
    level: ConsistencyLevel,
) -> Result<Page> {
    let mut point = from;
    let mut rows: Vec<RangeRow> = Vec::new();
    let mut bytes = 0usize;
    for _ in 0..MAX_ROUNDS {
        let Some(first) = point.first_token().filter(|&t| t <= end) else {
            return Ok(Page { rows, resume: None });
        };
        let (candidates, last) = piece(context.as_ref(), keyspace, first, end)?;
        let want = page_size - rows.len();
        let max_bytes = (MAX_PAGE_BYTES - bytes) as u64;
        let merged = {
            let pages = read_pages(
                context,
                keyspace,
                level,
                &candidates,
                &point,
                last,
                want,
                max_bytes,
            )
            .await?;
            merge_pages(&point, &pages, want, context.now())
        };
        if !merged.repairs.is_empty() {
            let mut by_host: BTreeMap<HostId, Vec<RangeRow>> = BTreeMap::new();
            for repair in merged.repairs {
                by_host.entry(repair.host).or_default().push(repair.row);
            }
            repair(context, keyspace, by_host).await?;
        }
        bytes += merged.rows.iter().map(RangeRow::bytes).sum::<usize>();
        rows.extend(merged.rows);
        point = match merged.next {
            PageEnd::After(next) => next,
            PageEnd::Complete if last == end => return Ok(Page { rows, resume: None }),
            PageEnd::Complete => ScanPoint::AfterToken(last),
        };
        if rows.len() >= page_size || bytes >= MAX_PAGE_BYTES {
            break;
        }
    }
    Ok(Page {
        rows,
        resume: Some(point),
    })
}

/// The piece holding token `first`: its replicas (with DC and liveness),
/// and its last token within the scan's range, which ends at `end`.
fn piece<H: CoordinatorHost>(
    context: &H,
    keyspace: &KeyspaceDef,
    first: Token,
    end: Token,
) -> Result<(Vec<ReplicaCandidate>, Token)> {
    let view = context.view();
    let map = context
        .replica_maps()
        .replica_map(&view.ring, keyspace.id, &keyspace.strategy);
    empty_ring::refuse_while_starting(&view)?;
    let replicas = map.replicas(first);
    if replicas.is_empty() {
        return Err(ScanError::NoReplica {
            keyspace: keyspace.name.clone(),
        }
        .into());
    }
    let range = replicas.range();
    // The ring range (s, e] holds `first`; unless it wraps past Token::MAX
    // after `first`, the piece ends at e.
    let last = if !range.is_full_ring() && range.end >= first {
        range.end.min(end)
    } else {
        end
    };
    let candidates = replicas
        .hosts()
        .map(|h| ReplicaCandidate::new(h.id, h.location.dc.clone(), view.is_up(h.id)))
        .collect();
    Ok((candidates, last))
}

/// Asks the replicas the level needs for their pages after `point` up to
/// `last` (topping up on failure or timeout) and returns the pages.
#[allow(clippy::too_many_arguments)]
async fn read_pages<H: CoordinatorHost>(
    context: &Arc<H>,
    keyspace: &KeyspaceDef,
    level: ConsistencyLevel,
    candidates: &[ReplicaCandidate],
    point: &ScanPoint,
    last: Token,
    limit: usize,
    max_bytes: u64,
) -> Result<Vec<(HostId, ReplicaPage)>> {
    let dc = context.dc().into();
    let plan = plan_read(level, &keyspace.strategy, &dc, candidates)?;
    let mut tracker = RangeReadTracker::new(&plan);
    let request = Arc::new(PageRequest {
        keyspace: keyspace.clone(),
        point: point.clone(),
        last,
        limit,
        max_bytes,
    });
    let (sender, mut replies) = mpsc::channel(candidates.len().max(1));
    let ask = |hosts: Vec<HostId>| {
        for host in hosts {
            let (context, request, sender) = (context.clone(), request.clone(), sender.clone());
            tokio::spawn(async move {
                let page = read_page_on(context.as_ref(), host, &request)
                    .await
                    .and_then(|page| {
                        check_page(&request.point, request.last, request.limit, &page)
                            .map(|()| page)
                            .map_err(|source| {
                                ScanError::BadPage {
                                    replica: host,
                                    source,
                                }
                                .into()
                            })
                    });
                let _ = sender.send((host, page)).await;
            });
        }
    };
    ask(tracker.requests());
    let round = Duration::from_millis(context.read_timeout_ms());
    let deadline = tokio::time::sleep(round);
    tokio::pin!(deadline);
    loop {
        let action = tokio::select! {
            reply = replies.recv() => match reply.expect("the coordinator holds a sender") {
                (host, Ok(page)) => tracker.on_page(host, page),
                (host, Err(error)) => {
                    tracing::debug!(%host, %error, "replica scan page failed");
                    tracker.on_failure(host)
                }
            },
            () = &mut deadline => tracker.on_timeout(),
        };
        match action {
            RangeReadAction::Wait => {}
            RangeReadAction::Contact(hosts) => {
                ask(hosts);
                deadline.as_mut().reset(tokio::time::Instant::now() + round);
            }
            RangeReadAction::Done(pages) => return Ok(pages),
            RangeReadAction::Failed(failure) => {
                return Err(ringstore_replication::ReplicationError::from(failure).into());
            }
        }
    }
}

/// What one replica is asked for.
struct PageRequest {
    keyspace: KeyspaceDef,
    point: ScanPoint,
    last: Token,
    limit: usize,
    max_bytes: u64,
}

/// Replica `host`'s page (locally when it is this node).
async fn read_page_on<H: CoordinatorHost>(
    context: &H,
    host: HostId,
    request: &PageRequest,
) -> Result<ReplicaPage> {
    let PageRequest {
        keyspace,
        point,
        last,
        limit,
        max_bytes,
    } = request;
    if host == context.host_id() {
        return replica::read_range(
            context.store(),
            keyspace.id,
            point.clone(),
            *last,
            *limit,
            *max_bytes,
        )
        .await;
    }
    let address = context.internode_address(host)?;
    let (after_token, after_key) = match point {
        ScanPoint::AfterToken(token) => (token.0, None),
        ScanPoint::AfterRow(row) => (row.token.0, Some(row.key.clone())),
    };
    let started = Instant::now();
    let response = context
        .peers()
        .client(address)
        .read_range(pb::ReadRangeRequest {
            keyspace_id: keyspace.id.to_string(),
            after_token,
            after_key,
            last_token: last.0,
            limit: u32::try_from(*limit).unwrap_or(u32::MAX),
            max_bytes: *max_bytes,
        })
        .await;
    context
        .metrics()
        .internode(address, InternodeRpc::ReadRange, started.elapsed());
    let response = response
        .map_err(NodeError::peer(address, "read range"))?
        .into_inner();
    let rows = response
        .rows
        .into_iter()
        .map(|entry| {
            let token =
                Murmur3Partitioner::token(&entry.key).map_err(|source| ScanError::BadRowKey {
                    replica: address,
                    source,
                })?;
            let cell = entry
                .cell
                .ok_or(ScanError::RowWithoutCell { replica: address })?;
            Ok(RangeRow {
                token,
                key: entry.key,
                cell: cell_from_pb(cell),
            })
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(ReplicaPage {
        rows,
        complete: response.complete,
    })
}

/// Writes the winners to the stale replicas, one `Apply` per replica, and
/// waits for all of them within the write timeout (blocking read repair).
async fn repair<H: CoordinatorHost>(
    context: &Arc<H>,
    keyspace: &KeyspaceDef,
    by_host: BTreeMap<HostId, Vec<RangeRow>>,
) -> Result<()> {
    let _stage = context.metrics().stage(Stage::ReadRepair);
    let count: usize = by_host.values().map(Vec::len).sum();
    let writes = by_host
        .into_iter()
        .map(|(host, rows)| apply_rows_on(context.as_ref(), host, keyspace, rows));
    let timeout = Duration::from_millis(context.write_timeout_ms());
    let results = tokio::time::timeout(timeout, futures::future::join_all(writes))
        .await
        .map_err(|_| ScanError::RepairTimedOut {
            rows: count,
            timeout,
        })?;
    let failed = results.iter().filter(|r| r.is_err()).count();
    if failed > 0 {
        return Err(ScanError::RepairFailed {
            failed,
            replicas: results.len(),
        }
        .into());
    }
    context.metrics().read_repaired(count as u64);
    tracing::debug!(count, "scan read repair done");
    Ok(())
}

/// Applies `rows` on replica `host` (locally when it is this node).
async fn apply_rows_on<H: CoordinatorHost>(
    context: &H,
    host: HostId,
    keyspace: &KeyspaceDef,
    rows: Vec<RangeRow>,
) -> Result<()> {
    if host == context.host_id() {
        let writes: Vec<_> = rows
            .into_iter()
            .map(|row| (keyspace.id, row.key, row.cell))
            .collect();
        context.store().apply_many(&writes).await?;
        return Ok(());
    }
    let mutations = rows
        .into_iter()
        .map(|row| pb::ReplicaMutation {
            keyspace_id: keyspace.id.to_string(),
            key: row.key,
            cell: Some(cell_to_pb(&row.cell)),
            deadline_micros: None,
        })
        .collect();
    write_call::apply_remotely(context, host, mutations, &context.view()).await
}
