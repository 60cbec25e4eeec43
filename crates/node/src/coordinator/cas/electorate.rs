//! Who votes in a key's rounds: the key's replicas the serial level names,
//! natural and pending, from one snapshot of the view.
//!
//! - `SERIAL`: every natural replica, in every data center, plus every
//!   pending one (a join, a leave, a keyspace alter, and for `ring_delay`
//!   after a ring switch the live replicas only the replaced ring has: the
//!   write candidates of [`write_candidates`](super::super::replicas::write_candidates)).
//!   Counting the pending replicas in the quorum (natural/2 + 1 + pending,
//!   as Cassandra does) makes every quorum during a movement meet every
//!   quorum of both the old and the new placement.
//! - `LOCAL_SERIAL`: the same, restricted to this node's data center.

use ringstore_paxos::{Electorate, SerialConsistency};
use ringstore_placement::{Datacenter, HostId};
use ringstore_replication::ReplicaCandidate;

use crate::error::{CasError, Result};

/// The electorate of a key at `serial` for a coordinator in `local_dc`,
/// and how many of its members are up (this node counts as up).
pub(super) fn electorate(
    serial: SerialConsistency,
    local_dc: &Datacenter,
    this_node: HostId,
    natural: &[ReplicaCandidate],
    pending: &[ReplicaCandidate],
) -> Result<(Electorate, usize)> {
    let votes = |c: &&ReplicaCandidate| match serial {
        SerialConsistency::Serial => true,
        SerialConsistency::LocalSerial => &c.dc == local_dc,
    };
    let natural: Vec<&ReplicaCandidate> = natural.iter().filter(votes).collect();
    let pending: Vec<&ReplicaCandidate> = pending.iter().filter(votes).collect();
    if natural.is_empty() {
        return Err(CasError::NoLocalReplicas {
            dc: local_dc.to_string(),
        }
        .into());
    }
    let alive = natural
        .iter()
        .chain(&pending)
        .filter(|c| c.alive || c.host == this_node)
        .count();
    let hosts = |cs: &[&ReplicaCandidate]| cs.iter().map(|c| c.host).collect::<Vec<_>>();
    let electorate = Electorate::new(hosts(&natural), hosts(&pending))
        .map_err(|source| CasError::Electorate { source })?;
    Ok((electorate, alive))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(n: u128) -> HostId {
        HostId(uuid::Uuid::from_u128(n))
    }

    fn candidate(n: u128, dc: &str, alive: bool) -> ReplicaCandidate {
        ReplicaCandidate::new(host(n), dc, alive)
    }

    #[test]
    fn serial_counts_every_dc_and_local_serial_only_its_own() {
        let natural = [
            candidate(1, "dc1", true),
            candidate(2, "dc1", false),
            candidate(3, "dc2", true),
        ];
        let pending = [candidate(4, "dc2", true)];
        let dc1 = Datacenter::from("dc1");
        let (all, alive) =
            electorate(SerialConsistency::Serial, &dc1, host(1), &natural, &pending).unwrap();
        assert_eq!(all.len(), 4);
        assert_eq!(all.quorum(), 3, "3 natural / 2 + 1, plus 1 pending");
        assert_eq!(alive, 3);
        let (local, alive) = electorate(
            SerialConsistency::LocalSerial,
            &dc1,
            host(1),
            &natural,
            &pending,
        )
        .unwrap();
        assert_eq!(local.natural(), &[host(1), host(2)]);
        assert!(local.pending().is_empty());
        assert_eq!((local.quorum(), alive), (2, 1));
    }

    #[test]
    fn local_serial_without_a_local_replica_is_refused() {
        let natural = [candidate(3, "dc2", true)];
        let error = electorate(
            SerialConsistency::LocalSerial,
            &Datacenter::from("dc1"),
            host(1),
            &natural,
            &[],
        )
        .unwrap_err();
        assert!(
            error.to_string().contains("no replica in data center"),
            "{error}"
        );
    }
}
