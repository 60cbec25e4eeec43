//! [`ScanError`]: a scan that cannot be served — a client's or a peer's
//! scan request out of bounds, a resume token that is not one this scan
//! handed out ([`ResumeTokenFault`]), a ring placing no replica, a replica's
//! page that breaks the protocol, a blocking read repair that did not finish.

use std::net::SocketAddr;
use std::time::Duration;

use ringstore_placement::{HostId, PlacementError, Token};
use ringstore_replication::PageError;

/// Why a scan (or one page of it) failed.
#[derive(Debug, thiserror::Error)]
pub enum ScanError {
    /// A client's range that is empty or wraps.
    #[error(
        "start_token {start} must be below end_token {end} (the range is (start, end] and does \
         not wrap)"
    )]
    EmptyRange {
        /// The range's exclusive start.
        start: Token,
        /// Its inclusive end.
        end: Token,
    },

    /// A client's page size of 0.
    #[error("page_size must be at least 1")]
    ZeroPageSize,

    /// A client's page size over the largest page served.
    #[error("page_size {size} exceeds the maximum of {max}")]
    PageTooLarge {
        /// The size asked for, in rows.
        size: u32,
        /// The largest page, in rows.
        max: usize,
    },

    /// A client's resume token that is not one this scan handed out.
    #[error(
        "invalid resume_token ({0}): pass the resume_token of the previous page of the same \
         scan, or none to start over"
    )]
    BadResumeToken(ResumeTokenFault),

    /// A peer's `ReadRange` limit of 0 or over the largest page.
    #[error("limit {limit} must be between 1 and {max}")]
    LimitOutOfRange {
        /// The limit asked for, in rows.
        limit: usize,
        /// The largest page, in rows.
        max: usize,
    },

    /// A peer's `ReadRange` whose last token is before its first.
    #[error("last_token {last} is before after_token {after}")]
    TokensReversed {
        /// The token the page starts after.
        after: Token,
        /// The last token asked for.
        last: Token,
    },

    /// The keyspace places no replica on this node's ring.
    #[error("no replica to scan: keyspace {keyspace} places none on this ring")]
    NoReplica {
        /// The keyspace's name.
        keyspace: String,
    },

    /// A replica's page breaks the protocol (a row outside the range asked
    /// for, too many rows...).
    #[error("replica {replica}: {source}")]
    BadPage {
        /// The replica.
        replica: HostId,
        /// What is wrong with its page.
        #[source]
        source: PageError,
    },

    /// A replica's row whose key has no token.
    #[error("{replica}: a bad key: {source}")]
    BadRowKey {
        /// The replica's address.
        replica: SocketAddr,
        /// Why the key has no token.
        #[source]
        source: PlacementError,
    },

    /// A replica's row without its cell.
    #[error("{replica}: a row without a cell")]
    RowWithoutCell {
        /// The replica's address.
        replica: SocketAddr,
    },

    /// The scan's blocking read repair did not finish within the write timeout.
    #[error("scan read repair of {rows} rows did not finish within {timeout:?}")]
    RepairTimedOut {
        /// Rows being written to stale replicas.
        rows: usize,
        /// The write timeout.
        timeout: Duration,
    },

    /// The scan's blocking read repair failed on some stale replicas.
    #[error("scan read repair failed on {failed} of {replicas} stale replicas")]
    RepairFailed {
        /// Replicas whose repair write failed.
        failed: usize,
        /// Stale replicas written to.
        replicas: usize,
    },
}

/// What is wrong with a resume token.
#[derive(Debug, thiserror::Error)]
pub enum ResumeTokenFault {
    /// Shorter than a header and its checksum.
    #[error("too short")]
    TooShort,
    /// Its checksum does not match its bytes (garbled or made up).
    #[error("its checksum does not match")]
    Checksum,
    /// A layout version this node does not know.
    #[error("unknown version {0}")]
    UnknownVersion(u8),
    /// A kind of point this node does not know (or a key where none belongs).
    #[error("unknown kind")]
    UnknownKind,
    /// Its key is empty or longer than a key may be.
    #[error("its key is empty or too long")]
    BadKey,
    /// It names a point outside the scan's range `(start, end]`.
    #[error("it lies outside the range ({start}, {end}]")]
    OutsideRange {
        /// The scan's exclusive start.
        start: Token,
        /// Its inclusive end.
        end: Token,
    },
}

impl ScanError {
    /// The gRPC status code.
    pub fn code(&self) -> tonic::Code {
        match self {
            ScanError::EmptyRange { .. }
            | ScanError::ZeroPageSize
            | ScanError::PageTooLarge { .. }
            | ScanError::BadResumeToken(_)
            | ScanError::LimitOutOfRange { .. }
            | ScanError::TokensReversed { .. } => tonic::Code::InvalidArgument,
            ScanError::NoReplica { .. } => tonic::Code::Unavailable,
            ScanError::BadPage { .. }
            | ScanError::BadRowKey { .. }
            | ScanError::RowWithoutCell { .. } => tonic::Code::Internal,
            ScanError::RepairTimedOut { .. } | ScanError::RepairFailed { .. } => {
                tonic::Code::DeadlineExceeded
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bad_resume_token_says_what_is_wrong_and_what_to_pass() {
        let error = ScanError::BadResumeToken(ResumeTokenFault::OutsideRange {
            start: Token(1),
            end: Token(5),
        });
        assert_eq!(error.code(), tonic::Code::InvalidArgument);
        assert_eq!(
            error.to_string(),
            "invalid resume_token (it lies outside the range (1, 5]): pass the resume_token of \
             the previous page of the same scan, or none to start over"
        );
    }

    #[test]
    fn codes_follow_whose_fault_it_is() {
        let keyspace = "ks".to_string();
        assert_eq!(
            ScanError::NoReplica { keyspace }.code(),
            tonic::Code::Unavailable
        );
        let replica = SocketAddr::from(([127, 0, 0, 1], 7000));
        assert_eq!(
            ScanError::RowWithoutCell { replica }.code(),
            tonic::Code::Internal
        );
        let failed = ScanError::RepairFailed {
            failed: 1,
            replicas: 2,
        };
        assert_eq!(failed.code(), tonic::Code::DeadlineExceeded);
    }
}
