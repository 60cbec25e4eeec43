//! Secure by default: a node that other machines can reach does not start
//! open, and the cluster secret is one worth having.
//!
//! # Rules
//! - A node whose internode or gossip address (bound or advertised) is not
//!   loopback needs a cluster secret, or it refuses to start with an error
//!   naming the choices — unless it is started `--insecure` (`insecure =
//!   true`), which it then logs loudly, as CockroachDB's `--insecure` and
//!   Redis's protected mode do. `0.0.0.0` counts as reachable. Internode TLS
//!   alone does not do: it guards the internode port, but gossip is UDP and
//!   only the secret authenticates it (a stranger could join the ring).
//! - A secret is at least [`MIN_SECRET_BYTES`] bytes; an empty or short one
//!   is refused, whatever the addresses.
//! - On loopback only, a node may start without a secret (`demo`, tests,
//!   a laptop): nobody else can reach it.
//!
//! The secret comes from `cluster_secret_file` (one secret per line: the
//! first seals gossip, every one is accepted, which is how a secret is
//! rotated without downtime: see [`ClusterSecrets`]), or from
//! `cluster_secret` (the config file or `RINGSTORE_CLUSTER_SECRET`). The
//! `--cluster-secret` flag still works but warns: it shows in `ps`.
//!
//! # Caveats
//! - The check looks at addresses, not at the network: a loopback-only node
//!   behind a port forward is as open as the forward makes it.

use std::path::Path;

use ringstore_membership::ClusterSecret;

use crate::config::NodeConfig;

pub use crate::start_refusals::{InsecureStart, MIN_SECRET_BYTES};

/// How open a node starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Posture {
    /// With a cluster secret: gossip and internode calls authenticated.
    Secured,
    /// Without one, on loopback addresses only.
    LoopbackOnly,
    /// Without one, reachable, because `insecure` says so.
    Insecure,
}

/// The cluster secrets a node holds: the first seals what it sends, every
/// one is accepted. Rotating: add the new one second on every node, then
/// move it first on every node, then drop the old one (each step reloaded
/// on every node before the next: `ringstore reloadsecrets`).
#[derive(Clone, PartialEq, Eq)]
pub struct ClusterSecrets {
    /// Each secret's bytes, the sealing one first; never empty.
    secrets: Vec<Vec<u8>>,
}

impl std::fmt::Debug for ClusterSecrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ClusterSecrets({} secrets)", self.secrets.len())
    }
}

impl ClusterSecrets {
    /// The secrets, the sealing one first.
    pub fn all(&self) -> &[Vec<u8>] {
        &self.secrets
    }

    /// The secrets as gossip's envelope takes them.
    pub fn for_gossip(&self) -> Vec<ClusterSecret> {
        self.secrets
            .iter()
            .filter_map(|secret| ClusterSecret::new(secret.clone()))
            .collect()
    }

    /// The secrets `config` names (none: the node has no secret). Each is
    /// checked for length.
    pub fn of(config: &NodeConfig) -> Result<Option<ClusterSecrets>, InsecureStart> {
        let secrets = match (&config.cluster_secret, &config.cluster_secret_file) {
            (Some(_), Some(_)) => return Err(InsecureStart::TwoSecrets),
            (Some(secret), None) => vec![secret.expose().as_bytes().to_vec()],
            (None, Some(path)) => read_secret_file(path)?,
            (None, None) => return Ok(None),
        };
        for secret in &secrets {
            if secret.len() < MIN_SECRET_BYTES {
                return Err(InsecureStart::ShortSecret { len: secret.len() });
            }
        }
        Ok(Some(ClusterSecrets { secrets }))
    }
}

/// The secrets of a secret file: one per line, surrounding blanks trimmed,
/// blank lines and `#` comments skipped.
fn read_secret_file(path: &Path) -> Result<Vec<Vec<u8>>, InsecureStart> {
    let text = std::fs::read_to_string(path).map_err(|source| InsecureStart::SecretFile {
        path: path.to_path_buf(),
        source,
    })?;
    let secrets: Vec<Vec<u8>> = text
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
        .map(|line| line.as_bytes().to_vec())
        .collect();
    if secrets.is_empty() {
        return Err(InsecureStart::EmptySecretFile {
            path: path.to_path_buf(),
        });
    }
    Ok(secrets)
}

