//! Membership settings, with presets.

use std::net::SocketAddr;
use std::num::{NonZeroU8, NonZeroUsize};
use std::time::Duration;

use crate::envelope::ClusterSecret;

/// How a node finds, watches and talks to the rest of the cluster.
#[derive(Clone, Debug)]
pub struct MembershipConfig {
    /// The cluster's name; packets of other clusters are dropped.
    pub cluster_name: String,
    /// With a secret, every gossip packet is authenticated (HMAC-SHA256) and
    /// replays are dropped. Several during a rotation: the first seals,
    /// every one opens.
    pub cluster_secrets: Vec<ClusterSecret>,
    /// Gossip addresses to join through. A node whose only seed is itself
    /// starts a new cluster.
    pub seeds: Vec<SocketAddr>,
    /// foca's SWIM parameters: probe period, suspicion, packet size.
    pub swim: foca::Config,
    /// How often metadata digests are gossiped.
    pub metadata_gossip_interval: Duration,
    /// How many random live members get each digest, and each push of a
    /// local metadata change.
    pub metadata_gossip_fanout: usize,
    /// How often a node with no live member announces itself to the seeds
    /// (first try at once, the next three after 250 ms, 500 ms and 1 s if
    /// this is longer).
    pub seed_retry_interval: Duration,
    /// How often live peers are sent a clock probe.
    pub clock_probe_interval: Duration,
    /// How many random live peers get a clock probe each interval (every
    /// one when there are fewer). A peer's estimate lasts
    /// [`MAX_SAMPLE_AGE`](crate::offsets::MAX_SAMPLE_AGE), so with 16 a
    /// second every peer of a cluster of up to a few hundred has one; in a
    /// bigger cluster the verdict rests on the few hundred peers probed
    /// lately, a random sample.
    pub clock_probe_fanout: usize,
    /// The most a node's clock may be off from the majority of the live
    /// members before its [`ClockVerdict`](crate::ClockVerdict) says skewed.
    pub max_clock_offset: Duration,
    /// How long a node must have been connected before it judges what
    /// members claim about each other (see [`crate::claims`]): long enough
    /// to know who is up. Two probe periods.
    pub claim_settle: Duration,
}

impl MembershipConfig {
    /// The default preset for a LAN: probes every second, a member that stops
    /// answering is suspected after one failed probe cycle and declared down 4 s
    /// later unless it refutes the suspicion, so all nodes see it `Down`
    /// within about 10 s; a short flap is absorbed by the suspicion.
    pub fn lan(cluster_name: impl Into<String>, seeds: Vec<SocketAddr>) -> MembershipConfig {
        let mut swim = foca::Config::new_lan(std::num::NonZeroU32::new(32).expect("nonzero"));
        swim.probe_period = Duration::from_secs(1);
        swim.probe_rtt = Duration::from_millis(400);
        swim.suspect_to_down_after = Duration::from_secs(4);
        swim.max_transmissions = NonZeroU8::new(8).expect("nonzero");
        swim.max_packet_size = NonZeroUsize::new(1400).expect("nonzero");
        // Never forget a down member by itself: down is not left.
        swim.remove_down_after = None;
        // A member back from a partition (or a restart) is noticed within
        // about 2 s: the others announce to down members that often, and the
        // verdicts each side reached while cut off are refuted sooner.
        if let Some(announce) = &mut swim.periodic_announce_to_down_members {
            announce.frequency = Duration::from_secs(2);
        }
        MembershipConfig {
            cluster_name: cluster_name.into(),
            cluster_secrets: Vec::new(),
            seeds,
            swim,
            metadata_gossip_interval: Duration::from_secs(1),
            metadata_gossip_fanout: 2,
            seed_retry_interval: Duration::from_secs(2),
            clock_probe_interval: Duration::from_secs(1),
            clock_probe_fanout: 16,
            max_clock_offset: Duration::from_millis(500),
            claim_settle: Duration::from_secs(2),
        }
    }

    /// A slower preset for tests that run many debug-build nodes on two cores:
    /// everything three times as patient as [`MembershipConfig::lan`].
    pub fn relaxed(cluster_name: impl Into<String>, seeds: Vec<SocketAddr>) -> MembershipConfig {
        let mut config = MembershipConfig::lan(cluster_name, seeds);
        config.swim.probe_period *= 3;
        config.swim.probe_rtt *= 3;
        config.swim.suspect_to_down_after *= 3;
        config.claim_settle *= 3;
        config
    }

    /// Sets the clock-offset bound.
    pub fn with_max_clock_offset(mut self, max_clock_offset: Duration) -> MembershipConfig {
        self.max_clock_offset = max_clock_offset;
        self
    }

    /// Sets the cluster secret.
    pub fn with_secret(mut self, secret: Option<ClusterSecret>) -> MembershipConfig {
        self.cluster_secrets = secret.into_iter().collect();
        self
    }

    /// Sets the cluster secrets: the first seals, every one opens.
    pub fn with_secrets(mut self, secrets: Vec<ClusterSecret>) -> MembershipConfig {
        self.cluster_secrets = secrets;
        self
    }
}
