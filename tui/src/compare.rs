//! `benchtop compare A B`: the comparison table, the differential stacks and the movers.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result};
use benchtop_sessions::compare::{self, CompareOptions, Comparison, Mover};
use benchtop_sessions::dir::DirHandle;
use benchtop_sessions::escape::Escaped;
use benchtop_sessions::flame::write_differential_svg;
use benchtop_sessions::intervals::IntervalStacks;
use benchtop_sessions::limits::{Held, LoadOptions};
use benchtop_sessions::names::short_names;
use benchtop_sessions::range::{
    Between, RangeSpec, SlowRows, SlowThreshold, restrict, run_length_ns,
};
use benchtop_sessions::series::Recorded;
use benchtop_sessions::store::Session;
use benchtop_sessions::units::human_ns;
use benchtop_sessions::{ByKind, Kind, StackTree};
use serde::Serialize;

use crate::cli::CompareArgs;

/// The longest function name in the text's movers, in characters.
const NAME_WIDTH: usize = 80;

/// Functions listed as movers per profile.
const MOVERS: usize = 10;

/// What `--json` prints.
#[derive(Debug, Serialize)]
struct Report<'a> {
    #[serde(flatten)]
    comparison: &'a Comparison,
    /// How the verdicts were reached, as the table's last line says it.
    method: String,
    movers: Vec<Movers>,
    /// The top stacks of each memory profile both sides have, A → B.
    memory: Vec<benchtop_sessions::memory::MemoryPairs>,
    files: Vec<String>,
}

/// The movers of one profile.
#[derive(Debug, Serialize)]
struct Movers {
    profile: &'static str,
    movers: Vec<Mover>,
}

