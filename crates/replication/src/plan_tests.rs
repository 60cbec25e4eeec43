//! Tests of [`plan_write`] and [`plan_read`]: every level on the two reference
//! keyspaces, then properties checked against an independent oracle.

use proptest::prelude::*;

use super::*;
use crate::ReplicationError;
use crate::testkit::{
    SIMPLE_RF3_COUNTS, Scenario, dc, host, nts_3_2, nts_replicas, replica, scenarios, simple_3,
    simple_replicas,
};
use ConsistencyLevel::*;

fn hosts(ns: &[u128]) -> Vec<HostId> {
    ns.iter().map(|&n| host(n)).collect()
}

fn target_hosts(plan: &WritePlan) -> Vec<HostId> {
    plan.targets().iter().map(|t| t.host).collect()
}

fn unavailable(
    level: ConsistencyLevel,
    dc_name: Option<&str>,
    required: u32,
    alive: u32,
) -> Unavailable {
    Unavailable {
        level,
        dc: dc_name.map(dc),
        required,
        alive,
    }
}

// ---- writes, SimpleStrategy rf 3 ----

#[test]
fn writes_on_simple_rf3_target_every_replica_and_wait_for_the_levels_count() {
    let natural = simple_replicas(&[]);
    for (level, required) in SIMPLE_RF3_COUNTS {
        let plan = plan_write(level, &simple_3(), &dc("dc1"), &natural, &[]).unwrap();
        assert_eq!(plan.required(), required, "{level}");
        assert_eq!(target_hosts(&plan), hosts(&[1, 2, 3]), "{level}");
        assert!(plan.down().is_empty());
        assert_eq!(plan.level(), level);
    }
}

#[test]
fn writes_on_simple_rf3_with_one_replica_down_refuse_only_three_and_all() {
    let natural = simple_replicas(&[2]);
    for level in [Any, One, Two, Quorum, LocalOne, LocalQuorum, EachQuorum] {
        let plan = plan_write(level, &simple_3(), &dc("dc1"), &natural, &[]).unwrap();
        assert_eq!(target_hosts(&plan), hosts(&[1, 3]), "{level}");
        assert_eq!(plan.down(), hosts(&[2]), "{level}");
    }
    assert_eq!(
        plan_write(Three, &simple_3(), &dc("dc1"), &natural, &[]).unwrap_err(),
        unavailable(Three, None, 3, 2)
    );
    assert_eq!(
        plan_write(All, &simple_3(), &dc("dc1"), &natural, &[]).unwrap_err(),
        unavailable(All, None, 3, 2)
    );
}

#[test]
fn any_accepts_a_write_with_every_replica_down_because_a_hint_will_count() {
    let natural = simple_replicas(&[1, 2, 3]);
    let plan = plan_write(Any, &simple_3(), &dc("dc1"), &natural, &[]).unwrap();
    assert!(plan.targets().is_empty());
    assert_eq!(plan.down(), hosts(&[1, 2, 3]));
    assert_eq!(plan.required(), 1);
    assert_eq!(
        plan_write(One, &simple_3(), &dc("dc1"), &natural, &[]).unwrap_err(),
        unavailable(One, None, 1, 0)
    );
}

#[test]
fn local_levels_with_simple_strategy_count_replicas_in_every_dc() {
    let natural = vec![
        replica(1, "dc1", false),
        replica(2, "dc2", true),
        replica(3, "dc2", true),
    ];
    let plan = plan_write(LocalQuorum, &simple_3(), &dc("dc1"), &natural, &[]).unwrap();
    assert_eq!(plan.required(), 2);
    assert!(
        plan.requirement()
            .is_met_by(plan.targets().iter().map(|t| &t.dc))
    );
    plan_write(LocalOne, &simple_3(), &dc("dc1"), &natural, &[]).unwrap();
}

#[test]
fn a_pending_replica_adds_one_ack_to_a_quorum_write() {
    let pending = [replica(9, "dc1", true)];
    let plan = plan_write(
        Quorum,
        &simple_3(),
        &dc("dc1"),
        &simple_replicas(&[]),
        &pending,
    )
    .unwrap();
    assert_eq!(plan.required(), 3);
    assert_eq!(target_hosts(&plan), hosts(&[1, 2, 3, 9]));
    assert!(plan.targets()[3].pending);
    assert!(!plan.targets()[0].pending);

    let one_down = simple_replicas(&[3]);
    assert_eq!(
        plan_write(Quorum, &simple_3(), &dc("dc1"), &one_down, &pending)
            .unwrap()
            .required(),
        3
    );
    let two_down = simple_replicas(&[2, 3]);
    assert_eq!(
        plan_write(Quorum, &simple_3(), &dc("dc1"), &two_down, &pending).unwrap_err(),
        unavailable(Quorum, None, 3, 2)
    );
}

