//! What a consistency level needs from a keyspace's replicas.
//!
//! A [`Requirement`] is a set of quotas: how many answers are needed, and from
//! where. It is computed from the level, the keyspace's strategy and the
//! coordinator's data center, with Cassandra's `blockFor` arithmetic:
//!
//! | level          | SimpleStrategy        | NetworkTopologyStrategy                     |
//! |----------------|-----------------------|---------------------------------------------|
//! | `ANY`, `ONE`   | 1 anywhere            | 1 anywhere                                  |
//! | `TWO`, `THREE` | 2, 3 anywhere         | 2, 3 anywhere                               |
//! | `QUORUM`       | rf/2+1 anywhere       | total_rf/2+1 anywhere                       |
//! | `ALL`          | rf anywhere           | total_rf anywhere                           |
//! | `LOCAL_ONE`    | 1 anywhere            | 1 in the local DC                           |
//! | `LOCAL_QUORUM` | rf/2+1 anywhere       | rf(local)/2+1 in the local DC               |
//! | `EACH_QUORUM`  | rf/2+1 anywhere       | rf(dc)/2+1 in every DC with rf > 0          |
//!
//! # Invariants
//! - Every quota is at least 1, and a replica counts toward at most one quota
//!   (the quotas' scopes are disjoint), so counting is a per-quota tally.
//! - A level never needs fewer answers than the same level with fewer pending
//!   replicas: [`Requirement::add_pending`] only raises quotas.
//!
//! # Caveats
//! - `LOCAL_*` under SimpleStrategy counts every replica as local: the strategy
//!   ignores data centers, so ringstore does too. (Cassandra computes the same
//!   numbers but still counts only replicas in the coordinator's DC, which
//!   differs only in a multi-DC cluster using SimpleStrategy.)
//! - A `LOCAL_*` level at a coordinator whose DC holds no replica (NTS rf 0)
//!   needs one local answer that can never come: such requests are
//!   unavailable, as in Cassandra.

use std::collections::BTreeMap;

use ringstore_placement::{Datacenter, ReplicationStrategy};

use crate::consistency::ConsistencyLevel;

/// How many answers a request needs, and from where.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Requirement {
    /// `count` answers from replicas in any data center.
    Anywhere {
        /// Answers needed; at least 1.
        count: u32,
    },
    /// `count` answers from replicas in `dc` (the coordinator's); other
    /// replicas' answers do not count.
    InDc {
        /// The data center whose replicas count.
        dc: Datacenter,
        /// Answers needed from it; at least 1.
        count: u32,
    },
    /// In every listed data center, its count of answers from its own replicas.
    EachDc {
        /// Answers needed per data center; each at least 1.
        counts: BTreeMap<Datacenter, u32>,
    },
}

/// A majority of `rf` replicas.
fn quorum(rf: u32) -> u32 {
    rf / 2 + 1
}

impl Requirement {
    /// What `level` needs for a keyspace placed by `strategy`, coordinated
    /// from `local_dc`, before counting pending replicas.
    pub fn for_level(
        level: ConsistencyLevel,
        strategy: &ReplicationStrategy,
        local_dc: &Datacenter,
    ) -> Requirement {
        let simple = matches!(strategy, ReplicationStrategy::Simple { .. });
        let anywhere = |count| Requirement::Anywhere { count };
        let local = |count| {
            if simple {
                anywhere(count)
            } else {
                Requirement::InDc {
                    dc: local_dc.clone(),
                    count,
                }
            }
        };
        match level {
            ConsistencyLevel::Any | ConsistencyLevel::One => anywhere(1),
            ConsistencyLevel::Two => anywhere(2),
            ConsistencyLevel::Three => anywhere(3),
            ConsistencyLevel::Quorum => anywhere(quorum(strategy.total_rf())),
            ConsistencyLevel::All => anywhere(strategy.total_rf()),
            ConsistencyLevel::LocalOne => local(1),
            ConsistencyLevel::LocalQuorum => local(quorum(strategy.rf_in(local_dc))),
            ConsistencyLevel::EachQuorum => match strategy {
                ReplicationStrategy::Simple { .. } => anywhere(quorum(strategy.total_rf())),
                ReplicationStrategy::NetworkTopology { rf_per_dc } => Requirement::EachDc {
                    counts: rf_per_dc
                        .iter()
                        .filter(|&(_, &rf)| rf > 0)
                        .map(|(dc, &rf)| (dc.clone(), quorum(rf)))
                        .collect(),
                },
            },
        }
    }

