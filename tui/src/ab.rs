//! `benchtop ab -- <A's run arguments> -- <B's run arguments>`: A and B recorded
//! alternately (A, B, B, A, A, B …: a drift over time hits both alike), each side a series, and B
//! judged against A from the runs (`benchtop_sessions::compare::compare_runs`). Each
//! side is a built-in workload or a command, as `benchtop run` takes them
//! ([`split_sides`] says where A ends); a command that exits by itself is judged on its
//! `wall_time_s` and `cpu_time_s`, as hyperfine judges one.
//!
//! # Stopping when decided
//!
//! With `--until-decided` the runs so far are judged after every pair from the second on
//! (a *look*), and the experiment stops once every chosen figure is decided: changed
//! (the comparison's verdict `improved`, `regressed` or `changed`: its interval excludes
//! no change and the change is at least the threshold) or `same` (its interval lies
//! inside ± the threshold). Looking again and again at growing data would inflate the
//! error rate of a fixed-sample test, so the error rate is spent by the number of the
//! look: look *k* judges at α·6/(π²*k*²), which sums to at most α over any number of looks
//! (Σ 1/*k*² = π²/6), whatever `--max-runs` is; within a look the comparison splits it
//! again over the chosen figures, the only ones it judges. The chance of any false verdict
//! over the whole experiment stays at most α = 1 %, and a large change is decided at the
//! first looks, where most of α is spent (61 % at the first, 15 % at the second).

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Instant, SystemTime};

use anyhow::{Context, Result};
use benchtop_sessions::compare::{
    CompareOptions, Comparison, FigureComparison, Verdict, compare_runs,
};
use benchtop_sessions::series::RunRole;
use benchtop_sessions::{Session, Status, new_session_id};
use clap::Parser;

use crate::cli::{AbArgs, Cli, Command};
use crate::record::{DEFAULT_SESSIONS_DIR, RecordOptions};
use crate::series::{SeriesRecorder, Tally, unique_dir};
use crate::state::ab::{AbEvent, AbOutcome, AbPlan, FigureLook, Look, RunLine, Side};

/// The family-wise error rate of the whole experiment, over all its looks.
pub const ALPHA: f64 = 0.01;

pub use crate::state::ab::Decision;

/// Where `figure` stands, against `threshold`.
pub fn decide(figure: &FigureComparison, threshold: f64) -> Decision {
    match figure.change.verdict {
        v if v.is_change() => Decision::Changed(v),
        Verdict::Same => Decision::Equivalent,
        _ => match figure.change.ci {
            Some((lo, hi)) if lo > -threshold && hi < threshold => Decision::Equivalent,
            _ => Decision::Open,
        },
    }
}

/// The error rate spent at look `k` (from 1): α·6/(π²k²), so that the looks of any
/// experiment, however many, spend at most α together.
pub fn alpha_at_look(k: usize) -> f64 {
    benchtop_sessions::compare::alpha_at_look(ALPHA, k)
}

/// Splits the sides into A's run arguments and B's.
///
/// With a `separator`, A's arguments end at its first occurrence. Otherwise they end at
/// the first `--`, unless what precedes that `--` names no workload (nothing, or only
/// recording options): then that `--` begins A's command, as it does for `benchtop run`,
/// and the command's words run to the next `--`. So `-- ring -- ring --mode ask` and
/// `-- --duration 5s -- ./old -- -- ./new` both split where they read; a command of A
/// with a `--` of its own needs `--separator`. No word is re-split.
pub fn split_sides<'a>(
    sides: &'a [OsString],
    separator: Option<&str>,
) -> Result<(&'a [OsString], &'a [OsString])> {
    let at = match separator {
        Some(word) => sides.iter().position(|s| s == word).ok_or_else(|| {
            anyhow::anyhow!(
                "--separator {word:?}: it is not among the sides; put it between A and B"
            )
        })?,
        None => {
            let Some(first) = sides.iter().position(|s| s == "--") else {
                anyhow::bail!(
                    "give A's and B's run arguments separated by `--`: \
                     `benchtop ab -- ring --num-nodes 100 -- ring --num-nodes 200`"
                );
            };
            if names_a_workload(&sides[..first]) {
                first
            } else {
                match sides[first + 1..].iter().position(|s| s == "--") {
                    Some(next) => first + 1 + next,
                    None => anyhow::bail!(
                        "A is a command (`-- <command>`) and nothing separates B from it: \
                         `benchtop ab -- -- ./old -- -- ./new`; when A's command has a `--` \
                         of its own, name another separator: `benchtop ab --separator :: -- \
                         -- ./old -- x :: -- ./new -- x`"
                    ),
                }
            }
        }
    };
    let (a, b) = (&sides[..at], &sides[at + 1..]);
    if a.is_empty() || b.is_empty() {
        anyhow::bail!("both A and B need run arguments: `benchtop ab -- <A> -- <B>`");
    }
    Ok((a, b))
}

