//! The node record in the data directory: host id, cluster name, generation.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use ringstore_placement::HostId;
use serde::{Deserialize, Serialize};

use crate::error::{MembershipError, Result};
use crate::identity::Generation;

/// The record's file name inside the data directory.
pub const NODE_RECORD_FILE: &str = "node.json";

/// What a node keeps about itself across restarts.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeRecord {
    /// Format version of this record; 1 today.
    pub format: u32,
    /// The node's permanent id.
    pub host_id: HostId,
    /// The cluster this data directory belongs to.
    pub cluster_name: String,
    /// The generation of the last start.
    pub generation: Generation,
}

const FORMAT: u32 = 1;

impl NodeRecord {
    /// Loads the record from `data_dir`, or creates one with host id
    /// `new_host` (the one the node's keys make), and bumps the generation
    /// for this start: `max(saved + 1, unix seconds)`, so that it grows even
    /// if the file was lost and restored. Refuses a data directory of
    /// another cluster. The bumped record is written (atomically) before it
    /// is returned.
    pub fn load_for_start(
        data_dir: &Path,
        cluster_name: &str,
        now_unix_secs: u64,
        new_host: HostId,
    ) -> Result<NodeRecord> {
        let path = data_dir.join(NODE_RECORD_FILE);
        let io = |source| MembershipError::NodeRecordIo {
            path: path.clone(),
            source,
        };
        fs::create_dir_all(data_dir).map_err(io)?;
        let record = match fs::read(&path) {
            Ok(bytes) => {
                let saved: NodeRecord = serde_json::from_slice(&bytes).map_err(|e| {
                    MembershipError::NodeRecordCorrupt {
                        path: path.clone(),
                        reason: e.to_string(),
                    }
                })?;
                if saved.format != FORMAT {
                    return Err(MembershipError::NodeRecordCorrupt {
                        path,
                        reason: format!("unknown format version {}", saved.format),
                    });
                }
                if saved.cluster_name != cluster_name {
                    return Err(MembershipError::ClusterNameMismatch {
                        path,
                        saved: saved.cluster_name,
                        configured: cluster_name.to_string(),
                    });
                }
                NodeRecord {
                    generation: Generation((saved.generation.0 + 1).max(now_unix_secs)),
                    ..saved
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => NodeRecord {
                format: FORMAT,
                host_id: new_host,
                cluster_name: cluster_name.to_string(),
                generation: Generation(now_unix_secs.max(1)),
            },
            Err(e) => return Err(io(e)),
        };
        record.write(&path).map_err(io)?;
        Ok(record)
    }

    fn write(&self, path: &Path) -> std::io::Result<()> {
        let tmp: PathBuf = path.with_extension("json.tmp");
        let mut file = fs::File::create(&tmp)?;
        file.write_all(&serde_json::to_vec_pretty(self).expect("a record serializes"))?;
        file.sync_all()?;
        fs::rename(&tmp, path)?;
        if let Some(dir) = path.parent() {
            fs::File::open(dir)?.sync_all()?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_restart_keeps_the_host_id_and_raises_the_generation() {
        let dir = tempfile::tempdir().unwrap();
        let first = NodeRecord::load_for_start(dir.path(), "prod", 100, HostId::random()).unwrap();
        let second = NodeRecord::load_for_start(dir.path(), "prod", 100, HostId::random()).unwrap();
        assert_eq!(first.host_id, second.host_id);
        assert_eq!(second.generation, Generation(101));
        let later = NodeRecord::load_for_start(dir.path(), "prod", 5000, HostId::random()).unwrap();
        assert_eq!(later.generation, Generation(5000));
    }

    #[test]
    fn a_data_directory_of_another_cluster_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        NodeRecord::load_for_start(dir.path(), "prod", 1, HostId::random()).unwrap();
        let error =
            NodeRecord::load_for_start(dir.path(), "staging", 2, HostId::random()).unwrap_err();
        assert!(matches!(error, MembershipError::ClusterNameMismatch { .. }));
        assert!(error.to_string().contains("\"prod\""), "{error}");
    }

    #[test]
    fn a_corrupt_record_is_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join(NODE_RECORD_FILE), b"{ not json").unwrap();
        let error =
            NodeRecord::load_for_start(dir.path(), "prod", 1, HostId::random()).unwrap_err();
        assert!(
            matches!(error, MembershipError::NodeRecordCorrupt { .. }),
            "{error}"
        );
    }
}
