//! `toppartitions`: samples this node's local reads and writes of one
//! keyspace for a while and lists the keys it saw most (see
//! `ringstore_hotkeys`).
//!
//! It reads the node through a [`TopPartitionsHost`], which the node's
//! context implements (in `node/hosts/`).

use std::sync::Arc;
use std::time::Duration;

use ringstore_hotkeys::{MAX_CAPACITY, Operation, OperationSample, Samplers};
use ringstore_proto::v1 as pb;

use ringstore_storage::KeyspaceId;

use crate::error::{OperatorError, Result};
use crate::schema::KeyspaceDef;

/// What `toppartitions` uses of the running node, and nothing more.
pub trait TopPartitionsHost: Send + Sync {
    /// The keyspace named `name` (not dropped), or `NOT_FOUND`: the one
    /// sampled.
    fn keyspace(&self, name: &str) -> Result<KeyspaceDef>;
    /// The sampling sessions, per keyspace id, that the node's local reads
    /// and writes record into.
    fn hot_keys(&self) -> &Samplers<KeyspaceId>;
}

/// The longest sampling one call may ask for.
pub const MAX_DURATION: Duration = Duration::from_secs(600);

/// Counters per operation when the request leaves it at 0 (Cassandra's).
const DEFAULT_CAPACITY: usize = 256;

/// Keys listed per operation when the request leaves it at 0.
const DEFAULT_TOP: usize = 10;

/// Samples for the request's duration, then answers with the hottest keys.
///
/// `host` comes in its `Arc`, as the `Admin` service holds it, though
/// nothing is spawned: that service still holds the whole context and
/// passes `&self.context`; once it is generic too, this can take `&impl
/// TopPartitionsHost`.
pub async fn top_partitions(
    host: &Arc<impl TopPartitionsHost>,
    request: pb::TopPartitionsRequest,
) -> Result<pb::TopPartitionsResponse> {
    let asked = Asked::from_pb(&request)?;
    let keyspace = host.keyspace(&request.keyspace)?;
    let session = host
        .hot_keys()
        .start(keyspace.id, &asked.operations, asked.capacity)
        .map_err(OperatorError::Sampling)?;
    tokio::time::sleep(asked.duration).await;
    let samples = session.finish(asked.top);
    Ok(pb::TopPartitionsResponse {
        samples: samples.into_iter().map(sample_to_pb).collect(),
    })
}

/// The request, checked, with its defaults filled in.
struct Asked {
    duration: Duration,
    capacity: usize,
    top: usize,
    operations: Vec<Operation>,
}

impl Asked {
    fn from_pb(request: &pb::TopPartitionsRequest) -> Result<Asked> {
        let duration = Duration::from_millis(request.duration_ms);
        if duration.is_zero() || duration > MAX_DURATION {
            return Err(OperatorError::SamplingDuration {
                asked_ms: request.duration_ms,
                max: MAX_DURATION,
            }
            .into());
        }
        let capacity = match request.capacity {
            0 => DEFAULT_CAPACITY,
            n => n as usize,
        };
        if capacity > MAX_CAPACITY {
            return Err(OperatorError::SamplingCapacity {
                capacity,
                max: MAX_CAPACITY,
            }
            .into());
        }
        let top = match request.top {
            0 => DEFAULT_TOP.min(capacity),
            n => n as usize,
        };
        if top > capacity {
            return Err(OperatorError::TopOverCapacity { top, capacity }.into());
        }
        Ok(Asked {
            duration,
            capacity,
            top,
            operations: operations_from_pb(&request.operations)?,
        })
    }
}

fn operations_from_pb(operations: &[i32]) -> Result<Vec<Operation>> {
    if operations.is_empty() {
        return Ok(Operation::ALL.to_vec());
    }
    operations
        .iter()
        .map(|&value| match pb::SampledOperation::try_from(value) {
            Ok(pb::SampledOperation::Writes) => Ok(Operation::Writes),
            Ok(pb::SampledOperation::Reads) => Ok(Operation::Reads),
            _ => Err(OperatorError::UnknownSampledOperation(value).into()),
        })
        .collect()
}

fn sample_to_pb(sample: OperationSample) -> pb::PartitionSample {
    let operation = match sample.operation {
        Operation::Writes => pb::SampledOperation::Writes,
        Operation::Reads => pb::SampledOperation::Reads,
    };
    pb::PartitionSample {
        operation: operation.into(),
        sampled: sample.sampled,
        capacity: u32::try_from(sample.capacity).unwrap_or(u32::MAX),
        partitions: sample
            .top
            .into_iter()
            .map(|c| pb::HotPartition {
                key: c.key,
                count: c.count,
                error: c.error,
            })
            .collect(),
    }
}
