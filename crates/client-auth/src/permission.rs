//! Permissions, the keyspaces they cover, and grants.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::error::AccessError;

/// The keyspace holding users and their grants. Only superusers read or
/// write its data directly; a grant on [`Scope::All`] covers it for
/// [`Permission::Admin`] only (so an administrator can repair or snapshot it).
pub const AUTH_KEYSPACE: &str = "system_auth";

/// What a user may do, per keyspace or for every keyspace.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Permission {
    /// Read data: `Get` (and anything else that returns stored values).
    Read,
    /// Write data: `Put`, `Delete`, `Batch`.
    Write,
    /// Create and drop keyspaces.
    Schema,
    /// Operate the cluster: topology changes, repair, hints, snapshots,
    /// drain, log levels, throttles; and, on all keyspaces, manage users.
    Admin,
}

impl Permission {
    /// Every permission, in order.
    pub const ALL: [Permission; 4] = [
        Permission::Read,
        Permission::Write,
        Permission::Schema,
        Permission::Admin,
    ];

    /// Its name, as the CLI spells it (`read`, `write`, `schema`, `admin`).
    pub fn name(self) -> &'static str {
        match self {
            Permission::Read => "read",
            Permission::Write => "write",
            Permission::Schema => "schema",
            Permission::Admin => "admin",
        }
    }
}

impl fmt::Display for Permission {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Permission {
    type Err = AccessError;

    /// Parses a name in any case.
    fn from_str(text: &str) -> Result<Permission, AccessError> {
        Permission::ALL
            .into_iter()
            .find(|p| p.name().eq_ignore_ascii_case(text))
            .ok_or_else(|| AccessError::UnknownPermission(text.to_string()))
    }
}

/// The keyspaces a grant covers.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    /// Every keyspace, present and future (for `read`, `write` and `schema`,
    /// all but [`AUTH_KEYSPACE`]).
    All,
    /// One keyspace, by name (a keyspace dropped and created again under the
    /// same name is covered again).
    Keyspace(String),
}

impl Scope {
    /// The scope a CLI argument names: `ALL` (any case) or a keyspace name.
    pub fn parse(text: &str) -> Scope {
        if text.eq_ignore_ascii_case("all") {
            Scope::All
        } else {
            Scope::Keyspace(text.to_string())
        }
    }

    /// Whether a grant of `permission` on this scope covers `target`.
    pub fn covers(&self, permission: Permission, target: &Scope) -> bool {
        match (self, target) {
            (Scope::All, Scope::Keyspace(name)) if name == AUTH_KEYSPACE => {
                permission == Permission::Admin
            }
            (Scope::All, _) => true,
            (Scope::Keyspace(_), Scope::All) => false,
            (Scope::Keyspace(mine), Scope::Keyspace(theirs)) => mine == theirs,
        }
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Scope::All => f.write_str("all keyspaces"),
            Scope::Keyspace(name) => write!(f, "keyspace {name}"),
        }
    }
}

/// One permission on one scope.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Grant {
    /// What is allowed.
    pub permission: Permission,
    /// Where.
    pub scope: Scope,
}

impl fmt::Display for Grant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} on {}", self.permission, self.scope)
    }
}
