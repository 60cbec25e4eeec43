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

/// `GET path` over TLS from `address` (`IP:port`), trusting the CA in
/// `ca`, with `token` as its bearer token: the status and the body; the
/// reason if the exchange fails.
pub fn https_get(
    address: &str,
    path: &str,
    ca: &Path,
    token: Option<&str>,
) -> Result<(u16, String), String> {
    use std::sync::Arc;
    use tokio_rustls::rustls;
    use tokio_rustls::rustls::pki_types::pem::PemObject;
    use tokio_rustls::rustls::pki_types::{CertificateDer, ServerName};

    let error = |e: &dyn std::fmt::Display| e.to_string();
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(ca).map_err(|e| error(&e))? {
        roots
            .add(cert.map_err(|e| error(&e))?)
            .map_err(|e| error(&e))?;
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| error(&e))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    let socket: std::net::SocketAddr = address.parse().map_err(|e| error(&e))?;
    let name = ServerName::IpAddress(socket.ip().into());
    let connection =
        rustls::ClientConnection::new(Arc::new(config), name).map_err(|e| error(&e))?;
    let tcp = std::net::TcpStream::connect(socket).map_err(|e| error(&e))?;
    tcp.set_read_timeout(Some(std::time::Duration::from_secs(20)))
        .map_err(|e| error(&e))?;
    let mut stream = rustls::StreamOwned::new(connection, tcp);
    let answer = super::processes::http_exchange(&mut stream, address, path, token)?;
    Ok((answer.status, answer.body))
}

/// What a plaintext `GET /metrics` to `address` gets back, whatever it is
/// (nothing, or a TLS alert, from a TLS port).
pub fn plaintext_exchange(address: &str) -> String {
    use std::io::{Read, Write};
    let Ok(mut stream) = std::net::TcpStream::connect(address) else {
        return String::new();
    };
    let _ = stream.set_read_timeout(Some(std::time::Duration::from_secs(10)));
    let _ = write!(
        stream,
        "GET /metrics HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n"
    );
    let mut response = Vec::new();
    let _ = stream.read_to_end(&mut response);
    String::from_utf8_lossy(&response).into_owned()
}
