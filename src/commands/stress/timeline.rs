//! The run over time, for `stress --html FILE`: for each second of the
//! run, the operations completed, how many failed, and a histogram of the
//! successful ones' latencies; then one self-contained HTML page (inline
//! SVG, no script, nothing fetched) with throughput and p50/p99/p99.9 per
//! second, as cassandra-stress's graph.
//!
//! Workers record each operation straight into the shared [`Timeline`],
//! under one short lock. (A recorder per worker that merged once a second
//! cost a histogram per worker per second: with hundreds of workers, the
//! fresh memory's page faults stalled the client for tens of milliseconds.)
//!
//! # Caveats
//! - A second is placed by when an operation completed, so the last second
//!   is usually partial (its throughput reads low).
//! - Per-second histograms keep 2 significant digits (about 1 % error) up to
//!   60 s; slower operations count as 60 s. The summary figures come from
//!   the run's full histogram, not from these.
//! - Memory grows by one small histogram per second of the run.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Mutex;
use std::time::Duration;

use hdrhistogram::Histogram;

/// The slowest latency a per-second histogram tells apart, in µs.
const MAX_MICROS: u64 = 60_000_000;
/// The chart's drawing area, in SVG units.
const WIDTH: f64 = 900.0;
const HEIGHT: f64 = 260.0;
/// Room left of and below the drawing area for the axis labels.
const MARGIN_LEFT: f64 = 70.0;
const MARGIN_BOTTOM: f64 = 30.0;

/// One second of the run.
struct Second {
    /// Latencies of the successful operations, in µs.
    latency: Histogram<u64>,
    /// Failed operations.
    errors: u64,
}

impl Second {
    fn new() -> Second {
        Second {
            latency: Histogram::new_with_bounds(1, MAX_MICROS, 2)
                .expect("constant histogram bounds are valid"),
            errors: 0,
        }
    }

    fn operations(&self) -> u64 {
        self.latency.len() + self.errors
    }
}

/// Every second of the run, shared by the workers.
#[derive(Default)]
pub struct Timeline {
    seconds: Mutex<BTreeMap<u64, Second>>,
}

impl Timeline {
    /// Records an operation that completed `since_start` into the run:
    /// successful in `Some(micros)`, failed if `None`.
    pub fn record(&self, since_start: Duration, latency_micros: Option<u64>) {
        let mut seconds = self.seconds.lock().unwrap_or_else(|p| p.into_inner());
        let second = seconds
            .entry(since_start.as_secs())
            .or_insert_with(Second::new);
        match latency_micros {
            Some(micros) => second.latency.saturating_record(micros.max(1)),
            None => second.errors += 1,
        }
    }

    /// The page: `title`, the `summary` lines as a table, and the charts.
    pub fn html(&self, title: &str, summary: &[(&str, String)]) -> String {
        let seconds = self.seconds.lock().unwrap_or_else(|p| p.into_inner());
        let last = seconds.keys().next_back().copied().unwrap_or(0);
        let throughput: Vec<(u64, f64)> = (0..=last)
            .map(|s| (s, seconds.get(&s).map_or(0, Second::operations) as f64))
            .collect();
        let quantile = |q: f64| -> Vec<(u64, f64)> {
            seconds
                .iter()
                .filter(|(_, second)| !second.latency.is_empty())
                .map(|(&s, second)| (s, second.latency.value_at_quantile(q) as f64 / 1000.0))
                .collect()
        };
        let latencies = [
            Series::new("p50", "#1b7837", quantile(0.50)),
            Series::new("p99", "#e08214", quantile(0.99)),
            Series::new("p99.9", "#b2182b", quantile(0.999)),
        ];
        let errors: Vec<(u64, f64)> = seconds
            .iter()
            .map(|(&s, second)| (s, second.errors as f64))
            .collect();

        let mut page = String::new();
        let _ = write!(
            page,
            "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>{title}</title>\n\
             <style>body{{font-family:sans-serif;margin:2em}}td{{padding:2px 12px 2px 0}}\
             svg{{display:block;margin:1em 0 2em}}</style></head><body>\n<h1>{title}</h1>\n<table>\n",
            title = escape(title)
        );
        for (label, value) in summary {
            let _ = writeln!(
                page,
                "<tr><td>{}</td><td>{}</td></tr>",
                escape(label),
                escape(value)
            );
        }
        page.push_str("</table>\n<h2>Throughput (operations completed per second)</h2>\n");
        let throughput = Series::new("ops/s", "#2166ac", throughput);
        page.push_str(&chart(&[throughput], last, "ops/s"));
        page.push_str("<h2>Latency of successful operations per second (ms)</h2>\n");
        page.push_str(&chart(&latencies, last, "ms"));
        if errors.iter().any(|&(_, e)| e > 0.0) {
            page.push_str("<h2>Failed operations per second</h2>\n");
            let errors = Series::new("errors", "#762a83", errors);
            page.push_str(&chart(&[errors], last, "errors"));
        }
        page.push_str("</body></html>\n");
        page
    }
}

