//! How a command fails: its message on stderr and its exit status.
//!
//! Exit status 0 is success, 1 a key not found (`not found` on stderr) or a
//! compare-and-set whose condition did not hold (`not applied; ...` on
//! stdout), 4 a compare-and-set that failed with its outcome unknown (it
//! may have been applied: the message says how to read it), 2 any other
//! error, printed as `CODE: message` with the gRPC status code
//! name when the node answered with an error, or as a sentence naming the
//! problem when the node could not be reached or the input was bad. A server
//! that must not run again on its data (decommissioned, or removed by another
//! node) exits with 3, so a supervisor can tell it from a crash (systemd:
//! `RestartPreventExitStatus=3`).

use std::fmt;
use std::process::ExitCode;

/// A command's failure.
#[derive(Debug)]
pub enum Failure {
    /// The key has no value.
    NotFound,
    /// A compare-and-set's condition did not hold; the command printed
    /// what the key holds on stdout, and nothing goes to stderr.
    NotApplied,
    /// A compare-and-set failed and may have been applied, or may still
    /// be by a later round: `read_with` is the command that tells.
    CasUnknown {
        /// Why it failed.
        cause: Box<Failure>,
        /// A `ringstore getserial ...` command line for the key.
        read_with: String,
    },
    /// The node answered with an error status.
    Status(tonic::Status),
    /// The node could not be reached at all.
    Connect {
        /// The address tried (`HOST:PORT`).
        address: String,
        /// Why.
        reason: String,
    },
    /// The server left the cluster for good (decommissioned, or removed by
    /// another node) and must not be restarted on its data.
    Retired(anyhow::Error),
    /// Anything else: bad input, I/O, a node that failed to start.
    Other(anyhow::Error),
}

impl Failure {
    /// The process exit status.
    pub fn exit_code(&self) -> ExitCode {
        match self {
            Failure::NotFound | Failure::NotApplied => ExitCode::from(1),
            Failure::CasUnknown { .. } => ExitCode::from(4),
            Failure::Retired(_) => ExitCode::from(3),
            _ => ExitCode::from(2),
        }
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::NotFound => f.write_str("not found"),
            Failure::NotApplied => f.write_str("not applied"),
            Failure::CasUnknown { cause, read_with } => write!(
                f,
                "{cause}\nthe result is unknown: the write may have been applied, or may \
                 still be by a later round; read the key with `{read_with}` to find out"
            ),
            Failure::Status(status) => {
                write!(f, "{}: {}", code_name(status.code()), status.message())
            }
            Failure::Connect { address, reason } => write!(
                f,
                "cannot connect to a node at {address}: {reason} (is a ringstore node running there? see --host)"
            ),
            Failure::Other(error) | Failure::Retired(error) => write!(f, "error: {error:#}"),
        }
    }
}

impl Failure {
    /// A call that failed in the transport (not an answer from the node) on
    /// a plaintext connection to `address`: most likely the node serves TLS.
    pub fn hint_plaintext(self, address: &str) -> Failure {
        match self {
            // A status the node sent has no source; a failed transport has one.
            Failure::Status(status) if std::error::Error::source(&status).is_some() => {
                Failure::Connect {
                    address: address.to_string(),
                    reason: format!(
                        "{} (if the node serves TLS, pass --ca-cert)",
                        status.message()
                    ),
                }
            }
            other => other,
        }
    }

    /// A call that failed in the transport on a TLS connection without a
    /// client certificate to `address`: most likely the node requires one
    /// (TLS 1.3 refuses a missing certificate after the handshake, on the
    /// first call).
    pub fn hint_client_certificate(self, address: &str) -> Failure {
        match self {
            Failure::Status(status) if std::error::Error::source(&status).is_some() => {
                Failure::Connect {
                    address: address.to_string(),
                    reason: format!(
                        "{} (if the node requires client certificates, pass --client-cert and --client-key)",
                        crate::client::root_cause(&status)
                    ),
                }
            }
            other => other,
        }
    }
}

impl From<tonic::Status> for Failure {
    fn from(status: tonic::Status) -> Failure {
        Failure::Status(status)
    }
}

impl From<ringstore_client::ClientError> for Failure {
    /// A node's answer stays a status (its code and message as the node
    /// sent them); a node that cannot be reached is a connect failure.
    fn from(error: ringstore_client::ClientError) -> Failure {
        use ringstore_client::ClientError as E;
        match error {
            E::Status { source, .. } => Failure::Status(source),
            E::NoSeed { source, .. } => Failure::from(*source),
            E::Connect { address, source } => Failure::Connect {
                address: address.to_string(),
                reason: source.to_string(),
            },
            E::Resolve { address, reason } => Failure::Connect { address, reason },
            other => Failure::Other(other.into()),
        }
    }
}

impl From<anyhow::Error> for Failure {
    fn from(error: anyhow::Error) -> Failure {
        Failure::Other(error)
    }
}

/// A gRPC code's canonical name, as `UNAVAILABLE`.
pub fn code_name(code: tonic::Code) -> &'static str {
    use tonic::Code::*;
    match code {
        Ok => "OK",
        Cancelled => "CANCELLED",
        Unknown => "UNKNOWN",
        InvalidArgument => "INVALID_ARGUMENT",
        DeadlineExceeded => "DEADLINE_EXCEEDED",
        NotFound => "NOT_FOUND",
        AlreadyExists => "ALREADY_EXISTS",
        PermissionDenied => "PERMISSION_DENIED",
        ResourceExhausted => "RESOURCE_EXHAUSTED",
        FailedPrecondition => "FAILED_PRECONDITION",
        Aborted => "ABORTED",
        OutOfRange => "OUT_OF_RANGE",
        Unimplemented => "UNIMPLEMENTED",
        Internal => "INTERNAL",
        Unavailable => "UNAVAILABLE",
        DataLoss => "DATA_LOSS",
        Unauthenticated => "UNAUTHENTICATED",
    }
}

/// A command's result.
pub type Outcome = Result<(), Failure>;
