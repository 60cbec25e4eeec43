//! Replication strategies: which hosts, walking clockwise from a key, hold it.

use std::collections::BTreeMap;
use std::fmt;
use std::num::NonZeroU32;

use crate::error::{PlacementError, Result};
use crate::host::{Datacenter, Location};
use crate::ring::HostIndex;

/// How a keyspace places its replicas, with Cassandra's semantics.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum ReplicationStrategy {
    /// The owner of the key's range, then the next distinct hosts clockwise,
    /// `rf` in all (fewer when the ring has fewer hosts). Ignores DCs and racks.
    Simple {
        /// Replication factor.
        rf: NonZeroU32,
    },
    /// Cassandra 4.x `NetworkTopologyStrategy`: one clockwise walk serves every
    /// DC; within a DC, hosts on racks not yet used are preferred, and hosts of
    /// used racks are taken only when the DC has fewer racks than its rf. A DC
    /// missing from the map (or with rf 0) holds no replica.
    NetworkTopology {
        /// Replication factor per data center.
        rf_per_dc: BTreeMap<Datacenter, u32>,
    },
}

impl ReplicationStrategy {
    /// `SimpleStrategy` with replication factor `rf` (at least 1).
    pub fn simple(rf: u32) -> Result<ReplicationStrategy> {
        let rf = NonZeroU32::new(rf)
            .ok_or(PlacementError::ZeroReplicationFactor { dc: String::new() })?;
        Ok(ReplicationStrategy::Simple { rf })
    }

    /// `NetworkTopologyStrategy` with the given factor per DC. At least one DC
    /// must have a factor of 1 or more.
    pub fn network_topology<D: Into<Datacenter>>(
        rf_per_dc: impl IntoIterator<Item = (D, u32)>,
    ) -> Result<ReplicationStrategy> {
        let rf_per_dc: BTreeMap<Datacenter, u32> = rf_per_dc
            .into_iter()
            .map(|(dc, rf)| (dc.into(), rf))
            .collect();
        if rf_per_dc.values().all(|&rf| rf == 0) {
            let dc = rf_per_dc.keys().next().map(|d| d.to_string());
            return Err(PlacementError::ZeroReplicationFactor {
                dc: dc.unwrap_or_default(),
            });
        }
        Ok(ReplicationStrategy::NetworkTopology { rf_per_dc })
    }

    /// The total replication factor: the sum over DCs for NTS, saturating at
    /// `u32::MAX` (factors come from clients; an overflowing sum must not
    /// panic or wrap to a small one).
    pub fn total_rf(&self) -> u32 {
        match self {
            ReplicationStrategy::Simple { rf } => rf.get(),
            ReplicationStrategy::NetworkTopology { rf_per_dc } => rf_per_dc
                .values()
                .fold(0u32, |total, &rf| total.saturating_add(rf)),
        }
    }

    /// The replication factor in `dc`: for SimpleStrategy, the whole factor
    /// (Cassandra's `LOCAL_*` levels treat it so).
    pub fn rf_in(&self, dc: &Datacenter) -> u32 {
        match self {
            ReplicationStrategy::Simple { rf } => rf.get(),
            ReplicationStrategy::NetworkTopology { rf_per_dc } => {
                rf_per_dc.get(dc).copied().unwrap_or(0)
            }
        }
    }
}

impl fmt::Display for ReplicationStrategy {
    /// `SimpleStrategy:3` or `NetworkTopologyStrategy:dc1=3,dc2=2`, the form the CLI accepts.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReplicationStrategy::Simple { rf } => write!(f, "SimpleStrategy:{rf}"),
            ReplicationStrategy::NetworkTopology { rf_per_dc } => {
                f.write_str("NetworkTopologyStrategy:")?;
                for (i, (dc, rf)) in rf_per_dc.iter().enumerate() {
                    let sep = if i == 0 { "" } else { "," };
                    write!(f, "{sep}{dc}={rf}")?;
                }
                Ok(())
            }
        }
    }
}

