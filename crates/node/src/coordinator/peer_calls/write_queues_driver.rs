//! Sending the coordinator's replica writes, coalesced per peer: a write
//! joins its peer's queue ([`ApplyQueues`](crate::coordinator::peer_calls::write_queues::ApplyQueues));
//! the write that finds a free call slot spawns the task that sends the
//! peer's calls. See `peer_calls/mod.rs` for the design. The queues, the
//! calls and the write timeout come from the coordinator's host
//! ([`CoordinatorHost`]).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use ringstore_membership::ClusterView;
use ringstore_proto::v1 as pb;
use ringstore_replication::Batch;
use tokio::sync::oneshot;

use crate::coordinator::host::CoordinatorHost;
use crate::coordinator::peer_calls;
use crate::coordinator::peer_calls::write_call::{call_apply, check_ring};
use crate::coordinator::peer_calls::write_queues::{Delivered, Delivery, Waiter};
use crate::error::{CoordinatorError, NodeError, Result};

/// Applies `mutation`, placed with `placed`, on the replica at `address`,
/// in a call shared with the other writes queued for it meanwhile. Fails
/// as a call of its own would: the call failed, the replica refused the
/// mutation, or its answer shows the placing ring behind its own.
pub(crate) async fn apply<H: CoordinatorHost>(
    context: &Arc<H>,
    address: SocketAddr,
    mutation: pb::ReplicaMutation,
    placed: &ClusterView,
) -> Result<()> {
    let (answer, delivery) = oneshot::channel();
    let bytes = prost::Message::encoded_len(&mutation);
    let ring = placed.ring.checksum();
    let waiter = Waiter {
        request: mutation,
        answer,
    };
    let leave_now = context
        .apply_queues()
        .lock()
        .submit(address, waiter, ring, bytes);
    if let Some(batch) = leave_now {
        tokio::spawn(send_calls(context.clone(), address, batch));
    }
    let delivered = delivery
        .await
        .map_err(|_| CoordinatorError::Abandoned {
            replica: Some(address),
            what: "replica write",
        })?
        .map_err(NodeError::from)?;
    if let Some(reason) = delivered.refused {
        return Err(CoordinatorError::Refused {
            replica: address,
            reason,
        }
        .into());
    }
    check_ring(context.as_ref(), address, placed, &delivered.members)
}

/// Sends `first`, then the batches queued for `address` meanwhile, one
/// call at a time, until a call ends with nobody queued. A write that
/// stopped waiting while it queued (its timeout passed) gets a hint
/// instead: it is not sent.
async fn send_calls<H: CoordinatorHost>(
    context: Arc<H>,
    address: SocketAddr,
    first: Batch<Waiter>,
) {
    let timeout = Duration::from_millis(context.write_timeout_ms());
    let context = &context;
    peer_calls::send_waiting_calls(
        context.apply_queues(),
        address,
        first,
        (timeout, "apply"),
        |mutations, ring| call(context.as_ref(), address, mutations, ring),
        |sent| context.metrics().coalesced_writes(sent),
    )
    .await;
}

/// One `Apply` call of `mutations`, on the peer's apply stream; each one's
/// part of the answer, in order.
async fn call(
    context: &impl CoordinatorHost,
    address: SocketAddr,
    mutations: Vec<pb::ReplicaMutation>,
    ring: u64,
) -> Vec<Delivery> {
    let count = mutations.len();
    let answered = call_apply(context, address, mutations, ring).await;
    deliveries(answered.map_err(Arc::new), count)
}

/// Each of `count` writes' part of a call's answer, in call order.
fn deliveries(
    answered: std::result::Result<pb::ApplyResponse, Arc<NodeError>>,
    count: usize,
) -> Vec<Delivery> {
    let response = match answered {
        Ok(response) => response,
        Err(error) => return vec![Err(error); count],
    };
    let mut refused: Vec<Option<String>> = vec![None; count];
    for refusal in response.refused {
        if let Some(slot) = refused.get_mut(refusal.index as usize) {
            *slot = Some(refusal.message);
        }
    }
    let members: Arc<[pb::MemberStamp]> = Arc::from(response.members);
    refused
        .into_iter()
        .map(|refused| {
            Ok(Delivered {
                refused,
                members: Arc::clone(&members),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_write_gets_its_own_refusal_and_the_call_s_members() {
        let response = pb::ApplyResponse {
            refused: vec![pb::RefusedMutation {
                index: 1,
                message: "keyspace dropped".into(),
                ..Default::default()
            }],
            members: vec![pb::MemberStamp::default()],
        };
        let parts: Vec<Delivery> = deliveries(Ok(response), 3);
        let refused: Vec<Option<String>> = parts
            .iter()
            .map(|p| p.as_ref().expect("answered").refused.clone())
            .collect();
        assert_eq!(refused, vec![None, Some("keyspace dropped".into()), None]);
        assert!(parts.iter().all(|p| p.as_ref().unwrap().members.len() == 1));
    }

    #[test]
    fn a_failed_call_fails_every_write_in_it_with_its_code() {
        let gone = ringstore_replication::Unavailable {
            level: ringstore_replication::ConsistencyLevel::One,
            dc: None,
            required: 1,
            alive: 0,
        };
        let failed = Err(Arc::new(NodeError::from(
            ringstore_replication::ReplicationError::from(gone),
        )));
        let parts: Vec<Delivery> = deliveries(failed, 2);
        assert_eq!(parts.len(), 2);
        for part in parts {
            let error = NodeError::from(part.expect_err("failed"));
            assert_eq!(error.code(), tonic::Code::Unavailable);
        }
    }
}
