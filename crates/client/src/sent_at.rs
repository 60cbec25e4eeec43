//! When a request was sent, told to the node with the request, so that a
//! node reading it after this client stopped waiting refuses it instead of
//! applying it late (see the node's `deadline` module).
//!
//! Every attempt of a unary call carries the client's wall-clock time in
//! `x-ringstore-sent-at-micros` and its timeout as the gRPC deadline
//! (`grpc-timeout`); a pipelined request carries the same in its
//! `sent_at_micros` and `timeout_ms` fields. Client timestamps already make
//! a later write of this client win whichever coordinator is slow; the send
//! time also keeps a paused coordinator from doing work nobody waits for,
//! and protects writes sent without a timestamp.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use ringstore_proto::SENT_AT_HEADER;

/// Microseconds since the epoch by this machine's clock, now.
pub fn now_micros() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX))
}

/// `message` as a request sent now that waits `timeout` for its answer.
pub fn timed<T>(message: T, timeout: Duration) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    request.set_timeout(timeout);
    if let Ok(value) = now_micros().to_string().parse() {
        request.metadata_mut().insert(SENT_AT_HEADER, value);
    }
    request
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_timed_request_carries_its_send_time_and_its_deadline() {
        let before = now_micros();
        let request = timed((), Duration::from_millis(1500));
        let after = now_micros();
        let metadata = request.metadata();
        let sent: i64 = metadata
            .get(SENT_AT_HEADER)
            .unwrap()
            .to_str()
            .unwrap()
            .parse()
            .unwrap();
        assert!((before..=after).contains(&sent), "{before} {sent} {after}");
        let timeout = metadata.get("grpc-timeout").unwrap().to_str().unwrap();
        assert!(
            ["1500000u", "1500m", "1500000000n"].contains(&timeout),
            "{timeout}"
        );
    }
}
