//! Starting a range movement: the checks before it (one movement at a
//! time, enough nodes left for every keyspace).
//!
//! They take the node as a [`TopologyHost`]; the pure checks of a view or
//! a ring stay in the module root ([`movements_under_way`],
//! [`strategy_fits`]), which imports nothing of the node.

use ringstore_placement::{ReplicationStrategy, Ring};

use crate::error::{MovementsUnderway, Result, TopologyError};
use crate::topology::host::TopologyHost;
use crate::topology::{movements_under_way, strategy_fits};

/// Refuses to start a movement while another is under way (a join,
/// leave, removal or replacement in gossip, or a keyspace alter).
pub fn ensure_no_movement(context: &impl TopologyHost) -> Result<()> {
    let under_way = movements_under_way(&context.view()).or_else(|| alters_under_way(context));
    match under_way {
        None => Ok(()),
        Some(movements) => Err(TopologyError::AnotherMovementUnderway(movements).into()),
    }
}

/// The keyspace alters the schema shows under way, described for an error
/// or a log line; `None` if none.
pub fn alters_under_way(context: &impl TopologyHost) -> Option<MovementsUnderway> {
    let alters: Vec<(String, ReplicationStrategy)> = context
        .keyspaces()
        .into_iter()
        .filter_map(|k| Some((k.name, k.pending_strategy?)))
        .collect();
    (!alters.is_empty()).then(|| MovementsUnderway {
        ring: Vec::new(),
        alters,
    })
}

/// Refuses a change that would leave fewer nodes than a keyspace's
/// replication factor (in any data center), the pending one of an alter
/// included.
pub fn ensure_enough_replicas(context: &impl TopologyHost, after: &Ring) -> Result<()> {
    for keyspace in context.keyspaces() {
        if keyspace
            .write_strategies()
            .any(|s| !strategy_fits(after, s))
        {
            return Err(TopologyError::TooFewNodesWouldRemain {
                keyspace: keyspace.name.clone(),
                remaining: after.hosts().len(),
            }
            .into());
        }
    }
    Ok(())
}
