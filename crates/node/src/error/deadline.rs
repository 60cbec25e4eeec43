//! [`ExpiredRequest`]: a client request the node read after its client had
//! stopped waiting for it (see `deadline.rs`), refused before anything was
//! written, as `DEADLINE_EXCEEDED`.

use std::time::Duration;

/// A request read more than the clock bound after its client's deadline.
#[derive(Debug, thiserror::Error)]
#[error(
    "the request was read {} ms after its deadline (sent at {sent_at_micros} µs by the client's \
     clock, waiting {} ms; allowed clock bound {} ms): refused, nothing was written. \
     A paused or overloaded coordinator, or a client clock behind the node's",
    late_by.as_millis(),
    timeout.as_millis(),
    allowance.as_millis()
)]
pub struct ExpiredRequest {
    /// How long after the deadline the node read it (its clock against the
    /// client's).
    pub late_by: Duration,
    /// When the client sent it, in µs since the epoch by the client's clock.
    pub sent_at_micros: i64,
    /// How long the client waits.
    pub timeout: Duration,
    /// How late is allowed: the clock bound, `max_clock_offset_ms`.
    pub allowance: Duration,
}

impl ExpiredRequest {
    /// The gRPC status code: `DEADLINE_EXCEEDED`.
    pub fn code(&self) -> tonic::Code {
        tonic::Code::DeadlineExceeded
    }
}
