//! `benchtop history`'s arguments.

use std::path::PathBuf;

use clap::Args;

use super::parse_fraction;

/// `benchtop history`: the directories and how to judge them.
#[derive(Debug, Clone, Args)]
pub struct HistoryArgs {
    /// Directories holding sessions and series, at any depth.
    #[arg(value_name = "DIR", required = true)]
    pub dirs: Vec<PathBuf>,
    /// Order the points by this label (`run --label KEY=VALUE`); recordings without it
    /// are left out. Values that are all numbers are ordered as numbers.
    #[arg(long, value_name = "LABEL")]
    pub order_by: Option<String>,
    /// Only this figure (repeatable) [default: every figure].
    #[arg(long, value_name = "NAME")]
    pub figure: Vec<String>,
    /// Exit with status 1 when this figure's newest point regressed beyond the threshold
    /// against the points since its last change point (repeatable).
    #[arg(long, value_name = "FIGURE")]
    pub fail_on: Vec<String>,
    /// The smallest change called regressed or improved (`2%` or `0.02`).
    #[arg(long, value_name = "T", default_value = "2%", value_parser = parse_fraction)]
    pub threshold: f64,
    /// Print JSON instead of text.
    #[arg(long, conflicts_with = "markdown")]
    pub json: bool,
    /// Print a Markdown table a history (for pull request comments).
    #[arg(long)]
    pub markdown: bool,
    /// Where the differential flamegraphs of the change points go (made when the first
    /// is written): for each change point and profile, `p<first>-p<at>-p<last>-diff-
    /// <profile>` .folded, .svg and -negated.svg [default: ./history-<first DIR's name>].
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Read no profiles: what moved at a change point lists the figures only, and no
    /// file is written.
    #[arg(long)]
    pub no_profiles: bool,
}