/// Whether `args`, as `benchtop run` reads them, name a workload; arguments `run` refuses
/// count as naming one (so that the error is said about that side).
fn names_a_workload(args: &[OsString]) -> bool {
    let argv = ["benchtop", "run"]
        .into_iter()
        .map(OsString::from)
        .chain(args.iter().cloned());
    match Cli::try_parse_from(argv) {
        Ok(Cli {
            command: Some(Command::Run(run)),
            ..
        }) => run.workload.is_some(),
        _ => true,
    }
}

/// One side's run arguments, as `benchtop run` reads them, into the conductor's options:
/// a built-in workload, or a command after `--`.
fn side(which: &str, args: &[OsString]) -> Result<(String, RecordOptions, bool)> {
    let argv = ["benchtop", "run"]
        .into_iter()
        .map(OsString::from)
        .chain(args.iter().cloned());
    let cli = Cli::try_parse_from(argv).map_err(|e| {
        let text = e.to_string();
        anyhow::anyhow!(
            "{which}'s run arguments: {}",
            text.lines()
                .next()
                .unwrap_or_default()
                .trim_start_matches("error: ")
        )
    })?;
    let Some(Command::Run(run)) = cli.command else {
        anyhow::bail!("{which}'s run arguments are not a run");
    };
    if run.record.record.is_some() || run.record.tui || run.record.baseline.is_some() {
        anyhow::bail!(
            "{which}: ab chooses the directories and records headless: leave out --record, --tui and --baseline"
        );
    }
    if run.series.is_series() {
        anyhow::bail!(
            "{which}: ab decides how many runs: leave out --runs, --warmup and --sweep (use ab's --runs)"
        );
    }
    match (run.workload, run.command.is_empty()) {
        (Some(workload), true) => {
            let name = workload.name().to_owned();
            let opts = crate::workload_options(workload, &run.record)?;
            Ok((name, opts, run.record.quiet))
        }
        (None, false) => {
            let opts = crate::external::command_options(&run.command, &run.record)
                .map_err(|e| anyhow::anyhow!("{which}: {e:#}"))?;
            Ok((opts.workload.clone(), opts, run.record.quiet))
        }
        (Some(_), false) => {
            anyhow::bail!("{which}: name a workload or a command after `--`, not both")
        }
        (None, true) => anyhow::bail!(
            "{which}: name a workload (`ring --num-nodes 100`) or a command (`-- ./bench`)"
        ),
    }
}

/// The experiment's directory: `requested` (new or empty), or a new one under ./sessions/.
fn experiment_dir(requested: Option<&Path>) -> Result<PathBuf> {
    match requested {
        None => unique_dir(
            Path::new(DEFAULT_SESSIONS_DIR),
            &new_session_id("ab", SystemTime::now()),
        ),
        Some(dir) => {
            match std::fs::create_dir(dir) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    let empty =
                        std::fs::read_dir(dir).is_ok_and(|mut entries| entries.next().is_none());
                    if !empty {
                        anyhow::bail!("{} exists and is not empty", dir.display());
                    }
                }
                Err(e) => {
                    return Err(e).with_context(|| format!("cannot create {}", dir.display()));
                }
            }
            Ok(dir.to_path_buf())
        }
    }
}

