//! Which replicas vote in a key's Paxos rounds: Cassandra's serial
//! consistency levels.

use std::fmt;

/// The serial consistency of a compare-and-set or serial read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum SerialConsistency {
    /// A quorum of all the key's replicas, in every data center (with the
    /// pending ones): linearizable across the whole cluster.
    #[default]
    Serial,
    /// A quorum of the key's replicas in the coordinator's data center
    /// only: linearizable as long as every operation on the key uses
    /// `LOCAL_SERIAL` in that one data center (as in Cassandra, mixing
    /// data centers or levels on one key gives no guarantee).
    LocalSerial,
}

impl SerialConsistency {
    /// Its name, as Cassandra spells it.
    pub fn name(self) -> &'static str {
        match self {
            SerialConsistency::Serial => "SERIAL",
            SerialConsistency::LocalSerial => "LOCAL_SERIAL",
        }
    }
}

impl fmt::Display for SerialConsistency {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
