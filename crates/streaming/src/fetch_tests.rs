//! The fetch policy on a simulated clock: no sockets, no sleeps.

use super::*;
use ringstore_cell::Timestamp;

const MS: Duration = Duration::from_millis(1);

fn preferred() -> HostId {
    HostId::from_u128(1)
}

fn second() -> HostId {
    HostId::from_u128(2)
}

fn range() -> TokenRange {
    TokenRange::new(Token(0), Token(100))
}

fn fetcher(checkpoint: Option<Position>) -> RangeFetcher {
    RangeFetcher::new(
        FetchConfig::default(),
        range(),
        vec![preferred(), second()],
        checkpoint,
    )
}

fn entries(tokens: &[u8]) -> Vec<(Vec<u8>, Cell)> {
    tokens
        .iter()
        .map(|&t| (vec![t], Cell::live(Timestamp(1), vec![t; 4])))
        .collect()
}

fn checksum(entries: &[(Vec<u8>, Cell)]) -> EntryChecksum {
    let mut sum = EntryChecksum::default();
    for (key, cell) in entries {
        sum.add(key, &cell.canonical_bytes());
    }
    sum
}

/// A well-formed chunk of `entries` ending at `last`.
fn chunk(entries: Vec<(Vec<u8>, Cell)>, last: i64) -> FetchEvent {
    FetchEvent::ChunkReceived {
        checksum: checksum(&entries).value(),
        entries,
        last_token: Token(last),
    }
}

fn failure() -> FetchEvent {
    FetchEvent::SourceFailed("connection reset".into())
}

/// The source and remaining range of an `Open`, or a panic naming the action.
fn opened(action: FetchAction) -> (HostId, TokenRange, bool) {
    match action {
        FetchAction::Open {
            source,
            remaining,
            failover,
        } => (source, remaining, failover),
        other => panic!("expected Open, got {other:?}"),
    }
}

fn wait_until(action: FetchAction) -> Duration {
    match action {
        FetchAction::WaitUntil(until) => until,
        other => panic!("expected WaitUntil, got {other:?}"),
    }
}

#[test]
fn a_fresh_fetch_streams_the_whole_range_from_the_preferred_source() {
    let mut fetch = fetcher(None);
    assert_eq!(
        opened(fetch.step(FetchEvent::Tick, Duration::ZERO)),
        (preferred(), range(), false)
    );
    let first = entries(&[1, 2]);
    let second = entries(&[3]);
    let mut total = checksum(&first);
    for (key, cell) in &second {
        total.add(key, &cell.canonical_bytes());
    }
    match fetch.step(chunk(first.clone(), 2), MS) {
        FetchAction::Apply {
            entries,
            checkpoint,
            bytes,
        } => {
            assert_eq!(entries, first);
            assert_eq!(checkpoint, Position::After(Token(2)));
            assert_eq!(bytes, checksum(&first).bytes());
        }
        other => panic!("expected Apply, got {other:?}"),
    }
    assert!(matches!(
        fetch.step(FetchEvent::Applied, MS),
        FetchAction::Receive
    ));
    assert!(matches!(
        fetch.step(chunk(second, 3), MS),
        FetchAction::Apply { .. }
    ));
    assert!(matches!(
        fetch.step(FetchEvent::Applied, MS),
        FetchAction::Receive
    ));
    let end = FetchEvent::StreamEnded {
        total_entries: 3,
        total_checksum: total.value(),
    };
    match fetch.step(end, MS) {
        FetchAction::Done { record, totals } => {
            assert!(record);
            assert_eq!(totals.ranges, 1);
            assert_eq!(totals.entries, 3);
            assert_eq!(totals.bytes, total.bytes());
        }
        other => panic!("expected Done, got {other:?}"),
    }
    assert_eq!(fetch.position(), Some(Position::Done));
    assert!(matches!(
        fetch.step(FetchEvent::Tick, MS),
        FetchAction::Continue
    ));
}