#[test]
fn a_down_pending_replica_still_raises_the_requirement_and_is_hinted() {
    let pending = [replica(9, "dc1", false)];
    let natural = simple_replicas(&[]);
    let plan = plan_write(All, &simple_3(), &dc("dc1"), &natural, &pending);
    assert_eq!(plan.unwrap_err(), unavailable(All, None, 4, 3));
    let plan = plan_write(Quorum, &simple_3(), &dc("dc1"), &natural, &pending).unwrap();
    assert_eq!(plan.required(), 3);
    assert_eq!(plan.down(), hosts(&[9]));
}

#[test]
fn any_ignores_pending_replicas() {
    let pending = [replica(9, "dc1", true)];
    let plan = plan_write(
        Any,
        &simple_3(),
        &dc("dc1"),
        &simple_replicas(&[]),
        &pending,
    )
    .unwrap();
    assert_eq!(plan.required(), 1);
    assert_eq!(plan.targets().len(), 4);
}

#[test]
fn a_host_listed_twice_is_planned_once() {
    let natural = simple_replicas(&[]);
    let pending = [replica(2, "dc1", true)];
    let plan = plan_write(Quorum, &simple_3(), &dc("dc1"), &natural, &pending).unwrap();
    assert_eq!(plan.required(), 2);
    assert_eq!(target_hosts(&plan), hosts(&[1, 2, 3]));
}

// ---- writes, NTS {dc1: 3, dc2: 2} from dc1 ----

#[test]
fn writes_on_nts_3_2_target_every_replica_and_wait_for_the_levels_count() {
    let natural = nts_replicas(&[]);
    for (level, required) in [
        (Any, 1),
        (One, 1),
        (Two, 2),
        (Three, 3),
        (Quorum, 3),
        (All, 5),
        (LocalOne, 1),
        (LocalQuorum, 2),
        (EachQuorum, 4),
    ] {
        let plan = plan_write(level, &nts_3_2(), &dc("dc1"), &natural, &[]).unwrap();
        assert_eq!(plan.required(), required, "{level}");
        assert_eq!(target_hosts(&plan), hosts(&[4, 1, 2, 5, 3]), "{level}");
    }
}

#[test]
fn local_quorum_is_unavailable_when_the_local_dc_is_short_even_if_others_are_up() {
    let natural = nts_replicas(&[1, 2]);
    assert_eq!(
        plan_write(LocalQuorum, &nts_3_2(), &dc("dc1"), &natural, &[]).unwrap_err(),
        unavailable(LocalQuorum, Some("dc1"), 2, 1)
    );
    plan_write(Quorum, &nts_3_2(), &dc("dc1"), &natural, &[]).unwrap();
    plan_write(LocalOne, &nts_3_2(), &dc("dc1"), &natural, &[]).unwrap();
    let dc1_down = nts_replicas(&[1, 2, 3]);
    assert_eq!(
        plan_write(LocalOne, &nts_3_2(), &dc("dc1"), &dc1_down, &[]).unwrap_err(),
        unavailable(LocalOne, Some("dc1"), 1, 0)
    );
    plan_write(One, &nts_3_2(), &dc("dc1"), &dc1_down, &[]).unwrap();
}

#[test]
fn each_quorum_is_unavailable_when_any_dc_is_short() {
    let natural = nts_replicas(&[5]);
    assert_eq!(
        plan_write(EachQuorum, &nts_3_2(), &dc("dc1"), &natural, &[]).unwrap_err(),
        unavailable(EachQuorum, Some("dc2"), 2, 1)
    );
    plan_write(Quorum, &nts_3_2(), &dc("dc1"), &natural, &[]).unwrap();
    plan_write(LocalQuorum, &nts_3_2(), &dc("dc1"), &natural, &[]).unwrap();
    plan_write(EachQuorum, &nts_3_2(), &dc("dc1"), &nts_replicas(&[3]), &[]).unwrap();
}

