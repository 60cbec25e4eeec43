//! Does an authenticated user's record allow what a request needs?

use crate::permission::{AUTH_KEYSPACE, Permission, Scope};
use crate::rpc::Need;
use crate::user::{DEFAULT_SUPERUSER, UserName, UserRecord};

/// Who a request runs as: the user's record as the node last read it.
#[derive(Clone, Debug)]
pub struct Principal {
    /// The user's record.
    pub user: UserRecord,
    /// The default superuser logged in with the default password: it may
    /// manage users and nothing else until the password is changed.
    pub default_password: bool,
}

/// Why a request is refused; the message names the user, the permission
/// and the keyspace, and goes back as `PERMISSION_DENIED`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Denied {
    /// The user lacks a permission.
    #[error("user {user} has no {permission} permission on {scope}")]
    Missing {
        /// The user.
        user: UserName,
        /// What it lacks.
        permission: Permission,
        /// Where.
        scope: Scope,
    },
    /// The request needs a superuser.
    #[error("user {user} is not a superuser, which this request needs")]
    NotSuperuser {
        /// The user.
        user: UserName,
    },
    /// The default superuser's password is still the default.
    #[error(
        "the default superuser's password must be changed before it may do anything else: \
         ringstore --user {DEFAULT_SUPERUSER} user password {DEFAULT_SUPERUSER}"
    )]
    DefaultPassword,
}

impl Principal {
    /// Whether `need` is met, for a request to an RPC for which
    /// `user_management` says whether it manages users.
    pub fn check(&self, need: &Need, user_management: bool) -> Result<(), Denied> {
        if self.default_password && !user_management && *need != Need::Login {
            return Err(Denied::DefaultPassword);
        }
        match need {
            Need::Login => Ok(()),
            Need::Superuser if self.user.superuser => Ok(()),
            Need::Superuser => Err(Denied::NotSuperuser {
                user: self.user.name.clone(),
            }),
            Need::Permission(permission, scope) => {
                // The auth keyspace's data (password hashes) is for superusers.
                let auth_data = *permission != Permission::Admin
                    && matches!(scope, Scope::Keyspace(name) if name == AUTH_KEYSPACE);
                if auth_data && !self.user.superuser {
                    return Err(Denied::NotSuperuser {
                        user: self.user.name.clone(),
                    });
                }
                if self.user.holds(*permission, scope) {
                    Ok(())
                } else {
                    Err(Denied::Missing {
                        user: self.user.name.clone(),
                        permission: *permission,
                        scope: scope.clone(),
                    })
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;
    use crate::password::StoredHash;
    use crate::permission::Grant;
    use crate::rpc::{is_user_management, rule_for};

    fn user(grants: &[(Permission, Scope)], superuser: bool) -> Principal {
        Principal {
            user: UserRecord {
                name: UserName::new("alice").unwrap(),
                hash: StoredHash::from_phc(String::new()),
                superuser,
                grants: grants
                    .iter()
                    .map(|(permission, scope)| Grant {
                        permission: *permission,
                        scope: scope.clone(),
                    })
                    .collect::<BTreeSet<_>>(),
            },
            default_password: false,
        }
    }

    fn ks(name: &str) -> Scope {
        Scope::Keyspace(name.into())
    }

    fn call(principal: &Principal, path: &str, keyspace: Option<&str>) -> Result<(), Denied> {
        principal.check(&rule_for(path).need(keyspace), is_user_management(path))
    }

    #[test]
    fn read_on_one_keyspace_reads_it_only() {
        let reader = user(&[(Permission::Read, ks("a"))], false);
        assert_eq!(call(&reader, "/ringstore.v1.Client/Get", Some("a")), Ok(()));
        assert_eq!(
            call(&reader, "/ringstore.v1.Client/Put", Some("a")),
            Err(Denied::Missing {
                user: UserName::new("alice").unwrap(),
                permission: Permission::Write,
                scope: ks("a"),
            })
        );
        assert!(call(&reader, "/ringstore.v1.Client/Get", Some("b")).is_err());
        assert!(call(&reader, "/ringstore.v1.Topology/Decommission", None).is_err());
        assert!(call(&reader, "/ringstore.v1.Users/CreateUser", None).is_err());
        assert_eq!(call(&reader, "/ringstore.v1.Admin/Status", None), Ok(()));
        let message = call(&reader, "/ringstore.v1.Client/Batch", Some("a"))
            .unwrap_err()
            .to_string();
        assert_eq!(message, "user alice has no write permission on keyspace a");
    }

    #[test]
    fn a_grant_on_all_covers_every_keyspace_but_not_the_auth_data() {
        let writer = user(&[(Permission::Write, Scope::All)], false);
        assert_eq!(call(&writer, "/ringstore.v1.Client/Put", Some("x")), Ok(()));
        assert!(call(&writer, "/ringstore.v1.Client/Put", Some(AUTH_KEYSPACE)).is_err());
        let admin = user(&[(Permission::Admin, Scope::All)], false);
        assert_eq!(
            call(&admin, "/ringstore.v1.Repair/Repair", Some(AUTH_KEYSPACE)),
            Ok(())
        );
        assert!(call(&admin, "/ringstore.v1.Client/Get", Some(AUTH_KEYSPACE)).is_err());
        // Admin on one keyspace repairs it, but not every keyspace.
        let local = user(&[(Permission::Admin, ks("a"))], false);
        assert_eq!(
            call(&local, "/ringstore.v1.Repair/Repair", Some("a")),
            Ok(())
        );
        assert!(call(&local, "/ringstore.v1.Repair/Repair", Some("")).is_err());
        assert!(call(&local, "/ringstore.v1.Topology/Decommission", None).is_err());
    }

    #[test]
    fn a_superuser_may_do_anything_even_unknown_rpcs() {
        let root = user(&[], true);
        for (path, keyspace) in [
            ("/ringstore.v1.Client/Put", Some(AUTH_KEYSPACE)),
            ("/ringstore.v1.Topology/Decommission", None),
            ("/ringstore.v1.Client/Teleport", Some("a")),
        ] {
            assert_eq!(call(&root, path, keyspace), Ok(()), "{path}");
        }
        let admin = user(&[(Permission::Admin, Scope::All)], false);
        assert!(matches!(
            call(&admin, "/ringstore.v1.Client/Teleport", Some("a")),
            Err(Denied::NotSuperuser { .. })
        ));
    }

    #[test]
    fn the_default_password_allows_user_management_and_views_only() {
        let mut fresh = user(&[], true);
        fresh.default_password = true;
        assert_eq!(
            call(&fresh, "/ringstore.v1.Users/ChangePassword", None),
            Ok(())
        );
        assert_eq!(call(&fresh, "/ringstore.v1.Users/CreateUser", None), Ok(()));
        assert_eq!(call(&fresh, "/ringstore.v1.Admin/Status", None), Ok(()));
        assert_eq!(
            call(&fresh, "/ringstore.v1.Client/Get", Some("a")),
            Err(Denied::DefaultPassword)
        );
        assert_eq!(
            call(&fresh, "/ringstore.v1.Topology/Decommission", None),
            Err(Denied::DefaultPassword)
        );
    }
}