#[test]
fn a_failing_source_is_retried_with_doubling_waits_then_gives_way_to_the_next() {
    let mut fetch = fetcher(None);
    let mut now = Duration::ZERO;
    let mut waits = Vec::new();
    for _ in 0..3 {
        assert_eq!(opened(fetch.step(FetchEvent::Tick, now)).0, preferred());
        let until = wait_until(fetch.step(failure(), now));
        waits.push(until - now);
        // Ticking early changes nothing.
        assert_eq!(wait_until(fetch.step(FetchEvent::Tick, until - MS)), until);
        now = until;
    }
    assert_eq!(waits, [200 * MS, 400 * MS, 800 * MS]);
    let (source, _, failover) = opened(fetch.step(FetchEvent::Tick, now));
    assert_eq!(
        source,
        second(),
        "three failures make the preferred source give way"
    );
    assert!(failover, "the first failover is flagged for a warning");
    let until = wait_until(fetch.step(failure(), now));
    assert_eq!(until - now, 1600 * MS);
    let (source, _, failover) = opened(fetch.step(FetchEvent::Tick, until));
    assert_eq!(source, second());
    assert!(!failover, "only the first failover is flagged");
}

#[test]
fn the_waits_stop_growing_at_the_longest_backoff() {
    let config = FetchConfig::default();
    assert_eq!(config.backoff(1), 200 * MS);
    assert_eq!(config.backoff(4), 1600 * MS);
    assert_eq!(config.backoff(5), config.max_backoff);
    assert_eq!(config.backoff(29), config.max_backoff);
}

#[test]
fn a_source_seen_down_is_skipped_and_taken_back_when_up() {
    let mut fetch = fetcher(None);
    assert!(matches!(
        fetch.step(FetchEvent::SourceSeenDown(preferred()), Duration::ZERO),
        FetchAction::Continue
    ));
    let (source, _, failover) = opened(fetch.step(FetchEvent::Tick, Duration::ZERO));
    assert_eq!((source, failover), (second(), true));
    let until = wait_until(fetch.step(failure(), MS));
    fetch.step(FetchEvent::SourceSeenUp(preferred()), until);
    assert_eq!(opened(fetch.step(FetchEvent::Tick, until)).0, preferred());
}

#[test]
fn with_no_source_up_every_attempt_waits_and_the_fetch_gives_up_saying_so() {
    let mut fetch = fetcher(None);
    fetch.step(FetchEvent::SourceSeenDown(preferred()), Duration::ZERO);
    fetch.step(FetchEvent::SourceSeenDown(second()), Duration::ZERO);
    let mut now = Duration::ZERO;
    for _ in 0..30 {
        now = wait_until(fetch.step(FetchEvent::Tick, now));
    }
    assert_eq!(fetch.attempts(), 30);
    match fetch.step(FetchEvent::Tick, now) {
        FetchAction::GiveUp(error) => {
            assert!(matches!(
                error,
                StreamingError::GaveUp {
                    attempts: 30,
                    last_error: FetchFailure::NoSourceUp,
                    ..
                }
            ));
            assert!(error.to_string().contains("after 30 attempts"), "{error}");
        }
        other => panic!("expected GiveUp, got {other:?}"),
    }
}

#[test]
fn giving_up_names_the_last_failure_and_keeps_the_resume_point() {
    let config = FetchConfig {
        max_attempts: 2,
        ..FetchConfig::default()
    };
    let mut fetch = RangeFetcher::new(config, range(), vec![preferred()], None);
    fetch.step(FetchEvent::Tick, Duration::ZERO);
    fetch.step(chunk(entries(&[5]), 5), MS);
    fetch.step(FetchEvent::Applied, MS);
    let until = wait_until(fetch.step(failure(), MS));
    fetch.step(FetchEvent::Tick, until);
    let until = wait_until(fetch.step(FetchEvent::ApplyFailed("disk full".into()), until));
    match fetch.step(FetchEvent::Tick, until) {
        FetchAction::GiveUp(StreamingError::GaveUp { last_error, .. }) => {
            assert!(
                matches!(last_error, FetchFailure::Local { source_host, .. } if source_host == preferred())
            );
            assert!(last_error.to_string().contains("disk full"), "{last_error}");
        }
        other => panic!("expected GiveUp, got {other:?}"),
    }
    assert_eq!(fetch.position(), Some(Position::After(Token(5))));
}

