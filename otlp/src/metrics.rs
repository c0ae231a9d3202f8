//! An interval's figures as one OTLP metrics request: the workload's counters as
//! cumulative sums (levels as gauges), each latency histogram of the interval as a delta
//! exponential histogram, and the process tree's resources as the semantic conventions'
//! `process.*` metrics.

use benchtop_sessions::TimeseriesRow;
use hdrhistogram::Histogram;
use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::common::v1::KeyValue;
use opentelemetry_proto::tonic::metrics::v1::{
    AggregationTemporality, ExponentialHistogram, ExponentialHistogramDataPoint, Gauge, Metric,
    NumberDataPoint, ResourceMetrics, ScopeMetrics, Sum, exponential_histogram_data_point, metric,
    number_data_point,
};
use opentelemetry_proto::tonic::resource::v1::Resource;

use crate::resource::{scope, string};

/// The finest scale tried: buckets 2^(1/256) apart (0.27 %), finer than HdrHistogram's
/// three significant digits need.
pub const MAX_SCALE: i32 = 8;
/// At most this many buckets per data point: the scale is lowered until the values fit
/// (the OpenTelemetry SDKs' default is 160; latency spans more octaves than a request
/// size, so more are kept).
pub const MAX_BUCKETS: i64 = 2048;

/// The times of one row on the wall clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RowTimes {
    /// The run's start, ns since the epoch (cumulative sums start here).
    pub start_unix_ns: u64,
    /// The interval's start.
    pub interval_start_unix_ns: u64,
    /// The interval's end (the row's time).
    pub end_unix_ns: u64,
}

impl RowTimes {
    /// The times of `row` in a run that started at `start_unix_ns`.
    pub fn of(row: &TimeseriesRow, start_unix_ns: u64) -> RowTimes {
        let end = start_unix_ns.saturating_add(seconds_ns(row.t_s));
        RowTimes {
            start_unix_ns,
            interval_start_unix_ns: end.saturating_sub(seconds_ns(row.interval_s)),
            end_unix_ns: end,
        }
    }
}

fn seconds_ns(s: f64) -> u64 {
    if s.is_finite() && s > 0.0 {
        (s * 1e9) as u64
    } else {
        0
    }
}

fn point(times: RowTimes, cumulative: bool, value: number_data_point::Value) -> NumberDataPoint {
    NumberDataPoint {
        start_time_unix_nano: if cumulative {
            times.start_unix_ns
        } else {
            times.interval_start_unix_ns
        },
        time_unix_nano: times.end_unix_ns,
        value: Some(value),
        ..NumberDataPoint::default()
    }
}

fn sum(name: &str, unit: &str, points: Vec<NumberDataPoint>) -> Metric {
    Metric {
        name: name.to_owned(),
        unit: unit.to_owned(),
        data: Some(metric::Data::Sum(Sum {
            data_points: points,
            aggregation_temporality: AggregationTemporality::Cumulative as i32,
            is_monotonic: true,
        })),
        ..Metric::default()
    }
}

fn gauge(name: &str, unit: &str, point: NumberDataPoint) -> Metric {
    Metric {
        name: name.to_owned(),
        unit: unit.to_owned(),
        data: Some(metric::Data::Gauge(Gauge {
            data_points: vec![point],
        })),
        ..Metric::default()
    }
}

fn int(v: u64) -> number_data_point::Value {
    number_data_point::Value::AsInt(i64::try_from(v).unwrap_or(i64::MAX))
}

fn with(mut p: NumberDataPoint, attributes: Vec<KeyValue>) -> NumberDataPoint {
    p.attributes = attributes;
    p
}

/// The metrics of one row and its interval's histograms as one request.
pub fn metrics_request(
    resource: &Resource,
    row: &TimeseriesRow,
    histograms: &[(String, Histogram<u64>)],
    times: RowTimes,
) -> ExportMetricsServiceRequest {
    let mut metrics = Vec::new();
    for (name, &value) in &row.counters {
        let metric_name = format!("benchtop.counter.{name}");
        // A counter without a rate over a real interval is a level (live bytes).
        if row.interval_s > 0.0 && !row.rates.contains_key(name) {
            metrics.push(gauge(&metric_name, "1", point(times, false, int(value))));
        } else {
            metrics.push(sum(&metric_name, "1", vec![point(times, true, int(value))]));
        }
    }
    for (name, histogram) in histograms {
        metrics.push(Metric {
            name: format!("benchtop.latency.{name}"),
            unit: "ns".to_owned(),
            data: Some(metric::Data::ExponentialHistogram(ExponentialHistogram {
                data_points: vec![exponential_point(histogram, times)],
                aggregation_temporality: AggregationTemporality::Delta as i32,
            })),
            ..Metric::default()
        });
    }
    if let Some(r) = &row.resources {
        let now = |v| point(times, false, v);
        metrics.push(gauge("process.memory.usage", "By", now(int(r.rss_bytes))));
        metrics.push(gauge(
            "process.thread.count",
            "{thread}",
            now(int(u64::from(r.threads))),
        ));
        metrics.push(gauge(
            "process.cpu.utilization",
            "1",
            now(number_data_point::Value::AsDouble(r.cpu_percent / 100.0)),
        ));
        metrics.push(sum(
            "process.cpu.time",
            "s",
            vec![point(
                times,
                true,
                number_data_point::Value::AsDouble(r.cpu_time_s),
            )],
        ));
        metrics.push(gauge(
            "benchtop.processes",
            "{process}",
            now(int(u64::from(r.processes))),
        ));
        if let Some(cs) = &r.ctx_switches_total {
            metrics.push(sum(
                "process.context_switches",
                "{context_switch}",
                vec![
                    with(
                        point(times, true, int(cs.voluntary)),
                        vec![string("process.context_switch.type", "voluntary")],
                    ),
                    with(
                        point(times, true, int(cs.involuntary)),
                        vec![string("process.context_switch.type", "involuntary")],
                    ),
                ],
            ));
        }
    }
    ExportMetricsServiceRequest {
        resource_metrics: vec![ResourceMetrics {
            resource: Some(resource.clone()),
            scope_metrics: vec![ScopeMetrics {
                scope: Some(scope()),
                metrics,
                schema_url: String::new(),
            }],
            schema_url: String::new(),
        }],
    }
}

