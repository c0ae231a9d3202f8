//! timeseries.jsonl, one row per interval, and the summary of every thread a run's
//! monitors saw ([`ThreadSummary`]; its file, threads.csv, is the session store's): the
//! data the resource monitors record.

use std::cell::Cell;
use std::collections::BTreeMap;
use std::fmt;
use std::marker::PhantomData;

use serde::de::{self, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize};

/// One interval of a run: the workload's counters and latencies, and the monitors.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[non_exhaustive]
pub struct TimeseriesRow {
    /// End of the interval, seconds since the worker started measured work.
    #[serde(deserialize_with = "f64_or_nan")]
    pub t_s: f64,
    /// Length of the interval, seconds.
    #[serde(deserialize_with = "f64_or_nan")]
    pub interval_s: f64,
    /// Cumulative workload counters.
    #[serde(default, deserialize_with = "counted_map")]
    pub counters: BTreeMap<String, u64>,
    /// Counter rates over the interval, per second.
    #[serde(default, deserialize_with = "f64_map_or_nan")]
    pub rates: BTreeMap<String, f64>,
    /// Latency percentiles of the interval, per histogram metric.
    #[serde(default, deserialize_with = "counted_map")]
    pub latency: BTreeMap<String, Percentiles>,
    /// Resource monitors of the worker's process tree at the end of the interval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<Resources>,
    /// Utilisation of each online CPU of the machine over the interval, percent (0–100),
    /// in CPU number order: the whole machine, not only the worker. Empty when not
    /// recorded.
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "f64_vec_or_nan"
    )]
    pub cpu_percent_per_core: Vec<f64>,
    /// The threads of the worker's tree that used the most CPU in the interval, busiest
    /// first (a few at most; every thread of the run is in threads.csv). Empty when not
    /// recorded.
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "counted_threads"
    )]
    pub top_threads: Vec<ThreadCpu>,
}

/// Percentiles of one histogram, in its unit (nanoseconds for latencies).
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Percentiles {
    /// Values recorded.
    pub count: u64,
    /// Smallest value.
    pub min: u64,
    /// Median.
    pub p50: u64,
    /// 90th percentile.
    pub p90: u64,
    /// 99th percentile.
    pub p99: u64,
    /// 99.9th percentile.
    pub p999: u64,
    /// Largest value.
    pub max: u64,
    /// Mean.
    #[serde(deserialize_with = "f64_or_nan")]
    pub mean: f64,
}

impl Percentiles {
    /// Percentiles of a histogram; all zero when it is empty.
    pub fn of(histogram: &hdrhistogram::Histogram<u64>) -> Self {
        if histogram.is_empty() {
            return Percentiles::default();
        }
        Percentiles {
            count: histogram.len(),
            min: histogram.min(),
            p50: histogram.value_at_quantile(0.50),
            p90: histogram.value_at_quantile(0.90),
            p99: histogram.value_at_quantile(0.99),
            p999: histogram.value_at_quantile(0.999),
            max: histogram.max(),
            mean: histogram.mean(),
        }
    }
}

