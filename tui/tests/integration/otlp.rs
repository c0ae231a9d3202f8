//! `--otlp`: runs streamed to a real OpenTelemetry Collector (v0.165.0, built by
//! scripts/otelcol with the collector builder), whose `otlphttp` exporter forwards what it
//! takes to a small receiver here that decodes it: the tests assert on the data that went
//! through the collector, proving that it accepts benchtop's OTLP (profiles and metrics).
//! One file past the usual length: every test shares the collector, the receiver and the
//! decoding of what it received.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use benchtop_sessions::store::Session;
use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::collector::profiles::v1development::ExportProfilesServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value;
use opentelemetry_proto::tonic::metrics::v1::metric::Data;
use prost::Message as _;

use crate::support::{benchtop, succeeded, wait_until};

/// The collector scripts/otelcol builds (scripts/test runs it first).
fn collector_binary() -> PathBuf {
    // target/debug/deps/integration-…: the target directory is three levels up.
    let exe = std::env::current_exe().unwrap();
    let target = exe
        .ancestors()
        .nth(3)
        .expect("the test runs from target/<profile>/deps")
        .to_owned();
    let binary = target.join("otelcol").join("otelcol-benchtop");
    assert!(
        binary.is_file(),
        "no OpenTelemetry Collector at {}: build it with scripts/otelcol (scripts/test, the \
         README's test command, does it first)",
        binary.display()
    );
    binary
}

/// What the receiver behind the collector decoded.
#[derive(Default)]
struct Received {
    profiles: Vec<ExportProfilesServiceRequest>,
    metrics: Vec<ExportMetricsServiceRequest>,
    bad: Vec<String>,
}

/// An OTLP/HTTP receiver (HTTP/1.1, protobuf bodies) on loopback.
struct Sink {
    port: u16,
    got: Arc<Mutex<Received>>,
}

impl Sink {
    fn start() -> Sink {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let got = Arc::new(Mutex::new(Received::default()));
        let shared = got.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let got = shared.clone();
                std::thread::spawn(move || serve(stream, &got));
            }
        });
        Sink { port, got }
    }

    fn take(&self) -> Received {
        std::mem::take(&mut *self.got.lock().unwrap())
    }

    fn with<T>(&self, f: impl FnOnce(&Received) -> T) -> T {
        f(&self.got.lock().unwrap())
    }
}

