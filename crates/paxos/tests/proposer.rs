//! The proposer's flows, driven by hand-written replies.

use std::num::NonZeroU32;

use ringstore_cell::{Cell, Timestamp};
use ringstore_paxos::{
    Action, Ballot, CommitTracker, Electorate, Event, Expected, Operation, Outcome, PaxosError,
    Promise, Proposal, Proposer, Request, Round,
};
use ringstore_placement::HostId;

const NOW: Timestamp = Timestamp(1_000_000_000);
const BALLOT: Ballot = Ballot {
    micros: 1_000_000_000,
    tiebreak: 1,
};

fn host(n: u128) -> HostId {
    HostId::from_u128(n)
}

fn three() -> Electorate {
    Electorate::new(vec![host(1), host(2), host(3)], vec![]).unwrap()
}

fn start(operation: Operation) -> Proposer {
    let (proposer, first) = Proposer::start(BALLOT, three(), operation, NOW);
    assert_eq!(first, Action::Broadcast(Request::Prepare(BALLOT)));
    proposer
}

fn put_if(expected: Expected, value: &[u8]) -> Operation {
    Operation::PutIf {
        expected,
        value: value.to_vec(),
        ttl: None,
    }
}

fn empty_promise(from: u128) -> Event {
    promise(from, Promise::default(), None)
}

fn promise(from: u128, promise: Promise, data: Option<Cell>) -> Event {
    Event::Promised {
        from: host(from),
        promise,
        data,
    }
}

fn accepted(from: u128) -> Event {
    Event::Accepted { from: host(from) }
}

fn refused(micros: i64) -> Ballot {
    Ballot {
        micros,
        tiebreak: 9,
    }
}

fn accept_sent(actions: &[Action]) -> Proposal {
    match actions {
        [Action::Broadcast(Request::Accept(proposal))] => proposal.clone(),
        other => panic!("expected an accept, got {other:?}"),
    }
}

fn live(ts: i64, value: &[u8]) -> Cell {
    Cell::live(Timestamp(ts), value.to_vec())
}

#[test]
fn an_uncontended_put_if_absent_applies_in_two_round_trips() {
    let mut p = start(put_if(Expected::Absent, b"v"));
    assert!(p.step(empty_promise(1)).is_empty());
    let proposal = accept_sent(&p.step(empty_promise(2)));
    let new = live(BALLOT.micros, b"v");
    assert_eq!(
        proposal,
        Proposal {
            ballot: BALLOT,
            cell: Some(new.clone())
        }
    );
    // The third promise arrives late: ignored.
    assert!(p.step(empty_promise(3)).is_empty());
    assert!(p.step(accepted(3)).is_empty());
    assert_eq!(
        p.step(accepted(1)),
        vec![
            Action::Commit(proposal),
            Action::Done(Outcome::Applied { current: new })
        ]
    );
    assert_eq!(p.round_trips(), 2);
    assert!(p.is_done());
    assert!(p.step(accepted(2)).is_empty());
}

#[test]
fn a_failed_condition_answers_in_one_round_trip_with_the_current_value() {
    let mut p = start(put_if(Expected::Absent, b"v"));
    let x = live(5, b"x");
    p.step(promise(1, Promise::default(), Some(x.clone())));
    assert_eq!(
        p.step(empty_promise(2)),
        vec![Action::Done(Outcome::NotApplied { current: Some(x) })]
    );
    assert_eq!(p.round_trips(), 1);
}

#[test]
fn a_serial_read_with_nothing_in_progress_takes_one_round_trip_and_merges_by_lww() {
    let mut p = start(Operation::SerialRead);
    p.step(promise(1, Promise::default(), Some(live(5, b"old"))));
    assert_eq!(
        p.step(promise(3, Promise::default(), Some(live(6, b"new")))),
        vec![Action::Done(Outcome::Read {
            current: Some(live(6, b"new"))
        })]
    );
    assert_eq!(p.round_trips(), 1);
}