/// Resource use of the worker's process tree: the worker and every descendant alive at the
/// end of the interval.
///
/// It is `Copy`: the per-core figures and the thread lists, which are not, live beside it
/// in [`TimeseriesRow`]. Fields added after the first sessions were written take their
/// defaults when absent, so older rows still load.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Resources {
    /// Resident set size, bytes, summed over the tree's processes (pages shared between
    /// processes count once per process, as in `ps`).
    pub rss_bytes: u64,
    /// Peak resident set size so far, bytes: the largest VmHWM (the kernel's own peak) of
    /// any one process of the tree, what `/usr/bin/time -v` reports. In rows recorded
    /// before [`Resources::tree_peak_rss_bytes`] existed, the larger of that and the
    /// largest tree sum seen.
    pub peak_rss_bytes: u64,
    /// The largest [`Resources::rss_bytes`] (the tree's sum) of any interval so far, bytes.
    /// The true peak of the sum between two intervals can be higher. `None` in rows
    /// recorded before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tree_peak_rss_bytes: Option<u64>,
    /// Threads of the tree.
    pub threads: u32,
    /// CPU use over the interval, percent of one core (200 = two cores busy), by the
    /// threads seen at the end of this interval or the previous one.
    #[serde(deserialize_with = "f64_or_nan")]
    pub cpu_percent: f64,
    /// CPU time used so far, user + system, seconds, by every thread seen so far (up to its
    /// last sighting).
    #[serde(deserialize_with = "f64_or_nan")]
    pub cpu_time_s: f64,
    /// Processes of the tree (zombies not counted); 0 when not recorded (older sessions).
    #[serde(default)]
    pub processes: u32,
    /// Context switches of every thread seen so far, up to its last sighting; `None` when
    /// not recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ctx_switches_total: Option<ContextSwitches>,
    /// Context switches within the interval (the growth of `ctx_switches_total`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ctx_switches_interval: Option<ContextSwitches>,
    /// I/O so far, summed over the tree's processes (each of which includes its threads
    /// and the children it has reaped); `None` when no process's counters could be read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub io_total: Option<IoCounters>,
    /// I/O within the interval (the growth of `io_total`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub io_interval: Option<IoCounters>,
    /// Live processes of the tree whose I/O counters could not be read (reading them needs
    /// the permission to trace the process) and are left out of `io_total`.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub io_unreadable_processes: u32,
    /// What the kernel counted for the whole tree so far, every thread and process the
    /// run started included, however short it lived (perf counting events inherited by
    /// each new thread and folded into the total as each exits); `None` where the kernel
    /// refused them (the polled figures above stand alone) and in older sessions. With it,
    /// `cpu_time_s` is its `cpu_time_s` and `cpu_percent` its interval's share.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub counted_total: Option<TreeCounts>,
    /// What the kernel counted within the interval (the growth of `counted_total`): the
    /// rows' intervals add up to the last row's total.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub counted_interval: Option<TreeCounts>,
}

/// Figures of a whole process tree counted by the kernel rather than polled: what `perf
/// stat` counts for a command and its descendants.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
#[non_exhaustive]
pub struct TreeCounts {
    /// CPU time, user and system together, seconds (perf's `task-clock`).
    #[serde(deserialize_with = "f64_or_nan")]
    pub cpu_time_s: f64,
    /// Context switches, voluntary and involuntary together (perf's `context-switches`);
    /// `None` when they could not be counted (they need kernel events: root,
    /// CAP_PERFMON or perf_event_paranoid <= 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_switches: Option<u64>,
    /// Minor page faults (perf's `minor-faults`, `time -v`'s "Minor … page faults");
    /// `None` when not counted, as for `context_switches`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub minor_faults: Option<u64>,
    /// Major page faults, those that read from storage (perf's `major-faults`); `None`
    /// when not counted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub major_faults: Option<u64>,
}

impl TreeCounts {
    /// The growth from `before` to `self` (counts never go down; a figure missing from
    /// either is missing from the growth).
    pub fn since(&self, before: &TreeCounts) -> TreeCounts {
        let diff = |a: Option<u64>, b: Option<u64>| Some(a?.saturating_sub(b?));
        TreeCounts {
            cpu_time_s: (self.cpu_time_s - before.cpu_time_s).max(0.0),
            context_switches: diff(self.context_switches, before.context_switches),
            minor_faults: diff(self.minor_faults, before.minor_faults),
            major_faults: diff(self.major_faults, before.major_faults),
        }
    }
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// Context switch counts: `/proc/<pid>/task/<tid>/status` `voluntary_ctxt_switches` and
/// `nonvoluntary_ctxt_switches`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ContextSwitches {
    /// The thread gave up the CPU itself: it blocked on I/O, a lock, a sleep.
    pub voluntary: u64,
    /// The scheduler took the CPU away: preemption, end of its time slice.
    pub involuntary: u64,
}

