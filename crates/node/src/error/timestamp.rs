//! Why a client-supplied write timestamp was refused: negative, or too far
//! ahead of this node's clock (`max_client_timestamp_skew_seconds`).
//!
//! Imports nothing of the node crate: every module imports the error
//! folder.

use std::time::Duration;

use tonic::Code;

/// Why a client's timestamp was refused.
#[derive(Debug, thiserror::Error)]
pub enum ClientTimestampError {
    /// A timestamp before the epoch.
    #[error("timestamp {0} is negative")]
    Negative(i64),

    /// A timestamp further ahead of this node's clock than the limit.
    #[error(
        "timestamp {micros} is {:.1} s ahead of this node's clock; the limit is {} s \
         (max_client_timestamp_skew_seconds)",
        *ahead_micros as f64 / 1e6,
        max_skew.as_secs()
    )]
    TooFarAhead {
        /// The timestamp, in µs since the epoch.
        micros: i64,
        /// How far ahead of this node's clock it is, in µs.
        ahead_micros: i64,
        /// The limit, `max_client_timestamp_skew_seconds`.
        max_skew: Duration,
    },
}

impl ClientTimestampError {
    /// The gRPC status code of this error: always `INVALID_ARGUMENT`.
    pub fn code(&self) -> Code {
        Code::InvalidArgument
    }
}
