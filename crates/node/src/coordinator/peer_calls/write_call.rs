//! Internode `Apply` calls as the coordinator makes them: one call, on the
//! peer's apply stream and timed in the internode metrics ([`call_apply`]);
//! the check of a replica's answer against the ring the writes were placed
//! with ([`check_ring`]); and a call of its own for several mutations
//! ([`apply_remotely`], as scans write their repairs). Single replica writes
//! go through the per-peer queues instead (`write_queues_driver.rs`), which use
//! the first two. Each takes the coordinator's host ([`CoordinatorHost`]).

use std::net::SocketAddr;
use std::time::Instant;

use ringstore_membership::ClusterView;
use ringstore_metrics::InternodeRpc;
use ringstore_placement::HostId;
use ringstore_proto::v1 as pb;

use crate::coordinator::host::CoordinatorHost;
use crate::coordinator::peer_calls::write_streams::Streamed;
use crate::error::{CoordinatorError, NodeError, Result};
use crate::ring_lag;

/// Sends `mutations`, placed with `placed`, to replica `host` in one
/// `Apply` call of their own. The replica refuses a bad mutation on its own
/// rather than failing the call; for the caller that is still a failure,
/// as is an answer showing the placing ring behind the replica's
/// ([`ring_lag`]).
pub(crate) async fn apply_remotely(
    context: &impl CoordinatorHost,
    host: HostId,
    mutations: Vec<pb::ReplicaMutation>,
    placed: &ClusterView,
) -> Result<()> {
    let address = context.internode_address(host)?;
    let response = call_apply(context, address, mutations, placed.ring.checksum()).await?;
    if let Some(refused) = response.refused.first() {
        return Err(CoordinatorError::Refused {
            replica: address,
            reason: refused.message.clone(),
        }
        .into());
    }
    check_ring(context, address, placed, &response.members)
}

/// One `Apply` call of `mutations`, placed with the ring of checksum
/// `ring`, to the replica at `address`, timed in the internode metrics: on
/// the peer's apply stream (`write_streams.rs`), or as a unary call to a
/// peer that does not serve one.
pub(crate) async fn call_apply(
    context: &impl CoordinatorHost,
    address: SocketAddr,
    mutations: Vec<pb::ReplicaMutation>,
    ring: u64,
) -> Result<pb::ApplyResponse> {
    let started = Instant::now();
    let request = pb::ApplyRequest {
        mutations,
        ring_checksum: ring,
    };
    let streams = context.apply_streams();
    let open = || {
        context.metrics().apply_stream_opened();
        context.peers().client(address)
    };
    let answered = match streams.call(address, open, request).await {
        Streamed::Answered(answered) => answered,
        Streamed::Unsupported(request) => {
            let response = context.peers().client(address).apply(request).await;
            response.map(tonic::Response::into_inner)
        }
    };
    context
        .metrics()
        .internode(address, InternodeRpc::Apply, started.elapsed());
    answered.map_err(NodeError::peer(address, "apply"))
}

/// Fails a replica's answer whose members show the placing ring behind the
/// replica's, noting them (see [`ring_lag`]).
pub(crate) fn check_ring(
    context: &impl CoordinatorHost,
    replica: SocketAddr,
    placed: &ClusterView,
    members: &[pb::MemberStamp],
) -> Result<()> {
    let ahead = ring_lag::ahead(placed, members);
    if ahead.is_empty() {
        return Ok(());
    }
    context.ring_lag().note(&ahead);
    Err(NodeError::RingBehind {
        replica,
        members: ahead.len(),
    })
}