impl ContextSwitches {
    /// Counts of `voluntary` and `involuntary` switches.
    pub fn new(voluntary: u64, involuntary: u64) -> Self {
        ContextSwitches {
            voluntary,
            involuntary,
        }
    }
}

/// I/O counters of `/proc/<pid>/io`, named as there (see proc(5)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[non_exhaustive]
pub struct IoCounters {
    /// Read system calls (`read`, `pread`, `readv`, …).
    pub syscr: u64,
    /// Write system calls.
    pub syscw: u64,
    /// Bytes read by system calls, from storage, the page cache, pipes or sockets alike.
    pub rchar: u64,
    /// Bytes written by system calls.
    pub wchar: u64,
    /// Bytes fetched from storage (block devices) on behalf of the process.
    pub read_bytes: u64,
    /// Bytes sent to storage on behalf of the process (at page-dirtying time).
    pub write_bytes: u64,
}

/// One thread's CPU use over an interval, in a [`TimeseriesRow`]'s top list.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ThreadCpu {
    /// Process id.
    pub pid: u32,
    /// Thread id.
    pub tid: u32,
    /// Name of the process (the comm of its main thread).
    pub process: String,
    /// Name of the thread (its comm, at most 15 bytes).
    pub thread: String,
    /// CPU use over the interval, percent of one core.
    #[serde(deserialize_with = "f64_or_nan")]
    pub cpu_percent: f64,
}

impl ThreadCpu {
    /// Thread `tid` of process `pid` using `cpu_percent` of one core.
    pub fn new(
        pid: u32,
        tid: u32,
        process: impl Into<String>,
        thread: impl Into<String>,
        cpu_percent: f64,
    ) -> Self {
        ThreadCpu {
            pid,
            tid,
            process: process.into(),
            thread: thread.into(),
            cpu_percent,
        }
    }
}

/// One thread seen during a run: a line of threads.csv.
#[derive(Debug, Clone, PartialEq, Default)]
#[non_exhaustive]
pub struct ThreadSummary {
    /// Process id.
    pub pid: u32,
    /// Thread id (equal to `pid` for the main thread).
    pub tid: u32,
    /// Name of the process (the comm of its main thread) when last seen.
    pub process: String,
    /// Name of the thread when last seen.
    pub thread: String,
    /// User CPU time from the thread's start to its last sighting, seconds.
    pub user_s: f64,
    /// System CPU time from the thread's start to its last sighting, seconds.
    pub system_s: f64,
    /// Context switches from the thread's start to its last sighting.
    pub ctx_switches: ContextSwitches,
    /// When the monitors first saw the thread, seconds after they started.
    pub first_seen_s: f64,
    /// When the monitors last saw the thread, seconds after they started.
    pub last_seen_s: f64,
    /// The parent of its process, when known.
    pub ppid: Option<u32>,
    /// When the thread was created, seconds after the monitors started, from the
    /// kernel's record of its fork; `None` for a thread that existed before, or one
    /// whose record was lost.
    pub start_s: Option<f64>,
    /// When it exited, likewise, from the kernel's record of its exit; `None` for a thread
    /// alive at the end (or whose record was lost).
    pub end_s: Option<f64>,
    /// Its CPU time (user + system) counted by the kernel up to its exit, seconds: the
    /// whole of it, where the polls saw only what it had used at their last sighting.
    /// `None` where only the polls saw the thread.
    pub counted_cpu_s: Option<f64>,
    /// For a line that aggregates exited threads (past the table's limit on lines of
    /// one thread): how many threads and processes it holds. `None` for one thread.
    pub aggregated: Option<Aggregated>,
}

/// What an aggregated line of threads.csv holds: exited threads of one process name
/// and thread name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct Aggregated {
    /// Threads.
    pub threads: u64,
    /// Of them, main threads: processes.
    pub processes: u64,
}

