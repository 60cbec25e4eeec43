//! Who a host is and where it sits.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

/// A node's permanent identity: a UUID chosen at its first start and kept in its
/// data directory, so that it survives restarts and address changes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(transparent))]
pub struct HostId(pub uuid::Uuid);

impl HostId {
    /// A fresh random host id.
    pub fn random() -> HostId {
        HostId(uuid::Uuid::new_v4())
    }

    /// A host id made from a number; deterministic, for tests and simulations.
    pub fn from_u128(n: u128) -> HostId {
        HostId(uuid::Uuid::from_u128(n))
    }
}

impl fmt::Display for HostId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.hyphenated().fmt(f)
    }
}

impl FromStr for HostId {
    type Err = uuid::Error;

    fn from_str(s: &str) -> Result<HostId, uuid::Error> {
        uuid::Uuid::parse_str(s).map(HostId)
    }
}

macro_rules! name_type {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
        #[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
        #[cfg_attr(feature = "serde", serde(transparent))]
        pub struct $name(Arc<str>);

        impl $name {
            /// The name as text.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl From<&str> for $name {
            fn from(name: &str) -> Self {
                $name(Arc::from(name))
            }
        }

        impl From<String> for $name {
            fn from(name: String) -> Self {
                $name(Arc::from(name))
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }
    };
}

name_type!(
    /// A data center's name, such as `dc1` (Cassandra's default is `datacenter1`).
    Datacenter
);
name_type!(
    /// A rack's name within its data center, such as `rack1`.
    Rack
);

/// Where a host sits: its data center and rack. NetworkTopologyStrategy spreads
/// replicas across racks by comparing locations.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Location {
    /// The host's data center.
    pub dc: Datacenter,
    /// The host's rack within `dc`.
    pub rack: Rack,
}

impl Location {
    /// A location from names.
    pub fn new(dc: impl Into<Datacenter>, rack: impl Into<Rack>) -> Location {
        Location {
            dc: dc.into(),
            rack: rack.into(),
        }
    }
}
