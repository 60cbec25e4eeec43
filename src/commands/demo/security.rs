//! How `ringstore demo --tls` and `--auth` secure the demo nodes, and how a
//! client then connects.
//!
//! With `--tls` the demo makes a test CA and a certificate for every node
//! address (and one for clients) in `DATA_DIR/certs` with the code of
//! `ringstore certs create`, reusing them when a previous run with the same
//! data directory left a complete set. Both ports are TLS-only and mutual:
//! a node presents its certificate to its peers and demands theirs, and a
//! client must present the client certificate. Every node shares a random
//! cluster secret, new at every run (it is never persisted, so nothing
//! outlives the demo but the data and the certificates).
//!
//! With `--auth` the nodes run the password authenticator; once the default
//! superuser `cassandra` exists, the demo changes its password to a random
//! one (which lifts the default superuser's restriction to user management),
//! prints it, and keeps it in `DATA_DIR/superuser-password` (mode 0600) for
//! the next run on the same data directory.

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use ringstore_client_auth::{DEFAULT_PASSWORD, DEFAULT_SUPERUSER};
use ringstore_node::NodeConfig;
use ringstore_node::client_auth::Authenticator;
use ringstore_node::config::SecretString;
use ringstore_node::tls::{ClientEncryption, InternodeEncryption, ServerEncryption};
use ringstore_proto::v1 as pb;

use crate::client::{ClientTls, Connection, Credentials};
use crate::commands::certs::{self, CertFiles};
use crate::failure::Failure;

/// How long the demo's certificates are valid, in days.
const CERTIFICATE_DAYS: u32 = 30;

/// What secures the demo nodes.
pub struct Security {
    /// The certificates, with `--tls`.
    certs: Option<CertFiles>,
    /// The cluster secret, with `--tls`.
    secret: Option<SecretString>,
    /// Whether the password authenticator is on (`--auth`).
    auth: bool,
    /// The superuser's password, once the demo has set it.
    password: Option<String>,
    /// Where it is kept between runs on one data directory.
    password_file: PathBuf,
}

impl Security {
    /// With `tls`, certificates for `ips` in `root/certs` (made, or reused
    /// if a complete set is there) and a fresh random secret.
    pub fn new(tls: bool, auth: bool, root: &Path, ips: &[IpAddr]) -> anyhow::Result<Security> {
        let (certs, secret) = if tls {
            let files = CertFiles::in_dir(&root.join("certs"));
            let files = if files.complete_for(ips) {
                files
            } else {
                certs::create(files.dir(), ips, CERTIFICATE_DAYS)
                    .context("making the demo's certificates")?
            };
            let secret = hex::encode(rand::random::<[u8; 32]>());
            (Some(files), Some(SecretString::from(secret.as_str())))
        } else {
            (None, None)
        };
        Ok(Security {
            certs,
            secret,
            auth,
            password: None,
            password_file: root.join("superuser-password"),
        })
    }

    /// Secures the configuration of the node at `ip`, one of `nodes`.
    pub fn apply(&self, config: &mut NodeConfig, ip: IpAddr, nodes: usize) {
        if let Some(files) = &self.certs {
            let certificate = Some(files.node_certificate(ip));
            let private_key = Some(files.node_key(ip));
            config.client_encryption = ClientEncryption {
                enabled: true,
                certificate: certificate.clone(),
                private_key: private_key.clone(),
                ca: Some(files.ca()),
                require_client_auth: true,
            };
            config.server_encryption = ServerEncryption {
                internode_encryption: InternodeEncryption::All,
                certificate,
                private_key,
                ca: Some(files.ca()),
                require_client_auth: true,
            };
            // The HTTP port (metrics and the web console) over TLS too,
            // with the node's certificate: no client certificate, so a
            // browser that trusts the demo's CA opens it.
            config.metrics_security.tls = true;
        }
        config.cluster_secret = self.secret.clone();
        if self.auth {
            config.auth.authenticator = Authenticator::Password;
            // A quorum of system_auth's replicas must be up to log in.
            config.auth.replication_factor = nodes.min(3) as u32;
        }
    }

    /// The CLI's TLS settings, with `--tls`.
    fn client_tls(&self) -> Result<Option<ClientTls>, Failure> {
        let Some(files) = &self.certs else {
            return Ok(None);
        };
        ClientTls::from_files(
            Some(&files.ca()),
            Some(&files.client_certificate()),
            Some(&files.client_key()),
        )
    }

