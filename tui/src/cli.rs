//! The command line.

use std::path::PathBuf;
use std::time::Duration;

use benchtop_profile::kinds::KindSet;
use benchtop_workloads::report::MIN_INTERVAL;
use benchtop_workloads::worker::Workload;
use clap::{Args, Parser, Subcommand, ValueEnum};

mod errors;
mod history;
use errors::{config_error, workload_first, workload_hint};
pub use history::HistoryArgs;

/// benchtop: launch a benchmark workload, sample it with perf events, watch its
/// resources, and record everything into a session directory.
#[derive(Debug, Parser)]
#[command(
    name = "benchtop",
    version,
    about,
    long_about = "benchtop launches a built-in benchmark workload as a worker process, samples \
it with Linux perf events (on-CPU and off-CPU stacks, symbolized while it runs), watches the \
memory, threads and CPU of its whole process tree, and records a session directory: \
session.json, timeseries.jsonl, latency.hlog (HdrHistogram log), cpu.folded and cpu.svg, \
offcpu.folded and offcpu.svg (flamegraphs), threads.csv, worker.log.\n\n\
With no command, on a terminal, it opens the TUI: a launcher of the workloads, then the run \
live (throughput, latency, resources and flamegraph side by side), recorded under \
./sessions/. Without a terminal it records the default workload (the actor ring) headless.",
    after_help = "Examples:\n  benchtop run ring --num-nodes 1000 --mode ask\n  \
benchtop run ring --record /tmp/ring-tell --duration 10s --frequency 499\n  \
benchtop run ring --num-rounds 100000000 --duration 30s --tui\n  \
benchtop show sessions/20261121-101500-ring"
)]
pub struct Cli {
    /// What to do; the default opens the TUI (or, without a terminal, records the default
    /// workload).
    #[command(subcommand)]
    pub command: Option<Command>,
    /// The recording options with nothing given: the built-in defaults, or the config
    /// file's (see [`crate::config`]); the launcher starts from these.
    #[arg(skip)]
    pub defaults: RecordArgs,
}

impl Cli {
    /// Parses `args` (the program's name first) as `try_parse_from` does; a mistyped
    /// workload after `run` is answered with the closest workload and the list of them,
    /// as clap answers a mistyped subcommand.
    pub fn parse_from_os<I, T>(args: I) -> Result<Cli, clap::Error>
    where
        I: IntoIterator<Item = T>,
        T: Into<std::ffi::OsString>,
    {
        let config = crate::config::Config::load().map_err(config_error)?;
        Cli::parse_with_config(args, &config)
    }

    /// Parses `args` as [`Cli::parse_from_os`] does, with `config`'s values as the
    /// defaults of the recording options (the command line wins).
    pub fn parse_with_config<I, T>(
        args: I,
        config: &crate::config::Config,
    ) -> Result<Cli, clap::Error>
    where
        I: IntoIterator<Item = T>,
        T: Into<std::ffi::OsString>,
    {
        use clap::{CommandFactory as _, FromArgMatches as _};
        let args: Vec<std::ffi::OsString> = args.into_iter().map(Into::into).collect();
        let command = config.apply(Cli::command()).map_err(config_error)?;
        let matches = match command.clone().try_get_matches_from(&args) {
            Ok(matches) => matches,
            // `run --duration 10s ring`: recording options before the workload's name, as
            // perf and hyperfine take them, parse as `run ring --duration 10s` does.
            Err(e) => match workload_first(&e, &args) {
                Some(reordered) => command
                    .clone()
                    .try_get_matches_from(&reordered)
                    .map_err(|e| workload_hint(e, &reordered))?,
                None => return Err(workload_hint(e, &args)),
            },
        };
        let mut cli = Cli::from_arg_matches(&matches)?;
        // What the launcher and the headless default start from: `run`'s options as they
        // stand with nothing on the command line.
        let defaults = command.try_get_matches_from(["benchtop", "run"])?;
        if let Some(Command::Run(run)) = Cli::from_arg_matches(&defaults)?.command {
            cli.defaults = run.record;
        }
        Ok(cli)
    }
}

/// The built-in workloads' names, as `run` takes them.
pub fn workload_names() -> Vec<String> {
    use clap::Subcommand as _;
    Workload::augment_subcommands(clap::Command::new("run"))
        .get_subcommands()
        .filter(|c| !c.is_hide_set())
        .map(|c| c.get_name().to_owned())
        .collect()
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a workload (or any command after `--`), profile it, and record a session.
    #[command(
        args_conflicts_with_subcommands = true,
        after_help = "Examples:\n  benchtop run ring --num-nodes 1000 --mode ask\n  \
benchtop run storm --num-nodes 4 --num-msgs 100000\n  \
benchtop run --duration 10s -- ./target/release/my-bench --threads 4\n\n\
A command after `--` is started with sampling enabled at its exec, so nothing of \
benchtop's own start-up is recorded; its output goes to worker.log in the session, and \
Ctrl-C or --duration sends it SIGINT (SIGTERM, then SIGKILL if it does not exit). A \
program that speaks the report protocol on the descriptor in BENCHTOP_REPORT_FD adds its \
counters and latency histograms to the session (docs/protocol.md)."
    )]
    Run(Box<RunArgs>),
    /// Profile a running process (and the threads and children it creates) until it
    /// exits, the duration elapses, or Ctrl-C; the process itself is never signalled.
    #[command(after_help = "Examples:\n  benchtop attach 4242 --duration 30s\n  \