#[test]
fn local_writes_count_only_local_pending_replicas() {
    let natural = nts_replicas(&[]);
    let remote_pending = [replica(9, "dc2", true)];
    let plan = plan_write(
        LocalQuorum,
        &nts_3_2(),
        &dc("dc1"),
        &natural,
        &remote_pending,
    )
    .unwrap();
    assert_eq!(plan.required(), 2);
    assert_eq!(plan.targets().len(), 6);
    let local_pending = [replica(9, "dc1", true)];
    let plan = plan_write(
        LocalQuorum,
        &nts_3_2(),
        &dc("dc1"),
        &natural,
        &local_pending,
    )
    .unwrap();
    assert_eq!(plan.required(), 3);
}

#[test]
fn each_quorum_adds_a_pending_replica_to_its_own_dc() {
    let pending = [replica(9, "dc2", true)];
    let plan = plan_write(
        EachQuorum,
        &nts_3_2(),
        &dc("dc1"),
        &nts_replicas(&[]),
        &pending,
    )
    .unwrap();
    assert_eq!(
        plan.requirement(),
        &Requirement::EachDc {
            counts: [(dc("dc1"), 2), (dc("dc2"), 3)].into_iter().collect()
        }
    );
    assert_eq!(
        plan_write(
            EachQuorum,
            &nts_3_2(),
            &dc("dc1"),
            &nts_replicas(&[4]),
            &pending
        )
        .unwrap_err(),
        unavailable(EachQuorum, Some("dc2"), 3, 2)
    );
}

// ---- reads ----

fn read(
    level: ConsistencyLevel,
    strategy: &ReplicationStrategy,
    local: &str,
    natural: &[ReplicaCandidate],
) -> ReadPlan {
    plan_read(level, strategy, &dc(local), natural).unwrap()
}

fn read_shape(plan: &ReadPlan) -> (HostId, Vec<HostId>, Vec<HostId>) {
    (
        plan.data_from(),
        plan.digests_from().to_vec(),
        plan.spares().to_vec(),
    )
}

#[test]
fn any_is_refused_for_reads() {
    let err = plan_read(Any, &simple_3(), &dc("dc1"), &simple_replicas(&[])).unwrap_err();
    assert_eq!(err, ReplicationError::InvalidForReads { level: Any });
    assert_eq!(
        err.to_string(),
        "consistency level ANY is only supported for writes"
    );
}

#[test]
fn reads_on_simple_rf3_ask_one_for_data_and_just_enough_for_digests() {
    let natural = simple_replicas(&[]);
    for (level, digests, spares) in [
        (One, &[][..], &[2, 3][..]),
        (Two, &[2], &[3]),
        (Three, &[2, 3], &[]),
        (Quorum, &[2], &[3]),
        (All, &[2, 3], &[]),
        (LocalOne, &[], &[2, 3]),
        (LocalQuorum, &[2], &[3]),
        (EachQuorum, &[2], &[3]),
    ] {
        let plan = read(level, &simple_3(), "dc1", &natural);
        assert_eq!(
            read_shape(&plan),
            (host(1), hosts(digests), hosts(spares)),
            "{level}"
        );
        assert_eq!(plan.required() as usize, 1 + digests.len(), "{level}");
    }
}

#[test]
fn reads_skip_down_replicas_and_refuse_when_too_few_are_up() {
    let natural = simple_replicas(&[1]);
    let plan = read(Quorum, &simple_3(), "dc1", &natural);
    assert_eq!(read_shape(&plan), (host(2), hosts(&[3]), vec![]));
    assert_eq!(
        plan_read(All, &simple_3(), &dc("dc1"), &natural).unwrap_err(),
        ReplicationError::Unavailable(unavailable(All, None, 3, 2))
    );
}

#[test]
fn reads_on_nts_3_2_go_to_the_local_dc_first_in_placement_order() {
    let natural = nts_replicas(&[]);
    for (level, data, digests, spares) in [
        (One, 1, &[][..], &[2, 3, 4, 5][..]),
        (Two, 1, &[2], &[3, 4, 5]),
        (Three, 1, &[2, 3], &[4, 5]),
        (Quorum, 1, &[2, 3], &[4, 5]),
        (All, 1, &[2, 3, 4, 5], &[]),
        (LocalOne, 1, &[], &[2, 3]),
        (LocalQuorum, 1, &[2], &[3]),
        (EachQuorum, 1, &[2, 4, 5], &[3]),
    ] {
        let plan = read(level, &nts_3_2(), "dc1", &natural);
        assert_eq!(
            read_shape(&plan),
            (host(data), hosts(digests), hosts(spares)),
            "{level}"
        );
    }
}

