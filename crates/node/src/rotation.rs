//! Rotating the cluster secret (and TLS certificates) without a restart:
//! `ringstore reloadsecrets` re-reads the files and swaps what the node
//! holds, one node at a time.
//!
//! # A secret's rotation
//! The secret file lists one secret per line: the first seals gossip,
//! every one is accepted (see [`crate::security::ClusterSecrets`]). With
//! the old secret `A` and the new `B`, three steps, each done on every
//! node (edit the file, `reloadsecrets`) before the next:
//!
//! 1. `A` then `B`: every node still seals with `A` and now accepts `B`;
//! 2. `B` then `A`: every node seals with `B` and still accepts `A`;
//! 3. `B` alone: `A` is refused from now on.
//!
//! At every moment each node accepts what every other node seals with, so
//! no packet is refused and no request fails. Internode calls do not use
//! the secret (members prove themselves with the keys they share, see
//! [`crate::internode_auth`]), so only gossip is concerned.
//!
//! # Caveats
//! - A secret given inline (`cluster_secret` or `RINGSTORE_CLUSTER_SECRET`)
//!   cannot be reloaded: the setting is read once. Rotating it takes the
//!   file, or a rolling restart with the file.
//! - A node cannot go from no secret to one (or back) without a restart:
//!   it would cut itself off from the others at once.

use ringstore_membership::MembershipHandle;

use crate::config::NodeConfig;
use crate::error::{NodeError, Result};
use crate::security::ClusterSecrets;

/// What a reload needs: the settings naming the files, and the parts that
/// hold what is read from them.
pub struct Rotation {
    /// The node's settings (the secret file's path).
    pub config: NodeConfig,
    /// Gossip, which seals and opens with the secrets.
    pub membership: MembershipHandle,
}

/// What a reload swapped.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Reloaded {
    /// The secrets now held.
    pub secrets: usize,
    /// The ports whose TLS files were re-read.
    pub tls: Vec<&'static str>,
}

/// Re-reads the secret file and swaps the secrets gossip uses.
pub async fn reload(rotation: &Rotation) -> Result<Reloaded> {
    let config = &rotation.config;
    if config.cluster_secret_file.is_none() {
        return Err(NodeError::FailedPrecondition(
            "this node's cluster secret is not in a file (cluster_secret_file), so there is \
             nothing to re-read: move it to a file to rotate it without a restart"
                .into(),
        ));
    }
    let secrets = ClusterSecrets::of(config)?
        .ok_or_else(|| NodeError::Internal("a secret file without secrets".into()))?;
    let count = secrets.all().len();
    let swapped = rotation
        .membership
        .set_secrets(secrets.for_gossip())
        .await?;
    if !swapped {
        return Err(NodeError::FailedPrecondition(
            "this node started without a cluster secret: restart it to add one".into(),
        ));
    }
    tracing::info!(secrets = count, "reloaded the cluster secrets");
    Ok(Reloaded {
        secrets: count,
        tls: Vec::new(),
    })
}
