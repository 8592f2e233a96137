//! Metric families in Prometheus's data model, written in its text exposition format by
//! the `prometheus` crate's encoder. Every sample carries the `pipeline` label, and a
//! worker's the `worker` label.

use prometheus::proto::{
    Bucket, Counter, Gauge, Histogram, LabelPair, Metric, MetricFamily, MetricType,
};
use prometheus::{Encoder, TextEncoder};

/// The content type of [`Families::encode`]'s text.
pub(super) const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Labels of one sample besides `pipeline`: `(name, value)`.
pub(super) type Labels = Vec<(&'static str, String)>;

/// A histogram with fixed bucket bounds, observed one value at a time.
#[derive(Debug, Clone)]
pub(super) struct Buckets {
    bounds: &'static [f64],
    /// Observations per bucket (not cumulative); the last counts those above every bound.
    counts: Vec<u64>,
    sum: f64,
}

impl Buckets {
    /// An empty histogram over `bounds` (ascending upper bounds).
    pub(super) fn new(bounds: &'static [f64]) -> Self {
        Self {
            bounds,
            counts: vec![0; bounds.len() + 1],
            sum: 0.0,
        }
    }

    /// Counts one observation.
    pub(super) fn observe(&mut self, value: f64) {
        let bucket = self.bounds.partition_point(|bound| *bound < value);
        self.counts[bucket] += 1;
        self.sum += value;
    }

    fn to_proto(&self) -> Histogram {
        let mut cumulative = 0;
        let buckets = self
            .bounds
            .iter()
            .zip(&self.counts)
            .map(|(bound, count)| {
                cumulative += count;
                let mut bucket = Bucket::default();
                bucket.set_upper_bound(*bound);
                bucket.set_cumulative_count(cumulative);
                bucket
            })
            .collect();
        let mut histogram = Histogram::default();
        histogram.set_bucket(buckets);
        histogram.set_sample_count(self.counts.iter().sum());
        histogram.set_sample_sum(self.sum);
        histogram
    }
}

/// Metric families being gathered for one scrape.
pub(super) struct Families {
    /// Labels of every sample: `pipeline`, and `worker` on a job of several workers.
    common: Labels,
    families: Vec<MetricFamily>,
}

impl Families {
    /// No families yet; every sample will be labelled `pipeline`, and `worker` when
    /// one of a job's workers serves them (a dashboard sums over workers).
    pub(super) fn new(pipeline: &str, worker: Option<usize>) -> Self {
        let mut common = vec![("pipeline", pipeline.to_string())];
        common.extend(worker.map(|w| ("worker", w.to_string())));
        Self {
            common,
            families: Vec::new(),
        }
    }

    /// A counter family (its name ends in `_total`).
    pub(super) fn counter(
        &mut self,
        name: &str,
        help: &str,
        samples: impl IntoIterator<Item = (Labels, f64)>,
    ) {
        let metrics = samples.into_iter().map(|(labels, value)| {
            let mut counter = Counter::default();
            counter.set_value(value);
            let mut metric = Metric::from_label(Vec::new());
            metric.set_counter(counter);
            (labels, metric)
        });
        self.push(name, help, MetricType::COUNTER, metrics);
    }

    /// A gauge family.
    pub(super) fn gauge(
        &mut self,
        name: &str,
        help: &str,
        samples: impl IntoIterator<Item = (Labels, f64)>,
    ) {
        let metrics = samples.into_iter().map(|(labels, value)| {
            let mut gauge = Gauge::default();
            gauge.set_value(value);
            (labels, Metric::from_gauge(gauge))
        });
        self.push(name, help, MetricType::GAUGE, metrics);
    }

    /// A histogram family with one histogram, labelled `pipeline` only.
    pub(super) fn histogram(&mut self, name: &str, help: &str, buckets: &Buckets) {
        let mut metric = Metric::from_label(Vec::new());
        metric.set_histogram(buckets.to_proto());
        self.push(
            name,
            help,
            MetricType::HISTOGRAM,
            std::iter::once((Vec::new(), metric)),
        );
    }

    fn push(
        &mut self,
        name: &str,
        help: &str,
        kind: MetricType,
        metrics: impl Iterator<Item = (Labels, Metric)>,
    ) {
        let metrics: Vec<Metric> = metrics
            .map(|(labels, mut metric)| {
                let pairs = self
                    .common
                    .iter()
                    .cloned()
                    .chain(labels)
                    .map(|(name, value)| {
                        let mut pair = LabelPair::default();
                        pair.set_name(name.to_string());
                        pair.set_value(value);
                        pair
                    })
                    .collect();
                metric.set_label(pairs);
                metric
            })
            .collect();
        // A family without samples is not valid exposition: leave it out.
        if metrics.is_empty() {
            return;
        }
        let mut family = MetricFamily::default();
        family.set_name(name.to_string());
        family.set_help(help.to_string());
        family.set_field_type(kind);
        family.set_metric(metrics);
        self.families.push(family);
    }

    /// The families in the text exposition format.
    ///
    /// # Errors
    /// A family the encoder rejects (a bug in gathering them).
    pub(super) fn encode(&self) -> Result<String, String> {
        let mut out = Vec::new();
        TextEncoder::new()
            .encode(&self.families, &mut out)
            .map_err(|e| format!("encoding metrics: {e}"))?;
        String::from_utf8(out).map_err(|e| format!("encoding metrics: {e}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_sample_is_labelled_with_the_pipeline_and_its_own_labels() {
        let mut families = Families::new("q5", None);
        families.counter(
            "riffle_rows_total",
            "Rows.",
            [(vec![("operator", "bids".to_string())], 7.0)],
        );
        let text = families.encode().unwrap();
        assert!(text.contains("# TYPE riffle_rows_total counter"), "{text}");
        assert!(
            text.contains("riffle_rows_total{pipeline=\"q5\",operator=\"bids\"} 7"),
            "{text}"
        );
    }

    #[test]
    fn a_workers_samples_say_which_worker_it_is() {
        let mut families = Families::new("q5", Some(2));
        families.gauge(
            "riffle_g",
            "G.",
            [(vec![("operator", "o".to_string())], 1.0)],
        );
        let text = families.encode().unwrap();
        assert!(
            text.contains("riffle_g{pipeline=\"q5\",worker=\"2\",operator=\"o\"} 1"),
            "{text}"
        );
    }

    #[test]
    fn a_family_without_samples_is_left_out() {
        let mut families = Families::new("q5", None);
        families.gauge("riffle_empty", "Nothing.", []);
        assert_eq!(families.encode().unwrap(), "");
    }

    #[test]
    fn histogram_buckets_are_cumulative_with_an_infinite_last_bucket() {
        let mut buckets = Buckets::new(&[1.0, 10.0]);
        for v in [0.5, 1.0, 5.0, 50.0] {
            buckets.observe(v);
        }
        let mut families = Families::new("p", None);
        families.histogram("riffle_x_seconds", "X.", &buckets);
        let text = families.encode().unwrap();
        assert!(
            text.contains("riffle_x_seconds_bucket{pipeline=\"p\",le=\"1\"} 2"),
            "{text}"
        );
        assert!(
            text.contains("riffle_x_seconds_bucket{pipeline=\"p\",le=\"10\"} 3"),
            "{text}"
        );
        assert!(
            text.contains("riffle_x_seconds_bucket{pipeline=\"p\",le=\"+Inf\"} 4"),
            "{text}"
        );
        assert!(
            text.contains("riffle_x_seconds_sum{pipeline=\"p\"} 56.5"),
            "{text}"
        );
        assert!(
            text.contains("riffle_x_seconds_count{pipeline=\"p\"} 4"),
            "{text}"
        );
    }

    #[test]
    fn label_values_are_escaped() {
        let mut families = Families::new("a\"b", None);
        families.gauge("riffle_g", "G.", [(Vec::new(), 1.0)]);
        let text = families.encode().unwrap();
        assert!(text.contains("riffle_g{pipeline=\"a\\\"b\"} 1"), "{text}");
    }
}