/// `benchtop ab`: headless, with a line per look on stderr, or on the `ab` screen.
pub fn ab(args: &AbArgs) -> Result<ExitCode> {
    if args.tui {
        return crate::app::run_ab_tui(args);
    }
    let experiment = Experiment::prepare(args, false)?;
    let plan = experiment.plan();
    eprintln!(
        "benchtop: ab into {}: {}",
        plan.dir.display(),
        plan_text(&plan)
    );
    let pairs = plan.pairs;
    let outcome = experiment.run(&mut |event| match event {
        AbEvent::Look(look) => eprintln!(
            "benchtop: ab {}/{pairs}: {}",
            look.pair,
            progress(&look.figures)
        ),
        // With -q the runs' own lines are gone; their warnings stay.
        AbEvent::RunEnded(run) if args.quiet => {
            for w in &run.warnings {
                eprintln!("benchtop: warning: {}: {w}", run.name);
            }
        }
        _ => {}
    })?;
    if outcome.stopped {
        eprintln!("benchtop: ab stopped: judging the runs recorded so far");
    }
    finish(&plan, &outcome)
}

/// `at most 20 runs a side, look k at α·6/(π²k²) (0.608 % at the first)` or `5 runs a
/// side, one look at α = 1 %`.
fn plan_text(plan: &AbPlan) -> String {
    if plan.until_decided {
        format!(
            "at most {} runs a side, look k at α·6/(π²k²) ({:.3} % at the first, 1 % over all)",
            plan.pairs,
            alpha_at_look(1) * 100.0
        )
    } else {
        format!(
            "{} runs a side, one look at α = {} %",
            plan.pairs,
            ALPHA * 100.0
        )
    }
}

