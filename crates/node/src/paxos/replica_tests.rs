//! The replica's calls over a real store: on sled in a temporary directory
//! (reopened to restart), and on a simulated disk (crashed to lose what
//! was not synced).

use std::collections::HashSet;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use ringstore_paxos::{AcceptReply, AcceptorState, Ballot, Promise, Proposal};
use ringstore_storage::{
    Cell, Durability, KeyspaceId, SimulatedDisk, SledEngine, SledOptions, Store, Timestamp,
};
use tonic::Code;

use super::*;
use crate::error::{NodeError, ServingError};
use crate::limits::MAX_KEY_BYTES;
use crate::paxos::{KeyLocks, PaxosFloors, purge, uncommitted};

/// A node as the replica sees it: a store, the locks, the keyspaces its
/// schema holds (and those it dropped), whether it serves.
struct TestHost {
    store: Store,
    locks: KeyLocks,
    floors: PaxosFloors,
    dropped: HashSet<KeyspaceId>,
    drained: AtomicBool,
}

impl TestHost {
    fn new(store: Store) -> TestHost {
        TestHost {
            store,
            locks: KeyLocks::default(),
            floors: PaxosFloors::default(),
            dropped: HashSet::new(),
            drained: AtomicBool::new(false),
        }
    }
}

impl PaxosReplicaHost for TestHost {
    fn store(&self) -> &Store {
        &self.store
    }

    fn paxos_locks(&self) -> &KeyLocks {
        &self.locks
    }

    fn paxos_floors(&self) -> &PaxosFloors {
        &self.floors
    }

    fn check_serving(&self) -> Result<()> {
        if self.drained.load(Ordering::Relaxed) {
            return Err(ServingError::Drained.into());
        }
        Ok(())
    }

    fn check_keyspace(&self, id: KeyspaceId) -> Result<()> {
        if self.dropped.contains(&id) {
            return Err(NodeError::KeyspaceNotFound(id.to_string()));
        }
        Ok(())
    }
}

/// The store of a node whose data directory is `dir`: sled, in batch
/// durability. Without the commit log the node adds: its checkpoint task
/// keeps the engine (and sled's file lock) for a while after a close, so
/// one process could not reopen it at once; Paxos state does not go
/// through the log anyway (`Store::paxos_put` waits for an engine flush).
fn open_store(dir: &Path) -> Store {
    let engine = SledEngine::open(dir.join("db"), SledOptions::small()).unwrap();
    Store::open(Arc::new(engine), Durability::Batch).unwrap()
}

/// `host`'s node stopped and started again on its data directory `dir`
/// (a clean stop: the crash case is `what_was_answered_survives_…`).
async fn restart(host: TestHost, dir: &Path) -> TestHost {
    host.store.close().await.unwrap();
    drop(host);
    TestHost::new(open_store(dir))
}

fn ballot(micros: i64) -> Ballot {
    Ballot {
        micros,
        tiebreak: 1,
    }
}

fn proposal(micros: i64, value: &[u8]) -> Proposal {
    Proposal {
        ballot: ballot(micros),
        cell: Some(Cell::live(Timestamp(micros), value.to_vec())),
    }
}

fn stored_state(store: &Store, ks: KeyspaceId, key: &[u8]) -> AcceptorState {
    AcceptorState::decode(&store.paxos_get(ks, key).unwrap().unwrap()).unwrap()
}

#[tokio::test]
async fn a_promise_holds_after_a_restart_and_a_lower_ballot_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let ks = KeyspaceId::random();
    let host = TestHost::new(open_store(dir.path()));
    let answer = prepare(&host, ks, b"k", ballot(20)).await.unwrap();
    assert_eq!(
        answer,
        PrepareAnswer::Promised {
            promise: Promise::default(),
            data: None
        }
    );
    let host = restart(host, dir.path()).await;
    assert_eq!(
        prepare(&host, ks, b"k", ballot(10)).await.unwrap(),
        PrepareAnswer::Rejected {
            promised: ballot(20)
        }
    );
    assert_eq!(
        prepare(&host, ks, b"k", ballot(20)).await.unwrap(),
        PrepareAnswer::Rejected {
            promised: ballot(20)
        },
        "an equal ballot is not newer"
    );
    assert_eq!(
        accept(&host, ks, b"k", proposal(15, b"old")).await.unwrap(),
        AcceptReply::Rejected {
            promised: ballot(20)
        }
    );
    assert!(matches!(
        prepare(&host, ks, b"other key", ballot(10)).await.unwrap(),
        PrepareAnswer::Promised { .. }
    ));
}