/// Serves one connection's requests (keep-alive) until it closes.
fn serve(stream: TcpStream, got: &Mutex<Received>) {
    let mut out = stream.try_clone().unwrap();
    let mut reader = BufReader::new(stream);
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let path = line.split_whitespace().nth(1).unwrap_or("").to_owned();
        let mut length = 0usize;
        loop {
            let mut header = String::new();
            if reader.read_line(&mut header).unwrap_or(0) == 0 {
                return;
            }
            let header = header.trim_end();
            if header.is_empty() {
                break;
            }
            if let Some((k, v)) = header.split_once(':')
                && k.eq_ignore_ascii_case("content-length")
            {
                length = v.trim().parse().unwrap();
            }
        }
        let mut body = vec![0u8; length];
        reader.read_exact(&mut body).unwrap();
        {
            let mut got = got.lock().unwrap();
            match path.as_str() {
                "/v1development/profiles" => {
                    match ExportProfilesServiceRequest::decode(&body[..]) {
                        Ok(r) => got.profiles.push(r),
                        Err(e) => got.bad.push(format!("profiles: {e}")),
                    }
                }
                "/v1/metrics" => match ExportMetricsServiceRequest::decode(&body[..]) {
                    Ok(r) => got.metrics.push(r),
                    Err(e) => got.bad.push(format!("metrics: {e}")),
                },
                other => got.bad.push(format!("unexpected path {other}")),
            }
        }
        let reply =
            b"HTTP/1.1 200 OK\r\ncontent-type: application/x-protobuf\r\ncontent-length: 0\r\n\r\n";
        if out.write_all(reply).is_err() {
            return;
        }
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// `benchtop export DIR --otlp` to the collector's HTTP/protobuf receiver, which must
/// succeed.
fn export_over_http(dir: &Path, collector: &Collector) {
    succeeded(
        benchtop()
            .arg("export")
            .arg(dir)
            .arg("--otlp")
            .arg(format!("http://127.0.0.1:{}", collector.http))
            .args(["--otlp-protocol", "http/protobuf"]),
    );
}

/// The collector on loopback: OTLP in (gRPC and HTTP), profiles and metrics pipelines
/// out to the sink through its `otlphttp` exporter.
struct Collector {
    grpc: u16,
    http: u16,
    config: PathBuf,
    log: PathBuf,
    child: Option<Child>,
}

impl Collector {
    fn start(dir: &Path, sink: &Sink) -> Collector {
        let (grpc, http) = (free_port(), free_port());
        let config = dir.join("otelcol.yaml");
        std::fs::write(
            &config,
            format!(
                "receivers:
  otlp:
    protocols:
      grpc:
        endpoint: 127.0.0.1:{grpc}
      http:
        endpoint: 127.0.0.1:{http}
exporters:
  otlphttp:
    endpoint: http://127.0.0.1:{sink}
    compression: none
service:
  telemetry:
    metrics:
      level: none
  pipelines:
    profiles:
      receivers: [otlp]
      exporters: [otlphttp]
    metrics:
      receivers: [otlp]
      exporters: [otlphttp]
",
                sink = sink.port
            ),
        )
        .unwrap();
        let mut c = Collector {
            grpc,
            http,
            config,
            log: dir.join("otelcol.log"),
            child: None,
        };
        c.restart();
        c
    }

    fn restart(&mut self) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .unwrap();
        let child = Command::new(collector_binary())
            .arg("--config")
            .arg(&self.config)
            .arg("--feature-gates=+service.profilesSupport")
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap();
        self.child = Some(child);
        let (grpc, http) = (self.grpc, self.http);
        let log = self.log.clone();
        wait_until(
            &format!("the collector listening (log: {})", log.display()),
            Duration::from_secs(60),
            || {
                TcpStream::connect(("127.0.0.1", grpc)).is_ok()
                    && TcpStream::connect(("127.0.0.1", http)).is_ok()
            },
        );
    }

    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for Collector {
    fn drop(&mut self) {
        self.kill();
    }
}

/// An attribute's value as text (a string referenced into `strings`, a profiles
/// request's string table, resolved).
fn shown(
    a: &opentelemetry_proto::tonic::common::v1::KeyValue,
    strings: &[String],
) -> Option<String> {
    match a.value.as_ref()?.value.as_ref()? {
        Value::StringValue(s) => Some(s.clone()),
        Value::StringValueStrindex(i) => strings.get(*i as usize).cloned(),
        Value::IntValue(i) => Some(i.to_string()),
        Value::DoubleValue(d) => Some(d.to_string()),
        Value::BoolValue(b) => Some(b.to_string()),
        _ => None,
    }
}

/// On-CPU samples per folded stack, resolved through each request's own dictionary.
fn cpu_totals(received: &Received) -> BTreeMap<String, u64> {
    profile_totals(received, "samples", "count")
}

/// The weights per folded stack of the profiles of sample type (`kind`, `unit`),
/// resolved through each request's own dictionary.
fn profile_totals(received: &Received, kind: &str, unit: &str) -> BTreeMap<String, u64> {
    let mut totals = BTreeMap::new();
    for_each_value(received, kind, unit, |stack, _, weight| {
        *totals.entry(stack.to_owned()).or_insert(0) += weight;
    });
    totals
}

/// The weights per folded stack at each time, of the profiles of sample type (`kind`,
/// `unit`): a level's snapshots (live bytes at each interval's end).
fn snapshots(received: &Received, kind: &str, unit: &str) -> BTreeMap<u64, BTreeMap<String, u64>> {
    let mut at: BTreeMap<u64, BTreeMap<String, u64>> = BTreeMap::new();
    for_each_value(received, kind, unit, |stack, t, weight| {
        *at.entry(t)
            .or_default()
            .entry(stack.to_owned())
            .or_insert(0) += weight;
    });
    at
}

/// Calls `f` with the folded stack, time and value of every value of the profiles of
/// sample type (`kind`, `unit`), resolved through each request's own dictionary.
fn for_each_value(received: &Received, kind: &str, unit: &str, mut f: impl FnMut(&str, u64, u64)) {
    for req in &received.profiles {
        let dict = req
            .dictionary
            .as_ref()
            .expect("every request carries its dictionary");
        let s = |i: i32| dict.string_table[i as usize].as_str();
        for rp in &req.resource_profiles {
            for sp in &rp.scope_profiles {
                for p in &sp.profiles {
                    let sample_type = p.sample_type.unwrap();
                    if s(sample_type.type_strindex) != kind {
                        continue;
                    }
                    assert_eq!(s(sample_type.unit_strindex), unit, "the unit of {kind}");
                    for sample in &p.samples {
                        let stack = benchtop_otlp::profiles::folded_stack(dict, sample.stack_index)
                            .expect("the request's dictionary has the sample's stack");
                        assert_eq!(sample.values.len(), sample.timestamps_unix_nano.len());
                        for (&v, &t) in sample.values.iter().zip(&sample.timestamps_unix_nano) {
                            f(&stack, t, v as u64);
                        }
                    }
                }
            }
        }
    }
}

fn folded(path: &Path) -> BTreeMap<String, u64> {
    let mut totals = BTreeMap::new();
    for line in std::fs::read_to_string(path).unwrap().lines() {
        let (stack, count) = line.rsplit_once(' ').unwrap();
        *totals.entry(stack.to_owned()).or_insert(0) += count.parse::<u64>().unwrap();
    }
    totals
}

/// Latency values per metric in the exponential histograms received.
fn latency_counts(received: &Received) -> BTreeMap<String, u64> {
    let mut counts = BTreeMap::new();
    for m in received.metrics.iter().flat_map(|r| &r.resource_metrics) {
        for metric in m.scope_metrics.iter().flat_map(|s| &s.metrics) {
            if let Some(Data::ExponentialHistogram(h)) = &metric.data {
                let name = metric
                    .name
                    .trim_start_matches("benchtop.latency.")
                    .to_owned();
                *counts.entry(name).or_insert(0) +=
                    h.data_points.iter().map(|p| p.count).sum::<u64>();
            }
        }
    }
    counts
}

/// The distinct times of the data points received: one per row that arrived.
fn row_times(received: &Received) -> Vec<u64> {
    let mut times: Vec<u64> = received
        .metrics
        .iter()
        .flat_map(|r| &r.resource_metrics)
        .flat_map(|m| &m.scope_metrics)
        .flat_map(|s| &s.metrics)
        .flat_map(|m| match &m.data {
            Some(Data::Gauge(g)) => g.data_points.iter().map(|p| p.time_unix_nano).collect(),
            Some(Data::Sum(s)) => s.data_points.iter().map(|p| p.time_unix_nano).collect(),
            Some(Data::ExponentialHistogram(h)) => {
                h.data_points.iter().map(|p| p.time_unix_nano).collect()
            }
            _ => Vec::new(),
        })
        .collect();
    times.sort_unstable();
    times.dedup();
    times
}

fn hlog_counts(session: &Session) -> BTreeMap<String, u64> {
    let mut counts = BTreeMap::new();
    for i in &session.latency {
        *counts.entry(i.tag.clone()).or_insert(0) += i.histogram.len();
    }
    counts
}

/// Waits until the sink holds `rows` rows and the stacks' whole weight.
fn wait_for_all(sink: &Sink, rows: usize, samples: u64) {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let (got_rows, got_samples) =
            sink.with(|r| (row_times(r).len(), cpu_totals(r).values().sum::<u64>()));
        if got_rows >= rows && got_samples >= samples {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the collector forwarded {got_rows} of {rows} rows and {got_samples} of {samples} \
             samples"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
}

#[test]
fn a_run_streamed_through_the_collector_carries_its_stacks_latency_and_session() {
    let tmp = tempfile::tempdir().unwrap();
    let sink = Sink::start();
    let collector = Collector::start(tmp.path(), &sink);
    let dir = tmp.path().join("s");
    let before = now_ns();
    succeeded(
        benchtop()
            .args([
                "run",
                "ring",
                "--duration",
                "4s",
                "--interval",
                "500ms",
                "--quiet",
            ])
            .arg("--record")
            .arg(&dir)
            .arg("--otlp")
            .arg(format!("http://127.0.0.1:{}", collector.grpc))
            .args(["--otlp-headers", "authorization=Bearer s3cret"]),
    );
    let session = Session::load(&dir).unwrap();
    let expected = folded(&dir.join("cpu.folded"));
    let samples: u64 = expected.values().sum();
    assert!(samples > 0, "the run sampled no stacks");
    wait_for_all(&sink, session.rows.len(), samples);
    let got = sink.take();
    assert!(got.bad.is_empty(), "{:?}", got.bad);

    // Every interval's figures arrived, once, in the run's time.
    let times = row_times(&got);
    assert_eq!(times.len(), session.rows.len(), "{times:?}");
    assert!(times[0] > before && *times.last().unwrap() < now_ns());
    // The total samples per stack are cpu.folded's.
    assert_eq!(cpu_totals(&got), expected);
    // The latency histograms hold latency.hlog's values.
    let hlog = hlog_counts(&session);
    assert!(!hlog.is_empty());
    assert_eq!(latency_counts(&got), hlog);
    // Resource attributes: the session, the workload and its parameters, the host.
    // (The collector sends profiles' resource attribute keys as references into the
    // request's string table, as OTLP 1.10 allows: resolved here.)
    let mut resources: Vec<Vec<(String, Option<String>)>> = Vec::new();
    for req in &got.profiles {
        let strings = &req.dictionary.as_ref().unwrap().string_table;
        for rp in &req.resource_profiles {
            let attrs = &rp.resource.as_ref().unwrap().attributes;
            resources.push(
                attrs
                    .iter()
                    .map(|a| {
                        let key = if a.key.is_empty() {
                            strings[a.key_strindex as usize].clone()
                        } else {
                            a.key.clone()
                        };
                        (key, shown(a, strings))
                    })
                    .collect(),
            );
        }
    }
    for req in &got.metrics {
        for rm in &req.resource_metrics {
            let attrs = &rm.resource.as_ref().unwrap().attributes;
            resources.push(
                attrs
                    .iter()
                    .map(|a| (a.key.clone(), shown(a, &[])))
                    .collect(),
            );
        }
    }
    assert!(resources.len() >= 2);
    for r in resources {
        let attr = |k: &str| {
            r.iter()
                .find(|(key, _)| key == k)
                .and_then(|(_, v)| v.clone())
        };
        assert_eq!(
            attr("benchtop.session.id").as_deref(),
            Some(session.meta.id.as_str())
        );
        assert_eq!(attr("benchtop.workload.name").as_deref(), Some("ring"));
        assert_eq!(attr("host.name"), Some(session.meta.host.hostname.clone()));
        assert!(attr("process.pid").is_some());
        for (name, value) in &session.meta.workload.params {
            let shown = match value {
                serde_json::Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            assert_eq!(
                attr(&format!("benchtop.workload.param.{name}")),
                Some(shown),
                "parameter {name}"
            );
        }
    }
    // The session says where it streamed and keeps no header value.
    let text = std::fs::read_to_string(dir.join("session.json")).unwrap();
    assert!(!text.contains("s3cret"), "{text}");
    let otlp = session.meta.otlp.as_ref().expect("session.json's otlp");
    assert_eq!(otlp.headers, ["authorization"]);
    assert_eq!(otlp.dropped, 0);
    assert!(otlp.requests as usize >= session.rows.len());

    // The same session replayed over HTTP/protobuf delivers the same totals, at the
    // same times.
    export_over_http(&dir, &collector);
    wait_for_all(&sink, session.rows.len(), samples);
    let replayed = sink.take();
    assert_eq!(cpu_totals(&replayed), expected);
    assert_eq!(latency_counts(&replayed), hlog);
    let again = row_times(&replayed);
    assert_eq!(again.len(), times.len());
    for (a, b) in times.iter().zip(&again) {
        // The live run's clock and the session's start (milliseconds) agree closely.
        assert!(a.abs_diff(*b) < 100_000_000, "{a} vs {b}");
    }
}

#[test]
fn a_collector_killed_mid_run_costs_counted_batches_and_gets_the_intervals_after_its_restart() {
    let tmp = tempfile::tempdir().unwrap();
    let sink = Sink::start();
    let mut collector = Collector::start(tmp.path(), &sink);
    let dir = tmp.path().join("s");
    // Rounds enough that the ring runs for the whole duration, however fast the machine.
    let mut run = benchtop()
        .args([
            "run",
            "ring",
            "--num-rounds",
            "1000000000",
            "--duration",
            "12s",
        ])
        .args(["--interval", "250ms", "--quiet"])
        .arg("--record")
        .arg(&dir)
        .arg("--otlp")
        .arg(format!("http://127.0.0.1:{}", collector.grpc))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_until(
        "the first rows through the collector",
        Duration::from_secs(30),
        || sink.with(|r| !row_times(r).is_empty()),
    );
    collector.kill();
    std::thread::sleep(Duration::from_secs(2));
    let restarted = now_ns();
    collector.restart();
    let status = run.wait().unwrap();
    let mut stderr = String::new();
    run.stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    assert!(status.success(), "{stderr}");

    // The run and its session are whole.
    let session = Session::load(&dir).unwrap();
    assert_eq!(session.meta.status, benchtop_sessions::Status::Complete);
    assert!(session.rows.len() >= 30, "{} rows", session.rows.len());
    assert!(dir.join("cpu.folded").is_file());
    // The warning counts the batches that did not arrive.
    let otlp = session.meta.otlp.as_ref().unwrap();
    assert!(otlp.dropped > 0, "{otlp:?}");
    let warning = session
        .meta
        .warnings
        .iter()
        .find(|w| w.starts_with("OTLP export"))
        .unwrap_or_else(|| panic!("no OTLP warning: {:?}", session.meta.warnings));
    assert!(
        warning.contains(&format!("{} batches dropped", otlp.dropped)),
        "{warning}"
    );
    // Intervals after the restart arrived.
    wait_until("rows after the restart", Duration::from_secs(30), || {
        sink.with(|r| row_times(r).iter().any(|&t| t > restarted))
    });
    let got = sink.take();
    assert!(got.bad.is_empty(), "{:?}", got.bad);
    let after = row_times(&got).iter().filter(|&&t| t > restarted).count();
    assert!(after >= 4, "{after} rows after the restart");
    assert!(
        row_times(&got).len() < session.rows.len(),
        "some rows were dropped"
    );
}

/// A C program whose resident memory grows by 96 MiB under `grow_a` and 32 MiB under
/// `grow_b`, a moment apart (so over more than one interval), built with frame pointers.
const GROW_C: &str = r#"
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#define MB (1024UL * 1024UL)
__attribute__((noinline)) char *grow_a(void) { char *p = malloc(96 * MB); memset(p, 1, 96 * MB); return p; }
__attribute__((noinline)) char *grow_b(void) { char *p = malloc(32 * MB); memset(p, 2, 32 * MB); return p; }
int main(void) { char *a = grow_a(); usleep(300000); char *b = grow_b(); usleep(200000); return a[12345] + b[6789] == 3 ? 0 : 1; }
"#;

#[test]
fn memory_profiles_reach_the_collector_in_bytes_live_and_replayed() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("grow.c");
    std::fs::write(&src, GROW_C).unwrap();
    let prog = tmp.path().join("grow");
    let built = Command::new("cc")
        .args([
            "-O2",
            "-g",
            "-fno-omit-frame-pointer",
            "-fno-optimize-sibling-calls",
        ])
        .arg("-o")
        .arg(&prog)
        .arg(&src)
        .status()
        .expect("this test builds a C fixture with `cc`: install gcc");
    assert!(built.success());
    let sink = Sink::start();
    let collector = Collector::start(tmp.path(), &sink);
    let dir = tmp.path().join("s");
    succeeded(
        benchtop()
            .args(["run", "--quiet", "--profile", "all", "--interval", "100ms"])
            .arg("--record")
            .arg(&dir)
            .arg("--otlp")
            .arg(format!("http://127.0.0.1:{}", collector.grpc))
            .arg("--")
            .arg(&prog),
    );
    let expected = folded(&dir.join("mem.folded"));
    let bytes: u64 = expected.values().sum();
    assert!(bytes >= 64 << 20, "mem.folded holds {bytes} bytes");
    let cpu_expected = folded(&dir.join("cpu.folded"));
    let samples: u64 = cpu_expected.values().sum();
    let mem = |r: &Received| profile_totals(r, "resident_growth", "bytes");
    let wait_for_bytes = |what: &str| {
        wait_until(what, Duration::from_secs(60), || {
            sink.with(|r| {
                mem(r).values().sum::<u64>() >= bytes
                    && cpu_totals(r).values().sum::<u64>() >= samples
            })
        })
    };
    wait_for_bytes("the memory profile's bytes through the collector");
    let got = sink.take();
    assert!(got.bad.is_empty(), "{:?}", got.bad);
    // Bytes per stack, as mem.folded has them; the on-CPU profile went along.
    assert_eq!(mem(&got), expected);
    assert_eq!(cpu_totals(&got), cpu_expected);
    // The growth is placed in time: grow_a's and grow_b's bytes carry the times of
    // their intervals, 300 ms apart.
    let mut times = std::collections::BTreeSet::new();
    for req in &got.profiles {
        let strings = &req.dictionary.as_ref().unwrap().string_table;
        for p in &req.resource_profiles[0].scope_profiles[0].profiles {
            if strings[p.sample_type.unwrap().type_strindex as usize] == "resident_growth" {
                for sample in &p.samples {
                    times.extend(sample.timestamps_unix_nano.iter().copied());
                }
            }
        }
    }
    assert!(times.len() >= 2, "memory samples at {times:?}");

    // Replayed over HTTP/protobuf: the same bytes per stack, with the sampling period.
    export_over_http(&dir, &collector);
    wait_for_bytes("the replayed memory profile's bytes");
    let replayed = sink.take();
    assert_eq!(mem(&replayed), expected);
    let session = Session::load(&dir).unwrap();
    let period = session
        .meta
        .sampling
        .mem
        .as_ref()
        .expect("sampling.mem")
        .period;
    for req in &replayed.profiles {
        let strings = &req.dictionary.as_ref().unwrap().string_table;
        for p in &req.resource_profiles[0].scope_profiles[0].profiles {
            if strings[p.sample_type.unwrap().type_strindex as usize] == "resident_growth" {
                assert_eq!(p.period, period as i64);
                let pt = p.period_type.unwrap();
                assert_eq!(strings[pt.type_strindex as usize], "page_faults");
            }
        }
    }
}

#[test]
fn a_worker_s_allocation_profiles_reach_the_collector_live_and_replayed() {
    let tmp = tempfile::tempdir().unwrap();
    let sink = Sink::start();
    let collector = Collector::start(tmp.path(), &sink);
    let dir = tmp.path().join("s");
    // The ring's asks pile up in their actors' slabs, then unwind: live bytes rise to a
    // peak and fall. 4 KiB between samples: thousands of samples. Intervals of 250 ms:
    // the naming thread's queue (128 batches) then holds half a minute of them while it
    // reads a debug build's symbols at nice 10 beside CPU hogs.
    succeeded(
        benchtop()
            .args(["run", "ring", "--mode", "ask", "--num-nodes", "1000"])
            .args(["--num-rounds", "1000", "--alloc-sample", "4096"])
            .args(["--profile", "none", "--interval", "250ms", "--quiet"])
            .arg("--record")
            .arg(&dir)
            .arg("--otlp")
            .arg(format!("http://127.0.0.1:{}", collector.grpc)),
    );
    let allocated = folded(&dir.join("alloc.folded"));
    let live_end = folded(&dir.join("live-end.folded"));
    let peak = folded(&dir.join("live.folded"));
    let bytes: u64 = allocated.values().sum();
    assert!(bytes >= 1 << 20, "alloc.folded holds {bytes} bytes");
    // What the run ended holding (the runtime, the lap histograms) is not nothing, so
    // the last snapshot has something to show.
    assert!(!live_end.is_empty());
    let alloc = |r: &Received| profile_totals(r, "alloc_space", "bytes");
    let live = |r: &Received| snapshots(r, "inuse_space", "bytes");
    let otlp_report = std::fs::read_to_string(dir.join("session.json"))
        .map(|text| {
            let meta: serde_json::Value = serde_json::from_str(&text).unwrap();
            format!("otlp {} warnings {}", meta["otlp"], meta["warnings"])
        })
        .unwrap_or_default();
    let wait_for_all = |what: &str| {
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        loop {
            let (got, snapshots, last_is_end) = sink.with(|r| {
                let l = live(r);
                (
                    alloc(r).values().sum::<u64>(),
                    l.len(),
                    l.values().next_back() == Some(&live_end),
                )
            });
            if got >= bytes && last_is_end {
                return;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "timed out waiting for {what}: {got} of {bytes} bytes allocated, {snapshots} \
                 snapshots of live bytes (the last {}the run's end); {otlp_report}",
                if last_is_end { "" } else { "not " }
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    wait_for_all("the allocation profiles through the collector");
    let got = sink.take();
    assert!(got.bad.is_empty(), "{:?}", got.bad);
    // The bytes allocated per stack, added up over the intervals, are alloc.folded's.
    assert_eq!(alloc(&got), allocated);
    // Streamed interval by interval: the asks pile up over a few intervals (some
    // 300 ms), then only unwind, so allocations at a few times; live bytes with each.
    let mut alloc_times = std::collections::BTreeSet::new();
    for_each_value(&got, "alloc_space", "bytes", |_, t, _| {
        alloc_times.insert(t);
    });
    assert!(alloc_times.len() >= 2, "allocations at {alloc_times:?}");
    let streamed = live(&got);
    assert!(streamed.len() >= 5, "{} snapshots", streamed.len());
    // The last snapshot of live bytes is what the run ended holding (live-end.folded);
    // the highest of them is about the peak that live.folded holds (taken at a tick,
    // where the snapshots are taken at the rows).
    assert_eq!(streamed.values().next_back(), Some(&live_end));
    let total = |m: &BTreeMap<String, u64>| m.values().sum::<u64>();
    let highest = streamed.values().map(total).max().unwrap();
    assert!(
        highest >= total(&peak) / 2 && highest > total(&live_end),
        "highest snapshot {highest}, live.folded {}, live-end.folded {}",
        total(&peak),
        total(&live_end)
    );
    // Their period is the sampling's bytes between samples.
    for req in &got.profiles {
        let strings = &req.dictionary.as_ref().unwrap().string_table;
        for p in &req.resource_profiles[0].scope_profiles[0].profiles {
            let pt = p.period_type.unwrap();
            if strings[pt.type_strindex as usize] == "space" {
                assert_eq!(p.period, 4096);
                assert_eq!(strings[pt.unit_strindex as usize], "bytes");
            }
        }
    }

    // Replayed over HTTP/protobuf: the same bytes allocated per stack, and live bytes at
    // the peak (live.folded) and at the end (live-end.folded), in that order.
    export_over_http(&dir, &collector);
    wait_for_all("the replayed allocation profiles");
    let replayed = sink.take();
    assert_eq!(alloc(&replayed), allocated);
    let snapshots: Vec<BTreeMap<String, u64>> = live(&replayed).into_values().collect();
    assert_eq!(snapshots, [peak, live_end]);
}

#[test]
fn a_collector_that_is_away_is_told_while_the_run_goes_on() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("s");
    let endpoint = format!("http://127.0.0.1:{}", free_port());
    // Not --quiet, stderr not a terminal: the progress line's notices are plain lines.
    let output = benchtop()
        .args(["run", "ring", "--duration", "3s", "--interval", "250ms"])
        .arg("--record")
        .arg(&dir)
        .arg("--otlp")
        .arg(&endpoint)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let told: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with(&format!("benchtop: streaming to {endpoint}: ")))
        .collect();
    // Told at once, not once an interval (at most every 10 s: once in a 3 s run).
    assert_eq!(told.len(), 1, "{stderr}");
    assert!(
        told[0].contains("batches dropped (") && told[0].contains("unreachable"),
        "{stderr}"
    );
    // The session is whole and its warning has the final count.
    let session = Session::load(&dir).unwrap();
    assert_eq!(session.meta.status, benchtop_sessions::Status::Complete);
    assert!(session.meta.otlp.as_ref().unwrap().dropped > 0);
}
