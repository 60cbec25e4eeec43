//! One Paxos call to one replica: this node's own replica directly, any
//! other through its internode client, timed in the internode metrics
//! (`paxos_prepare`, `paxos_accept`, `paxos_commit`: the round trips a
//! compare-and-set costs can be counted there).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ringstore_metrics::InternodeRpc;
use ringstore_paxos::{AcceptReply, Ballot, Proposal};
use ringstore_placement::HostId;
use ringstore_storage::KeyspaceId;

use crate::error::{CoordinatorError, NodeError, Result};
use crate::paxos;
use crate::paxos::PrepareAnswer;
use crate::paxos::wire;

use super::host::CasHost;

/// The key a call is about.
#[derive(Clone, Debug)]
pub(super) struct KeyRef {
    pub(super) keyspace: KeyspaceId,
    pub(super) key: Arc<[u8]>,
}

/// Asks `host` to promise `ballot` for the key, within `timeout`.
pub(super) async fn prepare<H: CasHost>(
    context: &H,
    host: HostId,
    key: &KeyRef,
    ballot: Ballot,
    timeout: Duration,
) -> Result<PrepareAnswer> {
    if host == context.host_id() {
        return paxos::prepare(context.paxos_replica(), key.keyspace, &key.key, ballot).await;
    }
    let address = context.internode_address(host)?;
    let request = wire::prepare_request_to_pb(key.keyspace, &key.key, ballot);
    let mut client = context.peers().client(address);
    let started = Instant::now();
    let answered = within(
        timeout,
        address,
        wire::PREPARE,
        client.paxos_prepare(request),
    )
    .await;
    context
        .metrics()
        .internode(address, InternodeRpc::PaxosPrepare, started.elapsed());
    wire::prepare_answer_from_pb(answered?.into_inner())
}

/// Asks `host` to accept `proposal` for the key, within `timeout`.
pub(super) async fn accept<H: CasHost>(
    context: &H,
    host: HostId,
    key: &KeyRef,
    proposal: Proposal,
    timeout: Duration,
) -> Result<AcceptReply> {
    if host == context.host_id() {
        return paxos::accept(context.paxos_replica(), key.keyspace, &key.key, proposal).await;
    }
    let address = context.internode_address(host)?;
    let request = wire::accept_request_to_pb(key.keyspace, &key.key, &proposal);
    let mut client = context.peers().client(address);
    let started = Instant::now();
    let answered = within(timeout, address, wire::ACCEPT, client.paxos_accept(request)).await;
    context
        .metrics()
        .internode(address, InternodeRpc::PaxosAccept, started.elapsed());
    wire::accept_reply_from_pb(answered?.into_inner())
}

/// Sends the chosen `proposal` to `host` as a commit, within `timeout`.
pub(super) async fn commit<H: CasHost>(
    context: &H,
    host: HostId,
    key: &KeyRef,
    proposal: Proposal,
    timeout: Duration,
) -> Result<()> {
    if host == context.host_id() {
        return paxos::commit(context.paxos_replica(), key.keyspace, &key.key, proposal).await;
    }
    let address = context.internode_address(host)?;
    let request = wire::commit_request_to_pb(key.keyspace, &key.key, &proposal);
    let mut client = context.peers().client(address);
    let started = Instant::now();
    let answered = within(timeout, address, wire::COMMIT, client.paxos_commit(request)).await;
    context
        .metrics()
        .internode(address, InternodeRpc::PaxosCommit, started.elapsed());
    answered.map(|_| ())
}

/// `call`'s answer, or a timeout after `timeout`.
async fn within<T>(
    timeout: Duration,
    address: SocketAddr,
    rpc: &'static str,
    call: impl Future<Output = std::result::Result<T, tonic::Status>>,
) -> Result<T> {
    match tokio::time::timeout(timeout, call).await {
        Ok(answered) => answered.map_err(NodeError::peer(address, rpc)),
        Err(_) => Err(CoordinatorError::NoAnswer {
            replica: address,
            rpc,
            after: timeout,
        }
        .into()),
    }
}
