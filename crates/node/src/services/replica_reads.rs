//! What a replica answers to reads from a coordinator: one key (`Read`), or
//! several in one call (`ReadMany`, the reads a coordinator coalesced for
//! this peer; `peer_calls/mod.rs`).
//!
//! Each read of a `ReadMany` is answered on its own, exactly as a `Read` of
//! its own would be: a refusal (a dropped keyspace, a bad key, a storage
//! error) fails that read only, with the status code the `Read` would have
//! failed with. A copy that does not read back is refused with
//! `DATA_LOSS` (`local_reads.rs`), which the coordinator tells from an
//! unavailable replica.
//!
//! A replica read is the coordinator's protocol seen from the other end, so
//! it takes the node as the coordinator's host ([`CoordinatorHost`]: the
//! store, and the read recorded as served locally) and the schema's
//! ([`SchemaHost`]: whether the keyspace was dropped, its name). It takes
//! the host in its `Arc`, as the `Internode` service holds it, though
//! nothing is spawned: that service still holds the whole context and
//! passes `&self.context`; once it is generic too, these can take `&H`.
//!
//! # Invariants
//! - A response holds one result per read, in the request's order.
//! - A call of more than [`MAX_READS_PER_CALL`] reads is refused whole (a
//!   coordinator sends at most 256): one call cannot hold a worker for long.
//! - A response stays small: once the cells answered fill
//!   [`RESPONSE_BUDGET_BYTES`], the reads after them are deferred (the
//!   coordinator sends each again on its own). The first read is always
//!   answered, so a call always makes progress, and a single cell, at most
//!   `max_value_bytes`, fits the internode message limit as it does in a
//!   `Read`.

use std::sync::Arc;

use ringstore_proto::v1 as pb;
use ringstore_replication::Digest;
use tonic::Status;

use crate::convert::{cell_to_pb, keyspace_id_from_pb};
use crate::coordinator::host::CoordinatorHost;
use crate::coordinator::local_reads::read_own_copy;
use crate::error::{NodeError, RequestError, Result};
use crate::limits::check_key;
use crate::schema::SchemaHost;

/// The bytes of cells a `ReadMany` answers before deferring the rest.
pub(crate) const RESPONSE_BUDGET_BYTES: usize = 4 * 1024 * 1024;

/// The most reads one `ReadMany` may hold.
pub(crate) const MAX_READS_PER_CALL: usize = 1024;

/// Reads one key on this replica: its cell (`(cell, 0)`), or only the
/// cell's digest (`(None, digest)`); recorded as served locally. A
/// keyspace id this node does not know yet is read (its schema may lag,
/// and data lives by id); a dropped one is `NOT_FOUND`.
pub(crate) fn read_one<H: CoordinatorHost + SchemaHost>(
    host: &Arc<H>,
    read: &pb::ReplicaRead,
) -> Result<(Option<pb::Cell>, u64)> {
    let host = host.as_ref();
    let id = keyspace_id_from_pb(&read.keyspace_id)?;
    let schema = host.schema().current();
    if schema.is_dropped(id) {
        return Err(NodeError::KeyspaceNotFound(id.to_string()));
    }
    check_key(&read.key)?;
    let name = schema.name_of(id);
    let cell = read_own_copy(host, id, &name, &read.key)?;
    Ok(if read.digest_only {
        (None, Digest::of(cell.as_ref()).0)
    } else {
        (cell.as_ref().map(cell_to_pb), 0)
    })
}

/// Answers each of `reads` on its own, in order, deferring those after the
/// cells answered filled the budget (see the module docs).
pub(crate) fn read_many<H: CoordinatorHost + SchemaHost>(
    host: &Arc<H>,
    reads: &[pb::ReplicaRead],
) -> Result<Vec<pb::ReadResult>> {
    answer_in_order(reads, |read| read_one(host, read))
}

/// [`read_many`] with each read answered by `read_one`.
fn answer_in_order(
    reads: &[pb::ReplicaRead],
    mut read_one: impl FnMut(&pb::ReplicaRead) -> Result<(Option<pb::Cell>, u64)>,
) -> Result<Vec<pb::ReadResult>> {
    if reads.len() > MAX_READS_PER_CALL {
        return Err(RequestError::TooManyReads {
            count: reads.len(),
            max: MAX_READS_PER_CALL,
        }
        .into());
    }
    let mut answered_bytes = 0usize;
    let results = reads
        .iter()
        .map(|read| {
            if answered_bytes >= RESPONSE_BUDGET_BYTES {
                return pb::ReadResult {
                    deferred: true,
                    ..Default::default()
                };
            }
            let result = result_of(read_one(read));
            answered_bytes += result.cell.as_ref().map_or(0, prost::Message::encoded_len);
            result
        })
        .collect();
    Ok(results)
}