/// One line of a chart.
struct Series {
    label: &'static str,
    colour: &'static str,
    /// (second, value), by second.
    points: Vec<(u64, f64)>,
}

impl Series {
    fn new(label: &'static str, colour: &'static str, points: Vec<(u64, f64)>) -> Series {
        Series {
            label,
            colour,
            points,
        }
    }
}

/// An SVG line chart of `series` over seconds `0..=last`, the y axis from
/// 0 to the largest value.
fn chart(series: &[Series], last: u64, unit: &str) -> String {
    let top = series
        .iter()
        .flat_map(|line| line.points.iter().map(|&(_, v)| v))
        .fold(0.0_f64, f64::max)
        .max(f64::MIN_POSITIVE);
    let span = last.max(1) as f64;
    let x = |s: u64| MARGIN_LEFT + s as f64 / span * WIDTH;
    let y = |v: f64| HEIGHT - v / top * HEIGHT;
    let mut svg = String::new();
    let _ = writeln!(
        svg,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" font-size=\"12\">",
        MARGIN_LEFT + WIDTH + 120.0,
        HEIGHT + MARGIN_BOTTOM + 10.0
    );
    for tick in 0..=4 {
        let value = top * f64::from(tick) / 4.0;
        let _ = writeln!(
            svg,
            "<line x1=\"{MARGIN_LEFT}\" x2=\"{}\" y1=\"{y:.1}\" y2=\"{y:.1}\" stroke=\"#ddd\"/>\
             <text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{} {unit}</text>",
            MARGIN_LEFT + WIDTH,
            MARGIN_LEFT - 6.0,
            y(value) + 4.0,
            round(value),
            y = y(value),
        );
    }
    for tick in 0..=5 {
        let second = last * tick / 5;
        let _ = writeln!(
            svg,
            "<text x=\"{:.1}\" y=\"{}\" text-anchor=\"middle\">{second} s</text>",
            x(second),
            HEIGHT + 20.0
        );
    }
    for (index, line) in series.iter().enumerate() {
        let (label, colour) = (line.label, line.colour);
        let path: Vec<String> = line
            .points
            .iter()
            .map(|&(s, v)| format!("{:.1},{:.1}", x(s), y(v)))
            .collect();
        let _ = writeln!(
            svg,
            "<polyline fill=\"none\" stroke=\"{colour}\" stroke-width=\"1.5\" points=\"{}\"/>\
             <text x=\"{}\" y=\"{}\" fill=\"{colour}\">{label}</text>",
            path.join(" "),
            MARGIN_LEFT + WIDTH + 10.0,
            16 + 16 * index
        );
    }
    svg.push_str("</svg>\n");
    svg
}

/// `value` with as many decimals as its size needs.
fn round(value: f64) -> String {
    if value == 0.0 {
        "0".into()
    } else if value >= 100.0 {
        format!("{value:.0}")
    } else if value >= 1.0 {
        format!("{value:.1}")
    } else {
        format!("{value:.3}")
    }
}

/// `text` safe inside HTML.
fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_gather_every_workers_operations_and_the_page_draws_them() {
        let timeline = Timeline::default();
        for i in 0..100u64 {
            timeline.record(Duration::from_millis(i * 25), Some(1000 + i));
            timeline.record(Duration::from_millis(i * 25), (i % 10 != 0).then_some(5000));
        }
        let seconds = timeline.seconds.lock().unwrap();
        // 100 operations each, 25 ms apart: seconds 0 to 2 (40, 40, 20 each).
        let counts: Vec<u64> = seconds.values().map(Second::operations).collect();
        assert_eq!(counts, [80, 80, 40]);
        assert_eq!(seconds.values().map(|s| s.errors).sum::<u64>(), 10);
        drop(seconds);
        let page = timeline.html("stress <write>", &[("throughput", "80 ops/s".into())]);
        assert!(page.starts_with("<!DOCTYPE html>"));
        assert!(page.contains("stress &lt;write&gt;"));
        assert_eq!(page.matches("<polyline").count(), 1 + 3 + 1, "{page}");
        assert!(page.contains("Failed operations per second"));
        assert!(!page.contains("<script"), "self-contained, no script");
    }

    #[test]
    fn an_empty_run_still_makes_a_page() {
        let page = Timeline::default().html("nothing", &[]);
        assert!(page.contains("<svg"));
        assert!(!page.contains("NaN"), "{page}");
    }
}