benchtop attach $(pgrep -n my-server) --record /tmp/server-profile")]
    // A baseline makes no sense for attach yet: refused there, so not offered in its help.
    #[command(mut_arg("baseline", |a| a.hide(true)))]
    Attach(AttachArgs),
    /// Print the summary of a recorded session (or a series' table of points), or of a
    /// time range of it.
    #[command(
        after_help = "Examples:\n  benchtop show sessions/20261121-101500-ring\n  \
benchtop show DIR --range 10s..20s --top 15\n  benchtop show DIR --range last:5s\n  \
benchtop show DIR --json | jq '.overview.latency[0].p99_ns'\n\n\
A range is A..B with durations from the run's start (10s..20s, ..5s, 30s..) or last:D; \
it holds the report intervals whose middle lies in it. Sessions recorded before \
per-interval stacks (schema 1) say so and show the whole run's functions."
    )]
    Show {
        /// The session directory.
        #[arg(value_hint = clap::ValueHint::DirPath)]
        dir: PathBuf,
        /// Print JSON for scripts instead of text: session.json's fields under `session`
        /// and the figures the text computes under `overview` (latency percentiles,
        /// resources, busiest threads, hottest and blocking frames, warnings), raw
        /// numbers with their unit in their names (`p99_ns`, `peak_rss_bytes`). For a
        /// series: series.json under `series` and each run's figures under `runs`.
        #[arg(long, conflicts_with = "range")]
        json: bool,
        /// Only this time range of the run: its figures and its top functions, self and
        /// total (A..B, ..B, A.., last:D).
        #[arg(long, value_name = "RANGE")]
        range: Option<benchtop_sessions::range::RangeSpec>,
        /// Functions listed per profile with --range.
        #[arg(long, value_name = "N", default_value_t = 10, requires = "range")]
        top: usize,
    },
    /// Compare session B against session A (or series of runs: `run --runs N`): every
    /// comparable figure with its change and verdict, the differential flamegraphs, and
    /// the functions whose share moved most.
    ///
    /// Runs are the unit of evidence: figures are judged across runs, on the log of the
    /// ratio B / A, with 99 % confidence for all the figures together (Bonferroni).
    /// Verdicts: regressed or improved (the interval excludes no change and the change
    /// passes the threshold), same (the interval lies inside ± the threshold), undecided
    /// (with the runs a side it would take). One run a side gets no verdicts, only the runs
    /// it would take: record series with `run --runs N`. Parts of one run (--range-a,
    /// --range-b, --slow) are judged from their intervals. The differential stacks
    /// (diff-cpu.folded, diff-cpu.svg and diff-cpu-negated.svg, and the same for off-CPU
    /// and memory) go to --out. Exit status: 1 with --fail-on-regression when a judged
    /// figure regressed, 2 on an error.
    #[command(
        after_help = "Examples:\n  benchtop compare sessions/before sessions/after\n  \
benchtop compare A B --markdown --threshold 5% --fail-on-regression\n  \
benchtop compare A B --json --out /tmp/diff\n  \
benchtop compare A --range-a 0s..10s --range-b 10s..20s\n  \
benchtop compare A --slow --metric lap --above 5ms"
    )]
    Compare(CompareArgs),
    /// Follow figures across many recorded sessions and series (one a commit, say): each
    /// figure's value at each point, its spread across runs, and the change points in it.
    ///
    /// Every session and series under the directories is read (recursively; symbolic
    /// links are not followed; at most 10,000 recordings); one that fails to load is
    /// named and skipped. One history per workload and parameters, host and sampling
    /// settings. Points are ordered by --order-by LABEL (a `--label` given at record
    /// time), else by the git commit's date picked up at record time, else by start
    /// time; recordings with the same order value pool into one point, and a series is
    /// one point (its runs give the spread). Change points: E-divisive means on the log
    /// of each point's value, each kept by a permutation test at α = 1 % (one noisy
    /// point is set aside, not taken for a change), with the size and interval of the
    /// change between the segments. What moved at each change point: every figure
    /// between the segments, and from the profiles of the 20 points nearest each side,
    /// the functions whose share moved most and a differential flamegraph (written
    /// under --out). Exit status: 1 when a --fail-on figure's newest point regressed
    /// against the segment since the last change point, 2 on an error.
    #[command(after_help = "Examples:\n  benchtop history results/\n  \
benchtop history results/ --order-by build --figure laps/s\n  \
benchtop history results/ --out /tmp/moved   # the change points' flamegraphs there\n  \
benchtop history results/ --markdown --fail-on 'messages/s' >> \"$GITHUB_STEP_SUMMARY\"\n  \
benchtop history results/ --json | jq '.histories[].figures[] | {name, changes}'\n\n\
Record each commit's run into the shared directory, e.g. in CI:\n  \
benchtop run ring --runs 3 --record results/$(git rev-parse --short HEAD) --label branch=main")]
    History(HistoryArgs),
    /// Browse a recorded session in the TUI, or two side by side.
    ///
    /// One session opens on the live screen as its run ended: throughput, latency,
    /// resources and the flamegraph (zoom, search, on/off-CPU). Two open the compare
    /// screen: every comparable figure with its verdict (as `benchtop compare` judges
    /// them), both latency histograms on one scale, and B's flamegraph against A's. A
    /// directory holding neither session.json nor series.json opens its history (as
    /// `benchtop history` reads it): a figure over the points with its change points
    /// marked; Enter on a change point opens the points before it against those after.
    #[command(
        after_help = "Examples:\n  benchtop open sessions/20261121-101500-ring\n  \
benchtop open sessions/before sessions/after --threshold 5%\n  \
benchtop open results/                       # a history"
    )]
    Open(OpenArgs),
    /// Write a session in formats other tools read: the latency percentile distribution
    /// (`.hgrm`, for hdr-plot and HistogramLogAnalyzer) and its plot (SVG), a pprof
    /// profile (for go tool pprof, Pyroscope, Parca), speedscope profiles, and the
    /// summary as Markdown or CSV. Files go into the session directory unless --out.
    ///
    /// A series exports its points: the table of points (summary.md), every run's
    /// figures (summary.csv), a sweep's curves (curves.svg), and each point's runs added
    /// together for latency and stacks (in point-1/, point-2/ … when it sweeps).
    #[command(
        after_help = "Examples:\n  benchtop export sessions/20261121-101500-ring\n  \
benchtop export DIR --format hgrm --out /tmp/plots\n  \
benchtop export DIR --format pprof && go tool pprof -top DIR/profile.pb.gz\n  \
benchtop export SERIES --format curves"
    )]
    Export(ExportArgs),
    /// List the processes that earlier runs left behind, and end them.
    ///
    /// A process is left behind (an orphan) when it carries benchtop's marker environment
    /// (BENCHTOP_OWNER, set on everything benchtop and its workloads start) and its owner
    /// (pid and start time) is gone. Nothing without the marker is ever signalled,
    /// whatever its command line, nor a marked process whose owner still runs.
    #[command(
        after_help = "Examples:\n  benchtop reap --dry-run\n  benchtop reap\n  \
benchtop reap --signal KILL\n  benchtop reap --grace 10s"
    )]
    Reap(ReapArgs),
    /// Run A and B alternately (A, B, B, A, A, B …) as two series and judge B against A;
    /// with --until-decided, stop as soon as every chosen figure is decided.
    ///
    /// Each side is what `benchtop run` takes for a built-in workload. Both series and
    /// the comparison go under one directory (a/, b/, comparison.txt, comparison.json).
    /// The exit status is 1 when a chosen figure regressed beyond the threshold (as
    /// `compare --fail-on-regression`) or a run failed, 2 on an error.
    #[command(after_help = "Examples:\n  \
