//! What each client-port RPC needs.

use crate::permission::{Permission, Scope};

/// Where an RPC's keyspace comes from, for the layer that decodes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyspaceField {
    /// The RPC names no keyspace.
    None,
    /// A string field of the request (an empty value means every keyspace).
    Field(u32),
}

/// The permission an RPC needs, before its keyspace is known.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rule {
    /// Any authenticated user: views of the cluster, not of data
    /// (`status`, `ring`, `info`, `describering`, `getendpoints`, `keyspace
    /// list`, `metrics`, `tpstats`, `netstats`, `hints`, `repair status`,
    /// `listsnapshots`, `getlogginglevels`, `plan`, `version`, `noop`), and
    /// changing one's own password (the service checks the target).
    Login,
    /// `permission` on the request's keyspace (every keyspace when the
    /// field is empty or the RPC names none).
    On(Permission, KeyspaceField),
    /// Any authenticated user may open it; it carries requests of other
    /// RPCs (`Client/Pipeline`), and the service checks each one against
    /// the rule of the RPC it stands for.
    PerMessage,
    /// Superusers only: an RPC this table does not know (fail closed), or
    /// one that swaps the node's secrets (`reloadsecrets`).
    Superuser,
}

/// The client-port RPC table, by gRPC path. Keep in step with the protos:
/// an RPC missing here is refused to all but superusers.
const TABLE: &[(&str, Rule)] = {
    use KeyspaceField::{Field, None as NoKs};
    use Permission::{Admin, Read, Schema, Write};
    use Rule::{Login, On};
    &[
        // Client: data.
        ("/ringstore.v1.Client/Put", On(Write, Field(1))),
        ("/ringstore.v1.Client/Get", On(Read, Field(1))),
        ("/ringstore.v1.Client/Scan", On(Read, Field(1))),
        ("/ringstore.v1.Client/Delete", On(Write, Field(1))),
        ("/ringstore.v1.Client/Batch", On(Write, Field(1))),
        ("/ringstore.v1.Client/Noop", Login),
        // Lightweight transactions: a compare-and-set writes, a serial read
        // reads. Caveat: a compare-and-set whose condition fails answers
        // with the current value, which a user with write but not read
        // permission thus learns (Cassandra asks for both; this table
        // holds one permission per RPC).
        ("/ringstore.v1.Client/PutIf", On(Write, Field(1))),
        ("/ringstore.v1.Client/DeleteIf", On(Write, Field(1))),
        ("/ringstore.v1.Client/GetSerial", On(Read, Field(1))),
        ("/ringstore.v1.Client/Pipeline", Rule::PerMessage),
        // Schema.
        ("/ringstore.v1.Schema/CreateKeyspace", On(Schema, Field(1))),
        ("/ringstore.v1.Schema/DropKeyspace", On(Schema, Field(1))),
        ("/ringstore.v1.Schema/AlterKeyspace", On(Schema, Field(1))),
        ("/ringstore.v1.Schema/ListKeyspaces", Login),
        // Admin: views.
        ("/ringstore.v1.Admin/Status", Login),
        ("/ringstore.v1.Admin/Ring", Login),
        ("/ringstore.v1.Admin/Info", Login),
        ("/ringstore.v1.Admin/DescribeRing", Login),
        ("/ringstore.v1.Admin/GetEndpoints", Login),
        ("/ringstore.v1.Admin/Hints", Login),
        ("/ringstore.v1.Admin/Metrics", Login),
        ("/ringstore.v1.Admin/GossipInfo", Login),
        ("/ringstore.v1.Admin/GetLoggingLevels", Login),
        ("/ringstore.v1.Admin/TpStats", Login),
        ("/ringstore.v1.Admin/ProxyHistograms", Login),
        ("/ringstore.v1.Admin/TableStats", Login),
        ("/ringstore.v1.Admin/ListSnapshots", Login),
        // Admin: a view of keys, which are data.
        ("/ringstore.v1.Admin/TopPartitions", On(Admin, Field(1))),
        // Admin: operations.
        ("/ringstore.v1.Admin/SetHandoff", On(Admin, NoKs)),
        ("/ringstore.v1.Admin/TruncateHints", On(Admin, NoKs)),
        ("/ringstore.v1.Admin/Flush", On(Admin, NoKs)),
        ("/ringstore.v1.Admin/SetLoggingLevel", On(Admin, NoKs)),
        ("/ringstore.v1.Admin/Drain", On(Admin, NoKs)),
        ("/ringstore.v1.Admin/Snapshot", On(Admin, Field(2))),
        ("/ringstore.v1.Admin/ClearSnapshot", On(Admin, NoKs)),
        ("/ringstore.v1.Admin/RestoreSnapshot", On(Admin, Field(2))),
        // Admin: swapping the cluster secret and TLS files is a superuser's.
        ("/ringstore.v1.Admin/ReloadSecrets", Rule::Superuser),
        // Topology.
        ("/ringstore.v1.Topology/Decommission", On(Admin, NoKs)),
        ("/ringstore.v1.Topology/RemoveNode", On(Admin, NoKs)),
        ("/ringstore.v1.Topology/Cleanup", On(Admin, Field(1))),
        ("/ringstore.v1.Topology/NetStats", Login),
        (
            "/ringstore.v1.Topology/SetStreamThroughput",
            On(Admin, NoKs),
        ),
        ("/ringstore.v1.Topology/Plan", Login),
        // Repair.
        ("/ringstore.v1.Repair/Repair", On(Admin, Field(1))),
        ("/ringstore.v1.Repair/RepairStatus", Login),
        ("/ringstore.v1.Repair/GarbageCollect", On(Admin, Field(1))),
        ("/ringstore.v1.Repair/PaxosRepair", On(Admin, Field(1))),
        // Users: managing users is `admin` on all keyspaces; the service
        // also requires a superuser to create, drop or change a superuser.
        ("/ringstore.v1.Users/CreateUser", On(Admin, NoKs)),
        ("/ringstore.v1.Users/DropUser", On(Admin, NoKs)),
        ("/ringstore.v1.Users/ListUsers", On(Admin, NoKs)),
        ("/ringstore.v1.Users/Grant", On(Admin, NoKs)),
        ("/ringstore.v1.Users/Revoke", On(Admin, NoKs)),
        ("/ringstore.v1.Users/ChangePassword", Login),
    ]
};