    /// Answers needed in all.
    pub fn total(&self) -> u32 {
        match self {
            Requirement::Anywhere { count } | Requirement::InDc { count, .. } => *count,
            Requirement::EachDc { counts } => counts.values().sum(),
        }
    }

    /// Whether an answer from a replica in `dc` counts toward the requirement.
    pub fn counts_toward(&self, dc: &Datacenter) -> bool {
        self.quota_of(dc).is_some()
    }

    /// Raises the requirement by one for a pending replica in `dc`, if a
    /// replica there counts (Cassandra's `blockForWrite`: every pending replica
    /// for most levels, local ones only for `LOCAL_*`, per DC for
    /// `EACH_QUORUM`). A write must reach the range's future owner too, or a
    /// finished range movement could leave it short of the level.
    pub fn add_pending(&mut self, dc: &Datacenter) {
        match self {
            Requirement::Anywhere { count } => *count += 1,
            Requirement::InDc { dc: local, count } => {
                if local == dc {
                    *count += 1;
                }
            }
            Requirement::EachDc { counts } => {
                if let Some(count) = counts.get_mut(dc) {
                    *count += 1;
                }
            }
        }
    }

    /// The index of the quota a replica in `dc` counts toward.
    pub(crate) fn quota_of(&self, dc: &Datacenter) -> Option<usize> {
        match self {
            Requirement::Anywhere { .. } => Some(0),
            Requirement::InDc { dc: local, .. } => (local == dc).then_some(0),
            Requirement::EachDc { counts } => counts.keys().position(|d| d == dc),
        }
    }

    /// Each quota's scope (`None`: anywhere) and count, by quota index.
    pub(crate) fn quotas(&self) -> Vec<(Option<&Datacenter>, u32)> {
        match self {
            Requirement::Anywhere { count } => vec![(None, *count)],
            Requirement::InDc { dc, count } => vec![(Some(dc), *count)],
            Requirement::EachDc { counts } => counts.iter().map(|(dc, &n)| (Some(dc), n)).collect(),
        }
    }

