//! Moving ranges: which node fetches what from whom for a ring change
//! ([`transfers`]), and having every receiver do it ([`fetch_everywhere`]).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use ringstore_placement::{HostId, MovementPlan, ReplicaMap, Ring};
use ringstore_proto::v1 as pb;

use crate::convert::range_to_pb;
use crate::error::{NodeError, Result};
use crate::streaming::fetch::{RangeFetch, fetch_ranges};
use crate::topology::host::TopologyHost;
use ringstore_streaming::{FetchTotals, StreamOperation};

/// Attempts per receiver at having it fetch its ranges (it resumes each time).
const FETCH_ATTEMPTS: u32 = 5;

/// What each receiving node must fetch for the ring to go from `before` to
/// `after`, over every keyspace: per receiver, its ranges with their sources
/// in order of preference (the losing replica first), leaving out sources in
/// `unavailable` (a dead node being removed or replaced). A range only an
/// unavailable node held is skipped, with a warning: its data is lost.
pub fn transfers(
    context: &impl TopologyHost,
    before: &Arc<Ring>,
    after: &Arc<Ring>,
    unavailable: &[HostId],
) -> BTreeMap<HostId, Vec<RangeFetch>> {
    let mut transfers: BTreeMap<HostId, Vec<RangeFetch>> = BTreeMap::new();
    if before.is_empty() {
        // A new cluster: no node holds data yet.
        return transfers;
    }
    for keyspace in context.keyspaces() {
        let old = ReplicaMap::new(before.clone(), &keyspace.strategy);
        let new = ReplicaMap::new(after.clone(), &keyspace.strategy);
        let plan = MovementPlan::between(&old, &new);
        let mut receivers: Vec<HostId> = plan
            .movements
            .iter()
            .flat_map(|m| m.gaining.iter().copied())
            .collect();
        receivers.sort_unstable();
        receivers.dedup();
        for receiver in receivers {
            for (range, sources) in plan.fetches_for(receiver) {
                let sources: Vec<HostId> = sources
                    .into_iter()
                    .filter(|s| !unavailable.contains(s))
                    .collect();
                if sources.is_empty() {
                    // Only the dead node held it (replication factor 1).
                    tracing::warn!(
                        keyspace = %keyspace.name,
                        %range,
                        "no surviving replica holds this range: its data is lost"
                    );
                    continue;
                }
                transfers.entry(receiver).or_default().push(RangeFetch {
                    keyspace: keyspace.id,
                    range,
                    sources,
                });
            }
        }
    }
    transfers
}

/// Has every receiver of `transfers` fetch its ranges (this node directly,
/// others through `FetchRanges`), all at once; retries a receiver that fails.
pub async fn fetch_everywhere<H: TopologyHost>(
    context: &Arc<H>,
    operation: StreamOperation,
    transfers: std::collections::BTreeMap<HostId, Vec<RangeFetch>>,
) -> Result<FetchTotals> {
    let jobs = transfers.into_iter().map(|(receiver, fetches)| {
        let context = context.clone();
        async move { fetch_on(&context, receiver, operation, fetches).await }
    });
    let mut totals = FetchTotals::default();
    for outcome in futures::future::join_all(jobs).await {
        totals += outcome?;
    }
    Ok(totals)
}

async fn fetch_on<H: TopologyHost>(
    context: &Arc<H>,
    receiver: HostId,
    operation: StreamOperation,
    fetches: Vec<RangeFetch>,
) -> Result<FetchTotals> {
    if receiver == context.host_id() {
        return fetch_ranges(context, operation, fetches).await;
    }
    let request = pb::FetchRangesRequest {
        operation: operation.to_string(),
        ranges: fetches
            .iter()
            .map(|f| pb::FetchRange {
                keyspace_id: f.keyspace.to_string(),
                range: Some(range_to_pb(f.range)),
                sources: f.sources.iter().map(|s| s.to_string()).collect(),
            })
            .collect(),
    };
    let mut last_error = None;
    for attempt in 1..=FETCH_ATTEMPTS {
        let address = context
            .view()
            .member(receiver)
            .map(|m| m.metadata.internode_addr)
            .ok_or(NodeError::NoAddress(receiver))?;
        match context
            .peers()
            .client(address)
            .fetch_ranges(request.clone())
            .await
        {
            Ok(response) => {
                let response = response.into_inner();
                return Ok(FetchTotals {
                    ranges: fetches.len() as u64,
                    bytes: response.bytes,
                    entries: response.entries,
                });
            }
            Err(status) => {
                tracing::warn!(%receiver, attempt, error = %status.message(), "a receiver failed to fetch its ranges; asking again");
                last_error = Some(status);
                tokio::time::sleep(Duration::from_secs(u64::from(attempt))).await;
            }
        }
    }
    let status = last_error.unwrap_or_else(|| tonic::Status::unknown("no attempt was made"));
    Err(NodeError::peer(
        format!("node {receiver}"),
        "fetch its ranges",
    )(status))
}