/// Compares the sessions of `args` and prints the result; the exit code is 1 with
/// `--fail-on-regression` when a judged figure regressed. A profile that cannot be
/// drawn is a note, never a failure: the table and the JSON are written whatever happens
/// to a flamegraph.
pub fn compare(args: &CompareArgs) -> Result<ExitCode> {
    // B gets what A left of the latency and rows budgets: the two hold at most each.
    let load = |dir: &Path, which: &str, held: Held| {
        let recorded = Recorded::load_after(dir, held);
        let recorded = recorded.with_context(|| {
            format!(
                "cannot open session {which} ({})",
                Escaped(&dir.display().to_string())
            )
        })?;
        for warning in recorded.warnings() {
            eprintln!("benchtop: warning: {which}: {}", Escaped(&warning));
        }
        if recorded.runs().is_empty() {
            anyhow::bail!(
                "series {which} ({}) has no complete run to judge",
                Escaped(&dir.display().to_string())
            );
        }
        Ok(recorded)
    };
    let (ra, rb) = parts(args, load)?;
    let (runs_a, runs_b) = (ra.runs(), rb.runs());
    let mut opts = CompareOptions::default();
    opts.threshold = args.threshold;
    // Parts of one run are judged from their intervals; sessions and series across runs.
    opts.parts = args.slow || args.range_a.is_some() || args.range_b.is_some();
    let mut comparison = compare::compare_runs(&runs_a, &runs_b, &opts);
    // The stacks of every run of a side together; the latency plot of its first run.
    let (a, b) = (merged(&runs_a), merged(&runs_b));

    let out_path = args
        .out
        .clone()
        .unwrap_or_else(|| default_out(&args.a, args.b.as_deref().unwrap_or(&args.a)));
    // Made when the first file is written: a comparison without stacks or latency
    // writes nothing.
    let mut out_dir: Option<DirHandle> = None;
    let mut files = Vec::new();
    let mut movers = Vec::new();
    let mut memory_tops = Vec::new();
    for kind in Kind::ALL {
        let (profile, ta, tb) = (kind.name(), &a[kind], &b[kind]);
        let (Some(ta), Some(tb)) = (ta, tb) else {
            continue;
        };
        if ta.is_empty() && tb.is_empty() {
            continue;
        }
        if let Some(note) = empty_profile_note(profile, ta.is_empty(), tb.is_empty()) {
            comparison.notes.push(note);
            continue;
        }
        let dir = open_out(&mut out_dir, &out_path)?;
        let (written, note) = write_diff(dir, kind, profile, ta, tb, !args.no_normalize)?;
        files.extend(written);
        comparison.notes.extend(note);
        movers.push(Movers {
            profile,
            movers: compare::movers(ta, tb, MOVERS),
        });
        if kind.spec().memory {
            memory_tops.push(benchtop_sessions::memory::top_pairs(
                kind,
                ta,
                tb,
                benchtop_sessions::memory::TOP_STACKS,
            ));
        }
    }
    if let Some(plot) = write_latency_plot(&mut out_dir, &out_path, runs_a[0], runs_b[0])? {
        files.push(plot);
    }

    let mut out = std::io::stdout().lock();
    if args.json {
        let report = Report {
            comparison: &comparison,
            method: comparison.method(),
            movers,
            memory: memory_tops,
            files: files.iter().map(|f| f.display().to_string()).collect(),
        };
        serde_json::to_writer_pretty(&mut out, &report)?;
        writeln!(out)?;
    } else if args.markdown {
        out.write_all(comparison.to_markdown().as_bytes())?;
    } else {
        out.write_all(comparison.to_text().as_bytes())?;
        for m in &movers {
            writeln!(
                out,
                "\nmoved most ({}; share of the profile, A → B)",
                m.profile
            )?;
            writeln!(out, "  {:>17}  {:>17}  function", "self", "total")?;
            // Shortened as people read them, never two functions under one label;
            // --json keeps the full names.
            let names: Vec<&str> = m.movers.iter().map(|x| x.name.as_str()).collect();
            let labels = short_names(&names, NAME_WIDTH);
            for (x, label) in m.movers.iter().zip(&labels) {
                writeln!(
                    out,
                    "  {:>6.1}% → {:>5.1}%  {:>6.1}% → {:>5.1}%  {}",
                    x.self_a * 100.0,
                    x.self_b * 100.0,
                    x.total_a * 100.0,
                    x.total_b * 100.0,
                    Escaped(label)
                )?;
            }
        }
        let mut text = String::new();
        benchtop_sessions::memory::write_memory_pairs(&memory_tops, &mut text)?;
        out.write_all(text.as_bytes())?;
        if !files.is_empty() {
            writeln!(
                out,
                "\ndifferential stacks and the latency plot in {}",
                Escaped(&out_path.display().to_string())
            )?;
        }
    }
    out.flush()?;
    let regressed: Vec<&str> = comparison.regressions().map(|f| f.name.as_str()).collect();
    if args.fail_on_regression && !regressed.is_empty() {
        eprintln!(
            "benchtop: regressed beyond {:.1}%: {}",
            args.threshold * 100.0,
            Escaped(&regressed.join(", "))
        );
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}

/// The two sides to compare: A and B as recorded, or parts of them (`--range-a`,
/// `--range-b`, `--slow`), each made a session of its own from the per-interval stacks.
fn parts(
    args: &CompareArgs,
    load: impl Fn(&Path, &str, Held) -> Result<Recorded>,
) -> Result<(Recorded, Recorded)> {
    let b_dir = args.b.as_deref().unwrap_or(&args.a);
    if !args.slow && args.range_a.is_none() && args.range_b.is_none() {
        let a = load(&args.a, "A", Held::default())?;
        let b = load(b_dir, "B", a.held())?;
        return Ok((a, b));
    }
    let session = |dir: &Path, which: &str, held| -> Result<(Session, Option<IntervalStacks>)> {
        let Recorded::Session(session) = load(dir, which, held)? else {
            anyhow::bail!(
                "{which} ({}) is a series: ranges and --slow take one session",
                Escaped(&dir.display().to_string())
            );
        };
        let stacks = IntervalStacks::load(dir, &LoadOptions::from_env()?)
            .with_context(|| format!("cannot read the per-interval stacks of {which}"))?;
        if stacks.is_none() {
            eprintln!(
                "benchtop: warning: {which} has no per-interval stacks (recorded before \
                 schema 2, or without sampling): its part is compared on figures only"
            );
        }
        Ok((*session, stacks))
    };
    let (a, stacks_a) = session(&args.a, "A", Held::default())?;
    if args.slow {
        let threshold = args.above.unwrap_or(SlowThreshold::RunP99);
        let (slow, metric, limit) = SlowRows::split(&a, args.metric.as_deref(), threshold)
            .with_context(|| format!("--slow on {}", Escaped(&args.a.display().to_string())))?;
        let others = slow.others();
        eprintln!(
            "benchtop: A: the {} intervals whose {} p99 is at most {}; B: the {} above it",
            others.count(),
            Escaped(&metric),
            human_ns(limit as f64),
            slow.count()
        );
        let rest = restrict(&a, stacks_a.as_ref(), &others, "other intervals");
        let slow = restrict(&a, stacks_a.as_ref(), &slow, "slow intervals");
        return Ok((
            Recorded::Session(Box::new(rest)),
            Recorded::Session(Box::new(slow)),
        ));
    }
    let same = args.b.as_deref().is_none_or(|b| b == args.a);
    // One session against itself is loaded and held once.
    let other = if same {
        None
    } else {
        Some(session(b_dir, "B", a.held())?)
    };
    let (b, stacks_b) = match &other {
        Some((b, stacks)) => (b, stacks.as_ref()),
        None => (&a, stacks_a.as_ref()),
    };
    let side = |s: &Session, stacks: Option<&IntervalStacks>, spec: Option<&RangeSpec>, which| {
        let Some(spec) = spec else {
            return Ok((s.clone(), None));
        };
        let length = run_length_ns(s, stacks);
        let (from, to) = spec
            .resolve(length)
            .with_context(|| format!("--range-{which} {spec}"))?;
        let label = format!("{}..{}", human_s(from), human_s(to));
        Ok::<_, anyhow::Error>((
            restrict(s, stacks, &Between(from, to), &label),
            Some((from, to)),
        ))
    };
    let (pa, ra) = side(&a, stacks_a.as_ref(), args.range_a.as_ref(), "a")?;
    let (pb, rb) = side(b, stacks_b, args.range_b.as_ref(), "b")?;
    if same {
        match (ra, rb) {
            (Some((a0, a1)), Some((b0, b1))) if a0 < b1 && b0 < a1 => anyhow::bail!(
                "--range-a {}..{} and --range-b {}..{} overlap: the intervals they share \
                 would be on both sides",
                human_s(a0),
                human_s(a1),
                human_s(b0),
                human_s(b1)
            ),
            (None, _) | (_, None) => anyhow::bail!(
                "comparing a session with itself needs two ranges: --range-a and --range-b"
            ),
            _ => {}
        }
    }
    Ok((
        Recorded::Session(Box::new(pa)),
        Recorded::Session(Box::new(pb)),
    ))
}

/// The note for a profile that one side has empty (`None` when both have stacks): its
/// differential flamegraph would have nothing to weigh against.
fn empty_profile_note(profile: &str, a_empty: bool, b_empty: bool) -> Option<String> {
    let side = match (a_empty, b_empty) {
        (true, true) => "both sides",
        (true, false) => "A",
        (false, true) => "B",
        (false, false) => return None,
    };
    Some(format!(
        "{side}: the {profile} profile is empty, so it has no differential flamegraph"
    ))
}

/// Nanoseconds as seconds, as ranges are written.
fn human_s(ns: u64) -> String {
    format!("{}s", ns as f64 / 1e9)
}

/// The stacks of each kind of `runs` added together (one run: its own).
fn merged(runs: &[&Session]) -> ByKind<Option<StackTree>> {
    ByKind::from_fn(|kind| {
        runs.iter()
            .filter_map(|s| s.profile(kind))
            .fold(None, |sum, tree| {
                let mut sum: StackTree = sum.unwrap_or_default();
                sum.merge(tree);
                Some(sum)
            })
    })
}

/// The output directory, made or opened on first use: a fresh directory, or an existing
/// one of this user that is not a symbolic link ([`DirHandle::create_or_open`]). Files go
/// into it atomically, through temporary files created with `O_EXCL`.
pub(crate) fn open_out<'a>(slot: &'a mut Option<DirHandle>, path: &Path) -> Result<&'a DirHandle> {
    if slot.is_none() {
        *slot = Some(DirHandle::create_or_open(path)?);
    }
    slot.as_ref()
        .ok_or_else(|| anyhow::anyhow!("{}: not opened", path.display()))
}

