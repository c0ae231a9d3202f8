//! Series: `benchtop run … --runs N --warmup K --sweep PARAM=V1,V2,…` records one
//! experiment of several runs, each a session of its own via the conductor
//! (`benchtop_record::record`, called once per run), named in series.json
//! (`benchtop_sessions::series`).
//!
//! The conductor knows no workload: a sweep is expanded here, each point's values parsed
//! through the workload's own clap definition (so a parameter that does not exist, or a
//! value it refuses, is named before anything runs), and each point becomes the
//! conductor's options for one run. Warm-up runs (at the first point) come first, then
//! round after round of every point, so drift over the series hits every point alike.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Instant, SystemTime};

use anyhow::{Context, Result};
use benchtop_sessions::Status;
use benchtop_sessions::curves::{curves_svg, series_points};
use benchtop_sessions::dir::DirHandle;
use benchtop_sessions::series::{RunRole, Series, SeriesMeta, SeriesWriter};
use benchtop_sessions::units::human_count;
use benchtop_sessions::{Session, SessionError, new_session_id, rfc3339};
use benchtop_workloads::echo::{PHASE_PARAMS, PHASE_SWEEP};
use benchtop_workloads::worker::Workload;
use clap::{FromArgMatches, Subcommand};
use serde_json::Value;

use crate::cli::RunArgs;
use crate::record::{self, DEFAULT_SESSIONS_DIR, RecordOptions, RecordOutcome};

/// The most points a sweep may expand to (the cross product of its values).
pub const MAX_POINTS: usize = 1_000;
/// The most values one `--sweep` may list.
const MAX_VALUES: usize = 256;

/// One point of a sweep: the swept parameters' values, and the workload they make.
#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    /// The swept parameters by their command-line names, as the workload reports them
    /// (numbers as numbers): what series.json records as the run's `point`.
    pub values: BTreeMap<String, Value>,
    /// The workload with the point's values in place of the base values.
    pub workload: Workload,
}

/// A point's values and the conductor's options for a run of it.
type PlannedRun = (BTreeMap<String, Value>, RecordOptions);

/// What a sweep expands to.
#[derive(Debug, Clone, PartialEq)]
pub enum Expansion {
    /// One run per point.
    Points(Vec<Point>),
    /// udp-echo's own sweep: every point a phase of one run (it keeps its server and
    /// sockets between points).
    Phases(Workload),
}