impl Aggregated {
    /// `threads` threads, `processes` of them main threads.
    pub fn new(threads: u64, processes: u64) -> Self {
        Aggregated { threads, processes }
    }
}

impl ThreadSummary {
    /// Thread `tid` of process `pid`, with no time or switches yet.
    pub fn new(pid: u32, tid: u32, process: impl Into<String>, thread: impl Into<String>) -> Self {
        ThreadSummary {
            pid,
            tid,
            process: process.into(),
            thread: thread.into(),
            ..ThreadSummary::default()
        }
    }

    /// CPU time, user + system, seconds: the kernel's count where there is one, else the
    /// polls'.
    pub fn cpu_s(&self) -> f64 {
        self.counted_cpu_s.unwrap_or(self.user_s + self.system_s)
    }

    /// Threads the line stands for: 1, or an aggregated line's count.
    pub fn threads(&self) -> u64 {
        self.aggregated.map_or(1, |a| a.threads)
    }

    /// Processes the line stands for: 1 for a main thread (`tid` = `pid`), 0 for another
    /// thread, or an aggregated line's count.
    pub fn processes(&self) -> u64 {
        self.aggregated
            .map_or(u64::from(self.tid == self.pid), |a| a.processes)
    }
}

/// serde_json writes a non-finite float as `null`; read `null` back as NaN so that such a
/// value cannot make a recorded session unreadable.
pub fn f64_or_nan<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::NAN))
}

/// What a loader holds of a row, bytes, as [`parse_row_within`] counts it value by value:
/// the row itself, 8 bytes a per-core figure, each entry of its maps (a B-tree node holds
/// its entries about half full after in-order inserts: twice the entry, and the name's
/// allocation) and each top thread with its names.
pub fn row_held_bytes(row: &TimeseriesRow) -> usize {
    let names = |map_entry: usize, keys: &mut dyn Iterator<Item = &String>| {
        keys.map(|k| map_entry.saturating_add(heap_bytes(k.capacity())))
            .fold(0usize, usize::saturating_add)
    };
    ROW_BYTES
        .saturating_add(
            row.cpu_percent_per_core
                .len()
                .saturating_mul(PER_CORE_BYTES),
        )
        .saturating_add(names(entry_bytes::<u64>(), &mut row.counters.keys()))
        .saturating_add(names(entry_bytes::<f64>(), &mut row.rates.keys()))
        .saturating_add(names(entry_bytes::<Percentiles>(), &mut row.latency.keys()))
        .saturating_add(
            row.top_threads
                .iter()
                .map(thread_bytes)
                .fold(0usize, usize::saturating_add),
        )
}

/// A row's fixed part.
const ROW_BYTES: usize = std::mem::size_of::<TimeseriesRow>();
/// One per-core figure.
const PER_CORE_BYTES: usize = std::mem::size_of::<f64>();

/// A map entry of value `V`, besides its name's allocation.
const fn entry_bytes<V>() -> usize {
    2 * std::mem::size_of::<(String, V)>()
}

/// What an allocation of `len` bytes takes from the allocator: rounded to 16, with its
/// header; nothing for an empty string.
fn heap_bytes(len: usize) -> usize {
    if len == 0 {
        0
    } else {
        len.saturating_add(15) / 16 * 16 + 16
    }
}

fn thread_bytes(t: &ThreadCpu) -> usize {
    std::mem::size_of::<ThreadCpu>()
        .saturating_add(heap_bytes(t.process.capacity()))
        .saturating_add(heap_bytes(t.thread.capacity()))
}

/// One row of timeseries.jsonl parsed within a budget of held bytes.
#[derive(Debug)]
pub enum RowWithin {
    /// The row, and what it holds ([`row_held_bytes`]).
    Row(Box<TimeseriesRow>, usize),
    /// The row holds more than the budget: parsing stopped there, and nothing of it is
    /// kept.
    OverBudget,
}

