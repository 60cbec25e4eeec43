//! The gRPC schema of ringstore, package `ringstore.v1`, generated at build
//! time from `proto/ringstore/v1/*.proto`.
//!
//! Services: `Client` (reads and writes at a consistency level), `Schema`
//! (keyspaces), `Admin` (what `status`, `ring`, `info`, `describering` and
//! `getendpoints` show) and `Repair` (anti-entropy repair and garbage
//! collection) and `Users` (client users and their permissions) on the client port, and `Internode` (replica reads and
//! writes, schema exchange, streaming, repair's trees and rows) on the
//! internode port.

/// The gRPC metadata key of a client's user name (ASCII), on every request
/// to the client port of a node with client authentication.
pub const USER_HEADER: &str = "x-ringstore-user";
/// The metadata key of the password (binary metadata: any bytes; sent
/// marked sensitive so HTTP/2 header compression does not index it).
pub const PASSWORD_HEADER: &str = "x-ringstore-password-bin";
/// The metadata key of when the client sent a request: microseconds since
/// the Unix epoch by the client's clock, in decimal. With the call's gRPC
/// deadline (`grpc-timeout`) it tells a node when the client stops waiting,
/// so a request read after that is refused instead of applied late.
pub const SENT_AT_HEADER: &str = "x-ringstore-sent-at-micros";

pub mod codec;

/// Whether `status` is tonic's own end of a call whose gRPC deadline passed
/// (`CANCELLED`, "Timeout expired", from the client's transport): to its
/// caller, a timeout like any other.
pub fn deadline_expired(status: &tonic::Status) -> bool {
    let mut source = std::error::Error::source(status);
    while let Some(error) = source {
        if error.is::<tonic::TimeoutExpired>() {
            return true;
        }
        source = error.source();
    }
    false
}

/// Version 1 of the API.
pub mod v1 {
    #![allow(missing_docs, clippy::all, clippy::pedantic)]
    tonic::include_proto!("ringstore.v1");
}
