//! Consistency levels as the nodes name them ([`ConsistencyLevel`], from
//! `ringstore-replication`: `QUORUM`, `local_quorum` in any case) and their
//! wire form. A caller that reads a level from its user (a command line, a
//! config file) parses it with the nodes' own names and puts
//! [`level_to_pb`] of it in the request.

use ringstore_proto::v1 as pb;
use ringstore_replication::ConsistencyLevel;

/// A consistency level's wire form (never `UNSPECIFIED`).
pub fn level_to_pb(level: ConsistencyLevel) -> pb::ConsistencyLevel {
    use pb::ConsistencyLevel as P;
    match level {
        ConsistencyLevel::Any => P::Any,
        ConsistencyLevel::One => P::One,
        ConsistencyLevel::Two => P::Two,
        ConsistencyLevel::Three => P::Three,
        ConsistencyLevel::Quorum => P::Quorum,
        ConsistencyLevel::All => P::All,
        ConsistencyLevel::LocalOne => P::LocalOne,
        ConsistencyLevel::LocalQuorum => P::LocalQuorum,
        ConsistencyLevel::EachQuorum => P::EachQuorum,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_level_goes_to_the_wire_value_of_its_name() {
        for level in ConsistencyLevel::ALL_LEVELS {
            assert_eq!(
                level_to_pb(level).as_str_name(),
                format!("CONSISTENCY_LEVEL_{}", level.name())
            );
        }
    }
}
