//! `ringstore certs create`: the files it writes, their modes, and that it
//! never overwrites one (no network).

use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_ringstore");

fn create(dir: &std::path::Path, ips: &str) -> std::process::Output {
    Command::new(BIN)
        .args([
            "certs",
            "create",
            "--out",
            dir.to_str().unwrap(),
            "--ip",
            ips,
        ])
        .output()
        .unwrap()
}

#[test]
fn certs_create_writes_a_ca_node_and_client_files_and_never_overwrites_them() {
    let dir = tempfile::tempdir().unwrap();
    let made = create(dir.path(), "127.89.0.1,::1");
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    for name in ["ca", "client", "node-127.89.0.1", "node-::1"] {
        let cert = std::fs::read_to_string(dir.path().join(format!("{name}.crt"))).unwrap();
        assert!(cert.starts_with("-----BEGIN CERTIFICATE-----"), "{name}");
        let key = dir.path().join(format!("{name}.key"));
        assert!(
            std::fs::read_to_string(&key)
                .unwrap()
                .contains("PRIVATE KEY")
        );
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&key).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o600, "{name}.key is readable by others");
        }
    }
    let ca = std::fs::read(dir.path().join("ca.crt")).unwrap();

    let again = create(dir.path(), "127.89.0.1");
    assert_eq!(again.status.code(), Some(2));
    let message = String::from_utf8_lossy(&again.stderr);
    assert!(message.contains("exists already"), "{message}");
    assert_eq!(
        std::fs::read(dir.path().join("ca.crt")).unwrap(),
        ca,
        "the CA was replaced"
    );

    let bad = create(dir.path(), "not-an-ip");
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("not-an-ip"));
}
