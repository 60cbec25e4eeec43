//! Snapshots of this node's keyspace data, as `nodetool snapshot`,
//! `listsnapshots` and `clearsnapshot`, and their restore (as `nodetool
//! refresh`).
//!
//! A snapshot `TAG` is the directory `DATA_DIR/snapshots/TAG/` holding one
//! file per keyspace, `NAME.cells` ([`crate::snapshot_file`]): every cell of
//! the keyspace on this node, tombstones and expiring cells included, in
//! token order. The cells of all the keyspaces snapshotted are read while
//! writes are held off, so the snapshot is one point in time. Restoring
//! (`restore -t TAG`) applies a snapshot's cells to the keyspaces of the same
//! names through last-write-wins merges, so the restored node holds exactly
//! the snapshotted cells (and anything newer).
//!
//! # Caveats
//! - Writes wait while the cells are read: a big keyspace pauses writes to
//!   this node for the scan (about a second per million keys).
//! - A snapshot is held in memory while it is written and restored.
//! - Hints and node metadata are not part of a snapshot.
//! - A stored cell that does not read back fails the snapshot
//!   (`DATA_LOSS`, naming its key; the store counts and logs it): a snapshot
//!   holds all of this node's cells or none. Repair the node, then take it.
//!
//! It asks for no more of the node than [`SnapshotHost`] (its data
//! directory, its store, the schema's keyspaces), which the node's context
//! implements (in `node/hosts/`), so this module does not name the context.

use std::path::{Path, PathBuf};

use ringstore_placement::{Token, TokenRange};
use ringstore_storage::{Cell, KeyspaceId, Store};

use crate::error::{NodeError, Result, SnapshotError};
use crate::schema::KeyspaceDef;
use crate::snapshot_file::{self, TRAILER_BYTES};

/// What snapshots need from the running node, and nothing more.
pub trait SnapshotHost: Send + Sync {
    /// The node's data directory: snapshots live under its `snapshots/`.
    fn data_dir(&self) -> &Path;
    /// Its storage: what a snapshot reads, and a restore writes to.
    fn store(&self) -> &Store;
    /// The keyspaces that hold data (not dropped): what an unnamed
    /// snapshot covers.
    fn keyspaces(&self) -> Vec<KeyspaceDef>;
    /// The keyspace named `name`, or `NOT_FOUND`: a snapshot's file is
    /// restored to the keyspace of its name.
    fn keyspace(&self, name: &str) -> Result<KeyspaceDef>;
}

/// The file name suffix of a keyspace's snapshot file.
const SUFFIX: &str = ".cells";

/// One keyspace's file in one snapshot.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SnapshotEntry {
    /// The snapshot's tag.
    pub tag: String,
    /// The keyspace.
    pub keyspace: String,
    /// Keys (cells) in the file.
    pub keys: u64,
    /// The file's size.
    pub bytes: u64,
}

/// Checks a tag: 1 to 100 characters of letters, digits, `-`, `_` and `.`,
/// not starting with `.` (it names a directory).
pub fn check_tag(tag: &str) -> Result<()> {
    let valid = (1..=100).contains(&tag.len())
        && !tag.starts_with('.')
        && tag
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c));
    if !valid {
        return Err(SnapshotError::BadTag(tag.to_string()).into());
    }
    Ok(())
}

fn snapshots_dir(context: &impl SnapshotHost) -> PathBuf {
    context.data_dir().join("snapshots")
}

fn io(path: &Path, error: std::io::Error) -> NodeError {
    NodeError::Io {
        what: format!("snapshot file {}", path.display()),
        source: error,
    }
}

/// The keyspaces named, or all of them.
fn keyspaces(context: &impl SnapshotHost, keyspace: &str) -> Result<Vec<KeyspaceDef>> {
    if keyspace.is_empty() {
        let mut all = context.keyspaces();
        all.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(all)
    } else {
        Ok(vec![context.keyspace(keyspace)?])
    }
}