    /// A connection to `address` as the demo's clients make it. With
    /// `--auth`, call [`Security::set_password`] first.
    pub async fn connect(&self, address: SocketAddr) -> Result<Connection, Failure> {
        let credentials = match &self.password {
            Some(password) => Credentials::new(Some(DEFAULT_SUPERUSER), Some(password))?,
            None => Credentials::default(),
        };
        Connection::open(
            &address.to_string(),
            self.client_tls()?.as_ref(),
            credentials,
        )
        .await
    }

    /// With `--auth`: waits (up to 2 minutes) until the superuser can log
    /// in, then gives it a random password, kept in `DATA_DIR/superuser-password`
    /// for a later run on the same data (which logs in with it instead).
    pub async fn set_password(&mut self, address: SocketAddr) -> Result<(), Failure> {
        if !self.auth {
            return Ok(());
        }
        let saved = &self.password_file;
        let (current, password, which) = match std::fs::read_to_string(saved) {
            Ok(text) => {
                let text = text.trim().to_string();
                let which = format!("the password in {}", saved.display());
                (text.clone(), text, which)
            }
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => (
                DEFAULT_PASSWORD.to_string(),
                hex::encode(rand::random::<[u8; 12]>()),
                "the default password".to_string(),
            ),
            Err(error) => {
                return Err(anyhow::Error::from(error)
                    .context(format!("cannot read {}", saved.display()))
                    .into());
            }
        };
        let credentials = Credentials::new(Some(DEFAULT_SUPERUSER), Some(&current))?;
        let tls = self.client_tls()?;
        let connection = Connection::open(&address.to_string(), tls.as_ref(), credentials).await?;
        let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
        loop {
            // Setting the password it has already is a login check.
            let changed = connection
                .users()
                .change_password(pb::ChangePasswordRequest {
                    name: DEFAULT_SUPERUSER.into(),
                    new_password: password.clone(),
                })
                .await;
            match changed {
                Ok(_) => break,
                // Until system_auth has its superuser: unauthenticated or unavailable.
                Err(status) if tokio::time::Instant::now() > deadline => {
                    return Err(anyhow::anyhow!(
                        "{DEFAULT_SUPERUSER} could not log in with {which} within 2 minutes: {}",
                        status.message()
                    )
                    .into());
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(500)).await,
            }
        }
        if current != password {
            certs::write_private(saved, password.as_bytes())
                .with_context(|| format!("cannot write {}", saved.display()))?;
        }
        self.password = Some(password);
        Ok(())
    }

    /// What to tell the user about how the cluster is secured, if anything.
    pub fn describe(&self) -> Vec<String> {
        let mut lines = Vec::new();
        if let Some(files) = &self.certs {
            lines.push(format!(
                "TLS on the client and internode ports, mutual (certificates in {}), \
                 and a random cluster secret",
                files.dir().display()
            ));
            lines.push(format!(
                "The HTTP port (metrics, web console) serves HTTPS only: a browser warns \
                 until it trusts {}",
                files.ca().display()
            ));
        }
        if let Some(password) = &self.password {
            lines.push(format!(
                "Password authentication: user {DEFAULT_SUPERUSER}, password {password}"
            ));
            lines.push(format!(
                "  export RINGSTORE_USER={DEFAULT_SUPERUSER} RINGSTORE_PASSWORD={password}"
            ));
            if self.certs.is_none() {
                lines.push("  (sent in plaintext: add --tls to encrypt it)".into());
            }
        }
        lines
    }

    /// The CLI flags before the command (`--host` when given, and the TLS
    /// files), each after a space.
    pub fn cli_flags(&self, host: Option<SocketAddr>) -> String {
        let mut flags = host.map(|h| format!(" --host {h}")).unwrap_or_default();
        if let Some(files) = &self.certs {
            for (flag, path) in [
                ("--ca-cert", files.ca()),
                ("--client-cert", files.client_certificate()),
                ("--client-key", files.client_key()),
            ] {
                flags.push_str(&format!(" {flag} {}", quoted(&path)));
            }
        }
        flags
    }
}

/// `path` as a shell word.
fn quoted(path: &Path) -> String {
    let text = path.to_string_lossy();
    match shlex::try_quote(&text) {
        Ok(word) => word.into_owned(),
        Err(_) => text.into_owned(),
    }
}
