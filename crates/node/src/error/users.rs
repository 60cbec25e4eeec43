//! [`UserError`]: a request of the `Users` service that its finer rules
//! refuse — a caller without the rights it needs, a user that exists
//! already, an unknown permission, a grant on `system_auth`, a user dropping
//! itself, the default superuser's password set back to the default.

use ringstore_client_auth::{AUTH_KEYSPACE, DEFAULT_SUPERUSER, Denied, UserName};

/// Why the `Users` service refused a request.
#[derive(Debug, thiserror::Error)]
pub enum UserError {
    /// The caller is not a superuser, and the request needs one.
    #[error("user {user} is not a superuser, which {needed_for} needs")]
    NotSuperuser {
        /// The caller.
        user: UserName,
        /// What needs a superuser (`creating a superuser`...).
        needed_for: &'static str,
    },

    /// The caller's permissions do not allow the request.
    #[error(transparent)]
    Denied(#[from] Denied),

    /// A user of that name exists already.
    #[error("user {:?} already exists", .0.as_str())]
    AlreadyExists(UserName),

    /// The caller asked to drop the user it is logged in as.
    #[error("user {0} cannot drop itself: log in as another user")]
    DropsItself(UserName),

    /// A permission outside the wire enum (or left unspecified).
    #[error("unknown permission {0} (expected read, write, schema or admin)")]
    UnknownPermission(i32),

    /// A grant on `system_auth`, whose data is for superusers only.
    #[error("nothing can be granted on {AUTH_KEYSPACE}: its data is for superusers only")]
    GrantOnAuthKeyspace,

    /// The default superuser's new password is its public default.
    #[error("{DEFAULT_SUPERUSER}'s new password must not be its public default")]
    DefaultPasswordAgain,
}

impl UserError {
    /// The gRPC status code.
    pub fn code(&self) -> tonic::Code {
        match self {
            UserError::NotSuperuser { .. } | UserError::Denied(_) => tonic::Code::PermissionDenied,
            UserError::AlreadyExists(_) => tonic::Code::AlreadyExists,
            UserError::DropsItself(_) => tonic::Code::FailedPrecondition,
            UserError::UnknownPermission(_)
            | UserError::GrantOnAuthKeyspace
            | UserError::DefaultPasswordAgain => tonic::Code::InvalidArgument,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_user_that_exists_already_is_named_as_text_and_is_already_exists() {
        let name = UserName::new("alice").expect("a valid name");
        let error = UserError::AlreadyExists(name);
        assert_eq!(error.to_string(), "user \"alice\" already exists");
        assert_eq!(error.code(), tonic::Code::AlreadyExists);
    }

    #[test]
    fn refusals_of_the_caller_are_permission_denied() {
        let user = UserName::new("bob").expect("a valid name");
        let needs = UserError::NotSuperuser {
            user: user.clone(),
            needed_for: "creating a superuser",
        };
        assert_eq!(needs.code(), tonic::Code::PermissionDenied);
        assert_eq!(
            needs.to_string(),
            "user bob is not a superuser, which creating a superuser needs"
        );
        let denied = UserError::from(Denied::NotSuperuser { user });
        assert_eq!(denied.code(), tonic::Code::PermissionDenied);
        assert_eq!(
            UserError::DropsItself(UserName::new("c").expect("valid")).code(),
            tonic::Code::FailedPrecondition
        );
    }
}