fn in_progress(micros: i64, cell: Cell) -> Promise {
    Promise {
        accepted: Some(Proposal {
            ballot: Ballot {
                micros,
                tiebreak: 2,
            },
            cell: Some(cell),
        }),
        committed: None,
    }
}

#[test]
fn an_in_progress_value_is_reproposed_unchanged_with_its_original_timestamp_then_answered() {
    let x = live(500, b"x");
    let mut p = start(put_if(Expected::Value(b"other".to_vec()), b"v"));
    p.step(promise(
        1,
        in_progress(500, x.clone()),
        Some(live(100, b"old")),
    ));
    let proposal = accept_sent(&p.step(promise(2, Promise::default(), Some(live(100, b"old")))));
    assert_eq!(
        proposal,
        Proposal {
            ballot: BALLOT,
            cell: Some(x.clone())
        },
        "the cell keeps its own timestamp, not the ballot's"
    );
    p.step(accepted(2));
    assert_eq!(
        p.step(accepted(3)),
        vec![
            Action::Commit(proposal),
            Action::Done(Outcome::NotApplied { current: Some(x) })
        ]
    );
    assert_eq!(p.round_trips(), 2);
}

#[test]
fn a_serial_read_finishes_a_proposal_in_progress_before_answering() {
    let x = live(500, b"x");
    let mut p = start(Operation::SerialRead);
    p.step(empty_promise(1));
    let proposal = accept_sent(&p.step(promise(3, in_progress(500, x.clone()), None)));
    assert_eq!(proposal.cell, Some(x.clone()));
    p.step(accepted(1));
    assert_eq!(
        p.step(accepted(2)),
        vec![
            Action::Commit(proposal),
            Action::Done(Outcome::Read { current: Some(x) })
        ]
    );
}

#[test]
fn an_accepted_proposal_that_a_quorum_member_committed_is_not_in_progress() {
    let x = live(500, b"x");
    let committed = Promise {
        committed: Some(Ballot {
            micros: 500,
            tiebreak: 2,
        }),
        ..in_progress(500, x.clone())
    };
    let mut p = start(Operation::SerialRead);
    p.step(promise(1, in_progress(500, x.clone()), None));
    assert_eq!(
        p.step(promise(2, committed, Some(x.clone()))),
        vec![Action::Done(Outcome::Read { current: Some(x) })]
    );
}

#[test]
fn an_applying_op_supersedes_the_in_progress_value_it_was_computed_from() {
    let x = live(500, b"x");
    let mut p = start(put_if(Expected::Value(b"x".to_vec()), b"y"));
    p.step(promise(1, in_progress(500, x), None));
    let proposal = accept_sent(&p.step(empty_promise(2)));
    assert_eq!(proposal.cell, Some(live(BALLOT.micros, b"y")));
}

#[test]
fn a_partial_accept_then_refusals_is_unknown_never_not_applied() {
    let mut p = start(put_if(Expected::Any, b"v"));
    p.step(empty_promise(1));
    accept_sent(&p.step(empty_promise(2)));
    assert!(p.step(accepted(1)).is_empty());
    assert!(
        p.step(Event::AcceptRejected {
            from: host(2),
            promised: refused(2_000_000_000)
        })
        .is_empty()
    );
    assert_eq!(
        p.step(Event::AcceptRejected {
            from: host(3),
            promised: refused(2_000_000_001)
        }),
        vec![Action::Done(Outcome::Unknown {
            accepted: 1,
            required: 2
        })]
    );
}

#[test]
fn a_partial_accept_then_the_deadline_is_unknown() {
    let mut p = start(put_if(Expected::Any, b"v"));
    p.step(empty_promise(1));
    p.step(empty_promise(2));
    p.step(accepted(3));
    assert_eq!(
        p.step(Event::Timeout),
        vec![Action::Done(Outcome::Unknown {
            accepted: 1,
            required: 2
        })]
    );
}