/// Prints the comparison and the decisions on stdout, says what regressed or failed,
/// and gives the exit code: failure when a chosen figure regressed or a run failed.
pub fn finish(plan: &AbPlan, outcome: &AbOutcome) -> Result<ExitCode> {
    let mut out = std::io::stdout().lock();
    out.write_all(outcome.text.as_bytes())?;
    writeln!(out)?;
    for (name, d) in &outcome.decided {
        writeln!(out, "decided: {name}: {d}")?;
    }
    let open: Vec<&str> = outcome
        .decided
        .iter()
        .filter(|(_, d)| *d == Decision::Open)
        .map(|(n, _)| n.as_str())
        .collect();
    if !open.is_empty() {
        writeln!(
            out,
            "undecided after {} pairs: {}",
            outcome.runs_a.min(outcome.runs_b),
            open.join(", ")
        )?;
    }
    writeln!(
        out,
        "ab: {} ({} runs of A, {} of B{})",
        plan.dir.display(),
        outcome.runs_a,
        outcome.runs_b,
        if outcome.stopped { ", stopped" } else { "" }
    )?;
    out.flush()?;
    if !outcome.regressed.is_empty() {
        eprintln!(
            "benchtop: regressed beyond {:.1}%: {}",
            plan.threshold * 100.0,
            outcome.regressed.join(", ")
        );
        return Ok(ExitCode::FAILURE);
    }
    if outcome.failed {
        eprintln!("benchtop: a run failed (the series say which)");
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}

/// An experiment ready to run: both sides read, its directory and both series created.
#[derive(Debug)]
pub struct Experiment {
    a: RecordOptions,
    b: RecordOptions,
    rec_a: SeriesRecorder,
    rec_b: SeriesRecorder,
    plan: AbPlan,
    opts: CompareOptions,
    figures: Vec<String>,
}

impl Experiment {
    /// Reads both sides and creates the experiment's directory; `silent` keeps every
    /// run's lines off stderr (the `ab` screen shows them instead).
    pub fn prepare(args: &AbArgs, silent: bool) -> Result<Experiment> {
        let (a_args, b_args) = split_sides(&args.sides, args.separator.as_deref())?;
        let (a_name, a, a_quiet) = side("A", a_args)?;
        let (b_name, b, b_quiet) = side("B", b_args)?;
        let quiet = silent || args.quiet || a_quiet || b_quiet;
        let pairs = if args.until_decided {
            args.max_runs
        } else {
            args.runs
        };
        let mut opts = CompareOptions::default();
        opts.threshold = args.threshold;
        // A fixed number of runs is judged once, at α; looks after every pair spend α by
        // their number.
        opts.alpha = if args.until_decided {
            alpha_at_look(1)
        } else {
            ALPHA
        };
        if !args.figure.is_empty() {
            opts.figures = Some(args.figure.clone());
        }
        let dir = experiment_dir(args.record.as_deref())?;
        let mut rec_a =
            SeriesRecorder::create(Some(&dir.join("a")), &a_name, Vec::new(), quiet, &[])?;
        let mut rec_b =
            SeriesRecorder::create(Some(&dir.join("b")), &b_name, Vec::new(), quiet, &[])?;
        // -q drops the runs' own lines (the headless loop still prints their warnings).
        if silent || args.quiet {
            rec_a.silence();
            rec_b.silence();
        }
        let words = |args: &[OsString]| {
            args.iter()
                .map(|a| a.to_string_lossy())
                .collect::<Vec<_>>()
                .join(" ")
        };
        let plan = AbPlan {
            dir,
            a: words(a_args),
            b: words(b_args),
            pairs: pairs as usize,
            until_decided: args.until_decided,
            alpha: opts.alpha,
            threshold: args.threshold,
        };
        Ok(Experiment {
            a,
            b,
            rec_a,
            rec_b,
            plan,
            opts,
            figures: args.figure.clone(),
        })
    }

    /// What the experiment is.
    pub fn plan(&self) -> AbPlan {
        self.plan.clone()
    }

    /// Records A and B alternately, judging after each pair, telling `tell` what
    /// happens; stops when decided (with `until_decided`), when the runs are done, or
    /// when interrupted ([`crate::record::interrupts`]), and writes the comparison.
    pub fn run(mut self, tell: &mut dyn FnMut(AbEvent)) -> Result<AbOutcome> {
        let plan = self.plan.clone();
        let mut tally = Tally::new()?;
        let (mut runs_a, mut runs_b): (Vec<Session>, Vec<Session>) = (Vec::new(), Vec::new());
        let mut chosen: Vec<String> = Vec::new();
        let mut last: Option<Comparison> = None;
        let total = 2 * plan.pairs;
        let no_point = BTreeMap::new();
        let mut look = 0;
        'pairs: for pair in 1..=plan.pairs {
            let mut order = [
                (Side::A, &mut self.rec_a, &self.a, &mut runs_a),
                (Side::B, &mut self.rec_b, &self.b, &mut runs_b),
            ];
            // A then B in odd pairs, B then A in even ones (A B B A A B …): a load that
            // grows or falls through the experiment weighs on both sides alike, where
            // plain alternation always runs A first in each pair and hands B the trend.
            if pair % 2 == 0 {
                order.reverse();
            }
            for (i, (side, rec, opts_side, runs)) in order.into_iter().enumerate() {
                let n = 2 * pair - 1 + i;
                if tally.interrupted() {
                    break 'pairs;
                }
                tell(AbEvent::RunStarted { n, total, side });
                let started = Instant::now();
                let outcome = rec.record(RunRole::Run, &no_point, opts_side, (n, total))?;
                tell(AbEvent::RunEnded(RunLine {
                    n,
                    side,
                    name: outcome
                        .dir
                        .file_name()
                        .map_or_else(String::new, |n| n.to_string_lossy().into_owned()),
                    status: outcome.status,
                    seconds: started.elapsed().as_secs_f64(),
                    warnings: outcome.warnings.clone(),
                }));
                if tally.add(&outcome) {
                    break 'pairs;
                }
                if outcome.status == Status::Complete {
                    let session = Session::load(&outcome.dir).with_context(|| {
                        format!("cannot read back the run {}", outcome.dir.display())
                    })?;
                    runs.push(session);
                }
            }
            if runs_a.is_empty() || runs_b.is_empty() {
                continue;
            }
            if plan.until_decided && runs_a.len() >= 2 && runs_b.len() >= 2 {
                look += 1;
                self.opts.alpha = alpha_at_look(look);
            }
            let mut comparison = judge(&runs_a, &runs_b, &self.opts);
            if chosen.is_empty() {
                chosen = choose(&comparison, &self.figures)?;
                if self.opts.figures.is_none() {
                    // Only the chosen figures are judged, so α is split over them alone.
                    self.opts.figures = Some(chosen.clone());
                    comparison = judge(&runs_a, &runs_b, &self.opts);
                }
            }
            let decisions = decisions(&comparison, &chosen, plan.threshold);
            tell(AbEvent::Look(Look {
                pair,
                runs_a: runs_a.len(),
                runs_b: runs_b.len(),
                figures: figure_looks(&comparison, &chosen, &decisions),
            }));
            let decided = runs_a.len() >= 2
                && runs_b.len() >= 2
                && decisions.iter().all(|d| *d != Decision::Open);
            last = Some(comparison);
            if plan.until_decided && decided {
                break;
            }
        }
        let Some(comparison) = last else {
            anyhow::bail!(
                "no complete run of {} to judge (the runs are in {})",
                if runs_a.is_empty() { "A" } else { "B" },
                plan.dir.display()
            );
        };
        write_comparison(&plan.dir, &comparison)?;
        let decisions = decisions(&comparison, &chosen, plan.threshold);
        let regressed = chosen
            .iter()
            .zip(&decisions)
            .filter(|(_, d)| **d == Decision::Changed(Verdict::Regressed))
            .map(|(n, _)| n.clone())
            .collect();
        Ok(AbOutcome {
            text: comparison.to_text(),
            decided: chosen.into_iter().zip(decisions).collect(),
            runs_a: runs_a.len(),
            runs_b: runs_b.len(),
            stopped: tally.stopped(),
            regressed,
            failed: tally.failed(),
        })
    }
}