/// `benchtop run … --runs/--warmup/--sweep`: records the series and says how it went.
pub fn run(args: RunArgs) -> Result<ExitCode> {
    let RunArgs {
        record,
        series,
        workload,
        command,
    } = args;
    if record.tui || record.baseline.is_some() {
        anyhow::bail!(
            "--runs, --warmup and --sweep record headless: leave out --tui and --baseline"
        );
    }
    let runs = series.runs.unwrap_or(1);
    let (name, points): (String, Vec<PlannedRun>) = match (workload, command.is_empty()) {
        (Some(workload), true) => {
            let name = workload.name().to_owned();
            match expand(&workload, &series.sweep)? {
                Expansion::Phases(workload) if series.runs.is_none() && series.warmup == 0 => {
                    // One run of phases, as udp-echo's sweep always was: a session.
                    return crate::record_workload(workload, record);
                }
                Expansion::Phases(workload) => (
                    name,
                    vec![(BTreeMap::new(), crate::workload_options(workload, &record)?)],
                ),
                Expansion::Points(points) => {
                    let mut out = Vec::with_capacity(points.len());
                    for p in points {
                        out.push((p.values, crate::workload_options(p.workload, &record)?));
                    }
                    (name, out)
                }
            }
        }
        (None, false) => {
            if !series.sweep.is_empty() {
                anyhow::bail!(
                    "--sweep varies a built-in workload's parameters; a command after `--` \
                         has none benchtop knows (run a series per variant and compare them)"
                );
            }
            let opts = crate::external::command_options(&command, &record)?;
            (opts.workload.clone(), vec![(BTreeMap::new(), opts)])
        }
        (Some(_), false) => anyhow::bail!(
            "name a workload or a command after `--`, not both (`benchtop run --help`)"
        ),
        (None, true) => {
            anyhow::bail!("name a workload (`benchtop run ring --runs 5`) or a command after `--`")
        }
    };
    // The swept parameters in the order given: curves.svg's x axis, then its lines.
    let swept: Vec<String> = if points.len() > 1 {
        series
            .sweep
            .iter()
            .filter_map(|s| parse_sweep(s).ok().map(|(p, _)| p))
            .collect()
    } else {
        Vec::new()
    };
    let mut recorder = SeriesRecorder::create(
        record.record.as_deref(),
        &name,
        swept,
        record.quiet,
        &record.labels,
    )?;
    let total = series.warmup as usize + runs as usize * points.len();
    let mut tally = Tally::new()?;
    let plan = (0..series.warmup)
        .map(|_| (RunRole::Warmup, &points[0]))
        .chain((0..runs).flat_map(|_| points.iter().map(|p| (RunRole::Run, p))));
    for (i, (role, (values, opts))) in plan.enumerate() {
        let outcome = recorder.record(role, values, opts, (i + 1, total))?;
        if tally.add(&outcome) {
            break;
        }
    }
    // The table of points, read back as `benchtop show` reads a series, and the
    // sweep's curves.
    match Series::load(recorder.dir()) {
        Ok(series) => {
            print!("{}", points_table(&series));
            if points.len() > 1 {
                match write_curves(&series, recorder.dir()) {
                    Ok(Some(path)) => println!("curves: {}", path.display()),
                    Ok(None) => eprintln!(
                        "benchtop: no result figure at two points or more: no curves.svg written"
                    ),
                    Err(e) => eprintln!("benchtop: warning: curves.svg: {e:#}"),
                }
            }
        }
        Err(e) => eprintln!("benchtop: warning: cannot read the series back: {e}"),
    }
    tally.report(recorder.dir(), total)
}

/// How the runs of a series ended.
#[derive(Debug)]
pub(crate) struct Tally {
    /// Interrupts counted before the series began.
    interrupts: usize,
    ran: usize,
    complete: usize,
    failed: Vec<String>,
    stopped: bool,
}

impl Tally {
    /// Nothing ran yet. From here on SIGINT, SIGTERM and SIGHUP are heard
    /// ([`record::interrupts`]): one between two runs ends the series too.
    pub(crate) fn new() -> Result<Self> {
        Ok(Tally {
            interrupts: record::interrupts()?.count(),
            ran: 0,
            complete: 0,
            failed: Vec::new(),
            stopped: false,
        })
    }

    /// Counts a run; true when the user stopped it, or interrupted after it ended (both
    /// end the series).
    pub(crate) fn add(&mut self, outcome: &RecordOutcome) -> bool {
        self.ran += 1;
        if record::interrupts().is_ok_and(|i| i.count() > self.interrupts) {
            self.stopped = true;
        }
        match outcome.status {
            Status::Complete => self.complete += 1,
            Status::Stopped => self.stopped = true,
            _ => self
                .failed
                .push(format!("{} ({})", outcome.dir.display(), outcome.status)),
        }
        self.stopped
    }

    /// Whether the user interrupted since the series began (then it is stopped): asked
    /// before a run starts, so that an interrupt between two runs starts no other.
    pub(crate) fn interrupted(&mut self) -> bool {
        if record::interrupts().is_ok_and(|i| i.count() > self.interrupts) {
            self.stopped = true;
        }
        self.stopped
    }

    /// Whether a run failed.
    pub(crate) fn failed(&self) -> bool {
        !self.failed.is_empty()
    }

    /// Whether the user stopped the series.
    pub(crate) fn stopped(&self) -> bool {
        self.stopped
    }