#[test]
fn reads_from_dc2_prefer_dc2() {
    let plan = read(Quorum, &nts_3_2(), "dc2", &nts_replicas(&[]));
    assert_eq!(read_shape(&plan), (host(4), hosts(&[5, 1]), hosts(&[2, 3])));
    let plan = read(LocalQuorum, &nts_3_2(), "dc2", &nts_replicas(&[]));
    assert_eq!(read_shape(&plan), (host(4), hosts(&[5]), vec![]));
}

#[test]
fn local_reads_never_use_remote_replicas_under_nts() {
    let natural = nts_replicas(&[1, 2, 3]);
    assert_eq!(
        plan_read(LocalOne, &nts_3_2(), &dc("dc1"), &natural).unwrap_err(),
        ReplicationError::Unavailable(unavailable(LocalOne, Some("dc1"), 1, 0))
    );
    let plan = read(One, &nts_3_2(), "dc1", &natural);
    assert_eq!(read_shape(&plan), (host(4), vec![], hosts(&[5])));
}

#[test]
fn local_reads_with_simple_strategy_fall_back_to_remote_replicas() {
    let natural = vec![
        replica(1, "dc2", true),
        replica(2, "dc1", false),
        replica(3, "dc1", true),
    ];
    let plan = read(LocalQuorum, &simple_3(), "dc1", &natural);
    assert_eq!(read_shape(&plan), (host(3), hosts(&[1]), vec![]));
}

#[test]
fn each_quorum_reads_need_a_quorum_in_every_dc() {
    let err = plan_read(EachQuorum, &nts_3_2(), &dc("dc1"), &nts_replicas(&[4])).unwrap_err();
    assert_eq!(
        err,
        ReplicationError::Unavailable(unavailable(EachQuorum, Some("dc2"), 2, 1))
    );
    let plan = read(EachQuorum, &nts_3_2(), "dc1", &nts_replicas(&[1]));
    assert_eq!(read_shape(&plan), (host(2), hosts(&[3, 4, 5]), vec![]));
}

#[test]
fn a_coordinator_outside_every_replica_dc_reads_in_placement_order() {
    let plan = read(One, &nts_3_2(), "dc3", &nts_replicas(&[]));
    assert_eq!(read_shape(&plan), (host(4), vec![], hosts(&[1, 2, 5, 3])));
    assert!(plan_read(LocalOne, &nts_3_2(), &dc("dc3"), &nts_replicas(&[])).is_err());
}

#[test]
fn the_first_requests_are_data_from_the_closest_and_digests_from_the_rest() {
    let plan = read(Quorum, &nts_3_2(), "dc1", &nts_replicas(&[]));
    assert_eq!(
        plan.requests(),
        vec![
            (host(1), Request::Data),
            (host(2), Request::Digest),
            (host(3), Request::Digest)
        ]
    );
}

// ---- properties ----

/// Whether the live replicas can satisfy `level`, computed straight from
/// Cassandra's definitions rather than through [`Requirement`].
fn oracle_available(level: ConsistencyLevel, s: &Scenario, with_pending: bool) -> bool {
    let pending: &[ReplicaCandidate] = if with_pending { &s.pending } else { &[] };
    let in_dc = |c: &&ReplicaCandidate, dc: Option<&Datacenter>| dc.is_none_or(|d| &c.dc == d);
    let alive_in = |dc: Option<&Datacenter>| {
        s.natural
            .iter()
            .chain(pending)
            .filter(|c| c.alive && in_dc(c, dc))
            .count() as u32
    };
    let pending_in =
        |dc: Option<&Datacenter>| pending.iter().filter(|c| in_dc(c, dc)).count() as u32;
    let quorum = |rf: u32| rf / 2 + 1;
    let anywhere = |base: u32| alive_in(None) >= base + pending_in(None);
    let simple = matches!(s.strategy, ReplicationStrategy::Simple { .. });
    let total_rf = s.strategy.total_rf();
    match level {
        Any => true,
        One => anywhere(1),
        Two => anywhere(2),
        Three => anywhere(3),
        Quorum => anywhere(quorum(total_rf)),
        All => anywhere(total_rf),
        LocalOne | LocalQuorum => {
            let base = if level == LocalOne {
                1
            } else {
                quorum(s.strategy.rf_in(&s.local_dc))
            };
            if simple {
                anywhere(base)
            } else {
                let local = Some(&s.local_dc);
                alive_in(local) >= base + pending_in(local)
            }
        }
        EachQuorum => match &s.strategy {
            ReplicationStrategy::Simple { .. } => anywhere(quorum(total_rf)),
            ReplicationStrategy::NetworkTopology { rf_per_dc } => rf_per_dc
                .iter()
                .filter(|&(_, &rf)| rf > 0)
                .all(|(dc, &rf)| alive_in(Some(dc)) >= quorum(rf) + pending_in(Some(dc))),
        },
    }
}

