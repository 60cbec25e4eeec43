//! Why the client-auth layer refuses a request, and the status it answers.

use ringstore_client_auth::{Denied, Throttled};
use ringstore_metrics::AuthRefusal;
use tonic::Status;

/// Why a request is refused before any service sees it.
#[derive(Debug)]
pub enum Refused {
    /// No user name or no password in the metadata.
    Missing,
    /// An unknown user, a wrong password or a malformed name (not told apart).
    BadCredentials,
    /// Too many failed logins from its source or as its user, or too many
    /// password checks pending: refused without a check.
    Throttled(Throttled),
    /// The user lacks the permission (its message names the user, the
    /// permission and the keyspace).
    Denied(Denied),
    /// The request does not decode.
    Malformed(String),
    /// The users could not be read (too few `system_auth` replicas up).
    Unavailable(Status),
}

impl Refused {
    /// The status the client gets. Never holds the password.
    pub fn status(&self) -> Status {
        match self {
            Refused::Missing => Status::unauthenticated(
                "this node requires a user name and password (--user and --password, or \
                 RINGSTORE_USER and RINGSTORE_PASSWORD)",
            ),
            Refused::BadCredentials => {
                Status::unauthenticated("authentication failed: unknown user or wrong password")
            }
            Refused::Throttled(throttled) => {
                Status::resource_exhausted(format!("login refused unchecked: {throttled}"))
            }
            Refused::Denied(denied) => Status::permission_denied(denied.to_string()),
            Refused::Malformed(message) => Status::invalid_argument(message.clone()),
            Refused::Unavailable(status) => status.clone(),
        }
    }

    /// The metrics reason, if it is counted.
    pub fn reason(&self) -> Option<AuthRefusal> {
        match self {
            Refused::Missing => Some(AuthRefusal::MissingCredentials),
            Refused::BadCredentials => Some(AuthRefusal::BadCredentials),
            Refused::Throttled(_) => Some(AuthRefusal::Throttled),
            Refused::Denied(_) => Some(AuthRefusal::PermissionDenied),
            Refused::Malformed(_) | Refused::Unavailable(_) => None,
        }
    }
}
