//! The replication crate's one error type, and the refusal every plan shares.
//!
//! A coordinator meets four kinds of failure, and clients must be able to
//! tell them apart: a request that can never work (an unknown or misused
//! level), one refused before anything was sent ([`Unavailable`]: nothing
//! changed), a write that timed out ([`WriteTimeout`]: it may still apply),
//! and a read that could not gather its answers ([`ReadFailure`]). The node
//! maps these to gRPC status codes in one place.

use std::fmt;

use ringstore_placement::Datacenter;

use crate::consistency::{ConsistencyLevel, valid_names};
use crate::read_tracker::ReadFailure;
use crate::write_tracker::WriteTimeout;

/// Why a replication operation failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReplicationError {
    /// A consistency level name that is not one of ringstore's.
    #[error(
        "unknown consistency level {name:?}; valid levels are {}",
        valid_names()
    )]
    UnknownConsistencyLevel {
        /// The text that failed to parse.
        name: String,
    },

    /// A level that reads cannot use (`ANY`).
    #[error("consistency level {level} is only supported for writes")]
    InvalidForReads {
        /// The refused level.
        level: ConsistencyLevel,
    },

    /// Too few replicas are alive; nothing was sent.
    #[error(transparent)]
    Unavailable(#[from] Unavailable),

    /// A write was not acknowledged by enough replicas in time; it may still apply.
    #[error(transparent)]
    WriteTimeout(#[from] WriteTimeout),

    /// A read could not gather enough answers.
    #[error(transparent)]
    ReadFailure(#[from] ReadFailure),

    /// A `speculative_retry` setting that does not parse.
    #[error(
        "invalid speculative_retry {input:?}: {reason}; use none, a delay such as 20ms, \
         or a percentile such as p99"
    )]
    InvalidSpeculativeRetry {
        /// The text that failed to parse.
        input: String,
        /// What is wrong with it.
        reason: &'static str,
    },
}

impl ReplicationError {
    /// Whether the request itself is wrong and retrying it cannot help
    /// (an unknown level, `ANY` on a read, a bad `speculative_retry`): gRPC
    /// `INVALID_ARGUMENT`.
    pub fn is_invalid_request(&self) -> bool {
        matches!(
            self,
            ReplicationError::UnknownConsistencyLevel { .. }
                | ReplicationError::InvalidForReads { .. }
                | ReplicationError::InvalidSpeculativeRetry { .. }
        )
    }

    /// Whether a write may have been applied despite the error: true only
    /// for [`WriteTimeout`]. Every other error left replicas untouched (or,
    /// for reads, there was nothing to change beyond read repair).
    pub fn may_have_applied(&self) -> bool {
        matches!(self, ReplicationError::WriteTimeout(_))
    }
}

/// A `Result` with a [`ReplicationError`].
pub type Result<T, E = ReplicationError> = std::result::Result<T, E>;

/// Too few live replicas to satisfy a consistency level: the request was
/// refused before anything was sent, so nothing changed. Cassandra's
/// `UnavailableException`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct Unavailable {
    /// The level asked for.
    pub level: ConsistencyLevel,
    /// The data center that falls short, for levels counted per DC
    /// (`LOCAL_*` under NetworkTopologyStrategy, `EACH_QUORUM`); `None` when
    /// replicas anywhere count.
    pub dc: Option<Datacenter>,
    /// Live replicas needed (in `dc`, if set), including one per pending
    /// replica that counts toward the level during a range movement.
    pub required: u32,
    /// Live replicas there were (in `dc`, if set); less than `required`.
    pub alive: u32,
}

impl fmt::Display for Unavailable {
    /// `cannot achieve consistency level QUORUM: 2 replicas required, 1 alive`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "cannot achieve consistency level {}", self.level)?;
        if let Some(dc) = &self.dc {
            write!(f, " in {dc}")?;
        }
        let noun = if self.required == 1 {
            "replica"
        } else {
            "replicas"
        };
        write!(
            f,
            ": {} {noun} required, {} alive",
            self.required, self.alive
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unavailable_names_the_level_the_counts_and_any_short_dc() {
        let quorum = Unavailable {
            level: ConsistencyLevel::Quorum,
            dc: None,
            required: 2,
            alive: 1,
        };
        assert_eq!(
            quorum.to_string(),
            "cannot achieve consistency level QUORUM: 2 replicas required, 1 alive"
        );
        let local = Unavailable {
            level: ConsistencyLevel::LocalOne,
            dc: Some(Datacenter::from("dc1")),
            required: 1,
            alive: 0,
        };
        assert_eq!(
            local.to_string(),
            "cannot achieve consistency level LOCAL_ONE in dc1: 1 replica required, 0 alive"
        );
    }

    #[test]
    fn only_level_misuse_is_an_invalid_request_and_only_timeouts_may_have_applied() {
        let invalid = ReplicationError::InvalidForReads {
            level: ConsistencyLevel::Any,
        };
        assert!(invalid.is_invalid_request());
        assert!(!invalid.may_have_applied());
        let unavailable = ReplicationError::from(Unavailable {
            level: ConsistencyLevel::All,
            dc: None,
            required: 3,
            alive: 2,
        });
        assert!(!unavailable.is_invalid_request());
        assert!(!unavailable.may_have_applied());
        let timeout = ReplicationError::from(WriteTimeout {
            level: ConsistencyLevel::One,
            acked: 0,
            required: 1,
        });
        assert!(timeout.may_have_applied());
    }
}