/// The chosen figures of `comparison` with their decisions, for a look.
fn figure_looks(
    comparison: &Comparison,
    chosen: &[String],
    decisions: &[Decision],
) -> Vec<FigureLook> {
    chosen
        .iter()
        .zip(decisions)
        .filter_map(|(name, &decision)| {
            let f = comparison.figures.iter().find(|f| &f.name == name)?;
            Some(FigureLook {
                name: name.clone(),
                change: f.change.change,
                ci: f.change.ci,
                decision,
            })
        })
        .collect()
}

fn judge(a: &[Session], b: &[Session], opts: &CompareOptions) -> Comparison {
    let a: Vec<&Session> = a.iter().collect();
    let b: Vec<&Session> = b.iter().collect();
    compare_runs(&a, &b, opts)
}

/// The figures that decide: those asked for (each must exist), or every figure with a
/// better direction.
fn choose(comparison: &Comparison, asked: &[String]) -> Result<Vec<String>> {
    if asked.is_empty() {
        return Ok(comparison
            .figures
            .iter()
            .filter(|f| f.better.is_some())
            .map(|f| f.name.clone())
            .collect());
    }
    for name in asked {
        if !comparison.figures.iter().any(|f| &f.name == name) {
            let known: Vec<&str> = comparison.figures.iter().map(|f| f.name.as_str()).collect();
            anyhow::bail!(
                "--figure {name:?}: no such figure; the runs have: {}",
                known.join(", ")
            );
        }
    }
    Ok(asked.to_vec())
}

fn decisions(comparison: &Comparison, chosen: &[String], threshold: f64) -> Vec<Decision> {
    chosen
        .iter()
        .map(|name| {
            comparison
                .figures
                .iter()
                .find(|f| &f.name == name)
                .map_or(Decision::Open, |f| decide(f, threshold))
        })
        .collect()
}

/// `lap p50 +1.2% [-3.0%, +5.4%] undecided · …`
fn progress(figures: &[FigureLook]) -> String {
    figures
        .iter()
        .map(|f| {
            let pct = |x: f64| format!("{:+.1}%", x * 100.0);
            let ci = f.ci.map_or(String::from("(no interval yet)"), |(lo, hi)| {
                format!("[{}, {}]", pct(lo), pct(hi))
            });
            format!("{} {} {ci} {}", f.name, pct(f.change), f.decision)
        })
        .collect::<Vec<_>>()
        .join(" · ")
}