/// The bucket of `value` at `scale`: bucket `i` holds (2^(i/2^scale), 2^((i+1)/2^scale)].
fn bucket(value: u64, scale: i32) -> i64 {
    let log = (value as f64).log2() * f64::from(scale).exp2();
    (log.ceil() as i64) - 1
}

/// An HdrHistogram as an exponential histogram data point: the same count, min and max;
/// each HdrHistogram bucket's count put in the exponential bucket of its middle value, at
/// the finest scale that fits [`MAX_BUCKETS`]. The sum is HdrHistogram's mean times the
/// count (it keeps no exact sum).
pub fn exponential_point(h: &Histogram<u64>, times: RowTimes) -> ExponentialHistogramDataPoint {
    let mut p = ExponentialHistogramDataPoint {
        start_time_unix_nano: times.interval_start_unix_ns,
        time_unix_nano: times.end_unix_ns,
        count: h.len(),
        ..ExponentialHistogramDataPoint::default()
    };
    if h.is_empty() {
        return p;
    }
    p.sum = Some(h.mean() * h.len() as f64);
    p.min = Some(h.min() as f64);
    p.max = Some(h.max() as f64);
    let values: Vec<(u64, u64)> = h
        .iter_recorded()
        .map(|v| {
            (
                h.median_equivalent(v.value_iterated_to()),
                v.count_at_value(),
            )
        })
        .collect();
    let positive: Vec<&(u64, u64)> = values.iter().filter(|(v, _)| *v > 0).collect();
    p.zero_count = values.iter().filter(|(v, _)| *v == 0).map(|(_, c)| c).sum();
    let (Some(&&(lo, _)), Some(&&(hi, _))) = (positive.first(), positive.last()) else {
        return p;
    };
    let mut scale = MAX_SCALE;
    while scale > -10 && bucket(hi, scale) - bucket(lo, scale) >= MAX_BUCKETS {
        scale -= 1;
    }
    let offset = bucket(lo, scale);
    let mut counts = vec![0u64; (bucket(hi, scale) - offset + 1).max(1) as usize];
    for &&(v, c) in &positive {
        let at = (bucket(v, scale) - offset).clamp(0, counts.len() as i64 - 1) as usize;
        counts[at] += c;
    }
    p.scale = scale;
    p.positive = Some(exponential_histogram_data_point::Buckets {
        offset: i32::try_from(offset).unwrap_or(0),
        bucket_counts: counts,
    });
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    fn times() -> RowTimes {
        RowTimes {
            start_unix_ns: 1_000,
            interval_start_unix_ns: 2_000,
            end_unix_ns: 3_000,
        }
    }

    #[test]
    fn an_exponential_histogram_keeps_the_count_and_the_range() {
        let mut h = Histogram::<u64>::new_with_bounds(1, 3_600_000_000_000, 3).expect("bounds");
        for v in [0u64, 1_000, 1_500, 2_000, 50_000, 1_000_000_000] {
            h.record(v).expect("in range");
        }
        let p = exponential_point(&h, times());
        assert_eq!(p.count, 6);
        assert_eq!(p.zero_count, 1);
        let b = p.positive.expect("buckets");
        assert_eq!(b.bucket_counts.iter().sum::<u64>(), 5);
        assert!(b.bucket_counts.len() as i64 <= MAX_BUCKETS);
        // The lowest value is in the first bucket: (base^offset, base^(offset+1)].
        let base = 2f64.powf(2f64.powi(-p.scale));
        let lo = base.powi(b.offset);
        assert!(lo < 1_000.0 && 1_000.0 <= lo * base * 1.01, "{lo} {base}");
        assert_eq!(p.max, Some(h.max() as f64));
    }

    #[test]
    fn a_wide_histogram_lowers_the_scale_to_fit() {
        let mut h = Histogram::<u64>::new_with_bounds(1, 3_600_000_000_000, 3).expect("bounds");
        h.record(1).expect("in range");
        h.record(3_000_000_000_000).expect("in range");
        let p = exponential_point(&h, times());
        assert!(p.scale < MAX_SCALE);
        assert_eq!(
            p.positive
                .expect("buckets")
                .bucket_counts
                .iter()
                .sum::<u64>(),
            2
        );
    }

    #[test]
    fn counters_are_sums_and_levels_gauges() {
        let mut row = TimeseriesRow::default();
        row.t_s = 2.0;
        row.interval_s = 1.0;
        row.counters.insert("ops".into(), 10);
        row.rates.insert("ops".into(), 5.0);
        row.counters.insert("alloc_live_bytes".into(), 4096);
        let req = metrics_request(&Resource::default(), &row, &[], times());
        let metrics = &req.resource_metrics[0].scope_metrics[0].metrics;
        let kind = |name: &str| {
            metrics
                .iter()
                .find(|m| m.name == name)
                .and_then(|m| m.data.clone())
        };
        assert!(matches!(
            kind("benchtop.counter.ops"),
            Some(metric::Data::Sum(_))
        ));
        assert!(matches!(
            kind("benchtop.counter.alloc_live_bytes"),
            Some(metric::Data::Gauge(_))
        ));
    }
}