/// Parses one JSON row, counting what it holds ([`row_held_bytes`]) value by value as the
/// values are read, and stops at the first value past `budget` bytes: a crafted row of
/// millions of figures costs at most the budget, however long its line. The errors are
/// serde_json's for a line that is not a row.
pub fn parse_row_within(line: &[u8], budget: usize) -> Result<RowWithin, serde_json::Error> {
    let outer = LEFT.replace(Left::Bytes(budget));
    let parsed = charge(ROW_BYTES).and_then(|()| serde_json::from_slice::<TimeseriesRow>(line));
    let left = LEFT.replace(outer);
    match (parsed, left) {
        (_, Left::Spent) => Ok(RowWithin::OverBudget),
        (Ok(row), Left::Bytes(left)) => Ok(RowWithin::Row(Box::new(row), budget - left)),
        (Ok(row), Left::Unbounded) => {
            let held = row_held_bytes(&row);
            Ok(RowWithin::Row(Box::new(row), held))
        }
        (Err(e), _) => Err(e),
    }
}

/// What the row being parsed on this thread may still hold ([`parse_row_within`]); rows
/// parsed otherwise (the recorder's own, the protocol's) are not counted.
#[derive(Debug, Clone, Copy)]
enum Left {
    Unbounded,
    Bytes(usize),
    Spent,
}

thread_local! {
    static LEFT: Cell<Left> = const { Cell::new(Left::Unbounded) };
}

/// Takes `bytes` from the budget of the row being parsed; past it, an error that ends the
/// parse (told apart from a malformed row by [`Left::Spent`]).
fn charge<E: de::Error>(bytes: usize) -> Result<(), E> {
    match LEFT.get() {
        Left::Unbounded => Ok(()),
        Left::Bytes(left) if bytes <= left => {
            LEFT.set(Left::Bytes(left - bytes));
            Ok(())
        }
        Left::Bytes(_) | Left::Spent => {
            LEFT.set(Left::Spent);
            Err(E::custom("the row holds more than the loader's budget"))
        }
    }
}

/// [`f64_or_nan`] for the items of a list, each counted as it is read.
fn f64_vec_or_nan<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<f64>, D::Error> {
    struct Figures;
    impl<'de> Visitor<'de> for Figures {
        type Value = Vec<f64>;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a list of numbers")
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<f64>, A::Error> {
            let mut list = Vec::new();
            while let Some(v) = seq.next_element::<Option<f64>>()? {
                charge(PER_CORE_BYTES)?;
                list.push(v.unwrap_or(f64::NAN));
            }
            // What was counted is what is held.
            list.shrink_to_fit();
            Ok(list)
        }
    }
    d.deserialize_seq(Figures)
}

/// A map of names, each entry counted as it is read.
fn counted_map<'de, D, V>(d: D) -> Result<BTreeMap<String, V>, D::Error>
where
    D: Deserializer<'de>,
    V: Deserialize<'de>,
{
    d.deserialize_map(CountedMap(PhantomData, |v| v))
}

/// [`f64_or_nan`] for the values of a map, each entry counted as it is read.
fn f64_map_or_nan<'de, D: Deserializer<'de>>(d: D) -> Result<BTreeMap<String, f64>, D::Error> {
    d.deserialize_map(CountedMap(PhantomData, |v: Option<f64>| {
        v.unwrap_or(f64::NAN)
    }))
}

/// Reads a map of `W` into one of `V` through its function, counting each entry.
struct CountedMap<W, F>(PhantomData<W>, F);

impl<'de, W, V, F> Visitor<'de> for CountedMap<W, F>
where
    W: Deserialize<'de>,
    F: Fn(W) -> V,
{
    type Value = BTreeMap<String, V>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a map of names")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut out = BTreeMap::new();
        while let Some(name) = map.next_key::<String>()? {
            charge(entry_bytes::<V>().saturating_add(heap_bytes(name.capacity())))?;
            let value = map.next_value::<W>()?;
            out.insert(name, (self.1)(value));
        }
        Ok(out)
    }
}

