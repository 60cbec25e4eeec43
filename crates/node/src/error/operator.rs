//! [`OperatorError`]: a request of the operator's tools (the `Admin`,
//! `Topology` and `Repair` services) that cannot be served as asked — a
//! plan without the change it plans, a throughput or token count out of
//! range, a sampling out of bounds, a topology operation already running.

use std::time::Duration;

use ringstore_hotkeys::SampleError;

/// Why an operator's request was refused.
#[derive(Debug, thiserror::Error)]
pub enum OperatorError {
    /// A stream throughput no network carries.
    #[error("{mib_per_sec} MiB/s is beyond any network; use 0 for unthrottled")]
    ThroughputTooHigh {
        /// The throughput asked for, in MiB/s.
        mib_per_sec: u64,
    },

    /// A plan request naming no change.
    #[error("say which change to plan: join, decommission, removenode or alter")]
    NoChangeToPlan,

    /// A join plan without the new node's data center or rack.
    #[error("a join plan needs a data center and a rack")]
    JoinWithoutLocation,

    /// A join plan with more tokens than a node takes.
    #[error("num_tokens {num_tokens} is out of range (1 to {max})")]
    NumTokensOutOfRange {
        /// Tokens asked for.
        num_tokens: u32,
        /// The most a node takes.
        max: u32,
    },

    /// A topology operation (a cleanup, a decommission...) already holds
    /// this node's operation lock.
    #[error("another topology operation is running on this node")]
    OperationRunning,

    /// A repair naming one end of its sub-range and not the other.
    #[error("give both --start-token and --end-token, or neither")]
    HalfSubRange,

    /// This node's view of the cluster lacks this node (never expected:
    /// the view is built with it).
    #[error("the local node is missing from its own view")]
    LocalNodeMissing,

    /// A sampling duration of 0 or over the longest.
    #[error("duration must be between 1 ms and {} s, not {asked_ms} ms", max.as_secs())]
    SamplingDuration {
        /// The duration asked for, in ms.
        asked_ms: u64,
        /// The longest sampling.
        max: Duration,
    },

    /// A sampling capacity over the largest.
    #[error("capacity must be between 1 and {max}, not {capacity}")]
    SamplingCapacity {
        /// Counters per operation asked for.
        capacity: usize,
        /// The most a session keeps.
        max: usize,
    },

    /// More keys to list than the session counts.
    #[error(
        "cannot list the top {top} keys with a capacity of {capacity}: raise the capacity or \
         list fewer"
    )]
    TopOverCapacity {
        /// Keys to list per operation.
        top: usize,
        /// Counters per operation.
        capacity: usize,
    },

    /// An operation to sample outside the wire enum.
    #[error("unknown sampled operation {0} (expected writes or reads)")]
    UnknownSampledOperation(i32),

    /// The sampler refused the session (too many running, bad settings).
    #[error(transparent)]
    Sampling(#[from] SampleError),
}

impl OperatorError {
    /// The gRPC status code.
    pub fn code(&self) -> tonic::Code {
        match self {
            // Sessions end by themselves: retry later (or on another node).
            OperatorError::Sampling(SampleError::TooManySessions) => tonic::Code::Unavailable,
            OperatorError::OperationRunning => tonic::Code::FailedPrecondition,
            OperatorError::LocalNodeMissing => tonic::Code::Internal,
            OperatorError::ThroughputTooHigh { .. }
            | OperatorError::NoChangeToPlan
            | OperatorError::JoinWithoutLocation
            | OperatorError::NumTokensOutOfRange { .. }
            | OperatorError::HalfSubRange
            | OperatorError::SamplingDuration { .. }
            | OperatorError::SamplingCapacity { .. }
            | OperatorError::TopOverCapacity { .. }
            | OperatorError::UnknownSampledOperation(_)
            | OperatorError::Sampling(_) => tonic::Code::InvalidArgument,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sampler_full_of_sessions_is_unavailable_and_a_bad_setting_invalid() {
        assert_eq!(
            OperatorError::from(SampleError::TooManySessions).code(),
            tonic::Code::Unavailable
        );
        assert_eq!(
            OperatorError::from(SampleError::NoOperation).code(),
            tonic::Code::InvalidArgument
        );
        assert_eq!(
            OperatorError::OperationRunning.code(),
            tonic::Code::FailedPrecondition
        );
    }

    #[test]
    fn a_sampling_duration_out_of_range_names_the_bounds() {
        let error = OperatorError::SamplingDuration {
            asked_ms: 0,
            max: Duration::from_secs(600),
        };
        assert_eq!(
            error.to_string(),
            "duration must be between 1 ms and 600 s, not 0 ms"
        );
    }
}