/// Takes snapshot `tag` (a new tag: the current time in milliseconds if
/// empty) of `keyspace` (every keyspace if empty); what it holds.
pub async fn take(
    context: &impl SnapshotHost,
    tag: &str,
    keyspace: &str,
) -> Result<(String, Vec<SnapshotEntry>)> {
    let tag = if tag.is_empty() {
        let millis = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis());
        millis.to_string()
    } else {
        tag.to_string()
    };
    check_tag(&tag)?;
    let keyspaces: Vec<(String, KeyspaceId)> = keyspaces(context, keyspace)?
        .into_iter()
        .map(|k| (k.name, k.id))
        .collect();
    let dir = snapshots_dir(context).join(&tag);
    std::fs::create_dir_all(snapshots_dir(context)).map_err(|e| io(&dir, e))?;
    match std::fs::create_dir(&dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            return Err(SnapshotError::TagTaken(tag.to_string()).into());
        }
        Err(e) => return Err(io(&dir, e)),
    }
    let store = context.store().clone();
    let written =
        ringstore_storage::offload::spawn_blocking(move || -> Result<Vec<SnapshotEntry>> {
            // One point in time: every keyspace's cells read with writes held off.
            let files = store.with_writes_paused(|| {
                keyspaces
                    .iter()
                    .map(|(name, id)| {
                        let cells = store
                            .scan(*id, TokenRange::new(Token::MIN, Token::MIN))?
                            .map(|entry| entry.map(|(_, key, cell)| (key, cell)))
                            .collect::<std::result::Result<Vec<(Vec<u8>, Cell)>, _>>()?;
                        let bytes = snapshot_file::encode(
                            name,
                            cells.iter().map(|(k, c)| (k.as_slice(), c)),
                        );
                        Ok((name.clone(), cells.len() as u64, bytes))
                    })
                    .collect::<Result<Vec<_>>>()
            })?;
            files
                .into_iter()
                .map(|(name, keys, bytes)| {
                    let path = dir.join(format!("{name}{SUFFIX}"));
                    write_durably(&path, &bytes)?;
                    Ok(SnapshotEntry {
                        tag: String::new(),
                        keyspace: name,
                        keys,
                        bytes: bytes.len() as u64,
                    })
                })
                .collect()
        })
        .await
        .map_err(NodeError::task("the snapshot task"))??;
    let entries = written
        .into_iter()
        .map(|e| SnapshotEntry {
            tag: tag.clone(),
            ..e
        })
        .collect();
    tracing::info!(%tag, "snapshot taken");
    Ok((tag, entries))
}

/// Writes `bytes` to `path` through a synced temporary file and a rename.
fn write_durably(path: &Path, bytes: &[u8]) -> Result<()> {
    use std::io::Write;
    let temporary = path.with_extension("tmp");
    let mut file = std::fs::File::create(&temporary).map_err(|e| io(&temporary, e))?;
    file.write_all(bytes).map_err(|e| io(&temporary, e))?;
    file.sync_all().map_err(|e| io(&temporary, e))?;
    std::fs::rename(&temporary, path).map_err(|e| io(path, e))?;
    if let Some(dir) = path.parent() {
        std::fs::File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(|e| io(dir, e))?;
    }
    Ok(())
}

/// Every snapshot file on this node, by tag then keyspace.
pub fn list(context: &impl SnapshotHost) -> Result<Vec<SnapshotEntry>> {
    let root = snapshots_dir(context);
    let mut entries = Vec::new();
    let tags = match std::fs::read_dir(&root) {
        Ok(tags) => tags,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(entries),
        Err(e) => return Err(io(&root, e)),
    };
    for tag in tags {
        let tag = tag.map_err(|e| io(&root, e))?;
        let tag_name = tag.file_name().to_string_lossy().into_owned();
        let files = std::fs::read_dir(tag.path()).map_err(|e| io(&tag.path(), e))?;
        for file in files {
            let path = file.map_err(|e| io(&tag.path(), e))?.path();
            let name = path.file_name().unwrap_or_default().to_string_lossy();
            let Some(keyspace) = name.strip_suffix(SUFFIX) else {
                continue;
            };
            let (keys, bytes) = file_counts(&path)?;
            entries.push(SnapshotEntry {
                tag: tag_name.clone(),
                keyspace: keyspace.to_string(),
                keys,
                bytes,
            });
        }
    }
    entries.sort_by(|a, b| (&a.tag, &a.keyspace).cmp(&(&b.tag, &b.keyspace)));
    Ok(entries)
}