    /// Prints the series' line; failure when a run failed.
    fn report(&self, dir: &Path, planned: usize) -> Result<ExitCode> {
        use std::io::Write;
        let mut out = std::io::stdout().lock();
        let ran = self.ran;
        let mut line = format!(
            "series: {} ({ran} of {planned} runs, {} complete",
            dir.display(),
            self.complete
        );
        if !self.failed.is_empty() {
            line.push_str(&format!(", {} failed", self.failed.len()));
        }
        if self.stopped {
            line.push_str(", stopped");
        }
        writeln!(out, "{line})")?;
        for f in &self.failed {
            writeln!(out, "failed: {f}")?;
        }
        Ok(if self.failed.is_empty() {
            ExitCode::SUCCESS
        } else {
            ExitCode::FAILURE
        })
    }
}

/// A series directory being recorded: names each run in series.json, then records it.
#[derive(Debug)]
pub(crate) struct SeriesRecorder {
    writer: SeriesWriter,
    quiet: bool,
    /// No line on stderr at all: a screen shows the runs instead.
    silent: bool,
}

impl SeriesRecorder {
    /// Creates the series directory: `requested` (new or empty), or a new one under
    /// ./sessions/ named after `name` and the time.
    /// `sweep` names the swept parameters in the order given (empty outside sweeps).
    pub(crate) fn create(
        requested: Option<&Path>,
        name: &str,
        sweep: Vec<String>,
        quiet: bool,
        labels: &[(String, String)],
    ) -> Result<Self> {
        let now = SystemTime::now();
        let dir = match requested {
            Some(dir) => dir.to_path_buf(),
            None => unique_dir(Path::new(DEFAULT_SESSIONS_DIR), &new_session_id(name, now))?,
        };
        let mut meta = SeriesMeta::new(name, rfc3339(now)).with_sweep(sweep);
        // Its labels, and the git commit checked out here, as each run's session keeps them.
        meta.labels = labels.iter().cloned().collect();
        meta.git = std::env::current_dir()
            .ok()
            .and_then(|dir| benchtop_record::git::checkout(&dir));
        let writer = SeriesWriter::create(&dir, meta)
            .with_context(|| format!("cannot create the series directory {}", dir.display()))?;
        Ok(SeriesRecorder {
            writer,
            quiet,
            silent: false,
        })
    }

    /// From now on its runs write nothing on stderr: no progress line, no line before
    /// or after a run, no warnings (the outcome carries them).
    pub(crate) fn silence(&mut self) {
        self.quiet = true;
        self.silent = true;
    }

    /// The series directory.
    pub(crate) fn dir(&self) -> &Path {
        self.writer.dir()
    }

    /// Names the next run and records it headless, with a line before and after it on
    /// standard error (`n` of `total`).
    pub(crate) fn record(
        &mut self,
        role: RunRole,
        point: &BTreeMap<String, Value>,
        opts: &RecordOptions,
        (n, total): (usize, usize),
    ) -> Result<RecordOutcome> {
        let dir = self
            .writer
            .next_run_dir(role, point.clone())
            .with_context(|| format!("cannot name the next run in {}", self.dir().display()))?;
        let name = dir
            .file_name()
            .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
        let what = match point_text(point) {
            t if t.is_empty() => String::new(),
            t => format!(" {t}"),
        };
        if !self.silent {
            eprintln!("benchtop: {n}/{total} {name}{what}");
        }
        let mut opts = opts.clone();
        opts.dir = Some(dir);
        let started = Instant::now();
        let outcome = record::headless(&opts, self.quiet)
            .with_context(|| format!("run {name} of the series {}", self.dir().display()))?;
        if !self.silent {
            for w in &outcome.warnings {
                eprintln!("benchtop: warning: {name}: {w}");
            }
            eprintln!(
                "benchtop: {n}/{total} {name}{what}: {} in {:.2} s",
                outcome.status,
                started.elapsed().as_secs_f64()
            );
        }
        Ok(outcome)
    }
}

/// Draws the sweep's curves ([`curves_svg`]) into `out` as curves.svg, atomically;
/// `None` when there is nothing to draw (fewer than two points with result figures).
pub fn write_curves(series: &Series, out: &Path) -> Result<Option<PathBuf>> {
    let title = format!("{} — sweep", series.meta.workload);
    let Some(svg) = curves_svg(&title, &series.meta.sweep, &series_points(series)) else {
        return Ok(None);
    };
    let dir = DirHandle::create_or_open(out)?;
    dir.write_atomically(CURVES_FILE, svg.as_bytes())?;
    Ok(Some(dir.join(CURVES_FILE)))
}