/// latency.svg in the output directory: both sessions' whole-run latency per metric on one
/// percentile plot; `None` when neither has latency.
fn write_latency_plot(
    out_dir: &mut Option<DirHandle>,
    out_path: &Path,
    a: &Session,
    b: &Session,
) -> Result<Option<PathBuf>> {
    let mut notes = Vec::new();
    let (la, lb) = (a.merged_latency(&mut notes), b.merged_latency(&mut notes));
    for note in notes {
        eprintln!("benchtop: warning: {}", Escaped(&note));
    }
    let label = |side: &str, tag: &str| match tag {
        "" => side.to_owned(),
        tag => format!("{side}: {tag}"),
    };
    let labelled: Vec<(String, &hdrhistogram::Histogram<u64>)> = la
        .iter()
        .map(|(tag, h)| (label("A", tag), h))
        .chain(lb.iter().map(|(tag, h)| (label("B", tag), h)))
        .collect();
    if labelled.is_empty() {
        return Ok(None);
    }
    let series: Vec<(&str, &hdrhistogram::Histogram<u64>)> =
        labelled.iter().map(|(l, h)| (l.as_str(), *h)).collect();
    let title = format!("latency: A {} against B {}", a.meta.id, b.meta.id);
    let dir = open_out(out_dir, out_path)?;
    dir.write_atomically(
        "latency.svg",
        benchtop_sessions::plot::percentile_svg(&title, &series).as_bytes(),
    )?;
    Ok(Some(dir.join("latency.svg")))
}