/// The top threads, each counted with its names as it is read.
fn counted_threads<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<ThreadCpu>, D::Error> {
    struct Threads;
    impl<'de> Visitor<'de> for Threads {
        type Value = Vec<ThreadCpu>;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a list of threads")
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<ThreadCpu>, A::Error> {
            let mut list = Vec::new();
            while let Some(t) = seq.next_element::<ThreadCpu>()? {
                charge(thread_bytes(&t))?;
                list.push(t);
            }
            list.shrink_to_fit();
            Ok(list)
        }
    }
    d.deserialize_seq(Threads)
}

/// The counters a built-in worker's counting allocator adds to every tick, as the report
/// protocol names them (`benchtop_protocol::ALLOC_BYTES` and the rest; docs/protocol.md,
/// "Allocation counters"). They are the worker's, not the workload's: whoever looks for
/// "the workload's counter" (its throughput) skips them.
pub const ALLOCATION_COUNTERS: [&str; 5] =
    ["alloc_bytes", "free_bytes", "allocs", "frees", "live_bytes"];

/// Whether `name` is one of the [`ALLOCATION_COUNTERS`].
pub fn is_allocation_counter(name: &str) -> bool {
    ALLOCATION_COUNTERS.contains(&name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn non_finite_floats_written_as_null_read_back_as_nan() {
        let mut row = TimeseriesRow {
            t_s: 1.0,
            interval_s: f64::INFINITY,
            ..TimeseriesRow::default()
        };
        row.rates.insert("ops".into(), f64::NAN);
        let json = serde_json::to_string(&row).unwrap();
        let back: TimeseriesRow = serde_json::from_str(&json).unwrap();
        assert_eq!(back.t_s, 1.0);
        assert!(back.interval_s.is_nan());
        assert!(back.rates["ops"].is_nan());
    }

    /// A row with a value of every kind a row holds.
    fn full_row() -> TimeseriesRow {
        let mut row = TimeseriesRow {
            t_s: 1.0,
            interval_s: 1.0,
            cpu_percent_per_core: vec![12.5, f64::NAN, 3.0],
            top_threads: vec![
                ThreadCpu::new(1, 2, "kvstore", "kvstore-worker-1", 99.0),
                ThreadCpu::new(1, 3, "kvstore", "", 9.0),
            ],
            resources: Some(Resources::default()),
            ..TimeseriesRow::default()
        };
        row.counters.insert("ops".into(), 10);
        row.counters.insert("a-much-longer-counter-name".into(), 1);
        row.rates.insert("ops".into(), 10.0);
        row.latency.insert("rtt".into(), Percentiles::default());
        row
    }

    #[test]
    fn a_row_is_counted_as_parsed_what_it_holds_once_parsed() {
        let json = serde_json::to_vec(&full_row()).unwrap();
        let RowWithin::Row(row, held) = parse_row_within(&json, usize::MAX).unwrap() else {
            panic!("over an unbounded budget");
        };
        assert_eq!(held, row_held_bytes(&row));
        assert_eq!(row.counters, full_row().counters);
        assert!(row.cpu_percent_per_core[1].is_nan());
        // At the edge: exactly what it holds is enough, a byte less is not.
        assert!(matches!(
            parse_row_within(&json, held).unwrap(),
            RowWithin::Row(_, h) if h == held
        ));
        assert!(matches!(
            parse_row_within(&json, held - 1).unwrap(),
            RowWithin::OverBudget
        ));
        // Outside a budgeted parse, nothing is counted, and nothing is left over from one.
        let back: TimeseriesRow = serde_json::from_slice(&json).unwrap();
        assert_eq!(back.top_threads, row.top_threads);
    }

    #[test]
    fn a_row_of_millions_of_figures_stops_at_the_budget_and_bad_rows_stay_errors() {
        let mut line = br#"{"t_s":1,"interval_s":1,"cpu_percent_per_core":["#.to_vec();
        line.extend(std::iter::repeat_n(&b"0,"[..], 1_000_000).flatten());
        line.extend_from_slice(b"0]}");
        assert!(matches!(
            parse_row_within(&line, 1 << 20).unwrap(),
            RowWithin::OverBudget
        ));
        assert!(matches!(
            parse_row_within(&line, 16 << 20).unwrap(),
            RowWithin::Row(row, _) if row.cpu_percent_per_core.len() == 1_000_001
        ));
        // Thousands of counters, each costing its entry and name.
        let counters: Vec<String> = (0..20_000).map(|i| format!("\"c{i}\":{i}")).collect();
        let line = format!(
            r#"{{"t_s":1,"interval_s":1,"counters":{{{}}}}}"#,
            counters.join(",")
        );
        let RowWithin::Row(_, held) = parse_row_within(line.as_bytes(), usize::MAX).unwrap() else {
            panic!("over an unbounded budget");
        };
        assert!(held > 20_000 * 64, "{held}");
        assert!(matches!(
            parse_row_within(line.as_bytes(), held / 2).unwrap(),
            RowWithin::OverBudget
        ));
        assert!(parse_row_within(b"{oops}", 1 << 20).is_err());
        assert!(parse_row_within(br#"{"t_s":"x","interval_s":1}"#, 1 << 20).is_err());
    }

    #[test]
    fn rows_written_before_the_tree_monitors_load_with_empty_new_fields() {
        let old = r#"{"t_s":1.0,"interval_s":1.0,"resources":{"rss_bytes":10,"peak_rss_bytes":20,"threads":4,"cpu_percent":180.0,"cpu_time_s":0.5}}"#;
        let row: TimeseriesRow = serde_json::from_str(old).unwrap();
        let r = row.resources.unwrap();
        assert_eq!((r.rss_bytes, r.peak_rss_bytes, r.threads), (10, 20, 4));
        assert_eq!((r.processes, r.io_unreadable_processes), (0, 0));
        assert!(r.ctx_switches_total.is_none() && r.io_total.is_none());
        assert!(row.cpu_percent_per_core.is_empty() && row.top_threads.is_empty());
    }

    #[test]
    fn tree_resources_per_core_figures_and_top_threads_round_trip() {
        let mut r = Resources {
            processes: 3,
            ctx_switches_total: Some(ContextSwitches::new(1_000, 20)),
            ctx_switches_interval: Some(ContextSwitches::new(100, 2)),
            io_unreadable_processes: 1,
            ..Resources::default()
        };
        let io = IoCounters {
            syscr: 1,
            syscw: 2,
            rchar: 3,
            wchar: 4,
            read_bytes: 5,
            write_bytes: 6,
        };
        r.io_total = Some(io);
        r.io_interval = Some(IoCounters::default());
        let row = TimeseriesRow {
            t_s: 2.0,
            interval_s: 1.0,
            resources: Some(r),
            cpu_percent_per_core: vec![12.5, f64::NAN],
            top_threads: vec![ThreadCpu::new(7, 8, "ring", "ring-node-1", 99.0)],
            ..TimeseriesRow::default()
        };
        let json = serde_json::to_string(&row).unwrap();
        assert!(
            json.contains(r#""ctx_switches_total":{"voluntary":1000,"involuntary":20}"#),
            "{json}"
        );
        let back: TimeseriesRow = serde_json::from_str(&json).unwrap();
        assert_eq!(back.resources, row.resources);
        assert_eq!(back.top_threads, row.top_threads);
        assert_eq!(back.cpu_percent_per_core[0], 12.5);
        assert!(back.cpu_percent_per_core[1].is_nan());

        // Nothing recorded, nothing written.
        let empty = serde_json::to_string(&TimeseriesRow::default()).unwrap();
        assert!(!empty.contains("cpu_percent_per_core") && !empty.contains("top_threads"));
        let r = serde_json::to_string(&Resources::default()).unwrap();
        assert!(!r.contains("io_") && !r.contains("ctx_"), "{r}");
    }
}
