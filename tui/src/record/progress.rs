//! The live progress line on stderr while a recording runs.

use std::io::IsTerminal;
use std::time::Duration;

use benchtop_record::ProgressFigures;
use benchtop_sessions::units::{human_bytes, human_ns};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// The progress line: an indicatif spinner on a terminal, plain lines otherwise.
#[derive(Debug)]
pub struct Progress {
    bar: Option<ProgressBar>,
    plain: bool,
}

impl Progress {
    /// A progress line on stderr; `quiet` shows nothing.
    pub fn new(workload: &str, quiet: bool) -> Self {
        if quiet {
            return Progress {
                bar: None,
                plain: false,
            };
        }
        if !std::io::stderr().is_terminal() {
            return Progress {
                bar: None,
                plain: true,
            };
        }
        let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
        let style = ProgressStyle::with_template(&format!("{{spinner}} {workload} {{msg}}"))
            .unwrap_or_else(|_| ProgressStyle::default_spinner());
        bar.set_style(style);
        bar.enable_steady_tick(Duration::from_millis(100));
        Progress {
            bar: Some(bar),
            plain: false,
        }
    }

    /// A status message (starting, stopping…).
    pub fn message(&self, text: &str) {
        if let Some(bar) = &self.bar {
            bar.set_message(text.to_owned());
        } else if self.plain {
            eprintln!("benchtop: {text}");
        }
    }

    /// Shows the figures of the latest interval.
    pub fn update(&self, figures: &ProgressFigures) {
        let line = format_figures(figures);
        if let Some(bar) = &self.bar {
            bar.set_message(line);
        } else if self.plain {
            eprintln!("benchtop: {line}");
        }
    }

    /// Removes the line before the final report is printed.
    pub fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

/// The text of the progress line.
pub fn format_figures(f: &ProgressFigures) -> String {
    let mut parts = vec![format!("{:>6.1}s", f.elapsed_s)];
    if let Some((name, rate)) = &f.rate {
        parts.push(format!("{} {name}/s", si(*rate)));
    }
    if let Some((name, p50, p99)) = &f.latency {
        parts.push(format!(
            "{name} p50 {} p99 {}",
            human_ns(*p50 as f64),
            human_ns(*p99 as f64)
        ));
    }
    if let Some(rss) = f.rss_bytes {
        parts.push(format!("RSS {}", human_bytes(rss)));
    }
    if let Some((samples, lost)) = f.samples {
        if lost > 0 {
            parts.push(format!("{samples} samples ({lost} records lost)"));
        } else {
            parts.push(format!("{samples} samples"));
        }
    }
    parts.join("  ")
}

/// 1234567 → "1.23M".
pub fn si(value: f64) -> String {
    let (scaled, suffix) = if value >= 1e9 {
        (value / 1e9, "G")
    } else if value >= 1e6 {
        (value / 1e6, "M")
    } else if value >= 1e3 {
        (value / 1e3, "k")
    } else {
        (value, "")
    };
    format!("{scaled:.2}{suffix}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_progress_line_shows_rate_latency_rss_and_samples() {
        let line = format_figures(&ProgressFigures {
            elapsed_s: 3.25,
            rate: Some(("messages".into(), 3_100_000.0)),
            latency: Some(("lap".into(), 1_200_000, 2_300_000)),
            rss_bytes: Some(14 << 20),
            samples: Some((3012, 4)),
        });
        assert_eq!(
            line,
            "   3.2s  3.10M messages/s  lap p50 1.20 ms p99 2.30 ms  RSS 14.0 MiB  3012 samples (4 records lost)"
        );
    }

    #[test]
    fn rates_scale_with_si_prefixes() {
        assert_eq!(si(999.0), "999.00");
        assert_eq!(si(3_100_000.0), "3.10M");
    }
}