benchtop ab --runs 5 -- ring --num-nodes 1000 -- ring --num-nodes 2000\n  \
benchtop ab --until-decided --max-runs 20 --figure 'lap p50' -- ring --mode tell -- ring --mode ask")]
    Ab(AbArgs),
    /// Print a shell completion script: bash, zsh, fish, elvish or powershell.
    #[command(
        after_help = "Examples:\n  benchtop completions bash > ~/.local/share/bash-completion/completions/benchtop\n  \
benchtop completions zsh > ~/.zfunc/_benchtop\n  \
benchtop completions fish > ~/.config/fish/completions/benchtop.fish"
    )]
    Completions {
        /// The shell.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the man page benchtop(1), or write one page per command and per workload
    /// into a directory.
    #[command(after_help = "Examples:\n  benchtop man | man -l -\n  \
benchtop man --out /usr/local/share/man/man1 && man benchtop-run")]
    Man {
        /// A directory (new, or empty) for benchtop.1, benchtop-run.1, benchtop-run-ring.1 …
        #[arg(long, short = 'o', value_name = "DIR")]
        out: Option<PathBuf>,
    },
    /// Wait for one byte on descriptor 4, then exec the command (started by the
    /// conductor, which attaches the sampler in between).
    #[command(name = "exec-gate", hide = true)]
    ExecGate {
        /// Set the JIT runtimes' environment (`run --jit`) before the exec.
        #[arg(long)]
        jit: bool,
        /// The command and its arguments, after `--`.
        #[arg(last = true, required = true, value_name = "COMMAND")]
        command: Vec<std::ffi::OsString>,
    },
    /// Run a workload as a worker speaking the report protocol (started by the conductor).
    #[command(hide = true)]
    Worker {
        /// The workload and its parameters.
        #[command(subcommand)]
        workload: Workload,
    },
}

/// `benchtop run`: the workload and how to record it.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// How to record; these options go after the workload's name or before it (before
    /// `--` for a command).
    #[command(flatten)]
    pub record: RecordArgs,
    /// Repeated runs and sweeps: a series instead of one session.
    #[command(flatten)]
    pub series: SeriesArgs,
    /// The workload and its parameters (`benchtop run <workload> --help` lists them).
    #[command(subcommand)]
    pub workload: Option<Workload>,
    /// Any program to run and profile instead of a built-in workload: `-- <command> [args]`.
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Vec<std::ffi::OsString>,
}

/// `benchtop run … --runs N --warmup K --sweep P=V1,V2`: a series instead of one session.
#[derive(Debug, Clone, Default, Args)]
pub struct SeriesArgs {
    /// Record N runs of the same thing as a series (the --record directory holds a
    /// session per run and series.json); with --sweep, N runs of every point.
    #[arg(long, global = true, value_name = "N",
          value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub runs: Option<u32>,
    /// Warm-up runs before the measured ones: recorded and kept, never judged.
    #[arg(long, global = true, value_name = "K", default_value_t = 0,
          value_parser = clap::value_parser!(u32).range(0..=1_000))]
    pub warmup: u32,
    /// Vary a workload parameter: one run per value (repeat for the cross product),
    /// e.g. `--sweep num-nodes=100,1000`. Values are checked by the workload before any
    /// run. udp-echo runs a single sweep of buffer-size or num-clients as phases of one
    /// run instead (it keeps its server between points).
    #[arg(
        id = "sweeps",
        long = "sweep",
        global = true,
        value_name = "PARAM=V1,V2,…"
    )]
    pub sweep: Vec<String>,
}

impl SeriesArgs {
    /// Whether a series was asked for rather than one session.
    pub fn is_series(&self) -> bool {
        self.runs.is_some() || self.warmup > 0 || !self.sweep.is_empty()
    }
}

/// `benchtop ab`: how many runs, when to stop, and the two sides.
#[derive(Debug, Clone, Args)]
pub struct AbArgs {
    /// Runs of each side (without --until-decided).
    #[arg(long, value_name = "N", default_value_t = 5,
          value_parser = clap::value_parser!(u32).range(2..=1_000))]
    pub runs: u32,
    /// Stop as soon as every chosen figure is decided: changed beyond the threshold, or
    /// the same within it; at most --max-runs runs a side (look k spends α·6/(π²k²)).
    #[arg(long)]
    pub until_decided: bool,
    /// With --until-decided: the most runs of each side.
    #[arg(long, value_name = "M", default_value_t = 20,
          value_parser = clap::value_parser!(u32).range(2..=1_000))]
    pub max_runs: u32,
    /// The smallest change called regressed or improved; an interval inside ± it is the
    /// same (`2%` or `0.02`).
    #[arg(long, value_name = "T", default_value = "2%", value_parser = parse_fraction)]
    pub threshold: f64,
    /// A figure that decides (`messages/s`, `lap p99`…), the only ones judged (the rest
    /// are shown); repeat for several [default: every figure with a better direction].
    #[arg(long, value_name = "NAME")]
    pub figure: Vec<String>,
    /// The directory for both series and the comparison [default:
    /// ./sessions/DATE-TIME-ab].
    #[arg(long, value_name = "DIR")]
    pub record: Option<PathBuf>,
    /// Do not show the runs' progress lines (the line per pair stays).
    #[arg(long, short)]
    pub quiet: bool,
    /// Show the experiment on a screen: the chosen figures' intervals narrowing look by
    /// look, and the runs as they end; the comparison is printed once it leaves.
    #[arg(long)]
    pub tui: bool,
    /// The word that ends A's run arguments [default: `--`]: needed only when A is a
    /// command that has `--` among its own arguments.
    #[arg(long, value_name = "WORD")]
    pub separator: Option<String>,
    /// A's run arguments, `--`, B's run arguments: `-- ring --num-nodes 100 -- ring
    /// --num-nodes 200`, or commands as `run` takes them: `-- -- ./old -- -- ./new`.
    #[arg(last = true, value_name = "A -- B", required = true)]
    pub sides: Vec<std::ffi::OsString>,
}