/// A purge deletes exactly the states its floor covers and whose
/// acceptance is committed here; the floor then refuses what the purged
/// promises refused, after a restart too; the data keeps the commits.
#[tokio::test]
async fn a_purge_deletes_committed_state_under_its_floor_which_then_refuses_older_ballots() {
    let dir = tempfile::tempdir().unwrap();
    let ks = KeyspaceId::random();
    let host = TestHost::new(open_store(dir.path()));
    // "done": accepted and committed at 10. "open": accepted at 12, never
    // committed. "promised": only promised, at 14. "late": committed at 40,
    // past the floor.
    for (key, micros) in [(&b"done"[..], 10), (b"open", 12), (b"late", 40)] {
        let _ = prepare(&host, ks, key, ballot(micros)).await.unwrap();
        let _ = accept(&host, ks, key, proposal(micros, key)).await.unwrap();
    }
    let _ = prepare(&host, ks, b"promised", ballot(14)).await.unwrap();
    commit(&host, ks, b"done", proposal(10, b"done"))
        .await
        .unwrap();
    commit(&host, ks, b"late", proposal(40, b"late"))
        .await
        .unwrap();
    assert_eq!(uncommitted(&host, ks).unwrap(), vec![b"open".to_vec()]);

    let report = purge(&host, ks, ballot(30)).await.unwrap();
    assert_eq!((report.purged, report.kept), (2, 2), "{report:?}");
    assert_eq!(report.floor, Some(ballot(30)));
    for (key, kept) in [
        (&b"done"[..], false),
        (b"promised", false),
        (b"open", true),
        (b"late", true),
    ] {
        assert_eq!(
            host.store.paxos_get(ks, key).unwrap().is_some(),
            kept,
            "{key:?}"
        );
    }
    let data = host.store.read(ks, b"done").unwrap().unwrap();
    assert_eq!(
        data.value.as_deref(),
        Some(&b"done"[..]),
        "a commit's cell stays in the data"
    );

    // A lower floor later changes nothing; the floor survives a restart and
    // refuses every ballot a purged promise refused, and the floor itself.
    let report = purge(&host, ks, ballot(20)).await.unwrap();
    assert_eq!(report.floor, Some(ballot(30)));
    let host = restart(host, dir.path()).await;
    for older in [ballot(13), ballot(30)] {
        assert_eq!(
            prepare(&host, ks, b"promised", older).await.unwrap(),
            PrepareAnswer::Rejected {
                promised: ballot(30)
            }
        );
    }
    assert_eq!(
        accept(&host, ks, b"done", proposal(11, b"stale"))
            .await
            .unwrap(),
        AcceptReply::Rejected {
            promised: ballot(30)
        }
    );
    assert!(matches!(
        prepare(&host, ks, b"done", ballot(31)).await.unwrap(),
        PrepareAnswer::Promised { .. }
    ));
    // Another keyspace has a floor of its own.
    assert!(matches!(
        prepare(&host, KeyspaceId::random(), b"done", ballot(5))
            .await
            .unwrap(),
        PrepareAnswer::Promised { .. }
    ));
}

