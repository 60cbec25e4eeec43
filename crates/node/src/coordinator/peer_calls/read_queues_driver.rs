//! Sending the coordinator's replica reads, coalesced per peer: a read joins
//! its peer's queue ([`ReadQueues`](crate::coordinator::peer_calls::read_queues::ReadQueues)); the
//! read that finds a free call slot spawns the task that sends the peer's
//! calls. See `peer_calls/mod.rs` for the design and `read_queues.rs` for what
//! each read gets back. The queues, the calls and the read timeout come
//! from the coordinator's host ([`CoordinatorHost`]).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ringstore_membership::ClusterView;
use ringstore_metrics::InternodeRpc;
use ringstore_proto::v1 as pb;
use ringstore_replication::Batch;
use ringstore_storage::KeyspaceId;
use tokio::sync::oneshot;

use crate::coordinator::host::CoordinatorHost;
use crate::coordinator::peer_calls;
use crate::coordinator::peer_calls::read_queues::{
    ReadAnswer, ReadDelivered, ReadDelivery, ReadWaiter,
};
use crate::coordinator::peer_calls::write_call::check_ring;
use crate::error::{CoordinatorError, NodeError, Result};

/// What a replica read returns: the cell (absent when the replica has none,
/// or a digest was asked for) and the digest (0 unless asked for).
pub(crate) type Answered = (Option<pb::Cell>, u64);

/// Reads `key` of `keyspace` (or only its digest) on the replica at
/// `address`, placed with `placed`, in a call shared with the other reads
/// queued for it meanwhile. Fails as a `Read` of its own would: the call
/// failed, the replica refused the read, or its answer shows the placing
/// ring behind its own.
pub(crate) async fn read<H: CoordinatorHost>(
    context: &Arc<H>,
    address: SocketAddr,
    keyspace: KeyspaceId,
    key: &[u8],
    digest_only: bool,
    placed: &ClusterView,
) -> Result<Answered> {
    let read = || pb::ReplicaRead {
        keyspace_id: keyspace.to_string(),
        key: key.to_vec(),
        digest_only,
    };
    let (answer, delivery) = oneshot::channel();
    let bytes = key.len();
    let ring = placed.ring.checksum();
    let waiter = ReadWaiter {
        request: read(),
        answer,
    };
    let leave_now = context
        .read_queues()
        .lock()
        .submit(address, waiter, ring, bytes);
    if let Some(batch) = leave_now {
        tokio::spawn(send_calls(context.clone(), address, batch));
    }
    let delivered = delivery
        .await
        .map_err(|_| CoordinatorError::Abandoned {
            replica: Some(address),
            what: "replica read",
        })?
        .map_err(NodeError::from)?;
    check_ring(context.as_ref(), address, placed, &delivered.members)?;
    match delivered.answer {
        ReadAnswer::Answered { cell, digest } => Ok((cell, digest)),
        ReadAnswer::Refused { code, message } => Err(NodeError::peer(address, "read")(
            tonic::Status::new(code, message),
        )),
        ReadAnswer::Deferred => {
            let response = call_read(context.as_ref(), address, read(), ring).await?;
            check_ring(context.as_ref(), address, placed, &response.members)?;
            Ok((response.cell, response.digest))
        }
    }
}

/// Sends `first`, then the batches queued for `address` meanwhile, one
/// call at a time, until a call ends with nobody queued. A read nobody
/// waits for any more (its round ended, or it timed out while it queued)
/// is not sent.
async fn send_calls<H: CoordinatorHost>(
    context: Arc<H>,
    address: SocketAddr,
    first: Batch<ReadWaiter>,
) {
    let timeout = Duration::from_millis(context.read_timeout_ms());
    let context = &context;
    peer_calls::send_waiting_calls(
        context.read_queues(),
        address,
        first,
        (timeout, "read"),
        |reads, ring| call_reads(context.as_ref(), address, reads, ring),
        |sent| context.metrics().coalesced_replica_reads(sent),
    )
    .await;
}

/// One call for `reads`: a `Read` when it is alone, a `ReadMany` otherwise.
/// Each read's part of the answer, in order.
async fn call_reads(
    context: &impl CoordinatorHost,
    address: SocketAddr,
    mut reads: Vec<pb::ReplicaRead>,
    ring: u64,
) -> Vec<ReadDelivery> {
    if reads.len() == 1 {
        let read = reads.pop().expect("one read");
        let delivered = call_read(context, address, read, ring)
            .await
            .map(|response| ReadDelivered {
                answer: ReadAnswer::Answered {
                    cell: response.cell,
                    digest: response.digest,
                },
                members: Arc::from(response.members),
            })
            .map_err(Arc::new);
        return vec![delivered];
    }
    let count = reads.len();
    let started = Instant::now();
    let refusals = context.read_many_refusals();
    if refusals.lacks_read_many(address, started) {
        return vec![Ok(deferred()); count];
    }
    let response = context
        .peers()
        .client(address)
        .read_many(pb::ReadManyRequest {
            reads,
            ring_checksum: ring,
        })
        .await;
    context
        .metrics()
        .internode(address, InternodeRpc::ReadMany, started.elapsed());
    if response
        .as_ref()
        .is_err_and(|status| status.code() == tonic::Code::Unimplemented)
    {
        refusals.refused(address, started);
    }
    deliveries(response.map(tonic::Response::into_inner), address, count)
}

/// One `Read` call, timed in the internode metrics.
async fn call_read(
    context: &impl CoordinatorHost,
    address: SocketAddr,
    read: pb::ReplicaRead,
    ring: u64,
) -> Result<pb::ReadResponse> {
    let started = Instant::now();
    let response = context
        .peers()
        .client(address)
        .read(pb::ReadRequest {
            keyspace_id: read.keyspace_id,
            key: read.key,
            digest_only: read.digest_only,
            ring_checksum: ring,
        })
        .await;
    context
        .metrics()
        .internode(address, InternodeRpc::Read, started.elapsed());
    Ok(response
        .map_err(NodeError::peer(address, "read"))?
        .into_inner())
}

