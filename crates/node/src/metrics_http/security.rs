//! Who may read `GET /metrics`, and over what: the `[metrics_security]`
//! settings, the check that refuses a clear metrics port beside a secured
//! client port, and the bearer token.
//!
//! The metrics page tells who the nodes are, what they hold and how busy
//! they are. A node whose client port wants TLS or passwords does not serve
//! it to anyone in clear: `/metrics` on a non-loopback address must be
//! served over TLS (the client port's certificate and key), or ask for a
//! bearer token (Prometheus's `authorization` / `bearer_token_file`), or
//! both; else the node refuses to start, naming the choices. A loopback
//! address is exempt (only local processes reach it), and
//! `allow_open = true` serves it in clear anyway, logged as unsafe.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use serde::Deserialize;

/// Who may read `GET /metrics`, and over what (`[metrics_security]`).
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(default, deny_unknown_fields)]
pub struct MetricsSecurity {
    /// Serve `/metrics` over TLS only, with the client port's certificate
    /// and key (`client_encryption.certificate`, `.private_key`, needed
    /// even when the client port itself is plaintext); scrapers verify it
    /// against the CA clients use. No client certificate is asked for.
    pub tls: bool,
    /// A file (mode 0600) holding the token a scraper must send as
    /// `Authorization: Bearer <token>` (surrounding whitespace ignored);
    /// without it, or with another, a scrape gets 401. Unset: no token.
    pub bearer_token_file: Option<PathBuf>,
    /// Serve `/metrics` in clear, without a token, on a non-loopback
    /// address even though the client port is secured (logged as unsafe
    /// at start). Default false: such a node refuses to start.
    pub allow_open: bool,
}

pub use crate::start_refusals::MetricsHttpError;

impl MetricsSecurity {
    /// What is wrong with these settings for `/metrics` at `bind` (none:
    /// disabled), beside a client port that is secured (`client_secured`:
    /// TLS or passwords), with the client port's certificate and key set or
    /// not (`tls_files`).
    pub fn check(
        &self,
        bind: Option<SocketAddr>,
        client_secured: bool,
        tls_files: bool,
    ) -> Result<(), String> {
        let Some(bind) = bind else {
            return Ok(());
        };
        if self.tls && !tls_files {
            return Err(
                "metrics_security.tls = true serves /metrics with the client port's \
                 certificate: set client_encryption.certificate and \
                 client_encryption.private_key"
                    .into(),
            );
        }
        if self.refuses_clear(bind, client_secured) {
            return Err(format!(
                "/metrics at {bind} (metrics_address, by default the listen IP on port 7200) \
                 would be served in clear to anyone who reaches it, while the client port is \
                 secured: set metrics_security.tls = true (the client port's certificate) \
                 and/or metrics_security.bearer_token_file, bind metrics_address to a loopback \
                 address (127.0.0.1:7200), set metrics_enabled = false, or accept the risk \
                 with metrics_security.allow_open = true"
            ));
        }
        Ok(())
    }

    /// Whether `/metrics` at `bind` is served in clear to anyone on a
    /// network beside a secured client port (refused, or with `allow_open`
    /// logged as unsafe).
    pub fn open_beside_secured(&self, bind: SocketAddr, client_secured: bool) -> bool {
        client_secured && !bind.ip().is_loopback() && !self.tls && self.bearer_token_file.is_none()
    }

    fn refuses_clear(&self, bind: SocketAddr, client_secured: bool) -> bool {
        self.open_beside_secured(bind, client_secured) && !self.allow_open
    }
}

/// The token scrapers must present; never shown by `Debug`.
#[derive(Clone)]
pub struct BearerToken(Vec<u8>);

impl std::fmt::Debug for BearerToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("BearerToken(..)")
    }
}

impl BearerToken {
    /// The token in `path` (whitespace around it ignored); warns when the
    /// file is readable by group or others.
    pub fn read(path: &Path) -> Result<BearerToken, MetricsHttpError> {
        let text = std::fs::read_to_string(path).map_err(|source| MetricsHttpError::TokenFile {
            path: path.to_path_buf(),
            source,
        })?;
        let token = text.trim();
        if token.is_empty() {
            return Err(MetricsHttpError::EmptyToken {
                path: path.to_path_buf(),
            });
        }
        crate::file_modes::warn_if_readable_by_others(path, "metrics_security.bearer_token_file");
        Ok(BearerToken(token.as_bytes().to_vec()))
    }

    /// Whether an `Authorization` header value presents this token,
    /// compared in time that does not depend on where they differ.
    pub fn admits(&self, authorization: Option<&[u8]>) -> bool {
        let Some(presented) = authorization.and_then(|value| value.strip_prefix(b"Bearer ")) else {
            return false;
        };
        let presented = presented.trim_ascii();
        presented.len() == self.0.len()
            && presented
                .iter()
                .zip(&self.0)
                .fold(0u8, |differ, (a, b)| differ | (a ^ b))
                == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_exact_bearer_token_is_admitted() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("token");
        std::fs::write(&file, "  s3cret-token\n").unwrap();
        let token = BearerToken::read(&file).unwrap();
        assert!(token.admits(Some(b"Bearer s3cret-token")));
        for wrong in [
            &b"Bearer s3cret-toke"[..],
            b"Bearer s3cret-token2",
            b"bearer s3cret-token",
            b"Basic s3cret-token",
            b"s3cret-token",
            b"Bearer ",
        ] {
            assert!(
                !token.admits(Some(wrong)),
                "{}",
                String::from_utf8_lossy(wrong)
            );
        }
        assert!(!token.admits(None));
        assert_eq!(format!("{token:?}"), "BearerToken(..)");
        std::fs::write(&file, " \n").unwrap();
        assert!(matches!(
            BearerToken::read(&file),
            Err(MetricsHttpError::EmptyToken { .. })
        ));
        assert!(matches!(
            BearerToken::read(&dir.path().join("missing")),
            Err(MetricsHttpError::TokenFile { .. })
        ));
    }
}
