//! The acceptor's rules, its stored form, and the ballot clock.

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use ringstore_cell::{Cell, Timestamp};
use ringstore_paxos::{
    AcceptReply, AcceptorState, Ballot, BallotClock, PaxosError, PrepareReply, Promise, Proposal,
    StateDamage,
};

fn ballot(micros: i64) -> Ballot {
    Ballot {
        micros,
        tiebreak: 7,
    }
}

fn proposal(micros: i64, value: &[u8]) -> Proposal {
    Proposal {
        ballot: ballot(micros),
        cell: Some(Cell::live(Timestamp(micros), value.to_vec())),
    }
}

fn promised(micros: i64) -> AcceptorState {
    AcceptorState {
        promised: Some(ballot(micros)),
        ..AcceptorState::default()
    }
}

#[test]
fn a_fresh_acceptor_promises_and_asks_to_persist_the_promise_first() {
    let step = AcceptorState::default().prepare(ballot(10));
    assert_eq!(step.persist, Some(promised(10)));
    assert_eq!(step.reply, PrepareReply::Promised(Promise::default()));
}

#[test]
fn a_prepare_of_a_lower_or_equal_ballot_is_refused_without_a_write() {
    let state = promised(10);
    for micros in [9, 10] {
        let step = state.prepare(ballot(micros));
        assert_eq!(step.persist, None);
        assert_eq!(
            step.reply,
            PrepareReply::Rejected {
                promised: ballot(10)
            }
        );
    }
    // Same micros, higher tiebreak: newer.
    let newer = Ballot {
        micros: 10,
        tiebreak: 8,
    };
    assert!(matches!(
        state.prepare(newer).reply,
        PrepareReply::Promised(_)
    ));
}

#[test]
fn a_prepare_must_be_newer_than_the_accepted_ballot_too() {
    let state = AcceptorState {
        promised: None,
        accepted: Some(proposal(20, b"x")),
        committed: None,
    };
    assert_eq!(
        state.prepare(ballot(20)).reply,
        PrepareReply::Rejected {
            promised: ballot(20)
        }
    );
}

#[test]
fn a_promise_carries_the_accepted_proposal_and_the_most_recent_commit() {
    let state = AcceptorState {
        promised: Some(ballot(20)),
        accepted: Some(proposal(20, b"x")),
        committed: Some(ballot(15)),
    };
    let step = state.prepare(ballot(30));
    assert_eq!(
        step.reply,
        PrepareReply::Promised(Promise {
            accepted: Some(proposal(20, b"x")),
            committed: Some(ballot(15)),
        })
    );
    assert_eq!(step.persist.and_then(|s| s.promised), Some(ballot(30)));
}

#[test]
fn an_accept_after_a_higher_promise_is_refused() {
    let step = promised(10).accept(proposal(9, b"x"));
    assert_eq!(step.persist, None);
    assert_eq!(
        step.reply,
        AcceptReply::Rejected {
            promised: ballot(10)
        }
    );
}

#[test]
fn an_accept_of_the_promised_ballot_is_accepted_and_persisted() {
    let step = promised(10).accept(proposal(10, b"x"));
    assert_eq!(step.reply, AcceptReply::Accepted);
    assert_eq!(
        step.persist,
        Some(AcceptorState {
            promised: Some(ballot(10)),
            accepted: Some(proposal(10, b"x")),
            committed: None,
        })
    );
    // Without a promise (the prepare went elsewhere), it raises the promise.
    let step = AcceptorState::default().accept(proposal(5, b"y"));
    assert_eq!(step.reply, AcceptReply::Accepted);
    assert_eq!(step.persist.and_then(|s| s.promised), Some(ballot(5)));
}

#[test]
fn a_duplicate_accept_is_answered_accepted_again_without_a_write() {
    let state = promised(10).accept(proposal(10, b"x")).persist.unwrap();
    let again = state.accept(proposal(10, b"x"));
    assert_eq!(again.reply, AcceptReply::Accepted);
    assert_eq!(again.persist, None);
    // Another value under the same ballot is refused (ballots are not reused).
    assert_eq!(
        state.accept(proposal(10, b"other")).reply,
        AcceptReply::Rejected {
            promised: ballot(10)
        }
    );
}

#[test]
fn a_commit_hands_back_the_cell_and_never_moves_the_most_recent_commit_back() {
    let state = AcceptorState::default();
    let step = state.commit(proposal(20, b"new"));
    assert_eq!(step.reply, proposal(20, b"new").cell);
    let state = step.persist.unwrap();
    assert_eq!(state.committed, Some(ballot(20)));
    let older = state.commit(proposal(10, b"old"));
    assert_eq!(
        older.reply,
        proposal(10, b"old").cell,
        "merging it is harmless"
    );
    assert_eq!(older.persist, None);
}