#[tokio::test]
async fn an_accepted_proposal_holds_after_a_restart_and_the_next_prepare_returns_it() {
    let dir = tempfile::tempdir().unwrap();
    let ks = KeyspaceId::random();
    let host = TestHost::new(open_store(dir.path()));
    let _ = prepare(&host, ks, b"k", ballot(10)).await.unwrap();
    let accepted = proposal(10, b"v");
    assert_eq!(
        accept(&host, ks, b"k", accepted.clone()).await.unwrap(),
        AcceptReply::Accepted
    );
    assert_eq!(
        accept(&host, ks, b"k", accepted.clone()).await.unwrap(),
        AcceptReply::Accepted,
        "a duplicate accept is accepted again"
    );
    let host = restart(host, dir.path()).await;
    assert_eq!(
        prepare(&host, ks, b"k", ballot(11)).await.unwrap(),
        PrepareAnswer::Promised {
            promise: Promise {
                accepted: Some(accepted),
                committed: None
            },
            data: None
        },
        "accepted, not committed: the data does not have it yet"
    );
}

#[tokio::test]
async fn a_commit_applies_its_cell_which_a_plain_read_sees_and_the_next_promise_reports() {
    let dir = tempfile::tempdir().unwrap();
    let ks = KeyspaceId::random();
    let host = TestHost::new(open_store(dir.path()));
    let chosen = proposal(10, b"chosen");
    let _ = prepare(&host, ks, b"k", ballot(10)).await.unwrap();
    let _ = accept(&host, ks, b"k", chosen.clone()).await.unwrap();
    commit(&host, ks, b"k", chosen.clone()).await.unwrap();
    let read = host.store.read(ks, b"k").unwrap().unwrap();
    assert_eq!(read.value.as_deref(), Some(&b"chosen"[..]));

    // A plain write newer than the commit wins by last write wins; an older
    // commit arriving late neither overwrites it nor moves the MRC back.
    let plain = Cell::live(Timestamp(50), b"plain".to_vec());
    host.store.apply(ks, b"k", plain.clone()).await.unwrap();
    commit(&host, ks, b"k", proposal(5, b"late")).await.unwrap();
    assert_eq!(host.store.read(ks, b"k").unwrap(), Some(plain.clone()));
    assert_eq!(
        stored_state(&host.store, ks, b"k").committed,
        Some(ballot(10))
    );

    assert_eq!(
        prepare(&host, ks, b"k", ballot(60)).await.unwrap(),
        PrepareAnswer::Promised {
            promise: Promise {
                accepted: Some(chosen),
                committed: Some(ballot(10)),
            },
            data: Some(plain),
        }
    );
}

/// The node-level proof of "durable before the reply": on a disk that
/// loses everything not synced, a crash right after each answer keeps
/// what was answered.
#[tokio::test]
async fn what_was_answered_survives_a_crash_right_after_the_answer() {
    let disk = SimulatedDisk::new();
    let ks = KeyspaceId::random();
    let open = || TestHost::new(Store::open(Arc::new(disk.clone()), Durability::Batch).unwrap());

    let host = open();
    let _ = prepare(&host, ks, b"k", ballot(10)).await.unwrap();
    drop(host);
    disk.crash();
    let host = open();
    assert_eq!(
        prepare(&host, ks, b"k", ballot(9)).await.unwrap(),
        PrepareAnswer::Rejected {
            promised: ballot(10)
        }
    );
    assert_eq!(
        accept(&host, ks, b"k", proposal(10, b"v")).await.unwrap(),
        AcceptReply::Accepted
    );
    drop(host);
    disk.crash();
    let host = open();
    assert_eq!(
        stored_state(&host.store, ks, b"k").accepted,
        Some(proposal(10, b"v"))
    );
}