/// A snapshot file's key count (from its trailer) and size.
fn file_counts(path: &Path) -> Result<(u64, u64)> {
    use std::io::{Read, Seek, SeekFrom};
    let mut file = std::fs::File::open(path).map_err(|e| io(path, e))?;
    let bytes = file.metadata().map_err(|e| io(path, e))?.len();
    if bytes < TRAILER_BYTES as u64 {
        return Ok((0, bytes));
    }
    let mut trailer = [0; TRAILER_BYTES];
    file.seek(SeekFrom::End(-(TRAILER_BYTES as i64)))
        .and_then(|_| file.read_exact(&mut trailer))
        .map_err(|e| io(path, e))?;
    Ok((snapshot_file::count_from_trailer(&trailer), bytes))
}

/// Removes snapshot `tag`, or every snapshot when `all`; the tags removed.
pub fn clear(context: &impl SnapshotHost, tag: &str, all: bool) -> Result<Vec<String>> {
    let tags: Vec<String> = match (tag.is_empty(), all) {
        (false, false) => {
            check_tag(tag)?;
            if !snapshots_dir(context).join(tag).is_dir() {
                return Err(SnapshotError::NoSuchSnapshot(tag.to_string()).into());
            }
            vec![tag.to_string()]
        }
        (true, true) => {
            let mut tags: Vec<String> = list(context)?.into_iter().map(|e| e.tag).collect();
            tags.dedup();
            tags
        }
        _ => {
            return Err(SnapshotError::TagOrAll.into());
        }
    };
    for tag in &tags {
        let dir = snapshots_dir(context).join(tag);
        std::fs::remove_dir_all(&dir).map_err(|e| io(&dir, e))?;
    }
    Ok(tags)
}

/// Applies snapshot `tag`'s files (only `keyspace`'s if given) to the
/// keyspaces of the same names; what was applied.
pub async fn restore(
    context: &impl SnapshotHost,
    tag: &str,
    keyspace: &str,
) -> Result<Vec<SnapshotEntry>> {
    check_tag(tag)?;
    let in_snapshot: Vec<SnapshotEntry> = list(context)?
        .into_iter()
        .filter(|e| e.tag == tag && (keyspace.is_empty() || e.keyspace == keyspace))
        .collect();
    if in_snapshot.is_empty() {
        return Err(SnapshotError::NoFiles {
            tag: tag.to_string(),
            keyspace: (!keyspace.is_empty()).then(|| keyspace.to_string()),
            dir: snapshots_dir(context).join(tag),
        }
        .into());
    }
    let mut restored = Vec::new();
    for entry in in_snapshot {
        let target = context.keyspace(&entry.keyspace)?;
        let path = snapshots_dir(context)
            .join(tag)
            .join(format!("{}{SUFFIX}", entry.keyspace));
        let bytes = std::fs::read(&path).map_err(|e| io(&path, e))?;
        let contents = snapshot_file::decode(&bytes).map_err(|e| SnapshotError::BadFile {
            path: path.clone(),
            source: Box::new(e),
        })?;
        for chunk in contents.cells.chunks(1000) {
            let writes: Vec<_> = chunk
                .iter()
                .map(|(key, cell)| (target.id, key.clone(), cell.clone()))
                .collect();
            context.store().apply_many(&writes).await?;
        }
        context.store().sync().await?;
        tracing::info!(%tag, keyspace = %entry.keyspace, keys = contents.cells.len(), "snapshot restored");
        restored.push(SnapshotEntry {
            keys: contents.cells.len() as u64,
            ..entry
        });
    }
    Ok(restored)
}
