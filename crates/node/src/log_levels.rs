//! Changing what a running node logs (`setlogginglevel`/`getlogginglevel`).
//!
//! The log filter belongs to the process, not to a node: the binary that
//! sets up `tracing` installs a [`LogLevels`] control once, and the `Admin`
//! service of every node in the process reaches it here. A process that
//! installed none (a test embedding nodes) answers that its levels cannot be
//! changed.

use std::sync::OnceLock;

use crate::error::{FilterError, OperationError, Result};

/// The process's log filter, as the binary set it up.
pub trait LogLevels: Send + Sync {
    /// The filter in force, in `RUST_LOG` syntax (`info,ringstore_node=debug`).
    fn current(&self) -> String;
    /// Replaces the filter with `filter` (`RUST_LOG` syntax); an error names
    /// what does not parse, and changes nothing.
    fn replace(&self, filter: &str) -> std::result::Result<(), FilterError>;
}

static LOG_LEVELS: OnceLock<Box<dyn LogLevels>> = OnceLock::new();

/// Installs the process's control; later calls change nothing.
pub fn install(levels: Box<dyn LogLevels>) {
    let _ = LOG_LEVELS.set(levels);
}

fn control() -> Result<&'static dyn LogLevels> {
    LOG_LEVELS
        .get()
        .map(Box::as_ref)
        .ok_or(OperationError::LogLevelsFixed.into())
}

/// The filter in force.
pub fn current() -> Result<String> {
    Ok(control()?.current())
}

/// Sets `level` (`trace`, `debug`, `info`, `warn`, `error` or `off`) for
/// `target` (a module path such as `ringstore_membership`), or for
/// everything when `target` is empty, on top of the filter in force. The
/// new filter.
pub fn set(target: &str, level: &str) -> Result<String> {
    const LEVELS: [&str; 6] = ["trace", "debug", "info", "warn", "error", "off"];
    let level = level.to_ascii_lowercase();
    if !LEVELS.contains(&level.as_str()) {
        return Err(OperationError::UnknownLogLevel {
            level,
            known: &LEVELS,
        }
        .into());
    }
    if !target
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
    {
        return Err(OperationError::NotAModulePath(target.to_string()).into());
    }
    let control = control()?;
    let filter = with_directive(&control.current(), target, &level);
    control
        .replace(&filter)
        .map_err(|source| OperationError::BadLogFilter {
            filter: filter.clone(),
            source,
        })?;
    Ok(filter)
}

/// `filter` with `target`'s directive (or the default level, when `target`
/// is empty) replaced by `level`.
fn with_directive(filter: &str, target: &str, level: &str) -> String {
    let mut directives: Vec<String> = filter
        .split(',')
        .map(str::trim)
        .filter(|d| !d.is_empty())
        .filter(|d| match d.split_once('=') {
            Some((t, _)) => t != target,
            None => !target.is_empty(),
        })
        .map(String::from)
        .collect();
    if target.is_empty() {
        directives.insert(0, level.to_string());
    } else {
        directives.push(format!("{target}={level}"));
    }
    directives.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::NodeError;

    #[test]
    fn a_target_directive_replaces_its_old_one_and_keeps_the_rest() {
        assert_eq!(
            with_directive("info,ringstore_node=debug", "ringstore_node", "trace"),
            "info,ringstore_node=trace"
        );
        assert_eq!(
            with_directive("info", "ringstore_membership", "debug"),
            "info,ringstore_membership=debug"
        );
        assert_eq!(
            with_directive("info,ringstore_node=debug", "", "warn"),
            "warn,ringstore_node=debug"
        );
    }

    #[test]
    fn unknown_levels_and_odd_targets_are_refused() {
        assert!(matches!(
            set("ringstore_node", "loud"),
            Err(NodeError::Operation(OperationError::UnknownLogLevel { .. }))
        ));
        assert!(matches!(
            set("a=b,c", "info"),
            Err(NodeError::Operation(OperationError::NotAModulePath(_)))
        ));
    }

    #[test]
    fn a_refused_filter_keeps_the_log_controls_reason_as_its_source() {
        let error = NodeError::from(OperationError::BadLogFilter {
            filter: "info,[".into(),
            source: "unclosed span".into(),
        });
        assert_eq!(error.code(), tonic::Code::InvalidArgument);
        assert_eq!(error.to_string(), "log filter \"info,[\": unclosed span");
        // `NodeError::Operation` is transparent: its source is the filter's.
        let source = std::error::Error::source(&error).map(ToString::to_string);
        assert_eq!(source.as_deref(), Some("unclosed span"));
    }
}