/// `./compare-<A>-vs-<B>`, from the sessions' directory names.
fn default_out(a: &Path, b: &Path) -> PathBuf {
    let name = |p: &Path| {
        p.file_name().map_or_else(
            || "session".to_owned(),
            |n| n.to_string_lossy().into_owned(),
        )
    };
    PathBuf::from(format!("compare-{}-vs-{}", name(a), name(b)))
}

/// Writes diff-<profile>.folded and its two flamegraphs; returns the files, and a note
/// when the stacks could not be drawn (a profile that cannot be rendered is never a
/// failure of the comparison; a file that cannot be written is).
fn write_diff(
    dir: &DirHandle,
    kind: Kind,
    profile: &str,
    a: &StackTree,
    b: &StackTree,
    normalize: bool,
) -> Result<(Vec<PathBuf>, Option<String>)> {
    let diff = match compare::diff_folded(a, b, normalize) {
        Ok(diff) => diff,
        Err(e) => return Ok((Vec::new(), Some(not_drawn(profile, &e)))),
    };
    write_diff_files(dir, kind, &format!("diff-{profile}"), &diff, ("A", "B"))
}

/// The note for differential flamegraphs of `profile` that could not be drawn.
fn not_drawn(profile: &str, e: &dyn std::fmt::Display) -> String {
    format!("the {profile} differential flamegraphs were not drawn: {e}")
}

/// Writes `<stem>.folded`, the differential folded text `diff` of side `b` against side
/// `a` (`sides`: their names in the titles), and its two flamegraphs: `<stem>.svg`
/// (widths from `b`, red where it grew) and `<stem>-negated.svg` (widths from `a`: what
/// `b` lost). Returns the files, and a note when the stacks could not be drawn (never a
/// failure; a file that cannot be written is).
pub(crate) fn write_diff_files(
    dir: &DirHandle,
    kind: Kind,
    stem: &str,
    diff: &str,
    (a, b): (&str, &str),
) -> Result<(Vec<PathBuf>, Option<String>)> {
    let folded = format!("{stem}.folded");
    dir.write_atomically(&folded, diff.as_bytes())?;
    let mut files = vec![dir.join(&folded)];
    let what = kind.title();
    for (negate, suffix, title) in [
        (
            false,
            "",
            format!("{what}: {b} against {a} (red grew, blue shrank)"),
        ),
        (
            true,
            "-negated",
            format!("{what}: {a} against {b} (negated: what {b} lost)"),
        ),
    ] {
        let name = format!("{stem}{suffix}.svg");
        let mut svg = Vec::new();
        if let Err(e) = write_differential_svg(diff, &title, kind.count_name(), negate, &mut svg) {
            return Ok((files, Some(not_drawn(kind.name(), &e))));
        }
        dir.write_atomically(&name, &svg)?;
        files.push(dir.join(&name));
    }
    Ok((files, None))
}
