//! The replica side of per-key Paxos over the wire: `PaxosPrepare`,
//! `PaxosAccept` and `PaxosCommit` on a running node, its answers, what a
//! commit leaves in the data, and a promise that outlives a restart. (The
//! coordinator side, `PutIf`/`GetSerial`, is tested where it is built.)

mod common;

use common::TestCluster;
use ringstore_proto::v1 as pb;
use tonic::Code;

fn ballot(micros: i64) -> Option<pb::PaxosBallot> {
    Some(pb::PaxosBallot {
        micros,
        tiebreak: 9,
    })
}

fn prepare(keyspace_id: &str, micros: i64) -> pb::PaxosPrepareRequest {
    pb::PaxosPrepareRequest {
        keyspace_id: keyspace_id.into(),
        key: b"k".to_vec(),
        ballot: ballot(micros),
    }
}

fn proposal(micros: i64, value: &[u8]) -> Option<pb::PaxosProposal> {
    Some(pb::PaxosProposal {
        ballot: ballot(micros),
        cell: Some(pb::Cell {
            timestamp_micros: micros,
            expires_at_micros: None,
            value: Some(value.to_vec()),
        }),
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_promises_accepts_and_commits_over_internode_and_keeps_its_promise_across_a_restart()
 {
    use pb::paxos_accept_response::Outcome as Accept;
    use pb::paxos_prepare_response::Outcome as Prepare;

    let mut cluster = TestCluster::start(233, 1, 1).await;
    let id = cluster.create_keyspace(0, "ks", 1).await;
    let mut internode = cluster.internode(0).await;

    let promised = internode.paxos_prepare(prepare(&id, 100)).await.unwrap();
    assert_eq!(
        promised.into_inner().outcome,
        Some(Prepare::Promised(pb::PaxosPromised::default()))
    );
    let accepted = internode
        .paxos_accept(pb::PaxosAcceptRequest {
            keyspace_id: id.clone(),
            key: b"k".to_vec(),
            proposal: proposal(100, b"chosen"),
        })
        .await
        .unwrap();
    assert_eq!(
        accepted.into_inner().outcome,
        Some(Accept::Accepted(pb::PaxosAccepted {}))
    );
    internode
        .paxos_commit(pb::PaxosCommitRequest {
            keyspace_id: id.clone(),
            key: b"k".to_vec(),
            proposal: proposal(100, b"chosen"),
        })
        .await
        .unwrap();
    assert_eq!(cluster.local_value(0, "ks", "k"), Some(b"chosen".to_vec()));

    let next = internode.paxos_prepare(prepare(&id, 200)).await.unwrap();
    let Some(Prepare::Promised(promise)) = next.into_inner().outcome else {
        panic!("a newer ballot is promised");
    };
    assert_eq!(promise.accepted, proposal(100, b"chosen"));
    assert_eq!(promise.committed, ballot(100));
    assert_eq!(promise.cell.and_then(|c| c.value), Some(b"chosen".to_vec()));

    // A keyspace not learned yet is taken (as a replica write to it is);
    // a request without its ballot is refused.
    let unknown = uuid::Uuid::new_v4().to_string();
    let promised = internode.paxos_prepare(prepare(&unknown, 300)).await;
    assert!(promised.is_ok(), "{promised:?}");
    let mut no_ballot = prepare(&id, 300);
    no_ballot.ballot = None;
    let status = internode.paxos_prepare(no_ballot).await.unwrap_err();
    assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");

    cluster.stop(0).await;
    cluster.restart(0).await;
    let mut internode = cluster.internode(0).await;
    let refused = internode.paxos_prepare(prepare(&id, 150)).await.unwrap();
    assert_eq!(
        refused.into_inner().outcome,
        Some(Prepare::Rejected(pb::PaxosRejected {
            promised: ballot(200)
        }))
    );
    cluster.shutdown().await;
}
