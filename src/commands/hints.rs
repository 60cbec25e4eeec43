//! `ringstore hints`, `enablehandoff`/`disablehandoff`,
//! `pausehandoff`/`resumehandoff`, `sethintedhandoffthrottlekb` and
//! `truncatehints`.

use std::io::Write;

use ringstore_proto::v1 as pb;

use crate::cli::TruncateHintsArgs;
use crate::client::Connection;
use crate::commands::info::hint_summary;
use crate::display::human_bytes;
use crate::failure::Outcome;

/// Prints the pending hints per target and the counters.
pub async fn show(connection: &Connection, out: &mut impl Write) -> Outcome {
    let hints = connection
        .admin()
        .hints(pb::HintsRequest {})
        .await?
        .into_inner();
    let mut text = format!(
        "Hinted handoff: {}, delivery {}, throttle {} KiB/s\n",
        if hints.enabled { "enabled" } else { "disabled" },
        if hints.paused { "paused" } else { "running" },
        hints.throttle_kib
    );
    text += &format!(
        "{:<36}  {:<21}  {:>10}  {}\n",
        "Target", "Address", "Hints", "Size"
    );
    for target in &hints.targets {
        text += &format!(
            "{:<36}  {:<21}  {:>10}  {}\n",
            target.host_id,
            target.address,
            target.hints,
            human_bytes(target.bytes)
        );
    }
    text += &format!("{}\n", hint_summary(hints.counters.unwrap_or_default()));
    out.write_all(text.as_bytes())
        .map_err(anyhow::Error::from)?;
    Ok(())
}

/// Changes the handoff settings that are given.
pub async fn set(
    connection: &Connection,
    enabled: Option<bool>,
    paused: Option<bool>,
    throttle_kib: Option<u64>,
) -> Outcome {
    connection
        .admin()
        .set_handoff(pb::SetHandoffRequest {
            enabled,
            paused,
            throttle_kib,
        })
        .await?;
    Ok(())
}

/// Deletes pending hints and prints how many.
pub async fn truncate(
    connection: &Connection,
    args: &TruncateHintsArgs,
    out: &mut impl Write,
) -> Outcome {
    let removed = connection
        .admin()
        .truncate_hints(pb::TruncateHintsRequest {
            host_id: args.host_id.clone().unwrap_or_default(),
        })
        .await?
        .into_inner()
        .removed;
    writeln!(out, "removed {removed} hints").map_err(anyhow::Error::from)?;
    Ok(())
}