/// Many tasks prepare one key at once, with ballots in random order; after
/// every promise, the stored promise is at least the promised ballot (a
/// prepare that loaded stale state and wrote it back would lower it), and
/// in the end it is the highest ballot promised.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_prepares_of_one_key_never_lower_a_promise() {
    use rand::seq::SliceRandom;
    use rand::{SeedableRng, rngs::StdRng};

    let dir = tempfile::tempdir().unwrap();
    let ks = KeyspaceId::random();
    let host = Arc::new(TestHost::new(open_store(dir.path())));
    let mut rng = StdRng::seed_from_u64(42);
    for round in 0..8i64 {
        let mut micros: Vec<i64> = (0..24).map(|i| round * 100 + i).collect();
        micros.shuffle(&mut rng);
        let tasks: Vec<_> = micros
            .into_iter()
            .map(|m| {
                let host = Arc::clone(&host);
                tokio::spawn(async move {
                    let answer = prepare(host.as_ref(), ks, b"hot", ballot(m)).await.unwrap();
                    if let PrepareAnswer::Promised { .. } = answer {
                        let held = stored_state(&host.store, ks, b"hot").promised;
                        assert!(held >= Some(ballot(m)), "promised {m}, then held {held:?}");
                    }
                    (m, answer)
                })
            })
            .collect();
        let mut highest_promised = None;
        for task in tasks {
            let (m, answer) = task.await.unwrap();
            match answer {
                PrepareAnswer::Promised { .. } => {
                    highest_promised = highest_promised.max(Some(ballot(m)));
                }
                PrepareAnswer::Rejected { promised } => assert!(promised >= ballot(m)),
            }
        }
        let highest = ballot(round * 100 + 23);
        assert_eq!(
            highest_promised,
            Some(highest),
            "the highest is always promised"
        );
        assert_eq!(
            stored_state(&host.store, ks, b"hot").promised,
            Some(highest)
        );
    }
}

#[tokio::test]
async fn corrupt_state_is_a_typed_data_loss_error_and_is_never_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let ks = KeyspaceId::random();
    let host = TestHost::new(open_store(dir.path()));
    let _ = prepare(&host, ks, b"k", ballot(10)).await.unwrap();
    let mut bytes = host.store.paxos_get(ks, b"k").unwrap().unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0x40;
    host.store.paxos_put(ks, b"k", &bytes).await.unwrap();

    let error = prepare(&host, ks, b"k", ballot(20)).await.unwrap_err();
    assert_eq!(error.code(), Code::DataLoss);
    assert!(error.is_damaged_replica());
    assert!(matches!(
        error,
        NodeError::Paxos(PaxosReplicaError::CorruptState { .. })
    ));
    assert!(error.to_string().contains("checksum"), "{error}");
    let error = accept(&host, ks, b"k", proposal(20, b"v"))
        .await
        .unwrap_err();
    assert_eq!(error.code(), Code::DataLoss);
    let error = commit(&host, ks, b"k", proposal(20, b"v"))
        .await
        .unwrap_err();
    assert_eq!(error.code(), Code::DataLoss);
    assert_eq!(
        host.store.paxos_get(ks, b"k").unwrap(),
        Some(bytes),
        "left as found"
    );
    assert_eq!(host.store.read(ks, b"k").unwrap(), None, "nothing applied");
}

#[tokio::test]
async fn dropped_keyspaces_bad_keys_and_a_drained_node_are_refused_and_an_unknown_keyspace_taken() {
    let dir = tempfile::tempdir().unwrap();
    let ks = KeyspaceId::random();
    let mut host = TestHost::new(open_store(dir.path()));
    let dropped = KeyspaceId::random();
    host.dropped.insert(dropped);

    // A keyspace this node has not learned yet: taken, as a replica write.
    let unknown = prepare(&host, KeyspaceId::random(), b"k", ballot(1)).await;
    assert!(
        matches!(unknown, Ok(PrepareAnswer::Promised { .. })),
        "{unknown:?}"
    );
    let gone = accept(&host, dropped, b"k", proposal(1, b"v")).await;
    assert_eq!(gone.unwrap_err().code(), Code::NotFound);
    let empty = prepare(&host, ks, b"", ballot(1)).await;
    assert_eq!(empty.unwrap_err().code(), Code::InvalidArgument);
    let long = commit(&host, ks, &vec![7; MAX_KEY_BYTES + 1], proposal(1, b"v")).await;
    assert_eq!(long.unwrap_err().code(), Code::InvalidArgument);
    host.drained.store(true, Ordering::Relaxed);
    let drained = prepare(&host, ks, b"k", ballot(1)).await;
    assert_eq!(drained.unwrap_err().code(), Code::Unavailable);
    assert_eq!(
        host.store.paxos_get(ks, b"k").unwrap(),
        None,
        "nothing stored"
    );
}