/// The file of a sweep's curves, in the series directory.
pub const CURVES_FILE: &str = "curves.svg";

/// `parent/id`, or `parent/id-2`, `-3` … when taken; the parent is created.
pub(crate) fn unique_dir(parent: &Path, id: &str) -> Result<PathBuf> {
    std::fs::create_dir_all(parent)
        .with_context(|| format!("cannot create {}", parent.display()))?;
    for n in 1..=1000 {
        let dir = match n {
            1 => parent.join(id),
            n => parent.join(format!("{id}-{n}")),
        };
        match std::fs::create_dir(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => {
                return Err(SessionError::io(&dir, e))
                    .with_context(|| format!("cannot create {}", dir.display()));
            }
        }
    }
    anyhow::bail!("no free directory name for {id} in {}", parent.display())
}

/// `num-nodes=100 mode=ask`.
pub fn point_text(point: &BTreeMap<String, Value>) -> String {
    point
        .iter()
        .map(|(k, v)| match v {
            Value::String(s) => format!("{k}={s}"),
            v => format!("{k}={v}"),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The table of a series' points, for `benchtop show SERIES` and `export`'s summary.md:
/// a header row, then a row per point (in the order the points first ran), how many of
/// its runs were measured and completed, and the mean over those runs of each result
/// figure (the workload's summary figures with a better direction; all of them when none
/// has one), with the spread between runs. Cells are as recorded: escape them to print.
pub fn points_rows(series: &Series) -> Vec<Vec<String>> {
    let mut points: Vec<&BTreeMap<String, Value>> = Vec::new();
    for run in &series.meta.runs {
        if run.role == RunRole::Run && !points.contains(&&run.point) {
            points.push(&run.point);
        }
    }
    let measured = series.measured();
    let sessions_of = |point: &BTreeMap<String, Value>| -> Vec<&Session> {
        series
            .sessions
            .iter()
            .filter(|(i, s)| {
                let run = &series.meta.runs[*i];
                run.point == *point && measured.iter().any(|m| std::ptr::eq(*m, s))
            })
            .map(|(_, s)| s)
            .collect()
    };
    let mut names: Vec<(&str, &str)> = Vec::new();
    let any_better = measured
        .iter()
        .any(|s| s.meta.summary.iter().any(|f| f.better.is_some()));
    for s in &measured {
        for f in &s.meta.summary {
            if (f.better.is_some() || !any_better) && !names.iter().any(|(n, _)| *n == f.name) {
                names.push((&f.name, &f.unit));
            }
        }
    }
    let mut rows: Vec<Vec<String>> = vec![
        ["point".to_owned(), "runs".to_owned()]
            .into_iter()
            .chain(names.iter().map(|(n, u)| match *u {
                "" => (*n).to_owned(),
                u => format!("{n} ({u})"),
            }))
            .collect(),
    ];
    for point in points {
        let named = series
            .meta
            .runs
            .iter()
            .filter(|r| r.role == RunRole::Run && r.point == *point)
            .count();
        let runs = sessions_of(point);
        let mut row = vec![
            match point_text(point) {
                t if t.is_empty() => "-".to_owned(),
                t => t,
            },
            format!("{}/{named}", runs.len()),
        ];
        for (name, _) in &names {
            let values: Vec<f64> = runs
                .iter()
                .filter_map(|s| s.meta.summary.iter().find(|f| f.name == *name))
                .map(|f| f.value)
                .filter(|v| v.is_finite())
                .collect();
            row.push(mean_and_spread(&values));
        }
        rows.push(row);
    }
    rows
}

/// [`points_rows`] as the aligned text table `benchtop show SERIES` prints, with the
/// series' line above and its warnings below.
pub fn points_table(series: &Series) -> String {
    use std::fmt::Write as _;
    let measured = series.measured();
    let mut rows = points_rows(series);
    // Names, units and points come from the sessions: escaped before they are measured.
    for cell in rows.iter_mut().flatten() {
        if let std::borrow::Cow::Owned(safe) = benchtop_sessions::escape::escaped(cell) {
            *cell = safe;
        }
    }
    let columns = rows.first().map_or(0, Vec::len);
    let widths: Vec<usize> = (0..columns)
        .map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    let _ = writeln!(
        out,
        "series {} ({}): {} measured runs",
        benchtop_sessions::escape::Escaped(&series.dir.display().to_string()),
        benchtop_sessions::escape::Escaped(&series.meta.workload),
        measured.len()
    );
    for row in &rows {
        let cells: Vec<String> = row
            .iter()
            .zip(&widths)
            .enumerate()
            .map(|(c, (cell, w))| match c {
                0 => format!("{cell:<w$}"),
                _ => format!("{cell:>w$}"),
            })
            .collect();
        let _ = writeln!(out, "{}", cells.join("  ").trim_end());
    }
    for w in &series.warnings {
        let _ = writeln!(out, "warning: {}", benchtop_sessions::escape::Escaped(w));
    }
    out
}

/// `1.23k ± 2.0%` (the spread is the runs' standard deviation over the mean).
fn mean_and_spread(values: &[f64]) -> String {
    if values.is_empty() {
        return "-".to_owned();
    }
    let n = values.len() as f64;
    let mean = values.iter().sum::<f64>() / n;
    let shown = short(mean);
    if values.len() < 2 || mean == 0.0 {
        return shown;
    }
    let sd = (values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt();
    format!("{shown} ± {:.1}%", sd / mean.abs() * 100.0)
}

/// A value in three significant digits: `0.00491`, `12.3`, `1.55 M` (SI prefixes from a
/// thousand on).
fn short(v: f64) -> String {
    if v.abs() >= 1000.0 || v == 0.0 || !v.is_finite() {
        return human_count(v);
    }
    let decimals = (2 - v.abs().log10().floor() as i32).max(0) as usize;
    format!("{v:.decimals$}")
}

/// One `--sweep PARAM=V1,V2,…`, read.
fn parse_sweep(text: &str) -> Result<(String, Vec<String>)> {
    let Some((param, values)) = text.split_once('=') else {
        anyhow::bail!("--sweep {text:?}: write PARAM=V1,V2,… (e.g. num-nodes=100,1000)");
    };
    let param = param.trim().trim_start_matches("--").to_owned();
    if param.is_empty() {
        anyhow::bail!("--sweep {text:?}: no parameter before `=`");
    }
    let values: Vec<String> = values.split(',').map(|v| v.trim().to_owned()).collect();
    if values.iter().any(String::is_empty) {
        anyhow::bail!("--sweep {text:?}: an empty value (separate values with single commas)");
    }
    if values.len() > MAX_VALUES {
        anyhow::bail!(
            "--sweep {param}: {} values; at most {MAX_VALUES}",
            values.len()
        );
    }
    Ok((param, values))
}

/// The workloads' command line, as `benchtop run` parses them.
fn workload_command() -> clap::Command {
    Workload::augment_subcommands(
        clap::Command::new("benchtop run")
            .no_binary_name(true)
            .subcommand_required(true),
    )
}

/// Parses a workload's argument vector through its own definition, and checks what clap
/// cannot.
fn parse_workload(cmd: &clap::Command, args: &[String]) -> Result<Workload, String> {
    let matches = cmd.clone().try_get_matches_from(args).map_err(|e| {
        let text = e.to_string();
        let first = text.lines().next().unwrap_or_default();
        first.trim_start_matches("error: ").to_owned()
    })?;
    let workload = Workload::from_arg_matches(&matches).map_err(|e| e.to_string())?;
    workload.validate().map_err(|e| e.to_string())?;
    Ok(workload)
}

/// Expands the sweeps of `base` into its points (the cross product, the first sweep
/// varying slowest), every point parsed and checked before anything runs. Without
/// sweeps, the one point `base`.
pub fn expand(base: &Workload, sweeps: &[String]) -> Result<Expansion> {
    let sweeps: Vec<(String, Vec<String>)> = sweeps
        .iter()
        .map(|s| parse_sweep(s))
        .collect::<Result<_>>()?;
    for (i, (param, _)) in sweeps.iter().enumerate() {
        if sweeps[..i].iter().any(|(p, _)| p == param) {
            anyhow::bail!("--sweep {param} is given twice: list all its values in one");
        }
    }
    let cmd = workload_command();
    let name = base.name();
    let Some(sub) = cmd.find_subcommand(name) else {
        anyhow::bail!("`{name}` is not a workload benchtop runs");
    };
    let visible: Vec<&clap::Arg> = sub
        .get_arguments()
        .filter(|a| !a.is_hide_set() && a.get_long().is_some_and(|l| l != "help"))
        .collect();
    let mut takes_value = BTreeMap::new();
    for (param, values) in &sweeps {
        let Some(arg) = visible
            .iter()
            .find(|a| a.get_long() == Some(param.as_str()))
        else {
            let known: Vec<&str> = visible.iter().filter_map(|a| a.get_long()).collect();
            anyhow::bail!(
                "`{name}` has no parameter `{param}` to sweep; its parameters: {}",
                known.join(", ")
            );
        };
        let takes = arg.get_action().takes_values();
        if !takes
            && let Some(v) = values
                .iter()
                .find(|v| !matches!(v.as_str(), "true" | "false"))
        {
            anyhow::bail!(
                "--sweep {param}: `--{param}` is a flag: its values are true and false, not {v:?}"
            );
        }
        takes_value.insert(param.clone(), takes);
    }
    // The base's arguments without the swept parameters.
    let base_args = base.to_args();
    let mut kept: Vec<String> = vec![name.to_owned()];
    let mut tokens = base_args.iter().skip(1);
    while let Some(token) = tokens.next() {
        let swept = sweeps.iter().find_map(|(p, _)| {
            let long = format!("--{p}");
            (token == &long || token.starts_with(&format!("{long}="))).then_some(p)
        });
        match swept {
            Some(p) => {
                if takes_value[p] && !token.contains('=') {
                    tokens.next();
                }
            }
            None => kept.push(token.clone()),
        }
    }

    if let (Workload::UdpEcho(_), [(param, values)]) = (base, &sweeps[..])
        && PHASE_PARAMS.contains(&param.as_str())
    {
        let mut args = kept;
        args.extend([
            format!("--{PHASE_SWEEP}"),
            format!("{param}={}", values.join(",")),
        ]);
        let workload =
            parse_workload(&cmd, &args).map_err(|e| anyhow::anyhow!("--sweep {param}: {e}"))?;
        return Ok(Expansion::Phases(workload));
    }

    let count = sweeps
        .iter()
        .try_fold(1usize, |n, (_, v)| n.checked_mul(v.len()))
        .filter(|&n| n <= MAX_POINTS);
    if count.is_none() {
        anyhow::bail!("the sweeps make more than {MAX_POINTS} points");
    }
    let mut combos: Vec<Vec<(&str, &str)>> = vec![Vec::new()];
    for (param, values) in &sweeps {
        combos = combos
            .into_iter()
            .flat_map(|c| {
                values.iter().map(move |v| {
                    let mut c = c.clone();
                    c.push((param.as_str(), v.as_str()));
                    c
                })
            })
            .collect();
    }
    let mut points = Vec::with_capacity(combos.len());
    for combo in combos {
        let mut args = kept.clone();
        for &(param, value) in &combo {
            if takes_value[param] {
                args.extend([format!("--{param}"), value.to_owned()]);
            } else if value == "true" {
                args.push(format!("--{param}"));
            }
        }
        let workload = parse_workload(&cmd, &args).map_err(|e| {
            let at: Vec<String> = combo.iter().map(|(p, v)| format!("{p}={v}")).collect();
            anyhow::anyhow!("the sweep's point {}: {e}", at.join(" "))
        })?;
        let params = workload.params_json();
        let values = combo
            .iter()
            .map(|&(param, value)| {
                let v = params.get(param).cloned().unwrap_or_else(|| match value {
                    "true" => Value::Bool(true),
                    "false" => Value::Bool(false),
                    v => Value::String(v.to_owned()),
                });
                (param.to_owned(), v)
            })
            .collect();
        points.push(Point { values, workload });
    }
    Ok(Expansion::Points(points))
}

#[cfg(test)]
mod tests {
    use super::*;
    use benchtop_workloads::ring::RingParams;

    fn ring() -> Workload {
        Workload::Ring(RingParams::default())
    }

    fn points(e: Expansion) -> Vec<Point> {
        match e {
            Expansion::Points(p) => p,
            Expansion::Phases(w) => panic!("phases: {w:?}"),
        }
    }

    #[test]
    fn two_sweeps_expand_to_their_cross_product_with_typed_values() {
        let p =
            points(expand(&ring(), &["num-nodes=10,20".into(), "mode=tell,ask".into()]).unwrap());
        assert_eq!(p.len(), 4);
        assert_eq!(p[0].values["num-nodes"], 10);
        assert_eq!(p[1].values["mode"], "ask");
        assert_eq!(p[3].values["num-nodes"], 20);
        assert_eq!(p[3].workload.params_json()["num-nodes"], 20);
        assert_eq!(point_text(&p[1].values), "mode=ask num-nodes=10");
    }

    #[test]
    fn a_swept_value_replaces_the_base_value() {
        let base = Workload::Ring(RingParams {
            num_nodes: 7,
            ..RingParams::default()
        });
        let p = points(expand(&base, &["num-nodes=30".into()]).unwrap());
        assert_eq!(p[0].workload.params_json()["num-nodes"], 30);
    }

    #[test]
    fn a_parameter_the_workload_lacks_is_named_with_the_ones_it_has() {
        let err = expand(&ring(), &["num-nodez=1,2".into()])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("num-nodez") && err.contains("num-nodes"),
            "{err}"
        );
    }

    #[test]
    fn a_value_the_workload_refuses_is_named_with_its_point() {
        let err = expand(&ring(), &["num-nodes=10,lots".into()])
            .unwrap_err()
            .to_string();
        assert!(err.contains("num-nodes=lots"), "{err}");
        for bad in ["num-nodes", "=1", "num-nodes=1,,2"] {
            assert!(expand(&ring(), &[bad.into()]).is_err(), "{bad}");
        }
        let twice = expand(&ring(), &["num-nodes=1".into(), "num-nodes=2".into()]);
        assert!(twice.unwrap_err().to_string().contains("twice"));
    }

    #[test]
    fn the_points_table_has_a_row_per_point_with_the_mean_of_its_runs() {
        use benchtop_sessions::meta::{Better, Figure, HostInfo, WorkloadInfo};
        use benchtop_sessions::{SessionMeta, SessionWriter};
        let root = tempfile::tempdir().unwrap();
        let mut w =
            SeriesWriter::create(&root.path().join("s"), SeriesMeta::new("ring", "t")).unwrap();
        for (nodes, rate, status) in [
            (100, 1000.0, Status::Complete),
            (1000, 500.0, Status::Complete),
            (100, 1200.0, Status::Complete),
            (1000, 9.0, Status::Crashed),
        ] {
            let point = BTreeMap::from([("num-nodes".to_owned(), Value::from(nodes))]);
            let dir = w.next_run_dir(RunRole::Run, point).unwrap();
            let meta = SessionMeta::new(
                "x",
                WorkloadInfo::new("ring", BTreeMap::new()),
                HostInfo::default(),
                "2026-11-24T12:00:00Z",
            );
            let mut s = SessionWriter::create(&dir, meta).unwrap();
            s.update_meta(|m| {
                let mut f = Figure::new("messages_per_second", rate, "messages/s");
                f.better = Some(Better::Higher);
                m.summary = vec![f, Figure::new("num_nodes", f64::from(nodes), "")];
            })
            .unwrap();
            s.finish(status, "2026-11-24T12:00:01Z".into()).unwrap();
        }
        let table = points_table(&Series::load(w.dir()).unwrap());
        let lines: Vec<&str> = table.lines().collect();
        assert!(lines[1].starts_with("point") && lines[1].contains("messages_per_second"));
        assert!(
            !lines[1].contains("num_nodes"),
            "only result figures: {table}"
        );
        assert!(
            lines[2].starts_with("num-nodes=100") && lines[2].contains("2/2"),
            "{table}"
        );
        assert!(lines[2].contains("1100 ± 12.9%"), "{table}");
        assert!(
            lines[3].starts_with("num-nodes=1000") && lines[3].contains("1/2"),
            "{table}"
        );
        assert!(lines[3].contains("500"), "{table}");
        assert_eq!(
            (short(0.004912), short(12.34), short(0.5)),
            ("0.00491".into(), "12.3".into(), "0.500".into())
        );
        assert!(table.contains("run-4: ended crashed"), "{table}");
    }

    #[test]
    fn messenger_sweeps_clients_by_cpu_allocation_in_four_points() {
        use benchtop_workloads::messenger::MsgrParams;
        let base = Workload::Messenger(MsgrParams::default());
        let p = points(
            expand(
                &base,
                &["clients=1,2".into(), "cpu-alloc=balanced,separated".into()],
            )
            .unwrap(),
        );
        let shown: Vec<String> = p.iter().map(|p| point_text(&p.values)).collect();
        assert_eq!(
            shown,
            [
                "clients=1 cpu-alloc=balanced",
                "clients=1 cpu-alloc=separated",
                "clients=2 cpu-alloc=balanced",
                "clients=2 cpu-alloc=separated"
            ]
        );
    }

    #[test]
    fn the_recorders_options_go_after_the_workload_and_udp_echos_sweep_is_the_recorders() {
        use crate::cli::{Cli, Command};
        use clap::Parser;
        let parse = |args: &[&str]| match Cli::try_parse_from(args).unwrap().command {
            Some(Command::Run(run)) => run,
            other => panic!("not a run: {other:?}"),
        };
        let run = parse(&[
            "benchtop",
            "run",
            "ring",
            "--runs",
            "3",
            "--warmup",
            "1",
            "--sweep",
            "num-nodes=1,2",
            "--sweep",
            "mode=tell,ask",
        ]);
        assert!(run.series.is_series());
        assert_eq!((run.series.runs, run.series.warmup), (Some(3), 1));
        assert_eq!(run.series.sweep, ["num-nodes=1,2", "mode=tell,ask"]);
        let echo = parse(&[
            "benchtop",
            "run",
            "udp-echo",
            "--sweep",
            "buffer-size=64,1024",
        ]);
        assert_eq!(echo.series.sweep, ["buffer-size=64,1024"]);
        let Some(Workload::UdpEcho(params)) = echo.workload else {
            panic!("not udp-echo")
        };
        assert!(
            params.sweep.is_none(),
            "the workload's own sweep stays unset"
        );
        assert!(!parse(&["benchtop", "run", "ring"]).series.is_series());
        assert!(Cli::try_parse_from(["benchtop", "run", "ring", "--runs", "0"]).is_err());
    }

    #[test]
    fn udp_echo_sweeps_buffer_size_in_phases_and_other_parameters_in_runs() {
        use benchtop_workloads::echo::EchoParams;
        let echo = Workload::UdpEcho(EchoParams::default());
        match expand(&echo, &["buffer-size=64,1024".into()]).unwrap() {
            Expansion::Phases(w) => {
                assert_eq!(w.params_json()["sweep"], "buffer-size=64,1024");
            }
            Expansion::Points(p) => panic!("points: {p:?}"),
        }
        let p = points(expand(&echo, &["window=1,2".into()]).unwrap());
        assert_eq!(p.len(), 2);
        // The workload's own check of the phases' values, before anything runs.
        assert!(expand(&echo, &["buffer-size=64,4000000".into()]).is_err());
    }
}
