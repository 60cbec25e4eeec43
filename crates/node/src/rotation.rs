//! Rotating the cluster secret and TLS certificates without a restart:
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
//! # A certificate's rotation
//! The same three steps with the TLS files: (1) the new CA added to each
//! node's `ca` file (a PEM bundle of both), (2) each node's certificate
//! and key replaced by ones from the new CA, (3) the old CA dropped from
//! `ca`. Every reload swaps the server configuration of each TLS port (new
//! connections use it; open ones keep theirs) and remakes the outgoing
//! internode channels.
//!
//! # Caveats
//! - A secret given inline (`cluster_secret` or `RINGSTORE_CLUSTER_SECRET`)
//!   cannot be reloaded: the setting is read once. A reload leaves it as
//!   it is (and still reloads the TLS files).
//! - A node cannot go from no secret to one (or back), nor turn TLS on or
//!   off, without a restart: it would cut itself off from the others.
//! - Files are all read and checked before anything is swapped: a bad file
//!   fails the reload and changes nothing.

use ringstore_membership::MembershipHandle;

use crate::config::NodeConfig;
use crate::error::{OperationError, Result};
use crate::peers::Peers;
use crate::security::ClusterSecrets;
use crate::tls::TlsHandles;

/// What a reload needs: the settings naming the files, and the parts that
/// hold what is read from them.
pub struct Rotation<'a> {
    /// The node's settings (the files' paths).
    pub config: &'a NodeConfig,
    /// Gossip, which seals and opens with the secrets.
    pub membership: &'a MembershipHandle,
    /// The TLS ports' server configurations.
    pub tls: &'a TlsHandles,
    /// The outgoing internode channels.
    pub peers: &'a Peers,
}

/// What a reload swapped.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Reloaded {
    /// The secrets now held (0: none).
    pub secrets: usize,
    /// Whether they were read from the secret file now.
    pub secrets_reloaded: bool,
    /// The ports whose TLS files were read now.
    pub tls: Vec<&'static str>,
}

/// Re-reads the secret file and the TLS files and swaps what they hold.
pub async fn reload(rotation: &Rotation<'_>) -> Result<Reloaded> {
    let config = rotation.config;
    // Read and check everything first.
    let secrets = ClusterSecrets::of(config)?;
    let client = match &rotation.tls.client {
        Some(_) => config.client_encryption.server_config()?,
        None => None,
    };
    let internode = match &rotation.tls.internode {
        Some(_) => config.server_encryption.configs()?,
        None => None,
    };
    let mut reloaded = Reloaded {
        secrets: secrets.as_ref().map_or(0, |s| s.all().len()),
        ..Reloaded::default()
    };
    if let (Some(secrets), Some(_)) = (&secrets, &config.cluster_secret_file) {
        if !rotation
            .membership
            .set_secrets(secrets.for_gossip())
            .await?
        {
            return Err(OperationError::NoClusterSecret.into());
        }
        reloaded.secrets_reloaded = true;
    }
    if let (Some(tls), Some(config)) = (&rotation.tls.client, client) {
        tls.replace(config);
        reloaded.tls.push("client");
    }
    if let (Some(tls), Some((server, client))) = (&rotation.tls.internode, internode) {
        tls.replace(server);
        rotation.peers.set_tls(client);
        reloaded.tls.push("internode");
    }
    tracing::info!(
        secrets = reloaded.secrets,
        secrets_reloaded = reloaded.secrets_reloaded,
        tls = ?reloaded.tls,
        "reloaded secrets"
    );
    Ok(reloaded)
}