    /// How many of the replicas in `dcs` count toward each quota, by index.
    pub(crate) fn tally<'a>(&self, dcs: impl IntoIterator<Item = &'a Datacenter>) -> Vec<u32> {
        let mut tally = vec![0; self.quotas().len()];
        for dc in dcs {
            if let Some(quota) = self.quota_of(dc) {
                tally[quota] += 1;
            }
        }
        tally
    }

    /// The first quota that answers from replicas in `dcs` leave short:
    /// its scope, its count and how many of `dcs` count toward it.
    pub(crate) fn shortfall<'a>(
        &self,
        dcs: impl IntoIterator<Item = &'a Datacenter>,
    ) -> Option<(Option<Datacenter>, u32, u32)> {
        let tally = self.tally(dcs);
        self.quotas()
            .into_iter()
            .zip(tally)
            .find(|&((_, need), have)| have < need)
            .map(|((dc, need), have)| (dc.cloned(), need, have))
    }

    /// Whether answers from replicas in `dcs` meet every quota.
    pub(crate) fn is_met_by<'a>(&self, dcs: impl IntoIterator<Item = &'a Datacenter>) -> bool {
        self.shortfall(dcs).is_none()
    }

    /// How much of the requirement answers from replicas in `dcs` cover: the
    /// sum over quotas of `min(answers counting toward it, its count)`. Less
    /// than [`total`](Requirement::total) exactly when the requirement is unmet.
    pub(crate) fn credited<'a>(&self, dcs: impl IntoIterator<Item = &'a Datacenter>) -> u32 {
        let tally = self.tally(dcs);
        self.quotas()
            .into_iter()
            .zip(tally)
            .map(|((_, need), have)| have.min(need))
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testkit::{SIMPLE_RF3_COUNTS, dc, nts_3_2, simple_3};
    use ConsistencyLevel::*;

    fn anywhere(count: u32) -> Requirement {
        Requirement::Anywhere { count }
    }

    #[test]
    fn simple_strategy_rf3_counts_every_replica_for_every_level() {
        let expected = SIMPLE_RF3_COUNTS;
        for (level, count) in expected {
            assert_eq!(
                Requirement::for_level(level, &simple_3(), &dc("dc1")),
                anywhere(count),
                "{level}"
            );
        }
    }

    #[test]
    fn local_levels_with_simple_strategy_treat_every_dc_as_local() {
        let requirement = Requirement::for_level(LocalQuorum, &simple_3(), &dc("elsewhere"));
        assert_eq!(requirement, anywhere(2));
        assert!(requirement.counts_toward(&dc("dc1")));
        assert!(requirement.counts_toward(&dc("dc2")));
    }

    #[test]
    fn network_topology_3_2_from_dc1_needs_cassandras_counts() {
        let local = dc("dc1");
        let strategy = nts_3_2();
        for (level, count) in [
            (Any, 1),
            (One, 1),
            (Two, 2),
            (Three, 3),
            (Quorum, 3),
            (All, 5),
        ] {
            assert_eq!(
                Requirement::for_level(level, &strategy, &local),
                anywhere(count),
                "{level}"
            );
        }
        assert_eq!(
            Requirement::for_level(LocalOne, &strategy, &local),
            Requirement::InDc {
                dc: local.clone(),
                count: 1
            }
        );
        assert_eq!(
            Requirement::for_level(LocalQuorum, &strategy, &local),
            Requirement::InDc {
                dc: local.clone(),
                count: 2
            }
        );
        let each = Requirement::for_level(EachQuorum, &strategy, &local);
        assert_eq!(
            each,
            Requirement::EachDc {
                counts: [(dc("dc1"), 2), (dc("dc2"), 2)].into_iter().collect()
            }
        );
        assert_eq!(each.total(), 4);
    }

    #[test]
    fn local_quorum_from_dc2_is_a_quorum_of_dc2() {
        let requirement = Requirement::for_level(LocalQuorum, &nts_3_2(), &dc("dc2"));
        assert_eq!(
            requirement,
            Requirement::InDc {
                dc: dc("dc2"),
                count: 2
            }
        );
        assert!(!requirement.counts_toward(&dc("dc1")));
    }

    #[test]
    fn local_levels_from_a_dc_without_replicas_need_a_local_answer_anyway() {
        let requirement = Requirement::for_level(LocalQuorum, &nts_3_2(), &dc("dc3"));
        assert_eq!(
            requirement,
            Requirement::InDc {
                dc: dc("dc3"),
                count: 1
            }
        );
    }

    #[test]
    fn each_quorum_skips_data_centers_with_rf_zero() {
        let strategy = ReplicationStrategy::network_topology([("dc1", 3), ("dc2", 0)]).unwrap();
        let each = Requirement::for_level(EachQuorum, &strategy, &dc("dc1"));
        assert_eq!(
            each,
            Requirement::EachDc {
                counts: [(dc("dc1"), 2)].into_iter().collect()
            }
        );
        assert!(!each.counts_toward(&dc("dc2")));
    }

    #[test]
    fn pending_replicas_raise_only_the_quota_they_count_toward() {
        let mut quorum = anywhere(3);
        quorum.add_pending(&dc("dc2"));
        assert_eq!(quorum, anywhere(4));

        let mut local = Requirement::InDc {
            dc: dc("dc1"),
            count: 2,
        };
        local.add_pending(&dc("dc2"));
        assert_eq!(
            local,
            Requirement::InDc {
                dc: dc("dc1"),
                count: 2
            }
        );
        local.add_pending(&dc("dc1"));
        assert_eq!(
            local,
            Requirement::InDc {
                dc: dc("dc1"),
                count: 3
            }
        );

        let mut each = Requirement::for_level(EachQuorum, &nts_3_2(), &dc("dc1"));
        each.add_pending(&dc("dc2"));
        each.add_pending(&dc("dc9"));
        assert_eq!(
            each,
            Requirement::EachDc {
                counts: [(dc("dc1"), 2), (dc("dc2"), 3)].into_iter().collect()
            }
        );
    }

    #[test]
    fn credit_is_capped_per_quota_so_surplus_in_one_dc_cannot_hide_a_shortfall() {
        let each = Requirement::for_level(EachQuorum, &nts_3_2(), &dc("dc1"));
        let answers = [dc("dc1"), dc("dc1"), dc("dc1"), dc("dc2")];
        assert_eq!(each.credited(&answers), 3);
        assert!(!each.is_met_by(&answers));
        assert_eq!(each.shortfall(&answers), Some((Some(dc("dc2")), 2, 1)));
        let more = [dc("dc1"), dc("dc1"), dc("dc2"), dc("dc2")];
        assert!(each.is_met_by(&more));
        assert_eq!(each.credited(&more), 4);
    }
}