#[test]
fn refusals_with_a_member_silent_wait_for_it_since_it_may_have_accepted() {
    let mut p = start(put_if(Expected::Any, b"v"));
    p.step(empty_promise(1));
    p.step(empty_promise(2));
    for from in [1, 2] {
        assert!(
            p.step(Event::AcceptRejected {
                from: host(from),
                promised: refused(2_000_000_000)
            })
            .is_empty()
        );
    }
    assert_eq!(
        p.step(Event::Timeout),
        vec![Action::Done(Outcome::Unknown {
            accepted: 0,
            required: 2
        })]
    );
}

#[test]
fn an_accept_refused_by_every_member_is_contention_and_changed_nothing() {
    let mut p = start(put_if(Expected::Any, b"v"));
    p.step(empty_promise(1));
    p.step(empty_promise(2));
    p.step(Event::AcceptRejected {
        from: host(1),
        promised: refused(2_000_000_005),
    });
    p.step(Event::Unreachable { from: host(3) });
    assert_eq!(
        p.step(Event::AcceptRejected {
            from: host(2),
            promised: refused(2_000_000_000)
        }),
        vec![Action::Done(Outcome::Contended {
            retry_after: refused(2_000_000_005)
        })]
    );
}

#[test]
fn a_refused_prepare_is_contention_with_the_newest_ballot_shown() {
    let mut p = start(Operation::SerialRead);
    p.step(empty_promise(1));
    assert!(
        p.step(Event::PrepareRejected {
            from: host(2),
            promised: refused(7)
        })
        .is_empty()
    );
    assert_eq!(
        p.step(Event::PrepareRejected {
            from: host(3),
            promised: refused(9)
        }),
        vec![Action::Done(Outcome::Contended {
            retry_after: refused(9)
        })]
    );
}

#[test]
fn round_one_without_a_quorum_and_without_refusals_is_no_quorum() {
    let mut p = start(put_if(Expected::Absent, b"v"));
    p.step(empty_promise(1));
    assert_eq!(
        p.step(Event::Timeout),
        vec![Action::Done(Outcome::NoQuorum {
            round: Round::Prepare,
            votes: 1,
            required: 2
        })]
    );
    let mut p = start(put_if(Expected::Absent, b"v"));
    p.step(Event::Unreachable { from: host(1) });
    assert_eq!(
        p.step(Event::Unreachable { from: host(2) }),
        vec![Action::Done(Outcome::NoQuorum {
            round: Round::Prepare,
            votes: 0,
            required: 2
        })]
    );
}

#[test]
fn pending_replicas_raise_the_quorum() {
    let electorate = Electorate::new(vec![host(1), host(2), host(3)], vec![host(4)]).unwrap();
    assert_eq!(electorate.quorum(), 3);
    assert_eq!(electorate.len(), 4);
    let (mut p, _) = Proposer::start(BALLOT, electorate, Operation::SerialRead, NOW);
    assert!(p.step(empty_promise(1)).is_empty());
    assert!(p.step(empty_promise(4)).is_empty());
    assert!(matches!(
        p.step(empty_promise(2)).as_slice(),
        [Action::Done(Outcome::Read { current: None })]
    ));
    let five = Electorate::new((1..=5).map(host).collect(), vec![host(6), host(7)]).unwrap();
    assert_eq!(five.quorum(), 5);
}

#[test]
fn electorates_without_natural_replicas_or_with_a_host_twice_are_refused() {
    assert_eq!(
        Electorate::new(vec![], vec![host(1)]),
        Err(PaxosError::NoNaturalReplicas)
    );
    assert_eq!(
        Electorate::new(vec![host(1), host(2)], vec![host(2)]),
        Err(PaxosError::DuplicateHost { host: host(2) })
    );
}

