//! The key file: `<data_dir>/identity.key`, mode 0600.
//!
//! ```text
//! "RSK1" | signing seed (32) | agreement seed (32) | SHA-256 of the 68 bytes before, first 8
//! ```
//!
//! Written once, at the first start, to a temporary file that is synced and
//! renamed; never rewritten. A file that does not check is an error at
//! start (the node would otherwise come back as somebody else), and so is
//! a file others can read.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::error::IdentityError;
use crate::keys::NodeKeys;

/// The key file's name inside the data directory.
pub const KEY_FILE: &str = "identity.key";
const MAGIC: &[u8; 4] = b"RSK1";
const LEN: usize = 4 + 32 + 32 + 8;

/// Whether the keys were made by this call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// Read from the key file.
    Loaded,
    /// Made now and saved.
    Created,
}

/// The node's keys from `data_dir`, made and saved first if there are none.
pub fn load_or_create(data_dir: &Path) -> Result<(NodeKeys, Origin), IdentityError> {
    let path = data_dir.join(KEY_FILE);
    let io = |source| IdentityError::Io {
        path: path.clone(),
        source,
    };
    match fs::read(&path) {
        Ok(bytes) => {
            check_private(&path)?;
            Ok((decode(&bytes, &path)?, Origin::Loaded))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            fs::create_dir_all(data_dir).map_err(io)?;
            let keys = NodeKeys::generate();
            write(&path, &encode(&keys)).map_err(io)?;
            Ok((keys, Origin::Created))
        }
        Err(e) => Err(io(e)),
    }
}

fn encode(keys: &NodeKeys) -> Vec<u8> {
    let (signing, agreement) = keys.seeds();
    let mut bytes = Vec::with_capacity(LEN);
    bytes.extend_from_slice(MAGIC);
    bytes.extend_from_slice(&signing);
    bytes.extend_from_slice(&agreement);
    let check = Sha256::digest(&bytes);
    bytes.extend_from_slice(&check[..8]);
    bytes
}

fn decode(bytes: &[u8], path: &Path) -> Result<NodeKeys, IdentityError> {
    let corrupt = |reason| IdentityError::Corrupt {
        path: path.to_path_buf(),
        reason,
    };
    if bytes.len() != LEN {
        return Err(corrupt("wrong length"));
    }
    if &bytes[..4] != MAGIC {
        return Err(corrupt("unknown format"));
    }
    if Sha256::digest(&bytes[..LEN - 8])[..8] != bytes[LEN - 8..] {
        return Err(corrupt("checksum mismatch"));
    }
    let seed = |at: usize| -> [u8; 32] { bytes[at..at + 32].try_into().expect("32 bytes") };
    Ok(NodeKeys::from_seeds(seed(4), seed(36)))
}

#[cfg(unix)]
fn check_private(path: &Path) -> Result<(), IdentityError> {
    use std::os::unix::fs::PermissionsExt;
    let mode = fs::metadata(path)
        .map_err(|source| IdentityError::Io {
            path: path.to_path_buf(),
            source,
        })?
        .permissions()
        .mode();
    if mode & 0o077 != 0 {
        return Err(IdentityError::Exposed {
            path: path.to_path_buf(),
            mode: mode & 0o777,
        });
    }
    Ok(())
}

#[cfg(not(unix))]
fn check_private(_: &Path) -> Result<(), IdentityError> {
    Ok(())
}

fn write(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let tmp: PathBuf = path.with_extension("key.tmp");
    let mut options = fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let mut file = options.open(&tmp)?;
    file.write_all(bytes)?;
    file.sync_all()?;
    fs::rename(&tmp, path)?;
    if let Some(dir) = path.parent() {
        fs::File::open(dir)?.sync_all()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_keys_are_made_once_and_read_back_the_same() {
        let dir = tempfile::tempdir().unwrap();
        let (made, origin) = load_or_create(dir.path()).unwrap();
        assert_eq!(origin, Origin::Created);
        let (read, origin) = load_or_create(dir.path()).unwrap();
        assert_eq!(origin, Origin::Loaded);
        assert_eq!(made.public(), read.public());
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = fs::metadata(dir.path().join(KEY_FILE))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);
        }
    }

    #[test]
    fn a_damaged_key_file_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        load_or_create(dir.path()).unwrap();
        let path = dir.path().join(KEY_FILE);
        let mut bytes = fs::read(&path).unwrap();
        bytes[10] ^= 0x40;
        fs::write(&path, &bytes).unwrap();
        let error = load_or_create(dir.path()).unwrap_err();
        assert!(matches!(error, IdentityError::Corrupt { .. }), "{error}");
        assert!(error.to_string().contains("identity.key"), "{error}");
        fs::write(&path, b"short").unwrap();
        assert!(load_or_create(dir.path()).is_err());
    }

    #[cfg(unix)]
    #[test]
    fn a_key_file_others_can_read_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        load_or_create(dir.path()).unwrap();
        let path = dir.path().join(KEY_FILE);
        fs::set_permissions(&path, fs::Permissions::from_mode(0o644)).unwrap();
        let error = load_or_create(dir.path()).unwrap_err();
        assert!(error.to_string().contains("chmod 600"), "{error}");
    }
}
