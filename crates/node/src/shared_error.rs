//! An error that several waiters share: one replica round answering many
//! coalesced reads (`read_flights.rs`), one internode call carrying many
//! replica writes or reads (`peer_queues.rs`). `NodeError` is not `Clone`,
//! so each waiter gets the error's kind and message.

use crate::error::NodeError;

/// An error in a form each of its sharers can have: its message, and a
/// variant that keeps its gRPC code (a client told `UNAVAILABLE` retries
/// elsewhere; one told `INTERNAL` does not).
#[derive(Clone, Debug)]
pub(crate) enum SharedError {
    Timeout(String),
    Unavailable(String),
    InvalidArgument(String),
    KeyspaceNotFound(String),
    Other(String),
}

impl From<NodeError> for SharedError {
    fn from(error: NodeError) -> SharedError {
        match error {
            NodeError::KeyspaceNotFound(name) => SharedError::KeyspaceNotFound(name),
            error => match error.code() {
                tonic::Code::DeadlineExceeded => SharedError::Timeout(error.to_string()),
                tonic::Code::Unavailable => SharedError::Unavailable(error.to_string()),
                tonic::Code::InvalidArgument => SharedError::InvalidArgument(error.to_string()),
                _ => SharedError::Other(error.to_string()),
            },
        }
    }
}

impl From<SharedError> for NodeError {
    fn from(error: SharedError) -> NodeError {
        match error {
            SharedError::Timeout(m) => NodeError::Timeout(m),
            SharedError::Unavailable(m) => NodeError::Unavailable(m),
            SharedError::InvalidArgument(m) => NodeError::InvalidArgument(m),
            SharedError::KeyspaceNotFound(name) => NodeError::KeyspaceNotFound(name),
            SharedError::Other(m) => NodeError::Internal(m),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shared(error: NodeError) -> NodeError {
        NodeError::from(SharedError::from(error))
    }

    #[test]
    fn a_shared_error_keeps_its_grpc_code() {
        for (error, code) in [
            (NodeError::ShuttingDown, tonic::Code::Unavailable),
            (
                NodeError::Unavailable("down".into()),
                tonic::Code::Unavailable,
            ),
            (
                NodeError::Timeout("slow".into()),
                tonic::Code::DeadlineExceeded,
            ),
            (
                NodeError::KeyspaceNotFound("ks".into()),
                tonic::Code::NotFound,
            ),
            (
                NodeError::InvalidArgument("bad".into()),
                tonic::Code::InvalidArgument,
            ),
            (NodeError::Internal("broken".into()), tonic::Code::Internal),
        ] {
            let message = error.to_string();
            let shared = shared(error);
            assert_eq!(shared.code(), code, "{message}");
            assert_eq!(shared.to_string(), message);
        }
    }
}