/// `benchtop compare`: the two sessions and how to report.
#[derive(Debug, Clone, Args)]
pub struct CompareArgs {
    /// The session to compare against (before).
    #[arg(value_name = "A", value_hint = clap::ValueHint::DirPath)]
    pub a: PathBuf,
    /// The session compared (after); A again, or left out, to compare two parts of A
    /// (`--range-a`/`--range-b`, `--slow`).
    #[arg(value_name = "B", value_hint = clap::ValueHint::DirPath,
          required_unless_present_any = ["slow", "range_b"])]
    pub b: Option<PathBuf>,
    /// Only this time range of A (`10s..20s`, `..5s`, `30s..`, `last:10s`).
    #[arg(long, value_name = "RANGE")]
    pub range_a: Option<benchtop_sessions::range::RangeSpec>,
    /// Only this time range of B (of A when B is left out).
    #[arg(long, value_name = "RANGE")]
    pub range_b: Option<benchtop_sessions::range::RangeSpec>,
    /// Compare A's slow intervals (latency p99 above the whole run's p99, or --above)
    /// against its other intervals: figures, differential flamegraphs on and off CPU,
    /// and the functions that moved most.
    #[arg(long, conflicts_with_all = ["b", "range_a", "range_b"])]
    pub slow: bool,
    /// The latency metric that decides which intervals are slow [default: the first one
    /// recorded].
    #[arg(long, value_name = "NAME", requires = "slow")]
    pub metric: Option<String>,
    /// Intervals whose p99 is above this are slow: `p99` (the whole run's, the default)
    /// or a latency (`5ms`, `250us`).
    #[arg(long, value_name = "p99|VALUE", requires = "slow", value_parser = parse_above)]
    pub above: Option<benchtop_sessions::range::SlowThreshold>,
    /// Where the differential stacks go [default: `./compare-A-vs-B`, from the two
    /// directories' names].
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Print JSON instead of the table.
    #[arg(long, conflicts_with = "markdown")]
    pub json: bool,
    /// Print a Markdown table (for CI comments).
    #[arg(long)]
    pub markdown: bool,
    /// The smallest change called regressed or improved; an interval inside ± it is the
    /// same (`2%` or `0.02`).
    #[arg(long, value_name = "T", default_value = "2%", value_parser = parse_fraction)]
    pub threshold: f64,
    /// Exit with status 1 when a figure regressed beyond the threshold.
    #[arg(long)]
    pub fail_on_regression: bool,
    /// Compare raw stack weights instead of scaling A's to B's total first.
    #[arg(long)]
    pub no_normalize: bool,
}

/// `benchtop open`: one session, or two to compare.
#[derive(Debug, Clone, Args)]
pub struct OpenArgs {
    /// The session to browse, or the one to compare against (before); a directory of
    /// sessions: its history.
    #[arg(value_name = "A", value_hint = clap::ValueHint::DirPath)]
    pub a: PathBuf,
    /// The session compared with A (after).
    #[arg(value_name = "B", value_hint = clap::ValueHint::DirPath)]
    pub b: Option<PathBuf>,
    /// The smallest change called regressed or improved; an interval inside ± it is the
    /// same (`2%` or `0.02`).
    #[arg(long, value_name = "T", default_value = "2%", value_parser = parse_fraction)]
    pub threshold: f64,
    /// Leave the mouse to the terminal (text selection) instead of focusing panes.
    #[arg(long)]
    pub no_mouse: bool,
}

/// `benchtop export`: the session and the formats.
#[derive(Debug, Clone, Args)]
pub struct ExportArgs {
    /// The session or series directory.
    #[arg(value_hint = clap::ValueHint::DirPath)]
    pub dir: PathBuf,
    /// What to write; repeat or separate with commas [default: all of them].
    #[arg(long, value_enum, value_delimiter = ',')]
    pub format: Vec<ExportFormat>,
    /// Where the files go [default: the session directory].
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Only this time range of the run, from its per-interval stacks (A..B, ..B, A..,
    /// last:D): the stack formats (speedscope, pprof), named after the range
    /// (`cpu.10s-20s.speedscope.json`, `profile.10s-20s.pb.gz`).
    #[arg(long, value_name = "RANGE")]
    pub range: Option<benchtop_sessions::range::RangeSpec>,
    /// `--otlp ENDPOINT`: send the session (every run of a series) to an OpenTelemetry
    /// Collector as OTLP profiles and metrics with its original times, instead of
    /// writing files.
    #[command(flatten)]
    pub otlp: Box<crate::otlp::OtlpArgs>,
}

/// The formats of `benchtop export`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ExportFormat {
    /// latency.hgrm (`latency-METRIC.hgrm` with several metrics): percentile
    /// distribution, milliseconds.
    Hgrm,
    /// cpu.speedscope.json and offcpu.speedscope.json, for <https://www.speedscope.app>.
    Speedscope,
    /// summary.md: the run and its figures as a Markdown table.
    SummaryMd,
    /// summary.csv: section,figure,value,unit.
    SummaryCsv,
    /// profile.pb.gz: on- and off-CPU stacks as a pprof profile with labels (workload,
    /// parameters, host, process, thread), for `go tool pprof`, Pyroscope and Parca.
    Pprof,
    /// latency.svg: the whole run's latency by percentile, one line per metric.
    LatencySvg,
    /// curves.svg, for a series that sweeps parameters: each result figure across the
    /// points, a line per value of the second swept parameter, and latency against
    /// throughput.
    Curves,
    /// profile.json.gz: the Firefox Profiler's processed format (profiler.firefox.com):
    /// a track per thread with its samples over time (placed within their report
    /// intervals), off-CPU tracks, markers for the run, its phases and warnings, and
    /// RSS and throughput counters. Only when asked for; a session's, not a series'.
    Firefox,
}

