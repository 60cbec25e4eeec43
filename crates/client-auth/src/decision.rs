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
    /// change that password and nothing else until it has.
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
    /// Another user's password, without `admin` on all keyspaces.
    #[error(
        "user {user} may change only its own password (another's needs admin on all keyspaces)"
    )]
    OthersPassword {
        /// The user.
        user: UserName,
    },
}

impl Principal {
    /// Whether `need` is met, for a request to an RPC for which
    /// `password_change` says whether it changes a password (which the
    /// service checks further, with [`Principal::may_set_password_of`]).
    /// With the default password, nothing else is allowed: not a view,
    /// not creating a user (a superuser made with a public password would
    /// outlive it).
    pub fn check(&self, need: &Need, password_change: bool) -> Result<(), Denied> {
        if self.default_password && !password_change {
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

    /// Whether this principal may set `target`'s password: its own always;
    /// another's with `admin` on all keyspaces, and a superuser's (once
    /// `target_superuser` is known) as a superuser; nothing but its own
    /// while its password is the default.
    pub fn may_set_password_of(
        &self,
        target: &UserName,
        target_superuser: Option<bool>,
    ) -> Result<(), Denied> {
        if self.user.name == *target {
            return Ok(());
        }
        if self.default_password {
            return Err(Denied::DefaultPassword);
        }
        if !self.user.holds(Permission::Admin, &Scope::All) {
            return Err(Denied::OthersPassword {
                user: self.user.name.clone(),
            });
        }
        if target_superuser == Some(true) && !self.user.superuser {
            return Err(Denied::NotSuperuser {
                user: self.user.name.clone(),
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;
    use crate::password::StoredHash;
    use crate::permission::Grant;
    use crate::rpc::{is_password_change, rule_for};

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
        principal.check(&rule_for(path).need(keyspace), is_password_change(path))
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
    fn the_default_password_allows_changing_that_password_and_nothing_else() {
        let mut fresh = user(&[], true);
        fresh.default_password = true;
        assert_eq!(
            call(&fresh, "/ringstore.v1.Users/ChangePassword", None),
            Ok(())
        );
        for (path, keyspace) in [
            ("/ringstore.v1.Users/CreateUser", None),
            ("/ringstore.v1.Users/Grant", None),
            ("/ringstore.v1.Users/ListUsers", None),
            ("/ringstore.v1.Admin/Status", None),
            ("/ringstore.v1.Client/Noop", None),
            ("/ringstore.v1.Client/Get", Some("a")),
            ("/ringstore.v1.Topology/Decommission", None),
        ] {
            assert_eq!(
                call(&fresh, path, keyspace),
                Err(Denied::DefaultPassword),
                "{path}"
            );
        }
    }

    #[test]
    fn a_password_is_set_by_its_user_or_an_admin_and_a_superusers_by_a_superuser() {
        let bob = UserName::new("bob").unwrap();
        let alice = UserName::new("alice").unwrap();
        let plain = user(&[], false);
        assert_eq!(plain.may_set_password_of(&alice, None), Ok(()));
        assert_eq!(
            plain.may_set_password_of(&bob, None),
            Err(Denied::OthersPassword {
                user: alice.clone()
            })
        );
        let admin = user(&[(Permission::Admin, Scope::All)], false);
        assert_eq!(admin.may_set_password_of(&bob, Some(false)), Ok(()));
        assert!(matches!(
            admin.may_set_password_of(&bob, Some(true)),
            Err(Denied::NotSuperuser { .. })
        ));
        let mut fresh = user(&[], true);
        assert_eq!(fresh.may_set_password_of(&bob, Some(true)), Ok(()));
        fresh.default_password = true;
        assert_eq!(fresh.may_set_password_of(&alice, Some(true)), Ok(()));
        assert_eq!(
            fresh.may_set_password_of(&bob, Some(false)),
            Err(Denied::DefaultPassword)
        );
    }
}