/// Each of `count` reads' part of the answer of a `ReadMany` to `address`,
/// in call order. A read the answer has no result for (a replica that broke
/// the protocol) fails; a failed call fails them all. A peer of an earlier
/// build, which has no `ReadMany` (`UNIMPLEMENTED`), defers them all: each
/// is sent again alone, as a `Read`, and `call_reads` sends the next
/// batches for that peer alone without asking (`read_many_refusals.rs`):
/// a rolling upgrade fails no read and pays one refused call per peer and
/// minute.
fn deliveries(
    answered: std::result::Result<pb::ReadManyResponse, tonic::Status>,
    address: SocketAddr,
    count: usize,
) -> Vec<ReadDelivery> {
    let response = match answered {
        Ok(response) => response,
        Err(status) if status.code() == tonic::Code::Unimplemented => {
            return vec![Ok(deferred()); count];
        }
        Err(status) => {
            let error = Arc::new(NodeError::peer(address, "read")(status));
            return vec![Err(error); count];
        }
    };
    let members: Arc<[pb::MemberStamp]> = Arc::from(response.members);
    let mut results = response.results.into_iter();
    (0..count)
        .map(|_| {
            let answer = match results.next() {
                Some(result) => answer_of(result),
                None => ReadAnswer::Refused {
                    code: tonic::Code::Internal,
                    message: "the replica's answer left this read out".into(),
                },
            };
            Ok(ReadDelivered {
                answer,
                members: Arc::clone(&members),
            })
        })
        .collect()
}

/// A read left for a `Read` of its own.
fn deferred() -> ReadDelivered {
    ReadDelivered {
        answer: ReadAnswer::Deferred,
        members: Arc::from([]),
    }
}

/// What one `ReadMany` result says of its read.
fn answer_of(result: pb::ReadResult) -> ReadAnswer {
    if result.deferred {
        return ReadAnswer::Deferred;
    }
    if result.refused_code != 0 || !result.refused.is_empty() {
        let code = match tonic::Code::from_i32(result.refused_code) {
            tonic::Code::Ok => tonic::Code::Unknown,
            code => code,
        };
        return ReadAnswer::Refused {
            code,
            message: result.refused,
        };
    }
    ReadAnswer::Answered {
        cell: result.cell,
        digest: result.digest,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peer() -> SocketAddr {
        "127.0.0.2:7101".parse().unwrap()
    }

    fn answers(parts: Vec<ReadDelivery>) -> Vec<ReadAnswer> {
        parts
            .into_iter()
            .map(|p| p.expect("answered").answer)
            .collect()
    }

    #[test]
    fn each_read_gets_its_own_result_in_order_with_the_call_s_members() {
        let cell = pb::Cell {
            value: Some(b"v".to_vec()),
            ..Default::default()
        };
        let response = pb::ReadManyResponse {
            results: vec![
                pb::ReadResult {
                    cell: Some(cell.clone()),
                    ..Default::default()
                },
                pb::ReadResult {
                    digest: 7,
                    ..Default::default()
                },
                pb::ReadResult {
                    refused: "keyspace dropped".into(),
                    refused_code: tonic::Code::NotFound as i32,
                    ..Default::default()
                },
                pb::ReadResult {
                    deferred: true,
                    ..Default::default()
                },
            ],
            members: vec![pb::MemberStamp::default()],
        };
        let parts = deliveries(Ok(response), peer(), 4);
        assert!(parts.iter().all(|p| p.as_ref().unwrap().members.len() == 1));
        assert_eq!(
            answers(parts),
            vec![
                ReadAnswer::Answered {
                    cell: Some(cell),
                    digest: 0
                },
                ReadAnswer::Answered {
                    cell: None,
                    digest: 7
                },
                ReadAnswer::Refused {
                    code: tonic::Code::NotFound,
                    message: "keyspace dropped".into()
                },
                ReadAnswer::Deferred,
            ]
        );
    }

    #[test]
    fn a_short_answer_or_a_refusal_without_a_code_fails_those_reads() {
        let response = pb::ReadManyResponse {
            results: vec![pb::ReadResult {
                refused: "broken".into(),
                ..Default::default()
            }],
            members: Vec::new(),
        };
        let parts = answers(deliveries(Ok(response), peer(), 2));
        assert!(matches!(
            &parts[0],
            ReadAnswer::Refused {
                code: tonic::Code::Unknown,
                ..
            }
        ));
        assert!(matches!(
            &parts[1],
            ReadAnswer::Refused { code: tonic::Code::Internal, message } if message.contains("left this read out")
        ));
    }

    #[test]
    fn a_failed_call_fails_every_read_in_it_naming_the_peer_and_its_status() {
        let failed = Err(tonic::Status::unavailable("peer gone"));
        let parts = deliveries(failed, peer(), 3);
        assert_eq!(parts.len(), 3);
        for part in parts {
            let error = NodeError::from(part.expect_err("failed")).to_string();
            assert!(
                error.contains("127.0.0.2:7101") && error.contains("peer gone"),
                "{error}"
            );
        }
    }

    #[test]
    fn a_peer_without_read_many_has_every_read_sent_again_alone() {
        let old_build = Err(tonic::Status::unimplemented("unknown method ReadMany"));
        let parts = deliveries(old_build, peer(), 3);
        assert!(parts.iter().all(|p| p.as_ref().unwrap().members.is_empty()));
        assert_eq!(answers(parts), vec![ReadAnswer::Deferred; 3]);
    }
}