#[test]
fn duplicate_replies_and_replies_from_strangers_count_once_or_not_at_all() {
    let mut p = start(put_if(Expected::Absent, b"v"));
    assert!(p.step(empty_promise(1)).is_empty());
    assert!(p.step(empty_promise(1)).is_empty());
    assert!(p.step(empty_promise(99)).is_empty());
    // A refusal from a host that already promised does not count either.
    assert!(
        p.step(Event::PrepareRejected {
            from: host(1),
            promised: refused(1)
        })
        .is_empty()
    );
    accept_sent(&p.step(empty_promise(2)));
    assert!(p.step(accepted(2)).is_empty());
    assert!(p.step(accepted(2)).is_empty());
    assert!(p.step(accepted(42)).is_empty());
    // A reply to round 1 arriving in round 2 is ignored.
    assert!(
        p.step(Event::PrepareRejected {
            from: host(3),
            promised: refused(1)
        })
        .is_empty()
    );
    assert!(matches!(
        p.step(accepted(3)).as_slice(),
        [Action::Commit(_), Action::Done(Outcome::Applied { .. })]
    ));
}

#[test]
fn a_new_cell_is_stamped_past_the_current_one_or_at_the_ballot_whichever_is_later() {
    // The current cell is a plain write stamped far ahead of the ballot.
    let ahead = live(BALLOT.micros + 1_000_000, b"x");
    let mut p = start(put_if(Expected::Value(b"x".to_vec()), b"y"));
    p.step(promise(1, Promise::default(), Some(ahead.clone())));
    let proposal = accept_sent(&p.step(empty_promise(2)));
    assert_eq!(proposal.cell, Some(live(ahead.timestamp.0 + 1, b"y")));
    // An older current cell: the ballot's micros.
    let mut p = start(put_if(Expected::Value(b"x".to_vec()), b"y"));
    p.step(promise(1, Promise::default(), Some(live(3, b"x"))));
    let proposal = accept_sent(&p.step(empty_promise(2)));
    assert_eq!(proposal.cell, Some(live(BALLOT.micros, b"y")));
}

#[test]
fn an_expired_or_deleted_value_counts_as_absent_and_the_new_ttl_counts_from_now() {
    let expired = Cell::expiring(
        Timestamp(10),
        b"old".to_vec(),
        1,
        Timestamp(NOW.0 - 2_000_000),
    );
    let ttl = NonZeroU32::new(60).unwrap();
    let op = Operation::PutIf {
        expected: Expected::Absent,
        value: b"v".to_vec(),
        ttl: Some(ttl),
    };
    let mut p = start(op.clone());
    p.step(promise(1, Promise::default(), Some(expired)));
    let proposal = accept_sent(&p.step(empty_promise(2)));
    assert_eq!(
        proposal.cell,
        Some(Cell::expiring(
            Timestamp(BALLOT.micros),
            b"v".to_vec(),
            60,
            NOW
        ))
    );
    // Still visible at NOW: not absent.
    let live_ttl = Cell::expiring(Timestamp(10), b"old".to_vec(), 10, NOW);
    let mut p = start(op.clone());
    p.step(promise(1, Promise::default(), Some(live_ttl.clone())));
    assert!(matches!(
        p.step(empty_promise(2)).as_slice(),
        [Action::Done(Outcome::NotApplied { .. })]
    ));
    // A tombstone, newer than the value it deleted.
    let mut p = start(op);
    p.step(promise(1, Promise::default(), Some(live(10, b"old"))));
    let proposal = accept_sent(&p.step(promise(
        2,
        Promise::default(),
        Some(Cell::tombstone(Timestamp(20))),
    )));
    assert!(proposal.cell.is_some_and(|cell| cell.value.is_some()));
}

#[test]
fn delete_if_writes_a_tombstone_that_beats_the_value_it_replaced() {
    let x = live(BALLOT.micros + 5, b"x");
    let mut p = start(Operation::DeleteIf {
        expected: Expected::Value(b"x".to_vec()),
    });
    p.step(promise(1, Promise::default(), Some(x.clone())));
    let proposal = accept_sent(&p.step(empty_promise(2)));
    let tombstone = Cell::deletion(Timestamp(x.timestamp.0 + 1), NOW);
    assert_eq!(proposal.cell, Some(tombstone.clone()));
    assert_eq!(x.reconcile(tombstone.clone()), tombstone);
}

