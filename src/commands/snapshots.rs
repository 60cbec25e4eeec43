//! `ringstore snapshot`, `listsnapshots`, `clearsnapshot` and `restore`: a
//! node's point-in-time copies of its keyspace data (as nodetool's
//! snapshot commands and `refresh`).

use std::io::Write;

use ringstore_proto::v1 as pb;

use crate::cli::{ClearSnapshotArgs, RestoreArgs, SnapshotArgs};
use crate::client::Connection;
use crate::display::human_bytes;
use crate::failure::Outcome;

/// Takes a snapshot; prints its tag and files.
pub async fn take(connection: &Connection, args: &SnapshotArgs, out: &mut impl Write) -> Outcome {
    let taken = connection
        .admin()
        .snapshot(pb::SnapshotRequest {
            tag: args.tag.clone().unwrap_or_default(),
            keyspace: args.keyspace.clone().unwrap_or_default(),
        })
        .await?
        .into_inner();
    let names: Vec<&str> = taken.files.iter().map(|f| f.keyspace.as_str()).collect();
    writeln!(
        out,
        "Requested creating snapshot(s) for [{}] with snapshot name [{}]\nSnapshot directory: {}",
        names.join(", "),
        taken.tag,
        taken.tag
    )
    .map_err(anyhow::Error::from)?;
    Ok(())
}

/// Lists every snapshot file, as `nodetool listsnapshots`.
pub async fn list(connection: &Connection, out: &mut impl Write) -> Outcome {
    let files = connection
        .admin()
        .list_snapshots(pb::ListSnapshotsRequest {})
        .await?
        .into_inner()
        .files;
    write!(out, "{}", list_text(&files)).map_err(anyhow::Error::from)?;
    Ok(())
}

fn list_text(files: &[pb::SnapshotFile]) -> String {
    if files.is_empty() {
        return "Snapshot Details: \nThere are no snapshots\n".into();
    }
    let mut text = format!(
        "Snapshot Details: \n{:<24}{:<24}{:>12}{:>16}\n",
        "Snapshot name", "Keyspace name", "Keys", "Size on disk"
    );
    for f in files {
        text += &format!(
            "{:<24}{:<24}{:>12}{:>16}\n",
            f.tag,
            f.keyspace,
            f.keys,
            human_bytes(f.bytes)
        );
    }
    let total: u64 = files.iter().map(|f| f.bytes).sum();
    text += &format!("\nTotal TrueDiskSpaceUsed: {}\n", human_bytes(total));
    text
}

/// Removes one snapshot or all of them.
pub async fn clear(
    connection: &Connection,
    args: &ClearSnapshotArgs,
    out: &mut impl Write,
) -> Outcome {
    let removed = connection
        .admin()
        .clear_snapshot(pb::ClearSnapshotRequest {
            tag: args.tag.clone().unwrap_or_default(),
            all: args.all,
        })
        .await?
        .into_inner()
        .removed;
    writeln!(out, "removed snapshots: [{}]", removed.join(", ")).map_err(anyhow::Error::from)?;
    Ok(())
}

/// Applies a snapshot in the node's `DATA_DIR/snapshots/TAG/`.
pub async fn restore(connection: &Connection, args: &RestoreArgs, out: &mut impl Write) -> Outcome {
    let restored = connection
        .admin()
        .restore_snapshot(pb::RestoreSnapshotRequest {
            tag: args.tag.clone(),
            keyspace: args.keyspace.clone().unwrap_or_default(),
        })
        .await?
        .into_inner();
    for f in &restored.files {
        writeln!(
            out,
            "restored {} keys of {} from snapshot {}",
            f.keys, f.keyspace, f.tag
        )
        .map_err(anyhow::Error::from)?;
    }
    Ok(())
}