/// Decides how open `config`'s node may start, or why it may not.
pub fn posture(config: &NodeConfig) -> Result<Posture, InsecureStart> {
    if ClusterSecrets::of(config)?.is_some() {
        return Ok(Posture::Secured);
    }
    let reachable = [
        ("internode_address", config.internode_address),
        ("gossip_address", config.gossip_address),
        (
            "broadcast_internode_address",
            config.advertised_internode_address(),
        ),
        (
            "broadcast_gossip_address",
            config.advertised_gossip_address(),
        ),
    ]
    .into_iter()
    .find(|(_, address)| !address.ip().is_loopback());
    match reachable {
        None => Ok(Posture::LoopbackOnly),
        Some(_) if config.insecure => Ok(Posture::Insecure),
        Some((setting, address)) => Err(InsecureStart::Open { setting, address }),
    }
}

/// Logs what `posture` means for the node, once at start.
pub fn announce(posture: Posture, config: &NodeConfig) {
    match posture {
        Posture::Secured => {}
        Posture::LoopbackOnly => tracing::warn!(
            "no cluster secret: gossip and the internode port are open, to loopback only \
             (on any other address the node would refuse to start)"
        ),
        Posture::Insecure => tracing::warn!(
            internode = %config.advertised_internode_address(),
            gossip = %config.advertised_gossip_address(),
            "INSECURE (started with --insecure): no cluster secret, so anyone who reaches \
             the internode or gossip port can join the ring, change the schema, and read \
             and write every key"
        ),
    }
}

#[cfg(test)]
mod tests {
    use std::net::SocketAddr;

    use super::*;

    fn config(address: &str) -> NodeConfig {
        let address: SocketAddr = address.parse().unwrap();
        NodeConfig {
            internode_address: address,
            gossip_address: SocketAddr::new(address.ip(), 7000),
            broadcast_internode_address: (address.ip().is_unspecified())
                .then(|| "10.0.0.1:7101".parse().unwrap()),
            broadcast_gossip_address: (address.ip().is_unspecified())
                .then(|| "10.0.0.1:7000".parse().unwrap()),
            ..NodeConfig::default()
        }
    }

    #[test]
    fn a_reachable_node_without_a_secret_refuses_to_start_and_names_the_choices() {
        for address in ["10.0.0.1:7101", "0.0.0.0:7101"] {
            let error = posture(&config(address)).unwrap_err();
            let text = error.to_string();
            for choice in [
                "cluster_secret_file",
                "RINGSTORE_CLUSTER_SECRET",
                "--insecure",
            ] {
                assert!(text.contains(choice), "{address}: {text}");
            }
        }
    }

    #[test]
    fn loopback_insecure_and_secured_nodes_start() {
        assert_eq!(
            posture(&config("127.0.0.5:7101")).unwrap(),
            Posture::LoopbackOnly
        );
        let mut open = config("10.0.0.1:7101");
        open.insecure = true;
        assert_eq!(posture(&open).unwrap(), Posture::Insecure);
        let mut secured = config("10.0.0.1:7101");
        secured.cluster_secret = Some("0123456789abcdef".into());
        assert_eq!(posture(&secured).unwrap(), Posture::Secured);
    }

    #[test]
    fn empty_and_short_secrets_are_refused_even_on_loopback() {
        for secret in ["", "short", "0123456789abcde"] {
            let mut c = config("127.0.0.1:7101");
            c.cluster_secret = Some(secret.into());
            assert!(
                matches!(posture(&c), Err(InsecureStart::ShortSecret { .. })),
                "{secret:?}"
            );
        }
    }

    #[test]
    fn a_secret_file_holds_one_secret_per_line_the_first_sealing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("secret");
        std::fs::write(
            &path,
            "# rotated on 2026-12-01\n  new-secret-0123456789  \n\nold-secret-0123456789\n",
        )
        .unwrap();
        let mut c = config("10.0.0.1:7101");
        c.cluster_secret_file = Some(path.clone());
        let secrets = ClusterSecrets::of(&c).unwrap().unwrap();
        assert_eq!(
            secrets.all(),
            [
                b"new-secret-0123456789".to_vec(),
                b"old-secret-0123456789".to_vec()
            ]
        );
        assert!(!format!("{secrets:?}").contains("secret-0123"));
        std::fs::write(&path, "# nothing\n\n").unwrap();
        assert!(matches!(
            ClusterSecrets::of(&c),
            Err(InsecureStart::EmptySecretFile { .. })
        ));
        c.cluster_secret = Some("0123456789abcdef".into());
        assert!(matches!(
            ClusterSecrets::of(&c),
            Err(InsecureStart::TwoSecrets)
        ));
    }
}