/// comparison.txt and comparison.json in the experiment's directory.
fn write_comparison(dir: &Path, comparison: &Comparison) -> Result<()> {
    let text = dir.join("comparison.txt");
    std::fs::write(&text, comparison.to_text())
        .with_context(|| format!("cannot write {}", text.display()))?;
    let json = dir.join("comparison.json");
    let mut bytes = serde_json::to_vec_pretty(comparison)?;
    bytes.push(b'\n');
    std::fs::write(&json, bytes).with_context(|| format!("cannot write {}", json.display()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use benchtop_sessions::compare::Change;

    fn figure(change: f64, ci: Option<(f64, f64)>, verdict: Verdict) -> FigureComparison {
        FigureComparison {
            name: "lap p50".into(),
            unit: "ns".into(),
            a: 1.0,
            b: 1.0 + change,
            better: Some(benchtop_sessions::meta::Better::Lower),
            change: Change::judged(change, ci, verdict),
        }
    }

    #[test]
    fn a_figure_is_decided_by_a_verdict_or_an_interval_inside_the_threshold() {
        let t = 0.02;
        assert_eq!(
            decide(&figure(0.5, Some((0.4, 0.6)), Verdict::Regressed), t),
            Decision::Changed(Verdict::Regressed)
        );
        assert_eq!(
            decide(&figure(0.001, Some((-0.01, 0.015)), Verdict::Same), t),
            Decision::Equivalent
        );
        assert_eq!(
            decide(&figure(0.001, Some((-0.05, 0.015)), Verdict::Undecided), t),
            Decision::Open
        );
        assert_eq!(
            decide(&figure(0.3, None, Verdict::Undecided), t),
            Decision::Open
        );
    }

    #[test]
    fn the_error_rate_is_spent_by_look_number_and_sums_to_at_most_alpha() {
        let spent: f64 = (1..=100_000).map(alpha_at_look).sum();
        assert!(spent <= ALPHA && spent > 0.9999 * ALPHA, "{spent}");
        assert!((alpha_at_look(1) - 0.006_079).abs() < 1e-6);
        assert!(alpha_at_look(2) < alpha_at_look(1) && alpha_at_look(0) <= ALPHA);
    }

    fn words(w: &[&str]) -> Vec<OsString> {
        w.iter().map(OsString::from).collect()
    }

    #[test]
    fn the_sides_split_at_the_first_separator_without_resplitting_words() {
        let args = words(&["ring", "--mode", "tell ask", "--", "ring"]);
        let (a, b) = split_sides(&args, None).unwrap();
        assert_eq!(a.len(), 3);
        assert_eq!(a[2], "tell ask");
        assert_eq!(b, [OsString::from("ring")]);
        assert!(split_sides(&args[..3], None).is_err());
        assert!(split_sides(&args[3..], None).is_err());
    }

    #[test]
    fn a_command_of_a_runs_to_the_next_separator() {
        let args = words(&["--", "sleep", "0.1", "--", "--", "sleep", "0.2"]);
        let (a, b) = split_sides(&args, None).unwrap();
        assert_eq!(a, words(&["--", "sleep", "0.1"]));
        assert_eq!(b, words(&["--", "sleep", "0.2"]));
        // Recording options before A's command stay A's.
        let args = words(&["--interval", "100ms", "--", "./old", "x y", "--", "ring"]);
        let (a, b) = split_sides(&args, None).unwrap();
        assert_eq!(a, words(&["--interval", "100ms", "--", "./old", "x y"]));
        assert_eq!(b, words(&["ring"]));
        // Options run refuses are A's, at the first `--`, for side() to say so.
        let args = words(&["--interval", "5ms", "--", "./old", "--", "ring"]);
        let (a, _) = split_sides(&args, None).unwrap();
        assert_eq!(a, words(&["--interval", "5ms"]));
        let err = side("A", a).unwrap_err().to_string();
        assert!(err.starts_with("A's run arguments: invalid value"), "{err}");
        // A workload against a command.
        let args = words(&["ring", "--", "--", "./new"]);
        let (a, b) = split_sides(&args, None).unwrap();
        assert_eq!(
            (a, b),
            (&words(&["ring"])[..], &words(&["--", "./new"])[..])
        );
        // Nothing after A's command: B is missing, and the message says how to split.
        let err = split_sides(&words(&["--", "./old", "x"]), None).unwrap_err();
        assert!(err.to_string().contains("--separator"), "{err}");
    }

    #[test]
    fn a_chosen_separator_lets_a_command_keep_its_own_separator() {
        let args = words(&[
            "--", "cargo", "bench", "--", "x", "::", "--", "cargo", "bench",
        ]);
        let (a, b) = split_sides(&args, Some("::")).unwrap();
        assert_eq!(a, words(&["--", "cargo", "bench", "--", "x"]));
        assert_eq!(b, words(&["--", "cargo", "bench"]));
        assert!(split_sides(&args, Some("%%")).is_err());
    }
}