#[test]
fn a_retry_resumes_after_the_last_applied_chunk() {
    let mut fetch = fetcher(Some(Position::After(Token(10))));
    let (_, remaining, _) = opened(fetch.step(FetchEvent::Tick, Duration::ZERO));
    assert_eq!(remaining, TokenRange::new(Token(10), Token(100)));
    fetch.step(chunk(entries(&[20]), 20), MS);
    fetch.step(FetchEvent::Applied, MS);
    // A chunk handed out but never reported applied does not move the point.
    fetch.step(chunk(entries(&[30]), 30), MS);
    let until = wait_until(fetch.step(failure(), MS));
    let (_, remaining, _) = opened(fetch.step(FetchEvent::Tick, until));
    assert_eq!(remaining, TokenRange::new(Token(20), Token(100)));
}

#[test]
fn a_corrupt_chunk_discards_the_pass_back_to_where_it_began() {
    let mut fetch = fetcher(Some(Position::After(Token(10))));
    fetch.step(FetchEvent::Tick, Duration::ZERO);
    fetch.step(chunk(entries(&[20]), 20), MS);
    fetch.step(FetchEvent::Applied, MS);
    let bad = FetchEvent::ChunkReceived {
        entries: entries(&[30]),
        checksum: 0xdead_beef,
        last_token: Token(30),
    };
    match fetch.step(bad, MS) {
        FetchAction::Rewind(to) => assert_eq!(to, Some(Position::After(Token(10)))),
        other => panic!("expected Rewind, got {other:?}"),
    }
    assert!(matches!(
        fetch.last_failure(),
        Some(FetchFailure::Corrupt { source_host, .. }) if *source_host == preferred()
    ));
    let until = wait_until(fetch.step(FetchEvent::Tick, MS));
    let (_, remaining, _) = opened(fetch.step(FetchEvent::Tick, until));
    assert_eq!(remaining, TokenRange::new(Token(10), Token(100)));
}

#[test]
fn a_stream_whose_totals_do_not_match_is_corrupt() {
    let mut fetch = fetcher(None);
    fetch.step(FetchEvent::Tick, Duration::ZERO);
    let sent = entries(&[1]);
    let sum = checksum(&sent);
    fetch.step(chunk(sent, 1), MS);
    fetch.step(FetchEvent::Applied, MS);
    let end = FetchEvent::StreamEnded {
        total_entries: 2,
        total_checksum: sum.value(),
    };
    assert!(matches!(fetch.step(end, MS), FetchAction::Rewind(None)));
    assert_eq!(fetch.position(), None);
}

#[test]
fn a_range_done_or_checkpointed_at_its_end_needs_no_stream() {
    let mut done = fetcher(Some(Position::Done));
    assert!(matches!(
        done.step(FetchEvent::Tick, Duration::ZERO),
        FetchAction::Done { record: false, .. }
    ));
    let mut at_end = fetcher(Some(Position::After(Token(100))));
    assert!(matches!(
        at_end.step(FetchEvent::Tick, Duration::ZERO),
        FetchAction::Done { record: true, .. }
    ));
}

#[test]
fn events_out_of_turn_are_ignored() {
    let mut fetch = fetcher(None);
    assert!(matches!(
        fetch.step(chunk(entries(&[1]), 1), MS),
        FetchAction::Continue
    ));
    assert!(matches!(
        fetch.step(FetchEvent::Applied, MS),
        FetchAction::Continue
    ));
    assert!(matches!(fetch.step(failure(), MS), FetchAction::Continue));
    assert_eq!(opened(fetch.step(FetchEvent::Tick, MS)).0, preferred());
    assert_eq!(fetch.attempts(), 1);
}
