//! Conversions between the wire types of `ringstore.v1` and the domain types,
//! with the checks that turn malformed messages into clear errors.

use std::collections::BTreeMap;

use ringstore_placement::{ReplicationStrategy, Token, TokenRange};
use ringstore_proto::v1 as pb;
use ringstore_repair::{ListedRow, RowVersion};
use ringstore_replication::{ConsistencyLevel, SpeculativeRetry};
use ringstore_storage::{Cell, KeyspaceId, Timestamp};

use crate::error::{KeyspaceRequestError, NodeError, RequestError};

/// A strategy from its wire form.
pub fn strategy_from_pb(
    replication: Option<pb::Replication>,
) -> Result<ReplicationStrategy, NodeError> {
    use KeyspaceRequestError as E;
    match replication.and_then(|r| r.strategy) {
        None => Err(E::NoReplication.into()),
        Some(pb::replication::Strategy::Simple(simple)) => {
            ReplicationStrategy::simple(simple.replication_factor).map_err(|source| {
                E::BadStrategy {
                    strategy: "SimpleStrategy",
                    source,
                }
                .into()
            })
        }
        Some(pb::replication::Strategy::NetworkTopology(nts)) => {
            if nts.replication_factors.is_empty() {
                return Err(E::NoDataCenter.into());
            }
            if let Some(dc) = nts
                .replication_factors
                .keys()
                .find(|dc| dc.trim().is_empty())
            {
                return Err(E::BadDataCenterName(dc.clone()).into());
            }
            ReplicationStrategy::network_topology(nts.replication_factors).map_err(|source| {
                E::BadStrategy {
                    strategy: "NetworkTopologyStrategy",
                    source,
                }
                .into()
            })
        }
    }
}

/// A strategy's wire form.
pub fn strategy_to_pb(strategy: &ReplicationStrategy) -> pb::Replication {
    let strategy = match strategy {
        ReplicationStrategy::Simple { rf } => {
            pb::replication::Strategy::Simple(pb::SimpleStrategy {
                replication_factor: rf.get(),
            })
        }
        ReplicationStrategy::NetworkTopology { rf_per_dc } => {
            pb::replication::Strategy::NetworkTopology(pb::NetworkTopologyStrategy {
                replication_factors: rf_per_dc
                    .iter()
                    .map(|(dc, &rf)| (dc.to_string(), rf))
                    .collect::<BTreeMap<_, _>>()
                    .into_iter()
                    .collect(),
            })
        }
    };
    pb::Replication {
        strategy: Some(strategy),
    }
}

/// A `speculative_retry` setting from its wire form: absent (a schema written
/// before the setting existed, or a request without it) is the default, `p99`.
pub fn speculative_retry_from_pb(text: Option<&str>) -> Result<SpeculativeRetry, NodeError> {
    Ok(text.map(str::parse).transpose()?.unwrap_or_default())
}

/// A keyspace id from its text form.
pub fn keyspace_id_from_pb(id: &str) -> Result<KeyspaceId, NodeError> {
    id.parse::<uuid::Uuid>().map(KeyspaceId).map_err(|source| {
        RequestError::BadKeyspaceId {
            text: id.to_string(),
            source,
        }
        .into()
    })
}

/// A cell's wire form.
pub fn cell_to_pb(cell: &Cell) -> pb::Cell {
    pb::Cell {
        timestamp_micros: cell.timestamp.0,
        expires_at_micros: cell.expires_at.map(|t| t.0),
        value: cell.value.clone(),
    }
}

/// A cell from its wire form.
pub fn cell_from_pb(cell: pb::Cell) -> Cell {
    Cell {
        timestamp: Timestamp(cell.timestamp_micros),
        expires_at: cell.expires_at_micros.map(Timestamp),
        value: cell.value,
    }
}