/// One read's outcome as a `ReadMany` result.
fn result_of(outcome: Result<(Option<pb::Cell>, u64)>) -> pb::ReadResult {
    match outcome {
        Ok((cell, digest)) => pb::ReadResult {
            cell,
            digest,
            ..Default::default()
        },
        Err(error) => {
            let status = Status::from(error);
            pb::ReadResult {
                refused: status.message().to_string(),
                refused_code: status.code() as i32,
                ..Default::default()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::NodeError;

    fn reads(count: usize) -> Vec<pb::ReplicaRead> {
        (0..count)
            .map(|i| pb::ReplicaRead {
                keyspace_id: "ks".into(),
                key: format!("key{i}").into_bytes(),
                digest_only: false,
            })
            .collect()
    }

    fn cell_of(bytes: usize) -> pb::Cell {
        pb::Cell {
            value: Some(vec![7; bytes]),
            ..Default::default()
        }
    }

    #[test]
    fn reads_after_the_budget_is_filled_are_deferred_in_order() {
        let big = RESPONSE_BUDGET_BYTES / 2 + 1;
        let mut asked = Vec::new();
        let results = answer_in_order(&reads(4), |read| {
            asked.push(read.key.clone());
            Ok((Some(cell_of(big)), 0))
        })
        .unwrap();
        assert_eq!(results.len(), 4);
        let deferred: Vec<bool> = results.iter().map(|r| r.deferred).collect();
        assert_eq!(deferred, [false, false, true, true]);
        assert!(results[..2].iter().all(|r| r.cell.is_some()));
        assert!(results[2..].iter().all(|r| r.cell.is_none()));
        assert_eq!(
            asked,
            [b"key0".to_vec(), b"key1".to_vec()],
            "deferred reads are not read"
        );
    }

    #[test]
    fn a_first_cell_over_the_budget_is_answered_and_small_ones_are_never_deferred() {
        let huge = RESPONSE_BUDGET_BYTES * 3;
        let results = answer_in_order(&reads(2), |_| Ok((Some(cell_of(huge)), 0))).unwrap();
        assert!(results[0].cell.is_some() && results[1].deferred);

        let results = answer_in_order(&reads(256), |_| Ok((Some(cell_of(100)), 0))).unwrap();
        assert!(results.iter().all(|r| r.cell.is_some() && !r.deferred));
    }

    #[test]
    fn a_call_of_too_many_reads_is_refused_whole_before_any_is_read() {
        let mut asked = 0;
        let error = answer_in_order(&reads(MAX_READS_PER_CALL + 1), |_| {
            asked += 1;
            Ok((None, 0))
        })
        .unwrap_err();
        assert_eq!(error.code(), tonic::Code::InvalidArgument);
        assert!(error.to_string().contains("1025 reads"), "{error}");
        assert_eq!(asked, 0);
        let at_the_limit = answer_in_order(&reads(MAX_READS_PER_CALL), |_| Ok((None, 0)));
        assert_eq!(at_the_limit.unwrap().len(), MAX_READS_PER_CALL);
    }

    #[test]
    fn a_refused_read_fails_alone() {
        let results = answer_in_order(&reads(3), |read| {
            if read.key == b"key1" {
                Err(NodeError::EmptyKey)
            } else {
                Ok((None, 9))
            }
        })
        .unwrap();
        let refused: Vec<&str> = results.iter().map(|r| r.refused.as_str()).collect();
        assert_eq!(refused[0], "");
        assert!(refused[1].contains("key must not be empty"), "{refused:?}");
        assert_eq!(refused[2], "");
        assert_eq!(results[2].digest, 9);
    }

    #[test]
    fn a_refused_read_keeps_the_code_a_read_of_its_own_would_fail_with() {
        let refused = result_of(Err(NodeError::KeyspaceNotFound("k".into())));
        assert_eq!(refused.refused_code, tonic::Code::NotFound as i32);
        assert!(refused.refused.contains('k'), "{}", refused.refused);
        assert!(refused.cell.is_none() && !refused.deferred);

        let invalid = result_of(Err(NodeError::KeyTooLong { len: 9, max: 8 }));
        assert_eq!(invalid.refused_code, tonic::Code::InvalidArgument as i32);

        // A damaged copy: DATA_LOSS, which the coordinator reads around.
        let damaged = ringstore_storage::StorageError::from(
            ringstore_storage::Cell::decode(&[2, 0, 0]).unwrap_err(),
        )
        .at_key(b"k");
        let refused = result_of(Err(NodeError::Storage(damaged)));
        assert_eq!(refused.refused_code, tonic::Code::DataLoss as i32);
        assert!(refused.refused.contains("at key k"), "{}", refused.refused);
        let seen = NodeError::peer("replica", "read")(tonic::Status::new(
            tonic::Code::from_i32(refused.refused_code),
            refused.refused,
        ));
        assert!(seen.is_damaged_replica());
        let unavailable = NodeError::peer("replica", "read")(tonic::Status::unavailable("down"));
        assert!(!unavailable.is_damaged_replica());

        let answered = result_of(Ok((None, 42)));
        assert_eq!((answered.digest, answered.refused.as_str()), (42, ""));
    }
}
