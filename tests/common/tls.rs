//! TLS for process tests: certificates made by `ringstore certs create`,
//! and servers started with TLS on both ports and a cluster secret.

use std::path::Path;
use std::process::Command;

use super::processes::{Processes, text};

const BIN: &str = env!("CARGO_BIN_EXE_ringstore");

/// `ringstore certs create` into `dir` for `ips`.
pub fn create_certs(dir: &Path, ips: &[String]) {
    let output = Command::new(BIN)
        .args(["certs", "create", "--out", dir.to_str().unwrap(), "--ip"])
        .arg(ips.join(","))
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", text(&output.stderr));
    for ip in ips {
        assert!(dir.join(format!("node-{ip}.crt")).exists());
    }
}

/// Server settings for TLS on both ports with `certs`' files for `ip`, and
/// the cluster secret `secret`.
pub fn tls_env(certs: &Path, ip: &str, secret: &str) -> Vec<(String, String)> {
    let file = |name: &str| certs.join(name).to_str().unwrap().to_string();
    let cert = file(&format!("node-{ip}.crt"));
    let key = file(&format!("node-{ip}.key"));
    vec![
        ("RINGSTORE_CLUSTER_SECRET".into(), secret.into()),
        ("RINGSTORE_CLIENT_ENCRYPTION__ENABLED".into(), "true".into()),
        (
            "RINGSTORE_CLIENT_ENCRYPTION__CERTIFICATE".into(),
            cert.clone(),
        ),
        (
            "RINGSTORE_CLIENT_ENCRYPTION__PRIVATE_KEY".into(),
            key.clone(),
        ),
        (
            "RINGSTORE_SERVER_ENCRYPTION__INTERNODE_ENCRYPTION".into(),
            "all".into(),
        ),
        ("RINGSTORE_SERVER_ENCRYPTION__CERTIFICATE".into(), cert),
        ("RINGSTORE_SERVER_ENCRYPTION__PRIVATE_KEY".into(), key),
        ("RINGSTORE_SERVER_ENCRYPTION__CA".into(), file("ca.crt")),
    ]
}

/// Starts server `i` with TLS on both ports (its `node-IP` files in
/// `certs`), `secret`, and `extra` settings.
pub fn start_tls(
    servers: &mut Processes,
    i: usize,
    certs: &Path,
    secret: &str,
    extra: &[(&str, &str)],
) {
    let ip = servers.address(i, 0).trim_end_matches(":0").to_string();
    let env = tls_env(certs, &ip, secret);
    let mut env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    env.extend_from_slice(extra);
    servers.start(i, &env);
}