#[test]
fn the_commit_tracker_counts_each_target_once_up_to_the_level() {
    let mut tracker = CommitTracker::new([host(1), host(2), host(3)], 2);
    assert!(!tracker.on_ack(host(1)));
    assert!(!tracker.on_ack(host(1)));
    assert!(!tracker.on_ack(host(9)));
    assert!(tracker.on_ack(host(3)));
    assert_eq!(tracker.acked(), 2);
    assert!(CommitTracker::new([host(1)], 0).is_met(), "ANY: background");
}

#[test]
fn finishing_another_proposal_that_fails_is_a_retry_never_unknown() {
    // A serial read and a failed condition both find a proposal in
    // progress and re-propose it; when that round fails, their own effect
    // was never proposed: contended (with a refusal) or no quorum.
    for operation in [Operation::SerialRead, put_if(Expected::Absent, b"mine")] {
        let x = live(500, b"x");
        let mut p = start(operation.clone());
        p.step(promise(1, in_progress(500, x.clone()), None));
        let proposal = accept_sent(&p.step(empty_promise(2)));
        assert_eq!(proposal.cell, Some(x), "the in-progress cell, unchanged");
        p.step(accepted(1));
        p.step(Event::AcceptRejected {
            from: host(2),
            promised: refused(2_000_000_000),
        });
        assert_eq!(
            p.step(Event::AcceptRejected {
                from: host(3),
                promised: refused(2_000_000_001),
            }),
            vec![Action::Done(Outcome::Contended {
                retry_after: refused(2_000_000_001)
            })],
            "{operation:?}"
        );
        let mut p = start(operation.clone());
        p.step(promise(1, in_progress(500, live(500, b"x")), None));
        p.step(empty_promise(2));
        p.step(accepted(1));
        assert_eq!(
            p.step(Event::Timeout),
            vec![Action::Done(Outcome::NoQuorum {
                round: Round::Accept,
                votes: 1,
                required: 2
            })],
            "{operation:?}"
        );
    }
}

/// A repair round with nothing in progress commits the current version
/// under its ballot at once (1 round trip); with a proposal in progress it
/// proposes the current version (the in-progress cell merged with the
/// data) and commits it once chosen.
#[test]
fn a_repair_round_always_commits_the_current_version_under_its_ballot() {
    let newest = live(50, b"newest");
    let mut p = start(Operation::Repair);
    p.step(promise(1, Promise::default(), Some(live(10, b"old"))));
    assert_eq!(
        p.step(promise(2, Promise::default(), Some(newest.clone()))),
        vec![
            Action::Commit(Proposal {
                ballot: BALLOT,
                cell: Some(newest.clone()),
            }),
            Action::Done(Outcome::Read {
                current: Some(newest.clone()),
            }),
        ]
    );
    assert_eq!(p.round_trips(), 1);

    // Nothing anywhere: the empty version is committed, to record the
    // ballot as every replica's most recent commit.
    let mut p = start(Operation::Repair);
    p.step(empty_promise(1));
    assert_eq!(
        p.step(empty_promise(2)),
        vec![
            Action::Commit(Proposal {
                ballot: BALLOT,
                cell: None,
            }),
            Action::Done(Outcome::Read { current: None }),
        ]
    );

    // In progress: an older ballot's cell accepted, never committed.
    let unfinished = Proposal {
        ballot: refused(5),
        cell: Some(live(60, b"unfinished")),
    };
    let holding = Promise {
        accepted: Some(unfinished),
        committed: None,
    };
    let mut p = start(Operation::Repair);
    p.step(promise(1, holding, Some(newest.clone())));
    let proposal = accept_sent(&p.step(empty_promise(2)));
    let current = live(60, b"unfinished");
    assert_eq!(
        proposal,
        Proposal {
            ballot: BALLOT,
            cell: Some(current.clone()),
        }
    );
    p.step(accepted(1));
    assert_eq!(
        p.step(accepted(3)),
        vec![
            Action::Commit(proposal),
            Action::Done(Outcome::Read {
                current: Some(current),
            }),
        ]
    );
}