/// A replica's row version, for a repair's `ListRows`.
pub fn row_version_to_pb(token: Token, key: Vec<u8>, cell: &Cell) -> pb::RowVersionMessage {
    let version = RowVersion::of(cell);
    let bytes = (key.len() + cell.value.as_ref().map_or(0, Vec::len)) as u64;
    pb::RowVersionMessage {
        key,
        token: token.0,
        timestamp_micros: version.timestamp.0,
        tombstone: version.tombstone,
        expires_at_micros: version.expires_at.map(|t| t.0),
        value_hash: version.value_hash,
        bytes,
    }
}

/// A listed row from its wire form.
pub fn listed_row_from_pb(row: pb::RowVersionMessage) -> ListedRow {
    ListedRow {
        token: Token(row.token),
        version: RowVersion {
            timestamp: Timestamp(row.timestamp_micros),
            tombstone: row.tombstone,
            expires_at: row.expires_at_micros.map(Timestamp),
            value_hash: row.value_hash,
        },
        key: row.key,
        bytes: row.bytes,
    }
}

/// A wire consistency level; unspecified means `ONE`.
pub fn level_from_pb(level: i32) -> Result<ConsistencyLevel, NodeError> {
    use pb::ConsistencyLevel as P;
    let level = P::try_from(level).map_err(|_| RequestError::UnknownConsistencyLevel(level))?;
    Ok(match level {
        P::Unspecified | P::One => ConsistencyLevel::One,
        P::Any => ConsistencyLevel::Any,
        P::Two => ConsistencyLevel::Two,
        P::Three => ConsistencyLevel::Three,
        P::Quorum => ConsistencyLevel::Quorum,
        P::All => ConsistencyLevel::All,
        P::LocalOne => ConsistencyLevel::LocalOne,
        P::LocalQuorum => ConsistencyLevel::LocalQuorum,
        P::EachQuorum => ConsistencyLevel::EachQuorum,
    })
}

/// A range as the internode messages carry it.
pub fn range_to_pb(range: TokenRange) -> pb::TokenRangeMessage {
    pb::TokenRangeMessage {
        start: range.start.0,
        end: range.end.0,
    }
}

/// Ranges from an internode message.
pub fn ranges_from_pb(ranges: Vec<pb::TokenRangeMessage>) -> Result<Vec<TokenRange>, NodeError> {
    ranges
        .into_iter()
        .map(|range| range_from_pb(Some(range)))
        .collect()
}

/// A range from an internode message.
pub fn range_from_pb(range: Option<pb::TokenRangeMessage>) -> Result<TokenRange, NodeError> {
    let range = range.ok_or(RequestError::NoTokenRange)?;
    Ok(TokenRange::new(Token(range.start), Token(range.end)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strategies_round_trip_and_bad_ones_are_refused() {
        for strategy in [
            ReplicationStrategy::simple(3).unwrap(),
            ReplicationStrategy::network_topology([("dc1", 3), ("dc2", 2)]).unwrap(),
        ] {
            assert_eq!(
                strategy_from_pb(Some(strategy_to_pb(&strategy))).unwrap(),
                strategy
            );
        }
        assert!(strategy_from_pb(None).is_err());
        let zero = pb::Replication {
            strategy: Some(pb::replication::Strategy::Simple(pb::SimpleStrategy {
                replication_factor: 0,
            })),
        };
        assert!(strategy_from_pb(Some(zero)).is_err());
        let empty = pb::Replication {
            strategy: Some(pb::replication::Strategy::NetworkTopology(
                pb::NetworkTopologyStrategy::default(),
            )),
        };
        assert!(strategy_from_pb(Some(empty)).is_err());
    }

    #[test]
    fn cells_round_trip() {
        let cell = Cell::expiring(Timestamp(5), b"v".to_vec(), 3, Timestamp(7));
        assert_eq!(cell_from_pb(cell_to_pb(&cell)), cell);
        let tombstone = Cell::tombstone(Timestamp(6));
        assert_eq!(cell_from_pb(cell_to_pb(&tombstone)), tombstone);
    }
}
