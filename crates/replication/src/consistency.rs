//! Consistency levels: how many replicas, and which, must answer a request.
//!
//! Names, parsing and read/write validity follow Cassandra's
//! `ConsistencyLevel`: names are upper-case with underscores (`LOCAL_QUORUM`)
//! and parse case-insensitively. `SERIAL`, `LOCAL_SERIAL` and `NODE_LOCAL`
//! are not offered: ringstore has no lightweight transactions. What a level
//! needs for a given keyspace is [`Requirement`](crate::Requirement)'s business.

use std::fmt;
use std::str::FromStr;

use crate::error::{ReplicationError, Result};

/// A Cassandra consistency level.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ConsistencyLevel {
    /// Writes only: one ack from any replica, or a hint stored for one.
    Any,
    /// One replica, anywhere.
    One,
    /// Two replicas, anywhere.
    Two,
    /// Three replicas, anywhere.
    Three,
    /// `total_rf / 2 + 1` replicas, anywhere.
    Quorum,
    /// Every replica (`total_rf`).
    All,
    /// One replica in the coordinator's data center.
    LocalOne,
    /// `rf(local DC) / 2 + 1` replicas in the coordinator's data center.
    LocalQuorum,
    /// `rf(dc) / 2 + 1` replicas in every data center that holds replicas.
    EachQuorum,
}

impl ConsistencyLevel {
    /// Every level, in Cassandra's protocol-code order.
    pub const ALL_LEVELS: [ConsistencyLevel; 9] = [
        ConsistencyLevel::Any,
        ConsistencyLevel::One,
        ConsistencyLevel::Two,
        ConsistencyLevel::Three,
        ConsistencyLevel::Quorum,
        ConsistencyLevel::All,
        ConsistencyLevel::LocalQuorum,
        ConsistencyLevel::EachQuorum,
        ConsistencyLevel::LocalOne,
    ];

    /// The level's name as Cassandra spells it: `LOCAL_QUORUM`.
    pub fn name(self) -> &'static str {
        match self {
            ConsistencyLevel::Any => "ANY",
            ConsistencyLevel::One => "ONE",
            ConsistencyLevel::Two => "TWO",
            ConsistencyLevel::Three => "THREE",
            ConsistencyLevel::Quorum => "QUORUM",
            ConsistencyLevel::All => "ALL",
            ConsistencyLevel::LocalOne => "LOCAL_ONE",
            ConsistencyLevel::LocalQuorum => "LOCAL_QUORUM",
            ConsistencyLevel::EachQuorum => "EACH_QUORUM",
        }
    }

    /// Whether the level only counts replicas in the coordinator's data center
    /// (`LOCAL_ONE`, `LOCAL_QUORUM`).
    pub fn is_dc_local(self) -> bool {
        matches!(
            self,
            ConsistencyLevel::LocalOne | ConsistencyLevel::LocalQuorum
        )
    }

    /// Whether a read may use the level: every level but `ANY`, whose promise
    /// (a hint was stored somewhere) says nothing about what replicas hold.
    pub fn is_valid_for_reads(self) -> bool {
        self != ConsistencyLevel::Any
    }

    /// `Ok` if a read may use the level, else [`ReplicationError::InvalidForReads`].
    pub fn check_valid_for_reads(self) -> Result<()> {
        if self.is_valid_for_reads() {
            Ok(())
        } else {
            Err(ReplicationError::InvalidForReads { level: self })
        }
    }
}

impl fmt::Display for ConsistencyLevel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for ConsistencyLevel {
    type Err = ReplicationError;

    /// Parses a name such as `QUORUM` or `local_quorum`, ignoring case.
    fn from_str(s: &str) -> Result<ConsistencyLevel> {
        ConsistencyLevel::ALL_LEVELS
            .into_iter()
            .find(|level| level.name().eq_ignore_ascii_case(s))
            .ok_or_else(|| ReplicationError::UnknownConsistencyLevel {
                name: s.to_string(),
            })
    }
}

/// The valid names, comma-separated, for error messages.
pub(crate) fn valid_names() -> String {
    ConsistencyLevel::ALL_LEVELS
        .map(ConsistencyLevel::name)
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_level_round_trips_through_its_name() {
        for level in ConsistencyLevel::ALL_LEVELS {
            assert_eq!(
                level.to_string().parse::<ConsistencyLevel>().unwrap(),
                level
            );
        }
    }

    #[test]
    fn names_are_upper_case_with_underscores_and_parse_in_any_case() {
        assert_eq!(ConsistencyLevel::LocalQuorum.to_string(), "LOCAL_QUORUM");
        assert_eq!(ConsistencyLevel::EachQuorum.to_string(), "EACH_QUORUM");
        assert_eq!(
            "local_quorum".parse::<ConsistencyLevel>().unwrap(),
            ConsistencyLevel::LocalQuorum
        );
        assert_eq!(
            "Local_One".parse::<ConsistencyLevel>().unwrap(),
            ConsistencyLevel::LocalOne
        );
        assert_eq!(
            "any".parse::<ConsistencyLevel>().unwrap(),
            ConsistencyLevel::Any
        );
    }

    #[test]
    fn an_unknown_name_is_an_error_listing_the_valid_names() {
        let err = "LOCALQUORUM".parse::<ConsistencyLevel>().unwrap_err();
        assert!(matches!(
            &err,
            ReplicationError::UnknownConsistencyLevel { name } if name == "LOCALQUORUM"
        ));
        let message = err.to_string();
        assert!(message.contains("\"LOCALQUORUM\""), "{message}");
        for level in ConsistencyLevel::ALL_LEVELS {
            assert!(message.contains(level.name()), "{message}");
        }
        assert!("SERIAL".parse::<ConsistencyLevel>().is_err());
        assert!("".parse::<ConsistencyLevel>().is_err());
    }

    #[test]
    fn any_is_valid_for_writes_only() {
        assert!(!ConsistencyLevel::Any.is_valid_for_reads());
        assert!(matches!(
            ConsistencyLevel::Any.check_valid_for_reads(),
            Err(ReplicationError::InvalidForReads {
                level: ConsistencyLevel::Any
            })
        ));
        for level in ConsistencyLevel::ALL_LEVELS.into_iter().skip(1) {
            assert!(level.check_valid_for_reads().is_ok(), "{level}");
        }
    }

    #[test]
    fn only_local_one_and_local_quorum_are_dc_local() {
        let local: Vec<_> = ConsistencyLevel::ALL_LEVELS
            .into_iter()
            .filter(|l| l.is_dc_local())
            .collect();
        assert_eq!(
            local,
            [ConsistencyLevel::LocalQuorum, ConsistencyLevel::LocalOne]
        );
    }
}
