//! Registering families, and the small helpers the sampled families use.

use prometheus::core::Collector;
use prometheus::{
    Gauge, GaugeVec, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge, IntGaugeVec,
    Opts, Registry,
};

use crate::error::{MetricsError, Result};
use crate::node_metrics::latency_buckets;

/// Registers families in one registry.
pub(crate) struct Families<'a>(pub(crate) &'a Registry);

impl Families<'_> {
    pub(crate) fn add<C: Collector + Clone + 'static>(
        &self,
        name: &'static str,
        c: C,
    ) -> Result<C> {
        self.0
            .register(Box::new(c.clone()))
            .map_err(|source| MetricsError::Register { name, source })?;
        Ok(c)
    }

    pub(crate) fn counter(&self, name: &'static str, help: &str) -> Result<IntCounter> {
        let c = IntCounter::new(name, help)
            .map_err(|source| MetricsError::Register { name, source })?;
        self.add(name, c)
    }

    pub(crate) fn counters(
        &self,
        name: &'static str,
        help: &str,
        labels: &[&str],
    ) -> Result<IntCounterVec> {
        let c = IntCounterVec::new(Opts::new(name, help), labels)
            .map_err(|source| MetricsError::Register { name, source })?;
        self.add(name, c)
    }

    pub(crate) fn gauge(&self, name: &'static str, help: &str) -> Result<IntGauge> {
        let g =
            IntGauge::new(name, help).map_err(|source| MetricsError::Register { name, source })?;
        self.add(name, g)
    }

    pub(crate) fn gauges(
        &self,
        name: &'static str,
        help: &str,
        labels: &[&str],
    ) -> Result<IntGaugeVec> {
        let g = IntGaugeVec::new(Opts::new(name, help), labels)
            .map_err(|source| MetricsError::Register { name, source })?;
        self.add(name, g)
    }

    pub(crate) fn float_gauge(&self, name: &'static str, help: &str) -> Result<Gauge> {
        let g = Gauge::new(name, help).map_err(|source| MetricsError::Register { name, source })?;
        self.add(name, g)
    }

    pub(crate) fn float_gauges(
        &self,
        name: &'static str,
        help: &str,
        labels: &[&str],
    ) -> Result<GaugeVec> {
        let g = GaugeVec::new(Opts::new(name, help), labels)
            .map_err(|source| MetricsError::Register { name, source })?;
        self.add(name, g)
    }

    pub(crate) fn histograms(
        &self,
        name: &'static str,
        help: &str,
        labels: &[&str],
    ) -> Result<HistogramVec> {
        let opts = HistogramOpts::new(name, help).buckets(latency_buckets());
        let h = HistogramVec::new(opts, labels)
            .map_err(|source| MetricsError::Register { name, source })?;
        self.add(name, h)
    }
}

/// Moves a counter mirroring a monotonic count up to `value` (never down:
/// the count it mirrors only grows while the process lives).
pub(crate) fn advance(counter: &IntCounter, value: u64) {
    let now = counter.get();
    if value > now {
        counter.inc_by(value - now);
    }
}

pub(crate) fn gauge_value(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}