/// `--above`: `p99`, or a latency such as `5ms`.
fn parse_above(text: &str) -> Result<benchtop_sessions::range::SlowThreshold, String> {
    use benchtop_sessions::range::SlowThreshold;
    if text.eq_ignore_ascii_case("p99") {
        return Ok(SlowThreshold::RunP99);
    }
    humantime::parse_duration(text)
        .map(|d| SlowThreshold::Above(d.as_nanos().min(u128::from(u64::MAX)) as u64))
        .map_err(|e| format!("{text:?} is neither p99 nor a latency (5ms, 250us): {e}"))
}

/// `2%` or `0.02`.
fn parse_fraction(text: &str) -> Result<f64, String> {
    let (number, scale) = match text.trim().strip_suffix('%') {
        Some(n) => (n, 100.0),
        None => (text.trim(), 1.0),
    };
    let v: f64 = number
        .parse()
        .map_err(|_| format!("{text:?} is not a fraction (try 2% or 0.02)"))?;
    let v = v / scale;
    if !(0.0..1.0).contains(&v) {
        return Err(format!("{text} is out of range: between 0% and 100%"));
    }
    Ok(v)
}

/// `benchtop attach`: the process and how to record it.
#[derive(Debug, Args)]
pub struct AttachArgs {
    /// The process to profile.
    #[arg(value_name = "PID", value_parser = clap::value_parser!(u32).range(1..),
          required_unless_present = "pid_flag", conflicts_with = "pid_flag")]
    pub pid: Option<u32>,
    /// The process to profile, as perf's `-p` names it.
    #[arg(short = 'p', long = "pid", value_name = "PID", id = "pid_flag",
          value_parser = clap::value_parser!(u32).range(1..))]
    pub pid_flag: Option<u32>,
    /// How to record.
    #[command(flatten)]
    pub record: RecordArgs,
}

/// `benchtop reap`: which orphans to end, and how.
#[derive(Debug, Clone, Args)]
pub struct ReapArgs {
    /// List the orphans, signal nothing.
    #[arg(long, short = 'n')]
    pub dry_run: bool,
    /// The first signal: TERM (then KILL after the grace period) or KILL at once.
    #[arg(long, value_enum, ignore_case = true, default_value_t = ReapSignalArg::Term)]
    pub signal: ReapSignalArg,
    /// How long a process gets to exit after SIGTERM before SIGKILL.
    #[arg(long, value_name = "D", default_value = "5s", value_parser = parse_duration)]
    pub grace: Duration,
    /// Only the processes of this session (the `id` in its session.json).
    #[arg(long, value_name = "ID", value_parser = Utf8Text)]
    pub session: Option<String>,
    /// Also end other users' processes (as root). Without it they are listed and left
    /// alone.
    #[arg(long)]
    pub all_users: bool,
}

/// The first signal `reap` sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ReapSignalArg {
    /// SIGTERM, then SIGKILL after the grace period.
    #[value(alias = "sigterm")]
    Term,
    /// SIGKILL at once.
    #[value(alias = "sigkill")]
    Kill,
}

