//! Where log lines go: stderr for a server and the tools; for `demo`, a file
//! for the nodes' logs and the terminal for warnings only.
//!
//! The process has one filter (`RUST_LOG`, else `info` for a server and the
//! demo, `warn` for the tools), replaceable at runtime (`setlogginglevel`).
//! The demo runs three nodes in one process whose `info` lines (about 30 at
//! start) would bury its own lines, so it writes every line to a file and
//! shows only warnings and errors on the terminal, and only once it has
//! printed how to connect: the warnings of a start (each node on loopback
//! warns it has no cluster secret) stay in the file, counted, not shown.

use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use ringstore_node::error::FilterError;
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer, reload};

use crate::cli::LogFormat;

/// Logs to stderr in `format`: `info` for a server, `warn` for the tools
/// (`RUST_LOG` overrides).
pub fn init(server: bool, format: LogFormat) {
    let default = if server { "info" } else { "warn" };
    install(default, vec![fmt_layer(format, std::io::stderr, true)]);
}

/// What the demo's terminal shows of its log, and when.
#[derive(Clone, Debug, Default)]
pub struct Terminal {
    /// Whether warnings reach the terminal yet (set once the demo's own
    /// lines are printed).
    open: Arc<AtomicBool>,
    /// Warnings and errors written to the file only, before then.
    held: Arc<AtomicUsize>,
}

impl Terminal {
    /// From now on warnings and errors show on the terminal too; returns
    /// how many were kept to the file before.
    pub fn open(&self) -> usize {
        self.open.store(true, Ordering::SeqCst);
        self.held.load(Ordering::SeqCst)
    }

    /// From now on warnings go to the file only again: the nodes' warnings
    /// while the demo stops them (each sees the others go) are expected.
    pub fn close(&self) {
        self.open.store(false, Ordering::SeqCst);
    }
}

impl<'a> MakeWriter<'a> for Terminal {
    type Writer = Box<dyn Write + 'a>;

    fn make_writer(&'a self) -> Self::Writer {
        if self.open.load(Ordering::SeqCst) {
            Box::new(std::io::stderr())
        } else {
            self.held.fetch_add(1, Ordering::SeqCst);
            Box::new(std::io::sink())
        }
    }
}

/// The demo's logging: every line the filter passes (`info` unless
/// `RUST_LOG` says otherwise) appended to `file`, and warnings and errors
/// also on stderr once `Terminal::open` is called.
pub fn init_demo(format: LogFormat, file: &Path) -> std::io::Result<Terminal> {
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(file)?;
    let file = Arc::new(file);
    let terminal = Terminal::default();
    let to_file = fmt_layer(format, file, false);
    let to_terminal = fmt_layer(format, terminal.clone(), true)
        .with_filter(tracing_subscriber::filter::LevelFilter::WARN)
        .boxed();
    install("info", vec![to_file, to_terminal]);
    Ok(terminal)
}

/// The subscriber below the line layers: the registry and the filter.
type Base = tracing_subscriber::layer::Layered<
    reload::Layer<EnvFilter, tracing_subscriber::Registry>,
    tracing_subscriber::Registry,
>;

/// A line layer.
type Lines = Box<dyn Layer<Base> + Send + Sync>;

/// A line formatter writing to `writer` (with colours if `ansi`).
fn fmt_layer<W>(format: LogFormat, writer: W, ansi: bool) -> Lines
where
    W: for<'w> MakeWriter<'w> + Send + Sync + 'static,
{
    let lines = tracing_subscriber::fmt::layer()
        .with_writer(writer)
        .with_ansi(ansi);
    match format {
        LogFormat::Text => lines.boxed(),
        LogFormat::Json => lines.json().boxed(),
    }
}

/// Installs `lines` behind the process's one filter (`RUST_LOG`, else
/// `default`), which `setlogginglevel` replaces at runtime.
fn install(default: &str, lines: Vec<Lines>) {
    let text = std::env::var("RUST_LOG")
        .ok()
        .filter(|t| EnvFilter::try_new(t).is_ok())
        .unwrap_or_else(|| default.to_string());
    let (filter, handle) = reload::Layer::new(EnvFilter::new(&text));
    tracing_subscriber::registry()
        .with(filter)
        .with(lines)
        .init();
    ringstore_node::log_levels::install(Box::new(ReloadableFilter {
        handle,
        text: std::sync::Mutex::new(text),
    }));
}

/// The process's log filter, replaceable at runtime.
struct ReloadableFilter {
    handle: reload::Handle<EnvFilter, tracing_subscriber::Registry>,
    /// The filter's text (an `EnvFilter` does not print back its input).
    text: std::sync::Mutex<String>,
}

impl ringstore_node::log_levels::LogLevels for ReloadableFilter {
    fn current(&self) -> String {
        self.text.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    fn replace(&self, filter: &str) -> Result<(), FilterError> {
        let parsed = EnvFilter::try_new(filter)?;
        self.handle.reload(parsed)?;
        *self.text.lock().unwrap_or_else(|e| e.into_inner()) = filter.to_string();
        Ok(())
    }
}
