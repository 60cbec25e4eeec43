//! The wire forms of the Paxos RPCs (`PaxosPrepare`, `PaxosAccept`,
//! `PaxosCommit` of `internode.proto`), both ways: the internode service
//! decodes requests and encodes answers with them, and a coordinator does
//! the reverse.

use ringstore_paxos::{AcceptReply, Ballot, Promise, Proposal};
use ringstore_proto::v1 as pb;
use ringstore_storage::KeyspaceId;

use crate::convert::{cell_from_pb, cell_to_pb, keyspace_id_from_pb};
use crate::error::{PaxosReplicaError, Result};
use crate::paxos::replica::PrepareAnswer;

/// The name of the prepare call, in errors.
pub const PREPARE: &str = "PaxosPrepare";
/// The name of the accept call, in errors.
pub const ACCEPT: &str = "PaxosAccept";
/// The name of the commit call, in errors.
pub const COMMIT: &str = "PaxosCommit";

/// A ballot's wire form.
pub fn ballot_to_pb(ballot: Ballot) -> pb::PaxosBallot {
    pb::PaxosBallot {
        micros: ballot.micros,
        tiebreak: ballot.tiebreak,
    }
}

/// A ballot from its wire form; `part` of `call` when it is missing.
pub fn ballot_from_pb(
    ballot: Option<pb::PaxosBallot>,
    call: &'static str,
    part: &'static str,
) -> Result<Ballot> {
    let ballot = ballot.ok_or(PaxosReplicaError::Missing { call, part })?;
    Ok(Ballot {
        micros: ballot.micros,
        tiebreak: ballot.tiebreak,
    })
}

/// A proposal's wire form.
pub fn proposal_to_pb(proposal: &Proposal) -> pb::PaxosProposal {
    pb::PaxosProposal {
        ballot: Some(ballot_to_pb(proposal.ballot)),
        cell: proposal.cell.as_ref().map(cell_to_pb),
    }
}

/// A proposal from its wire form (`call`'s, for errors).
pub fn proposal_from_pb(
    proposal: Option<pb::PaxosProposal>,
    call: &'static str,
) -> Result<Proposal> {
    let proposal = proposal.ok_or(PaxosReplicaError::Missing {
        call,
        part: "proposal",
    })?;
    Ok(Proposal {
        ballot: ballot_from_pb(proposal.ballot, call, "proposal's ballot")?,
        cell: proposal.cell.map(cell_from_pb),
    })
}

/// A prepare request: keyspace, key, ballot.
pub fn prepare_request_to_pb(
    ks: KeyspaceId,
    key: &[u8],
    ballot: Ballot,
) -> pb::PaxosPrepareRequest {
    pb::PaxosPrepareRequest {
        keyspace_id: ks.to_string(),
        key: key.to_vec(),
        ballot: Some(ballot_to_pb(ballot)),
    }
}

/// A prepare request's keyspace, key and ballot.
pub fn prepare_request_from_pb(
    request: pb::PaxosPrepareRequest,
) -> Result<(KeyspaceId, Vec<u8>, Ballot)> {
    let ks = keyspace_id_from_pb(&request.keyspace_id)?;
    let ballot = ballot_from_pb(request.ballot, PREPARE, "ballot")?;
    Ok((ks, request.key, ballot))
}

/// An accept request: keyspace, key, proposal.
pub fn accept_request_to_pb(
    ks: KeyspaceId,
    key: &[u8],
    proposal: &Proposal,
) -> pb::PaxosAcceptRequest {
    pb::PaxosAcceptRequest {
        keyspace_id: ks.to_string(),
        key: key.to_vec(),
        proposal: Some(proposal_to_pb(proposal)),
    }
}

/// An accept request's keyspace, key and proposal.
pub fn accept_request_from_pb(
    request: pb::PaxosAcceptRequest,
) -> Result<(KeyspaceId, Vec<u8>, Proposal)> {
    let ks = keyspace_id_from_pb(&request.keyspace_id)?;
    let proposal = proposal_from_pb(request.proposal, ACCEPT)?;
    Ok((ks, request.key, proposal))
}

/// A commit request: keyspace, key, proposal.
pub fn commit_request_to_pb(
    ks: KeyspaceId,
    key: &[u8],
    proposal: &Proposal,
) -> pb::PaxosCommitRequest {
    pb::PaxosCommitRequest {
        keyspace_id: ks.to_string(),
        key: key.to_vec(),
        proposal: Some(proposal_to_pb(proposal)),
    }
}

/// A commit request's keyspace, key and proposal.
pub fn commit_request_from_pb(
    request: pb::PaxosCommitRequest,
) -> Result<(KeyspaceId, Vec<u8>, Proposal)> {
    let ks = keyspace_id_from_pb(&request.keyspace_id)?;
    let proposal = proposal_from_pb(request.proposal, COMMIT)?;
    Ok((ks, request.key, proposal))
}