/// Options of a recording, shared by every workload.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Recording options")]
pub struct RecordArgs {
    /// For a command after `--`: set the environment that makes JIT runtimes name their
    /// generated code (and keep frame pointers through it), so that their frames are
    /// read: `PYTHONPERFSUPPORT=1` (CPython 3.12+), `--perf-basic-prof
    /// --interpreted-frames-native-stack` appended to `NODE_OPTIONS`, and
    /// `-XX:+PreserveFramePointer -XX:+UnlockDiagnosticVMOptions -XX:+DumpPerfMapAtExit`
    /// appended to `JAVA_TOOL_OPTIONS`. Only the command's environment changes.
    #[arg(long, global = true)]
    pub jit: bool,
    /// Session directory to create [default: ./sessions/DATE-TIME-WORKLOAD].
    #[arg(long, short = 'o', global = true, value_name = "DIR")]
    pub record: Option<PathBuf>,
    /// A label kept in session.json (series.json for a series), KEY=VALUE, repeatable:
    /// `history --order-by KEY` orders the points of a history by it (e.g. `--label
    /// commit=$(git rev-parse HEAD) --label branch=main`). The git commit checked out
    /// where benchtop runs, and its date, are kept without asking.
    #[arg(long = "label", global = true, value_name = "KEY=VALUE", value_parser = parse_label)]
    pub labels: Vec<(String, String)>,
    /// Stop the workload after this long (e.g. 10s, 2m) [default: until it finishes].
    #[arg(long, global = true, value_name = "D", value_parser = parse_duration)]
    pub duration: Option<Duration>,
    /// Sampling frequency per CPU, in Hz (at most 10000: beyond that the sampling itself
    /// takes the CPU from the workload; perf's own default is 4000).
    #[arg(long, short = 'F', global = true, value_name = "HZ", default_value_t = 999,
          value_parser = clap::value_parser!(u64).range(1..=MAX_FREQUENCY_HZ))]
    pub frequency: u64,
    /// Interval of the workload's reports and the monitors (100ms to 1day, whole
    /// milliseconds).
    #[arg(long, global = true, value_name = "D", default_value = "1s", value_parser = parse_interval)]
    pub interval: Duration,
    /// Which stacks to sample, a comma-separated set of kinds: `cpu` (on-CPU, driven by
    /// --event), `offcpu` (where threads block, weighted by the time blocked), `mem` (where
    /// resident memory grew: page faults, one in --mem-period, weighted in bytes), `waits`
    /// (blocked time by what woke it: each blocked stack, `— woken by —`, the waker's
    /// thread and stack; brings offcpu with it; needs the sched:sched_waking tracepoint,
    /// so root or CAP_PERFMON, and is never part of an alias); `both` is cpu,offcpu, `all`
    /// the three of cpu, offcpu and mem, `none` nothing (e.g. `--profile cpu,mem`).
    /// Off-CPU stacks need kernel sampling (root, CAP_PERFMON or perf_event_paranoid <= 1);
    /// without it blocked time is recorded per thread, without stacks, and page faults
    /// taken inside system calls are missed; the session says why. A built-in worker's
    /// allocation profiles (alloc, live) follow --alloc-sample whatever --profile says:
    /// `--profile none` still writes them.
    #[arg(long, global = true, value_name = "KINDS", default_value = "both",
          value_parser = parse_profile)]
    pub profile: KindSet,
    /// Put the thread name under the process name in every stack (process;thread;…),
    /// instead of merging the threads of a process.
    #[arg(long, global = true)]
    pub per_thread: bool,
    /// The event that drives on-CPU sampling: `auto` is hardware cycles where the machine
    /// has a PMU and the software cpu-clock elsewhere (VMs). Compare sessions sampled on
    /// the same event.
    #[arg(long, global = true, value_enum, default_value_t = PerfEvent::Auto)]
    pub event: PerfEvent,
    /// How frames are named: `inlined` reads DWARF and expands inlined functions into
    /// frames of their own; `names` reads ELF symbol tables only (cheaper on very large
    /// binaries, no inlined frames). Either reads the symbol table of a stripped file's
    /// separate debug file (see --debug-dir). Compare sessions symbolized the same way.
    #[arg(long, global = true, value_enum, default_value_t = Symbols::Inlined)]
    pub symbols: Symbols,
    /// A directory of separate debug files, searched before /usr/lib/debug and
    /// /lib/debug for files without a symbol table of their own: by build id
    /// (DIR/.build-id/xx/yyyy.debug) and by debug link (DIR/NAME, DIR/<the file's
    /// directory>/NAME), as perf's --symfs and samply's --symbol-dir. Repeatable.
    #[arg(long = "debug-dir", global = true, value_name = "DIR")]
    pub debug_dirs: Vec<PathBuf>,
    /// How user stacks are walked: `fp` follows frame pointers (cheapest; stacks cut
    /// short in code built without them), `dwarf` unwinds a copy of each sample's stack
    /// with each module's .eh_frame, `auto` picks per module (frame pointers where kept,
    /// .eh_frame elsewhere) and copies stacks like `dwarf` [default: auto; fp for the
    /// built-in workloads, which keep frame pointers, unless --profile is mem or all or
    /// udp-echo runs on DPDK's libraries, --backend dpdk]. Compare sessions unwound the
    /// same way.
    #[arg(long, global = true, value_enum)]
    pub unwind: Option<Unwind>,
    /// Bytes of user stack copied with each sample by `--unwind auto|dwarf` (perf's
    /// default; at most 65536). Deeper stacks end in `[truncated: stack copy too small]`.
    #[arg(long, global = true, value_name = "BYTES", default_value_t = 8192,
          value_parser = clap::value_parser!(u32).range(8..=65536))]
    pub stack_size: u32,
    /// Take an off-CPU stack at one context switch in N (each then stands for N, its
    /// blocked time scaled by N): for programs switching tens of thousands of times a
    /// second, where a stack copy per switch costs hundreds of MB/s.
    #[arg(long, global = true, value_name = "N", default_value_t = 1,
          value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub offcpu_stack_every: u32,
    /// With `--profile waits`: take the waker's stack at one wake-up in N. Every wake-up
    /// is still recorded, without its stack; a wait whose waker's stack was taken stands
    /// for N (its time scaled by N), and the others stay in the off-CPU profile only.
    /// For programs waking tens of thousands of times a second.
    #[arg(long, global = true, value_name = "N", default_value_t = 1,
          value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub waker_stack_every: u32,
    /// With `--profile mem|all`: sample one page fault in N (each sample weighs N pages).
    /// The default, 128 (512 KiB per sample with 4 KiB pages), costs no more than
    /// `perf record -e page-faults -g`; 1 records every fault and loses samples at high
    /// fault rates when stacks are copied.
    #[arg(long, global = true, value_name = "N", default_value_t = benchtop_profilers::DEFAULT_MEM_PERIOD,
          value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub mem_period: u64,
    /// A built-in worker samples the stack of about one allocation every BYTES it
    /// allocates (at random, as jemalloc and tcmalloc do: 512 KiB by default), each kept
    /// until freed: alloc.folded, live.folded and live-end.folded. 0 samples no stacks
    /// (the allocation counters stay).
    #[arg(long, global = true, value_name = "BYTES", default_value_t = 524_288)]
    pub alloc_sample: u64,
    /// Keep every on-CPU sample with its own time, thread and stack in stacks.jsonl (at
    /// most 20 million a run), so that `export --format firefox` places samples at their
    /// real times instead of spreading them over their report interval.
    #[arg(long, global = true)]
    pub keep_samples: bool,
    /// Do not show the progress line.
    #[arg(long, short, global = true)]
    pub quiet: bool,
    /// Poll the tree's CPU time, context switches, page faults and threads every
    /// interval only, without the kernel's counting events and thread records: what
    /// sessions held before those existed. For measuring what counting costs
    /// (benches/counting_cost.py), hidden.
    #[arg(long, global = true, hide = true)]
    pub polled_figures: bool,
    /// Watch the run in the live TUI (histograms, resources and flamegraph side by side)
    /// instead of the progress line; the session is recorded the same way. A workload, a
    /// command after `--` or an attached process (whose process CPU, context switches and
    /// samples per second take the place of throughput and latency); `benchtop` alone
    /// opens the TUI's launcher.
    #[arg(long, global = true)]
    pub tui: bool,
    /// In the TUI: a saved session to compare the run with from the start (its stacks and
    /// latency are the baseline that `b` would take).
    #[arg(long, global = true, value_name = "DIR")]
    pub baseline: Option<PathBuf>,
    /// In the TUI: leave the mouse to the terminal (selecting text) instead of clicking
    /// panes and scrolling the flamegraph.
    #[arg(long, global = true)]
    pub no_mouse: bool,
    /// `--otlp` and its options: the run streamed to an OpenTelemetry Collector.
    #[command(flatten)]
    pub otlp: Box<crate::otlp::OtlpArgs>,
}