fn sample_states() -> Vec<AcceptorState> {
    let now = Timestamp(1_000_000);
    vec![
        AcceptorState::default(),
        promised(-5),
        AcceptorState {
            promised: Some(Ballot {
                micros: i64::MAX,
                tiebreak: u64::MAX,
            }),
            accepted: Some(proposal(3, b"")),
            committed: Some(ballot(1)),
        },
        AcceptorState {
            promised: Some(ballot(9)),
            accepted: Some(Proposal {
                ballot: ballot(9),
                cell: None,
            }),
            committed: None,
        },
        AcceptorState {
            promised: Some(ballot(9)),
            accepted: Some(Proposal {
                ballot: ballot(9),
                cell: Some(Cell::expiring(Timestamp(9), b"v".to_vec(), 60, now)),
            }),
            committed: Some(ballot(8)),
        },
        AcceptorState {
            promised: None,
            accepted: Some(Proposal {
                ballot: ballot(4),
                cell: Some(Cell::deletion(Timestamp(4), now)),
            }),
            committed: Some(ballot(4)),
        },
    ]
}

#[test]
fn states_round_trip_through_their_stored_form() {
    for state in sample_states() {
        let bytes = state.encode();
        assert_eq!(bytes[0], ringstore_paxos::STATE_FORMAT);
        assert_eq!(AcceptorState::decode(&bytes), Ok(state));
    }
}

#[test]
fn damaged_states_decode_to_typed_errors() {
    let damage = |bytes: &[u8]| match AcceptorState::decode(bytes) {
        Err(PaxosError::CorruptState(damage)) => damage,
        other => panic!("{bytes:?} decoded as {other:?}"),
    };
    assert_eq!(damage(&[]), StateDamage::Truncated("format"));
    assert_eq!(damage(&[9, 0, 0, 0, 0, 0]), StateDamage::UnknownFormat(9));
    assert_eq!(damage(&[1, 0, 0]), StateDamage::Truncated("checksum"));
    let mut good = promised(3).encode();
    good[2] ^= 1;
    assert!(matches!(damage(&good), StateDamage::Checksum { .. }));
    // A well-checksummed body with trailing bytes, or unknown flags.
    let with_crc = |body: &[u8]| {
        let mut bytes = body.to_vec();
        bytes.extend_from_slice(&crc32fast_hash(body).to_be_bytes());
        bytes
    };
    assert_eq!(damage(&with_crc(&[1, 0, 5])), StateDamage::TrailingBytes(1));
    assert_eq!(
        damage(&with_crc(&[1, 0x40])),
        StateDamage::UnknownFlags(0x40)
    );
    assert_eq!(
        damage(&with_crc(&[1, 1, 0, 0])),
        StateDamage::Truncated("promised ballot")
    );
}

/// CRC-32 (IEEE), as crc32fast computes it; here to build damaged states
/// whose checksum is right, without a dev-dependency.
fn crc32fast_hash(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &byte in bytes {
        crc ^= u32::from(byte);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

#[test]
fn every_truncation_bit_flip_and_random_string_decodes_to_an_error_not_a_panic() {
    for state in sample_states() {
        let good = state.encode();
        for len in 0..good.len() {
            assert!(AcceptorState::decode(&good[..len]).is_err(), "cut at {len}");
        }
        for bit in 0..good.len() * 8 {
            let mut flipped = good.clone();
            flipped[bit / 8] ^= 1 << (bit % 8);
            assert!(AcceptorState::decode(&flipped).is_err(), "bit {bit}");
        }
    }
    let mut rng = StdRng::seed_from_u64(42);
    for _ in 0..20_000 {
        let len = rng.random_range(0..80);
        let mut bytes: Vec<u8> = (0..len).map(|_| rng.random()).collect();
        if rng.random_bool(0.5) && !bytes.is_empty() {
            bytes[0] = ringstore_paxos::STATE_FORMAT;
        }
        // Anything that decodes must encode back to the same bytes.
        if let Ok(state) = AcceptorState::decode(&bytes) {
            assert_eq!(state.encode(), bytes);
        }
    }
}

#[test]
fn the_ballot_clock_issues_strictly_increasing_ballots_past_what_it_was_shown() {
    let mut clock = BallotClock::new(3);
    let first = clock.next(Timestamp(100), None);
    assert_eq!(
        first,
        Ballot {
            micros: 100,
            tiebreak: 3
        }
    );
    // The clock went back: still one past the last.
    let second = clock.next(Timestamp(50), None);
    assert_eq!(second.micros, 101);
    // A refusal showed a ballot from the future: past it.
    let shown = Ballot {
        micros: 5_000,
        tiebreak: u64::MAX,
    };
    let third = clock.next(Timestamp(102), Some(shown));
    assert!(third > shown);
    assert_eq!(third.micros, 5_001);
    assert!(clock.next(Timestamp(0), None) > third);
}