fn levels() -> impl Strategy<Value = ConsistencyLevel> {
    proptest::sample::select(ConsistencyLevel::ALL_LEVELS.to_vec())
}

proptest! {
    #[test]
    fn plan_write_is_unavailable_exactly_when_live_replicas_cannot_satisfy_the_level(
        level in levels(), s in scenarios()
    ) {
        let plan = plan_write(level, &s.strategy, &s.local_dc, &s.natural, &s.pending);
        prop_assert_eq!(plan.is_ok(), oracle_available(level, &s, true), "{:?}", plan);
        if let Err(err) = plan {
            prop_assert_eq!(err.level, level);
            prop_assert!(err.alive < err.required);
        }
    }

    #[test]
    fn a_successful_write_plan_never_requires_more_than_it_targets(
        level in levels(), s in scenarios()
    ) {
        match plan_write(level, &s.strategy, &s.local_dc, &s.natural, &s.pending) {
            // ANY never refuses: a stored hint satisfies it even with no target.
            plan if level == Any => prop_assert!(plan.is_ok()),
            Ok(plan) => {
                prop_assert!(plan.required() as usize <= plan.targets().len());
                prop_assert!(plan.requirement().is_met_by(plan.targets().iter().map(|t| &t.dc)));
            }
            Err(_) => {}
        }
    }

    #[test]
    fn a_write_plan_targets_every_live_replica_and_hints_every_down_one(
        level in levels(), s in scenarios()
    ) {
        if let Ok(plan) = plan_write(level, &s.strategy, &s.local_dc, &s.natural, &s.pending) {
            let all: Vec<_> = s.natural.iter().chain(&s.pending).collect();
            let live: Vec<_> = all.iter().filter(|c| c.alive).map(|c| c.host).collect();
            let down: Vec<_> = all.iter().filter(|c| !c.alive).map(|c| c.host).collect();
            prop_assert_eq!(target_hosts(&plan), live);
            prop_assert_eq!(plan.down(), &down[..]);
        }
    }

    #[test]
    fn plan_read_is_unavailable_exactly_when_live_replicas_cannot_satisfy_the_level(
        level in levels(), s in scenarios()
    ) {
        match plan_read(level, &s.strategy, &s.local_dc, &s.natural) {
            Err(ReplicationError::InvalidForReads { .. }) => prop_assert_eq!(level, Any),
            Err(ReplicationError::Unavailable(_)) => {
                prop_assert!(!oracle_available(level, &s, false));
            }
            Err(other) => prop_assert!(false, "unexpected {other}"),
            Ok(plan) => {
                prop_assert!(oracle_available(level, &s, false));
                let requirement = plan.requirement();
                let contacted: Vec<_> = plan.contacted().iter().map(|&h| plan.dc_of(h)).collect();
                prop_assert!(requirement.is_met_by(contacted.iter().copied()));
                prop_assert_eq!(contacted.len() as u32, plan.required());
                for &spare in plan.spares() {
                    prop_assert!(requirement.counts_toward(plan.dc_of(spare)));
                }
                let eligible = s.natural.iter()
                    .filter(|c| c.alive && requirement.counts_toward(&c.dc))
                    .count();
                prop_assert_eq!(plan.contacted().len() + plan.spares().len(), eligible);
            }
        }
    }

    #[test]
    fn reads_contact_local_replicas_before_remote_ones(level in levels(), s in scenarios()) {
        if let Ok(plan) = plan_read(level, &s.strategy, &s.local_dc, &s.natural) {
            let spares_local = plan.spares().iter().any(|&h| *plan.dc_of(h) == s.local_dc);
            let remote_contacted = plan.contacted().iter().any(|&h| *plan.dc_of(h) != s.local_dc);
            // EACH_QUORUM under NTS must go remote whatever the local spares.
            let each_nts = level == EachQuorum
                && matches!(s.strategy, ReplicationStrategy::NetworkTopology { .. });
            prop_assert!(each_nts || !(spares_local && remote_contacted));
        }
    }
}
