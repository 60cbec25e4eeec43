//! Files that may hold secrets (the config file, with `cluster_secret`; a
//! bearer token), and whether users other than the node's can read them.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// The permission bits of `path` if its group or others may read it;
/// `None` if they may not, or it cannot be inspected.
pub fn open_to_others(path: &Path) -> Option<u32> {
    let mode = std::fs::metadata(path).ok()?.permissions().mode() & 0o777;
    (mode & 0o044 != 0).then_some(mode)
}

/// Warns, naming `what` and the fix, when `path` is readable by group or others.
pub fn warn_if_readable_by_others(path: &Path, what: &str) {
    if let Some(mode) = open_to_others(path) {
        tracing::warn!(
            "{what} {} is readable by group or others (mode {mode:o}); it may hold secrets: \
             chmod 600 it, owned by the user the node runs as",
            path.display()
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_an_owner_only_mode_is_private() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("secret.toml");
        std::fs::write(&file, "x").unwrap();
        for (mode, open) in [
            (0o600, false),
            (0o400, false),
            (0o700, false),
            (0o640, true),
            (0o604, true),
            (0o620, false),
        ] {
            std::fs::set_permissions(&file, std::fs::Permissions::from_mode(mode)).unwrap();
            assert_eq!(open_to_others(&file).is_some(), open, "{mode:o}");
        }
        assert_eq!(open_to_others(&dir.path().join("missing")), None);
    }
}