/// The defaults are the command line's: one source of truth.
impl Default for RecordArgs {
    fn default() -> Self {
        #[derive(Parser)]
        struct Defaults {
            #[command(flatten)]
            record: RecordArgs,
        }
        Defaults::parse_from(["benchtop"]).record
    }
}

/// `--profile`'s set of kinds (benchtop_profile::kinds::KindSet's words).
fn parse_profile(s: &str) -> Result<KindSet, String> {
    s.parse()
        .map_err(|e: benchtop_profile::kinds::UnknownKind| e.to_string())
}

/// How frames are named.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Symbols {
    /// DWARF names, inlined functions as frames of their own.
    Inlined,
    /// ELF symbol-table names only.
    Names,
}

/// The highest `--frequency`. Measured on the ring (2-CPU VM): at 100 kHz the worker
/// starved (messages/s fell from 6 M to nearly 0, millions of samples lost).
pub const MAX_FREQUENCY_HZ: u64 = 10_000;

/// How user stacks are walked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Unwind {
    /// Per module: frame pointers where kept, .eh_frame elsewhere.
    Auto,
    /// Frame pointers only.
    Fp,
    /// .eh_frame (DWARF CFI) everywhere it exists.
    Dwarf,
}

/// The event that drives on-CPU sampling.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PerfEvent {
    /// Hardware cycles where available, else cpu-clock.
    Auto,
    /// The software cpu-clock timer.
    CpuClock,
    /// Hardware CPU cycles (needs a PMU).
    Cycles,
}

/// Text that must be UTF-8: an argument that is not is refused naming its option and
/// showing its bytes escaped (clap's own error names neither).
#[derive(Debug, Clone, Copy)]
struct Utf8Text;

impl clap::builder::TypedValueParser for Utf8Text {
    type Value = String;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<String, clap::Error> {
        value.to_str().map(str::to_owned).ok_or_else(|| {
            let name = arg.map_or_else(|| "the argument".to_owned(), ToString::to_string);
            let shown = value.as_encoded_bytes().escape_ascii().to_string();
            clap::Error::raw(
                clap::error::ErrorKind::InvalidUtf8,
                format!("{name} takes UTF-8 text; \"{shown}\" is not\n"),
            )
            .with_cmd(cmd)
        })
    }
}

/// The longest duration any option takes (`--duration`, `--grace`): a year (365.25 days,
/// humantime's), far beyond
/// any run, and far inside what a clock can add without overflowing.
pub const MAX_DURATION: Duration = Duration::from_secs(31_557_600);
/// The longest `--interval`: a day. The worker takes whole milliseconds of at least
/// [`MIN_INTERVAL`]; longer than a day is no interval a run could show.
pub const MAX_INTERVAL: Duration = Duration::from_secs(24 * 3600);

/// The most characters of a label's key and of its value.
const LABEL_KEY_CHARS: usize = 64;
const LABEL_VALUE_CHARS: usize = 1024;

/// `--label KEY=VALUE`: a key of letters, digits, `.`, `_`, `-` and `/`, and any value
/// without control characters.
fn parse_label(text: &str) -> Result<(String, String), String> {
    let Some((key, value)) = text.split_once('=') else {
        return Err("expected KEY=VALUE (e.g. branch=main)".into());
    };
    let key_ok = key
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '/'));
    if key.is_empty() || !key_ok || key.chars().count() > LABEL_KEY_CHARS {
        return Err(format!(
            "a label's key is 1 to {LABEL_KEY_CHARS} letters, digits, '.', '_', '-' or '/'"
        ));
    }
    if value.chars().any(char::is_control) || value.chars().count() > LABEL_VALUE_CHARS {
        return Err(format!(
            "a label's value is at most {LABEL_VALUE_CHARS} characters, none a control \
             character"
        ));
    }
    Ok((key.to_owned(), value.to_owned()))
}

fn parse_duration(text: &str) -> Result<Duration, String> {
    let d = humantime::parse_duration(text).map_err(|e| format!("{e} (try 10s, 500ms, 2m)"))?;
    if d.is_zero() {
        return Err("must be longer than zero".into());
    }
    if d > MAX_DURATION {
        return Err(format!(
            "longer than the longest allowed, {} (durations run from 1ns to {})",
            humantime::format_duration(MAX_DURATION),
            humantime::format_duration(MAX_DURATION)
        ));
    }
    Ok(d)
}