/// A strategy compiled against one ring's hosts: DCs and racks turned into
/// small integers so that a walk compares numbers, not names.
#[derive(Clone)]
pub(crate) enum Walker {
    Simple {
        /// rf capped at the number of hosts.
        replicas: usize,
    },
    NetworkTopology {
        /// Per host: its DC's index into `dcs`, or `None` if the DC holds no replica.
        host_dc: Vec<Option<usize>>,
        /// Per host: a ring-wide number for its (dc, rack).
        host_rack: Vec<u32>,
        dcs: Vec<DcPlan>,
    },
}

/// The per-DC numbers a NetworkTopologyStrategy walk starts from.
#[derive(Clone, Copy)]
pub(crate) struct DcPlan {
    /// `min(rf, hosts in the DC)`: how many replicas the DC gets.
    replicas: usize,
    /// `rf - racks in the DC` (Cassandra uses rf, not the capped count).
    acceptable_rack_repeats: i64,
}

impl Walker {
    /// Compiles `strategy` for a ring whose host `i` sits at `locations[i]`.
    pub(crate) fn new<'a>(
        strategy: &ReplicationStrategy,
        locations: impl ExactSizeIterator<Item = &'a Location> + Clone,
    ) -> Walker {
        match strategy {
            ReplicationStrategy::Simple { rf } => Walker::Simple {
                replicas: (rf.get() as usize).min(locations.len()),
            },
            ReplicationStrategy::NetworkTopology { rf_per_dc } => {
                let mut racks: BTreeMap<&Location, u32> = BTreeMap::new();
                let mut hosts_per_dc: BTreeMap<&Datacenter, usize> = BTreeMap::new();
                for location in locations.clone() {
                    let next = racks.len() as u32;
                    racks.entry(location).or_insert(next);
                    *hosts_per_dc.entry(&location.dc).or_default() += 1;
                }
                let served: Vec<(&Datacenter, u32)> = rf_per_dc
                    .iter()
                    .filter(|&(dc, &rf)| rf > 0 && hosts_per_dc.contains_key(dc))
                    .map(|(dc, &rf)| (dc, rf))
                    .collect();
                let dcs = served
                    .iter()
                    .map(|&(dc, rf)| {
                        let rack_count = racks.keys().filter(|l| &l.dc == dc).count();
                        DcPlan {
                            replicas: (rf as usize).min(hosts_per_dc[dc]),
                            acceptable_rack_repeats: rf as i64 - rack_count as i64,
                        }
                    })
                    .collect();
                Walker::NetworkTopology {
                    host_dc: locations
                        .clone()
                        .map(|l| served.iter().position(|&(dc, _)| *dc == l.dc))
                        .collect(),
                    host_rack: locations.map(|l| racks[l]).collect(),
                    dcs,
                }
            }
        }
    }

    /// For each of `hosts` hosts, the group among which its replicas are shared:
    /// a rack when its DC has exactly rf racks (each rack then holds one copy
    /// of every range), else its DC. Hosts of DCs without replicas share group 0.
    /// Every group's total effective ownership is fixed by the strategy, so a
    /// balanced ring gives each host its group's ownership per token.
    pub(crate) fn balance_groups(&self, hosts: usize) -> Vec<u32> {
        match self {
            Walker::Simple { .. } => vec![1; hosts],
            Walker::NetworkTopology {
                host_dc,
                host_rack,
                dcs,
            } => (0..hosts)
                .map(|h| match host_dc[h] {
                    None => 0,
                    Some(dc) if dcs[dc].acceptable_rack_repeats == 0 => 1 + host_rack[h],
                    Some(dc) => 1 + host_rack.len() as u32 + dc as u32,
                })
                .collect(),
        }
    }

    /// Walks clockwise from `start` over a ring of `len` positions whose owners
    /// `owner(position)` gives, pushing the *positions* at which replicas were
    /// accepted onto `out`, in acceptance order (primary first); the replica
    /// hosts are their owners. Returns how many positions the walk looked at,
    /// so a caller knows which ranges' placement depends on which positions.
    pub(crate) fn walk(
        &self,
        len: usize,
        start: usize,
        owner: impl Fn(usize) -> HostIndex,
        out: &mut Vec<usize>,
    ) -> usize {
        let first = out.len();
        let taken = |out: &[usize], host| out[first..].iter().any(|&q| owner(q) == host);
        match self {
            Walker::Simple { replicas } => {
                for step in 0..len {
                    if out.len() - first == *replicas {
                        return step;
                    }
                    let position = (start + step) % len;
                    if !taken(out, owner(position)) {
                        out.push(position);
                    }
                }
                len
            }
            Walker::NetworkTopology {
                host_dc,
                host_rack,
                dcs,
            } => {
                let mut left: Vec<DcPlan> = dcs.clone();
                let mut unfinished = left.iter().filter(|d| d.replicas > 0).count();
                let mut seen_racks: Vec<u32> = Vec::with_capacity(8);
                for step in 0..len {
                    if unfinished == 0 {
                        return step;
                    }
                    let position = (start + step) % len;
                    let host = owner(position);
                    let Some(dc) = host_dc[host as usize] else {
                        continue;
                    };
                    let plan = &mut left[dc];
                    if plan.replicas == 0 || taken(out, host) {
                        continue;
                    }
                    let rack = host_rack[host as usize];
                    if !seen_racks.contains(&rack) {
                        seen_racks.push(rack);
                    } else if plan.acceptable_rack_repeats > 0 {
                        plan.acceptable_rack_repeats -= 1;
                    } else {
                        continue;
                    }
                    out.push(position);
                    plan.replicas -= 1;
                    if plan.replicas == 0 {
                        unfinished -= 1;
                    }
                }
                len
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn walk(
        strategy: &ReplicationStrategy,
        hosts: &[Location],
        owners: &[u32],
        start: usize,
    ) -> Vec<u32> {
        let walker = Walker::new(strategy, hosts.iter());
        let mut out = Vec::new();
        walker.walk(owners.len(), start, |p| owners[p], &mut out);
        out.into_iter().map(|p| owners[p]).collect()
    }

    #[test]
    fn simple_strategy_takes_distinct_hosts_clockwise() {
        let hosts = vec![Location::new("dc1", "r1"); 3];
        let s = ReplicationStrategy::simple(2).unwrap();
        assert_eq!(walk(&s, &hosts, &[0, 0, 1, 2], 0), vec![0, 1]);
        assert_eq!(walk(&s, &hosts, &[0, 0, 1, 2], 3), vec![2, 0]);
        let too_many = ReplicationStrategy::simple(5).unwrap();
        assert_eq!(walk(&too_many, &hosts, &[0, 1, 2], 1), vec![1, 2, 0]);
    }

    #[test]
    fn nts_prefers_unseen_racks_and_repeats_only_when_racks_are_short() {
        let hosts = vec![
            Location::new("dc1", "a"),
            Location::new("dc1", "a"),
            Location::new("dc1", "b"),
        ];
        // rf 2 with 2 racks: no repeats allowed, so host 1 (rack a again) is skipped.
        let rf2 = ReplicationStrategy::network_topology([("dc1", 2)]).unwrap();
        assert_eq!(walk(&rf2, &hosts, &[0, 1, 2], 0), vec![0, 2]);
        // rf 3 with 2 racks: one repeat allowed.
        let rf3 = ReplicationStrategy::network_topology([("dc1", 3)]).unwrap();
        assert_eq!(walk(&rf3, &hosts, &[0, 1, 2], 0), vec![0, 1, 2]);
    }

    #[test]
    fn nts_interleaves_dcs_in_walk_order_and_ignores_dcs_without_rf() {
        let hosts = vec![
            Location::new("dc1", "a"),
            Location::new("dc2", "a"),
            Location::new("dc1", "b"),
            Location::new("dc3", "a"),
            Location::new("dc2", "b"),
        ];
        let s = ReplicationStrategy::network_topology([("dc1", 2), ("dc2", 1)]).unwrap();
        assert_eq!(walk(&s, &hosts, &[3, 1, 0, 4, 2], 0), vec![1, 0, 2]);
    }

    #[test]
    fn strategy_display_is_the_cli_form() {
        let s = ReplicationStrategy::network_topology([("dc2", 2), ("dc1", 3)]).unwrap();
        assert_eq!(s.to_string(), "NetworkTopologyStrategy:dc1=3,dc2=2");
        assert_eq!(
            ReplicationStrategy::simple(3).unwrap().to_string(),
            "SimpleStrategy:3"
        );
        assert!(ReplicationStrategy::simple(0).is_err());
        assert!(ReplicationStrategy::network_topology([("dc1", 0)]).is_err());
    }
}
