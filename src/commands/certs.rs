//! `ringstore certs create`: a test CA and node and client certificates in
//! one command (rcgen), for trying TLS and for the tests.
//!
//! Node certificates carry their IP address as the subject alternative name
//! (peers and clients verify a node by the address they dial) and are valid
//! for both server and client authentication, since a node is a client of
//! its peers. Keys are ECDSA P-256, written with mode 0600. Nothing is
//! overwritten: an existing file is an error naming it, so a CA is never
//! replaced by accident. These are for tests and trials; a production CA
//! belongs in the operator's PKI.
//!
//! [`create`] is also what `ringstore demo --tls` calls.

use std::io::Write;
use std::net::IpAddr;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use rcgen::{
    BasicConstraints, Certificate, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose,
};

use crate::cli::{CertsCommand, CertsCreateArgs};

/// Runs a `certs` subcommand.
pub fn run(command: &CertsCommand, out: &mut impl Write) -> Result<()> {
    match command {
        CertsCommand::Create(args) => create_command(args, out),
    }
}

/// The files [`create`] writes into one directory, by name.
#[derive(Clone, Debug)]
pub struct CertFiles {
    dir: PathBuf,
}

impl CertFiles {
    /// The files in `dir` (whether or not they exist).
    pub fn in_dir(dir: &Path) -> CertFiles {
        CertFiles {
            dir: dir.to_path_buf(),
        }
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The CA's certificate (`ca.crt`), which nodes and clients trust.
    pub fn ca(&self) -> PathBuf {
        self.dir.join("ca.crt")
    }

    /// The certificate of the node at `ip` (`node-IP.crt`).
    pub fn node_certificate(&self, ip: IpAddr) -> PathBuf {
        self.dir.join(format!("node-{ip}.crt"))
    }

    /// Its private key (`node-IP.key`).
    pub fn node_key(&self, ip: IpAddr) -> PathBuf {
        self.dir.join(format!("node-{ip}.key"))
    }

    /// The client certificate (`client.crt`).
    pub fn client_certificate(&self) -> PathBuf {
        self.dir.join("client.crt")
    }

    /// Its private key (`client.key`).
    pub fn client_key(&self) -> PathBuf {
        self.dir.join("client.key")
    }

    /// Whether every file for the nodes at `ips` exists.
    pub fn complete_for(&self, ips: &[IpAddr]) -> bool {
        file_names(ips)
            .iter()
            .all(|name| self.dir.join(name).exists())
    }
}

/// The names of the files made for the nodes at `ips`.
fn file_names(ips: &[IpAddr]) -> Vec<String> {
    let mut stems = vec!["ca".to_string(), "client".to_string()];
    stems.extend(ips.iter().map(|ip| format!("node-{ip}")));
    stems
        .iter()
        .flat_map(|stem| [format!("{stem}.crt"), format!("{stem}.key")])
        .collect()
}

fn create_command(args: &CertsCreateArgs, out: &mut impl Write) -> Result<()> {
    let files = create(&args.out, &args.ips, args.days)?;
    writeln!(out, "Wrote to {}:", files.dir().display())?;
    for pair in file_names(&args.ips).chunks(2) {
        writeln!(out, "  {}  {}", pair[0], pair[1])?;
    }
    if let Some(ip) = args.ips.first() {
        writeln!(
            out,
            "Node {ip}: server_encryption / client_encryption certificate = node-{ip}.crt, \
             private_key = node-{ip}.key, ca = ca.crt"
        )?;
        writeln!(
            out,
            "CLI: ringstore --host {ip}:7100 --ca-cert ca.crt [--client-cert client.crt --client-key client.key] status"
        )?;
    }
    Ok(())
}

/// Writes a new test CA, a certificate for each node IP in `ips` and a
/// client certificate, valid for `days`, into `dir` (created if missing).
/// Fails, naming the file, if any of them exists already.
pub fn create(dir: &Path, ips: &[IpAddr], days: u32) -> Result<CertFiles> {
    if days == 0 {
        bail!("--days must be at least 1");
    }
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    for name in file_names(ips) {
        let path = dir.join(name);
        if path.exists() {
            bail!("{} exists already; not overwriting it", path.display());
        }
    }

    let (not_before, not_after) = validity(days);
    let ca_key = KeyPair::generate().context("generating the CA key")?;
    let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    // A random suffix tells CAs made by different runs apart in errors.
    let ca_name = format!("ringstore test CA {:08x}", rand::random::<u32>());
    ca_params
        .distinguished_name
        .push(DnType::CommonName, ca_name);
    ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    ca_params.not_before = not_before;
    ca_params.not_after = not_after;
    let ca_cert = ca_params.self_signed(&ca_key)?;
    write_pair(dir, "ca", &ca_cert, &ca_key)?;
    let issuer = Issuer::new(ca_params, ca_key);

    let leaf = |common_name: &str, sans: Vec<String>, usages: Vec<ExtendedKeyUsagePurpose>| {
        let key = KeyPair::generate()?;
        let mut params = CertificateParams::new(sans)?;
        params
            .distinguished_name
            .push(DnType::CommonName, common_name);
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = usages;
        params.not_before = not_before;
        params.not_after = not_after;
        let cert = params.signed_by(&key, &issuer)?;
        Ok::<_, rcgen::Error>((cert, key))
    };
    for ip in ips {
        let (cert, key) = leaf(
            &format!("ringstore node {ip}"),
            vec![ip.to_string()],
            vec![
                ExtendedKeyUsagePurpose::ServerAuth,
                ExtendedKeyUsagePurpose::ClientAuth,
            ],
        )
        .with_context(|| format!("making the certificate of {ip}"))?;
        write_pair(dir, &format!("node-{ip}"), &cert, &key)?;
    }
    let (cert, key) = leaf(
        "ringstore client",
        Vec::new(),
        vec![ExtendedKeyUsagePurpose::ClientAuth],
    )
    .context("making the client certificate")?;
    write_pair(dir, "client", &cert, &key)?;
    Ok(CertFiles::in_dir(dir))
}

/// From an hour ago (clock differences) to `days` from now.
fn validity(days: u32) -> (time::OffsetDateTime, time::OffsetDateTime) {
    let now = time::OffsetDateTime::now_utc();
    (
        now - time::Duration::hours(1),
        now + time::Duration::days(i64::from(days)),
    )
}

fn write_pair(dir: &Path, name: &str, cert: &Certificate, key: &KeyPair) -> Result<()> {
    let cert_path = dir.join(format!("{name}.crt"));
    std::fs::write(&cert_path, cert.pem())
        .with_context(|| format!("cannot write {}", cert_path.display()))?;
    let key_path = dir.join(format!("{name}.key"));
    write_private(&key_path, key.serialize_pem().as_bytes())
        .with_context(|| format!("cannot write {}", key_path.display()))
}

/// Writes a new file only its owner can read (on Unix).
pub(crate) fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    options.open(path)?.write_all(bytes)
}