/// The rule of the RPC at gRPC path `path` (`/ringstore.v1.Client/Put`).
pub fn rule_for(path: &str) -> Rule {
    TABLE
        .iter()
        .find(|(p, _)| *p == path)
        .map_or(Rule::Superuser, |(_, rule)| *rule)
}

/// Whether the table names `path` (an RPC it does not name is refused to
/// all but superusers, by default rather than by choice).
pub fn in_table(path: &str) -> bool {
    TABLE.iter().any(|(p, _)| *p == path)
}

/// Whether `path` changes a password: the one RPC a default superuser
/// whose password is still the default may call (to change it).
pub fn is_password_change(path: &str) -> bool {
    path == "/ringstore.v1.Users/ChangePassword"
}

/// What a request needs once its keyspace is known.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Need {
    /// Only to be authenticated.
    Login,
    /// `permission` on `scope`.
    Permission(Permission, Scope),
    /// To be a superuser.
    Superuser,
}

impl Rule {
    /// Whether the layer must decode the request to find the keyspace, and
    /// which field holds it.
    pub fn keyspace_field(self) -> Option<u32> {
        match self {
            Rule::On(_, KeyspaceField::Field(field)) => Some(field),
            _ => None,
        }
    }

    /// What a request needs whose keyspace field holds `keyspace` (`None`
    /// or empty: every keyspace).
    pub fn need(self, keyspace: Option<&str>) -> Need {
        match self {
            Rule::Login | Rule::PerMessage => Need::Login,
            Rule::Superuser => Need::Superuser,
            Rule::On(permission, _) => Need::Permission(
                permission,
                match keyspace {
                    Some(name) if !name.is_empty() => Scope::Keyspace(name.to_string()),
                    _ => Scope::All,
                },
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_rpcs_need_read_or_write_on_their_keyspace() {
        let put = rule_for("/ringstore.v1.Client/Put");
        assert_eq!(put.keyspace_field(), Some(1));
        assert_eq!(
            put.need(Some("demo")),
            Need::Permission(Permission::Write, Scope::Keyspace("demo".into()))
        );
        assert_eq!(
            rule_for("/ringstore.v1.Client/Get").need(Some("demo")),
            Need::Permission(Permission::Read, Scope::Keyspace("demo".into()))
        );
        for path in ["/ringstore.v1.Client/Delete", "/ringstore.v1.Client/Batch"] {
            assert!(matches!(
                rule_for(path).need(Some("k")),
                Need::Permission(Permission::Write, _)
            ));
        }
    }

    #[test]
    fn admin_operations_need_admin_and_views_need_a_login() {
        for path in [
            "/ringstore.v1.Topology/Decommission",
            "/ringstore.v1.Topology/RemoveNode",
            "/ringstore.v1.Admin/TruncateHints",
            "/ringstore.v1.Admin/SetHandoff",
            "/ringstore.v1.Admin/Drain",
            "/ringstore.v1.Admin/SetLoggingLevel",
            "/ringstore.v1.Topology/SetStreamThroughput",
        ] {
            assert_eq!(
                rule_for(path).need(None),
                Need::Permission(Permission::Admin, Scope::All),
                "{path}"
            );
        }
        // A keyspace-wide admin operation on every keyspace needs admin on all.
        assert_eq!(
            rule_for("/ringstore.v1.Repair/Repair").need(Some("")),
            Need::Permission(Permission::Admin, Scope::All)
        );
        for path in [
            "/ringstore.v1.Admin/Status",
            "/ringstore.v1.Admin/Ring",
            "/ringstore.v1.Admin/Info",
        ] {
            assert_eq!(rule_for(path).need(None), Need::Login, "{path}");
        }
    }

    #[test]
    fn an_unknown_rpc_is_for_superusers_only() {
        assert_eq!(rule_for("/ringstore.v1.Client/Teleport"), Rule::Superuser);
        assert_eq!(rule_for("").need(Some("demo")), Need::Superuser);
    }

    #[test]
    fn every_path_in_the_table_is_unique_and_well_formed() {
        let mut seen = std::collections::BTreeSet::new();
        for (path, _) in TABLE {
            assert!(path.starts_with("/ringstore.v1."), "{path}");
            assert!(seen.insert(*path), "{path} twice");
        }
    }
}