fn parse_interval(text: &str) -> Result<Duration, String> {
    let range = format!(
        "intervals run from {} to {}, in whole milliseconds",
        humantime::format_duration(MIN_INTERVAL),
        humantime::format_duration(MAX_INTERVAL)
    );
    let d = humantime::parse_duration(text).map_err(|e| format!("{e} ({range})"))?;
    if d < MIN_INTERVAL || d > MAX_INTERVAL {
        return Err(format!("out of range: {range}"));
    }
    if d.subsec_nanos() % 1_000_000 != 0 {
        return Err(format!("not a whole number of milliseconds: {range}"));
    }
    Ok(d)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_command_line_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn record_options_go_after_the_workload_name() {
        let cli = Cli::try_parse_from([
            "benchtop",
            "run",
            "ring",
            "--num-nodes",
            "10",
            "--record",
            "/tmp/x",
            "--duration",
            "2s",
            "--frequency",
            "99",
        ])
        .unwrap();
        let Some(Command::Run(run)) = cli.command else {
            panic!("not a run")
        };
        assert_eq!(run.record.record.as_deref(), Some("/tmp/x".as_ref()));
        assert_eq!(run.record.duration, Some(Duration::from_secs(2)));
        assert_eq!(run.record.frequency, 99);
    }

    #[test]
    fn labels_are_key_value_pairs_and_odd_ones_are_refused() {
        let parse = |args: &[&str]| {
            Cli::parse_with_config(args.iter().copied(), &crate::config::Config::default())
        };
        let cli = parse(&[
            "benchtop",
            "run",
            "ring",
            "--label",
            "branch=main",
            "--label",
            "note=a=b c",
        ])
        .unwrap();
        let Some(Command::Run(run)) = cli.command else {
            panic!("not a run")
        };
        assert_eq!(
            run.record.labels,
            vec![
                ("branch".to_owned(), "main".to_owned()),
                ("note".to_owned(), "a=b c".to_owned())
            ]
        );
        for bad in ["novalue", "=x", "a b=c", "k=\u{1b}[31m"] {
            assert!(
                parse(&["benchtop", "run", "ring", "--label", bad]).is_err(),
                "{bad:?} was taken"
            );
        }
    }

    #[test]
    fn record_options_before_the_workload_name_are_taken_as_after_it() {
        let parse = |args: &[&str]| {
            Cli::parse_with_config(args.iter().copied(), &crate::config::Config::default())
        };
        let cli = parse(&[
            "benchtop",
            "run",
            "--duration",
            "2s",
            "--record",
            "ring",
            "storm",
            "--num-nodes",
            "4",
        ])
        .unwrap();
        let Some(Command::Run(run)) = cli.command else {
            panic!("not a run")
        };
        assert_eq!(run.record.duration, Some(Duration::from_secs(2)));
        // A workload's name as an option's value stays that value.
        assert_eq!(run.record.record.as_deref(), Some("ring".as_ref()));
        assert!(
            matches!(run.workload, Some(Workload::Storm(_))),
            "{:?}",
            run.workload
        );
        // A misspelt name is still refused with the names there are; a command after
        // `--` is left alone.
        let err = parse(&["benchtop", "run", "--duration", "2s", "rnig"])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("unknown workload 'rnig'") && err.contains("'ring'"),
            "{err}"
        );
        let cli = parse(&["benchtop", "run", "--duration", "2s", "--", "ring"]).unwrap();
        let Some(Command::Run(run)) = cli.command else {
            panic!("not a run")
        };
        assert!(run.workload.is_none());
        // Options of the workload itself before its name are its own refusal.
        let err = parse(&["benchtop", "run", "--num-nodes", "4", "ring"])
            .unwrap_err()
            .to_string();
        assert!(err.contains("--num-nodes"), "{err}");
    }

    #[test]
    fn an_unknown_workload_parameter_is_refused_by_name() {
        let err = Cli::try_parse_from(["benchtop", "run", "ring", "--num-nodez", "3"])
            .unwrap_err()
            .to_string();
        assert!(err.contains("--num-nodez"), "{err}");
    }

    #[test]
    fn defaults_are_the_command_line_defaults() {
        let args = RecordArgs::default();
        assert_eq!(args.frequency, 999);
        assert_eq!(args.interval, Duration::from_secs(1));
        assert_eq!((args.profile, args.event), (KindSet::BOTH, PerfEvent::Auto));
        assert!(!args.per_thread);
        assert_eq!(args.symbols, Symbols::Inlined);
        assert!(args.record.is_none() && args.duration.is_none() && !args.quiet);
    }

    #[test]
    fn profile_takes_a_set_of_kinds_with_the_old_words_as_aliases() {
        use benchtop_profile::kinds::Kind;
        let profile = |p: &str| {
            let cli = Cli::try_parse_from(["benchtop", "run", "ring", "--profile", p])?;
            let Some(Command::Run(args)) = cli.command else {
                panic!("not a run")
            };
            Ok::<_, clap::Error>(args.record.profile)
        };
        let cpu_mem = KindSet::of(Kind::Cpu).with(Kind::Mem);
        assert_eq!(profile("cpu,mem").expect("a set"), cpu_mem);
        assert_eq!(profile("mem,cpu").expect("a set"), cpu_mem);
        assert_eq!(profile("both").expect("an alias"), KindSet::BOTH);
        assert_eq!(profile("cpu,offcpu,mem").expect("a set"), KindSet::ALL);
        assert_eq!(profile("none").expect("an alias"), KindSet::NONE);
        let refused = profile("cpu,gpu").expect_err("gpu is no kind").to_string();
        assert!(
            refused.contains("\"gpu\" is not a profile kind"),
            "{refused}"
        );
        assert!(refused.contains("--profile"), "{refused}");
    }

    #[test]
    fn reap_takes_signal_names_in_any_case() {
        for (name, expected) in [
            ("TERM", ReapSignalArg::Term),
            ("kill", ReapSignalArg::Kill),
            ("SIGKILL", ReapSignalArg::Kill),
        ] {
            let cli = Cli::try_parse_from(["benchtop", "reap", "--signal", name]).unwrap();
            let Some(Command::Reap(args)) = cli.command else {
                panic!("not a reap")
            };
            assert_eq!(args.signal, expected);
            assert_eq!(args.grace, Duration::from_secs(5));
        }
        assert!(Cli::try_parse_from(["benchtop", "reap", "--signal", "HUP"]).is_err());
    }

    #[test]
    fn thresholds_read_as_percent_or_fraction() {
        assert_eq!(parse_fraction("2%"), Ok(0.02));
        assert_eq!(parse_fraction("0.05"), Ok(0.05));
        assert!(parse_fraction("150%").is_err());
        assert!(parse_fraction("two").unwrap_err().contains("try 2%"));
    }

    #[test]
    fn intervals_and_durations_beyond_their_range_are_refused_naming_the_flag() {
        for (args, says) in [
            (
                &["run", "ring", "--interval", "584542046090y"][..],
                "intervals run from 100ms to 1day",
            ),
            (&["run", "ring", "--interval", "25h"], "out of range"),
            (&["run", "ring", "--interval", "100500us"], "whole number"),
            (
                &["run", "ring", "--duration", "584542046090y"],
                "1ns to 1year",
            ),
            (
                &["reap", "--grace", "2years"],
                "longer than the longest allowed",
            ),
        ] {
            let err = Cli::try_parse_from(std::iter::once("benchtop").chain(args.iter().copied()))
                .unwrap_err()
                .to_string();
            let flag = args[args.len() - 2];
            assert!(err.contains(flag), "{args:?}: {err}");
            assert!(err.contains(says), "{args:?}: {err}");
        }
        let ok = Cli::try_parse_from(["benchtop", "run", "ring", "--interval", "1day"]);
        assert!(ok.is_ok());
    }

    #[test]
    fn an_interval_below_100ms_is_refused() {
        let err = Cli::try_parse_from(["benchtop", "run", "ring", "--interval", "10ms"])
            .unwrap_err()
            .to_string();
        assert!(err.contains("100ms"), "{err}");
    }
}