/// A prepare's answer in its wire form.
pub fn prepare_answer_to_pb(answer: &PrepareAnswer) -> pb::PaxosPrepareResponse {
    use pb::paxos_prepare_response::Outcome;
    let outcome = match answer {
        PrepareAnswer::Promised { promise, data } => Outcome::Promised(pb::PaxosPromised {
            accepted: promise.accepted.as_ref().map(proposal_to_pb),
            committed: promise.committed.map(ballot_to_pb),
            cell: data.as_ref().map(cell_to_pb),
        }),
        PrepareAnswer::Rejected { promised } => Outcome::Rejected(pb::PaxosRejected {
            promised: Some(ballot_to_pb(*promised)),
        }),
    };
    pb::PaxosPrepareResponse {
        outcome: Some(outcome),
    }
}

/// A prepare's answer from its wire form.
pub fn prepare_answer_from_pb(response: pb::PaxosPrepareResponse) -> Result<PrepareAnswer> {
    use pb::paxos_prepare_response::Outcome;
    let missing = PaxosReplicaError::Missing {
        call: PREPARE,
        part: "outcome",
    };
    Ok(match response.outcome.ok_or(missing)? {
        Outcome::Promised(promised) => PrepareAnswer::Promised {
            promise: Promise {
                accepted: promised
                    .accepted
                    .map(|p| proposal_from_pb(Some(p), PREPARE))
                    .transpose()?,
                committed: promised
                    .committed
                    .map(|b| ballot_from_pb(Some(b), PREPARE, "committed ballot"))
                    .transpose()?,
            },
            data: promised.cell.map(cell_from_pb),
        },
        Outcome::Rejected(rejected) => PrepareAnswer::Rejected {
            promised: ballot_from_pb(rejected.promised, PREPARE, "refusal's ballot")?,
        },
    })
}

/// An accept's answer in its wire form.
pub fn accept_reply_to_pb(reply: AcceptReply) -> pb::PaxosAcceptResponse {
    use pb::paxos_accept_response::Outcome;
    let outcome = match reply {
        AcceptReply::Accepted => Outcome::Accepted(pb::PaxosAccepted {}),
        AcceptReply::Rejected { promised } => Outcome::Rejected(pb::PaxosRejected {
            promised: Some(ballot_to_pb(promised)),
        }),
    };
    pb::PaxosAcceptResponse {
        outcome: Some(outcome),
    }
}

/// An accept's answer from its wire form.
pub fn accept_reply_from_pb(response: pb::PaxosAcceptResponse) -> Result<AcceptReply> {
    use pb::paxos_accept_response::Outcome;
    let missing = PaxosReplicaError::Missing {
        call: ACCEPT,
        part: "outcome",
    };
    Ok(match response.outcome.ok_or(missing)? {
        Outcome::Accepted(_) => AcceptReply::Accepted,
        Outcome::Rejected(rejected) => AcceptReply::Rejected {
            promised: ballot_from_pb(rejected.promised, ACCEPT, "refusal's ballot")?,
        },
    })
}

#[cfg(test)]
mod tests {
    use ringstore_storage::{Cell, Timestamp};

    use super::*;

    fn ballot(micros: i64) -> Ballot {
        Ballot {
            micros,
            tiebreak: 7,
        }
    }

    #[test]
    fn answers_read_back_as_they_were_sent() {
        let promised = PrepareAnswer::Promised {
            promise: Promise {
                accepted: Some(Proposal {
                    ballot: ballot(5),
                    cell: Some(Cell::live(Timestamp(5), b"v".to_vec())),
                }),
                committed: Some(ballot(3)),
            },
            data: Some(Cell::live(Timestamp(3), b"u".to_vec())),
        };
        let rejected = PrepareAnswer::Rejected {
            promised: ballot(9),
        };
        for answer in [
            promised,
            rejected,
            PrepareAnswer::Promised {
                promise: Promise::default(),
                data: None,
            },
        ] {
            let back = prepare_answer_from_pb(prepare_answer_to_pb(&answer)).unwrap();
            assert_eq!(back, answer);
        }
        for reply in [
            AcceptReply::Accepted,
            AcceptReply::Rejected {
                promised: ballot(4),
            },
        ] {
            assert_eq!(
                accept_reply_from_pb(accept_reply_to_pb(reply)).unwrap(),
                reply
            );
        }
    }

    #[test]
    fn requests_without_their_ballot_or_proposal_are_invalid_arguments() {
        let ks = KeyspaceId::random();
        let mut prepare = prepare_request_to_pb(ks, b"k", ballot(1));
        prepare.ballot = None;
        let error = prepare_request_from_pb(prepare).unwrap_err();
        assert_eq!(error.code(), tonic::Code::InvalidArgument);
        assert_eq!(error.to_string(), "PaxosPrepare message without its ballot");
        let proposal = Proposal {
            ballot: ballot(1),
            cell: None,
        };
        let mut accept = accept_request_to_pb(ks, b"k", &proposal);
        accept.proposal = None;
        assert_eq!(
            accept_request_from_pb(accept).unwrap_err().code(),
            tonic::Code::InvalidArgument
        );
        let mut commit = commit_request_to_pb(ks, b"k", &proposal);
        commit.proposal.as_mut().unwrap().ballot = None;
        assert_eq!(
            commit_request_from_pb(commit).unwrap_err().to_string(),
            "PaxosCommit message without its proposal's ballot"
        );
    }
}
