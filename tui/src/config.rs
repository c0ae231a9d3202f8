//! The config file: defaults for the recording options, the command line winning.
//!
//! `$BENCHTOP_CONFIG` when set, else `$XDG_CONFIG_HOME/benchtop/config.toml`, else
//! `~/.config/benchtop/config.toml`. A missing file is no config; anything else wrong
//! with it (not a regular file, too large, not UTF-8, not TOML, an unknown key, a value
//! the option refuses) is an error naming the file and the key, before anything runs.
//!
//! ```toml
//! [record]
//! frequency = 499        # the keys are run's and attach's long options
//! interval = "250ms"
//! profile = "cpu"
//! unwind = "dwarf"
//! stack-size = 16384
//! otlp = "http://localhost:4317"   # stream every run to an OpenTelemetry Collector
//! otlp-headers = "authorization=Bearer%20…"
//!
//! [tui]
//! flame-short-names = true   # the flamegraph's names shortened (`w` toggles)
//! flame-hide = true          # frames matching flame-hide-frames merged into callers (`x`)
//! flame-hide-frames = ["std::rt::*", "tokio::runtime::task::*"]  # replaces the defaults
//! ```
//!
//! Values go through the option's own parser, so the config accepts exactly what the
//! command line does and says the same when it refuses.

use std::io::Read;
use std::path::{Path, PathBuf};

use benchtop_sessions::escape::EscapedPath;

/// The largest config file read: a config is a few lines; more is not one.
pub const MAX_BYTES: u64 = 64 * 1024;

/// The recording options a config may set, by their long names. The per-run ones
/// (`--record`, `--duration`, `--baseline`, `--tui`) stay on the command line.
pub const RECORD_KEYS: &[&str] = &[
    "frequency",
    "interval",
    "profile",
    "event",
    "symbols",
    "debug-dir",
    "unwind",
    "stack-size",
    "offcpu-stack-every",
    "mem-period",
    "alloc-sample",
    "per-thread",
    "quiet",
    "no-mouse",
    "otlp",
    "otlp-protocol",
    "otlp-headers",
    "otlp-ca",
];

/// The keys of `[tui]`: how the TUI shows things.
pub const TUI_KEYS: &[&str] = &["flame-short-names", "flame-hide", "flame-hide-frames"];

/// A config file that was read: its path, `[record]`'s values as the command line
/// would spell them, and `[tui]`'s.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Config {
    /// Where it came from (for messages); `None` for the empty config.
    pub path: Option<PathBuf>,
    /// `(long option, value)`, in the file's order.
    pub record: Vec<(String, String)>,
    /// `[tui]`: what it sets; the rest keeps the built-in defaults.
    pub tui: TuiConfig,
}

/// The `[tui]` section: each key, when the file sets it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TuiConfig {
    /// `flame-short-names`: the flamegraph starts with short names (default true).
    pub flame_short_names: Option<bool>,
    /// `flame-hide`: the flamegraph starts with the frames of `flame-hide-frames` merged
    /// into their callers (default true).
    pub flame_hide: Option<bool>,
    /// `flame-hide-frames`: the patterns of the frames to hide, in place of the default
    /// set ([`crate::state::flame::tree::DEFAULT_HIDDEN`]); `*` matches any characters.
    pub flame_hide_frames: Option<Vec<String>>,
}

impl TuiConfig {
    /// The flamegraph's options: the built-in ones with what the file sets.
    pub fn flame_options(&self) -> crate::state::flame::FlameOptions {
        let mut options = crate::state::flame::FlameOptions::default();
        if let Some(on) = self.flame_short_names {
            options.short_names = on;
        }
        if let Some(on) = self.flame_hide {
            options.hide = on;
        }
        if let Some(patterns) = &self.flame_hide_frames {
            options.hidden = patterns.clone();
        }
        options
    }

    fn parse(table: toml::Table) -> Result<TuiConfig, String> {
        use crate::state::flame::tree::{MAX_PATTERN_LEN, MAX_PATTERNS};
        let mut tui = TuiConfig::default();
        for (key, value) in table {
            let kind = value.type_str();
            match (key.as_str(), value) {
                ("flame-short-names", toml::Value::Boolean(b)) => tui.flame_short_names = Some(b),
                ("flame-hide", toml::Value::Boolean(b)) => tui.flame_hide = Some(b),
                ("flame-hide-frames", toml::Value::Array(items)) => {
                    if items.len() > MAX_PATTERNS {
                        return Err(format!(
                            "[tui] flame-hide-frames: {} patterns, more than the {MAX_PATTERNS} it may have",
                            items.len()
                        ));
                    }
                    let mut patterns = Vec::with_capacity(items.len());
                    for item in items {
                        match item {
                            toml::Value::String(p)
                                if !p.is_empty() && p.len() <= MAX_PATTERN_LEN =>
                            {
                                patterns.push(p)
                            }
                            toml::Value::String(p) => {
                                return Err(format!(
                                    "[tui] flame-hide-frames: a pattern of {} bytes (1 to {MAX_PATTERN_LEN})",
                                    p.len()
                                ));
                            }
                            other => {
                                return Err(format!(
                                    "[tui] flame-hide-frames: a {} is no pattern (patterns are strings)",
                                    other.type_str()
                                ));
                            }
                        }
                    }
                    tui.flame_hide_frames = Some(patterns);
                }
                ("flame-short-names" | "flame-hide", _) => {
                    return Err(format!("[tui] {key}: a {kind}, not true or false"));
                }
                ("flame-hide-frames", _) => {
                    return Err(format!("[tui] {key}: a {kind}, not a list of patterns"));
                }
                _ => {
                    return Err(format!(
                        "[tui] has no key '{key}' (it may set: {})",
                        TUI_KEYS.join(", ")
                    ));
                }
            }
        }
        Ok(tui)
    }
}

/// Why a config file was refused.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// It could not be opened or read.
    #[error("config file {}: {source}", EscapedPath(.path))]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// Something other than a regular file (a FIFO would hang, a directory is a mistake).
    #[error("config file {}: not a regular file", EscapedPath(.path))]
    NotAFile {
        /// The file.
        path: PathBuf,
    },
    /// Larger than [`MAX_BYTES`].
    #[error("config file {}: {size} bytes, more than the {MAX_BYTES} a config may have", EscapedPath(.path))]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// Its size.
        size: u64,
    },
    /// Not UTF-8, not TOML, or a key or value it cannot have.
    #[error("config file {}: {message}", EscapedPath(.path))]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong, naming the key.
        message: String,
    },
}

impl Config {
    /// The config file's path from the environment; `None` when there is no place for one
    /// (no `$BENCHTOP_CONFIG`, `$XDG_CONFIG_HOME` or `$HOME`).
    pub fn default_path() -> Option<PathBuf> {
        let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
        if let Some(explicit) = var("BENCHTOP_CONFIG") {
            return Some(PathBuf::from(explicit));
        }
        let base = var("XDG_CONFIG_HOME")
            .map(PathBuf::from)
            .or_else(|| var("HOME").map(|home| Path::new(&home).join(".config")))?;
        Some(base.join("benchtop").join("config.toml"))
    }

    /// Reads the config at [`Config::default_path`]; the empty config when there is none.
    /// A `$BENCHTOP_CONFIG` that names a missing file is an error: it was asked for.
    pub fn load() -> Result<Config, ConfigError> {
        let Some(path) = Config::default_path() else {
            return Ok(Config::default());
        };
        let explicit = std::env::var_os("BENCHTOP_CONFIG").is_some_and(|v| !v.is_empty());
        match Config::read(&path) {
            Err(ConfigError::Io { source, .. })
                if !explicit && source.kind() == std::io::ErrorKind::NotFound =>
            {
                Ok(Config::default())
            }
            other => other,
        }
    }

    /// Reads and checks the config at `path` (symbolic links followed: configs are often
    /// links into a dotfiles repository).
    pub fn read(path: &Path) -> Result<Config, ConfigError> {
        use std::os::unix::fs::OpenOptionsExt as _;
        let io = |source| ConfigError::Io {
            path: path.to_owned(),
            source,
        };
        // O_NONBLOCK: opening a FIFO must not wait for a writer; it is refused below.
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
            .open(path)
            .map_err(io)?;
        let meta = file.metadata().map_err(io)?;
        if !meta.is_file() {
            return Err(ConfigError::NotAFile {
                path: path.to_owned(),
            });
        }
        if meta.len() > MAX_BYTES {
            return Err(ConfigError::TooLarge {
                path: path.to_owned(),
                size: meta.len(),
            });
        }
        let mut bytes = Vec::new();
        file.take(MAX_BYTES + 1)
            .read_to_end(&mut bytes)
            .map_err(io)?;
        let invalid = |message: String| ConfigError::Invalid {
            path: path.to_owned(),
            message,
        };
        let text = String::from_utf8(bytes).map_err(|e| {
            invalid(format!(
                "not UTF-8 (byte {} is not)",
                e.utf8_error().valid_up_to()
            ))
        })?;
        let mut config = Config::parse(&text).map_err(invalid)?;
        config.path = Some(path.to_owned());
        Ok(config)
    }

    /// Parses a config's text; the message names the key or the line.
    pub fn parse(text: &str) -> Result<Config, String> {
        let table: toml::Table = text.parse().map_err(|e: toml::de::Error| {
            // toml's message spans several lines with a caret; one line is enough here.
            let mut message = e.message().to_owned();
            if let Some(span) = e.span() {
                let line = text[..span.start.min(text.len())].matches('\n').count() + 1;
                message = format!("line {line}: {message}");
            }
            message
        })?;
        let mut config = Config::default();
        for (section, value) in table {
            match (section.as_str(), value) {
                ("record", toml::Value::Table(record)) => {
                    for (key, value) in record {
                        if !RECORD_KEYS.contains(&key.as_str()) {
                            return Err(format!(
                                "[record] has no key '{key}' (it may set: {})",
                                RECORD_KEYS.join(", ")
                            ));
                        }
                        let text = match value {
                            toml::Value::String(s) => s,
                            toml::Value::Integer(i) => i.to_string(),
                            toml::Value::Boolean(b) => b.to_string(),
                            other => {
                                return Err(format!(
                                    "[record] {key}: a {} is no value of an option",
                                    other.type_str()
                                ));
                            }
                        };
                        config.record.push((key, text));
                    }
                }
                ("record", other) => {
                    return Err(format!(
                        "'record' is a {}, not a [record] table",
                        other.type_str()
                    ));
                }
                ("tui", toml::Value::Table(tui)) => config.tui = TuiConfig::parse(tui)?,
                ("tui", other) => {
                    return Err(format!(
                        "'tui' is a {}, not a [tui] table",
                        other.type_str()
                    ));
                }
                (other, _) => {
                    return Err(format!(
                        "unknown section '{other}' (there are: [record], [tui])"
                    ));
                }
            }
        }
        Ok(config)
    }

    /// `command` with the config's values as the defaults of `run`'s and `attach`'s
    /// options (and, through clap's global arguments, of every workload's), each value
    /// checked by the option's own parser first.
    pub fn apply(&self, mut command: clap::Command) -> Result<clap::Command, ConfigError> {
        let path = self
            .path
            .clone()
            .unwrap_or_else(|| PathBuf::from("(config)"));
        let invalid = |message: String| ConfigError::Invalid {
            path: path.clone(),
            message,
        };
        // Each value is checked by parsing it as `run --key=value` on the unchanged
        // command line, so the config refuses what the command line refuses, in its words.
        for (key, value) in &self.record {
            let switch = matches!(value.as_str(), "true" | "false")
                && command
                    .find_subcommand("run")
                    .and_then(|run| run.get_arguments().find(|a| a.get_long() == Some(key)))
                    .is_some_and(|a| !a.get_action().takes_values());
            let given = if switch {
                format!("--{key}")
            } else {
                format!("--{key}={value}")
            };
            if let Err(e) = command
                .clone()
                .try_get_matches_from(["benchtop", "run", &given])
            {
                let reason = e.to_string();
                let reason = reason.lines().next().unwrap_or("");
                let reason = reason.trim_start_matches("error: ");
                return Err(invalid(format!("[record] {key} = {value:?}: {reason}")));
            }
        }
        for sub in ["run", "attach"] {
            if command.find_subcommand(sub).is_none() {
                continue;
            }
            command = command.mut_subcommand(sub, |mut sub_command| {
                for (key, value) in &self.record {
                    let Some(arg) = sub_command
                        .get_arguments()
                        .find(|a| a.get_long() == Some(key.as_str()))
                    else {
                        continue;
                    };
                    let id = arg.get_id().clone();
                    if arg.get_action().takes_values() {
                        let value = value.clone();
                        sub_command = sub_command.mut_arg(&id, |a| a.default_value(value));
                    } else if value == "true" {
                        // A switch the config turns on by default (checked above to be
                        // true or false; false is its default already).
                        sub_command = sub_command.mut_arg(&id, |a| a.default_value("true"));
                    }
                }
                sub_command
            });
        }
        Ok(command)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_and_values_are_read_as_the_command_line_spells_them() {
        let config = Config::parse(
            "# mine\n[record]\nfrequency = 499\ninterval = \"250ms\"\nper-thread = true\n",
        )
        .unwrap();
        assert_eq!(
            config.record,
            [
                ("frequency".to_owned(), "499".to_owned()),
                ("interval".to_owned(), "250ms".to_owned()),
                ("per-thread".to_owned(), "true".to_owned()),
            ]
        );
    }

    #[test]
    fn unknown_keys_sections_and_kinds_are_named() {
        for (text, needle) in [
            ("[record]\nfreqency = 1\n", "no key 'freqency'"),
            ("[recrod]\n", "unknown section 'recrod'"),
            ("record = 3\n", "not a [record] table"),
            ("[record]\nfrequency = [1]\n", "frequency: a array"),
            ("[record]\nfrequency = \n", "line 2"),
        ] {
            let err = Config::parse(text).unwrap_err();
            assert!(err.contains(needle), "{text:?}: {err}");
        }
    }

    #[test]
    fn tui_keys_set_the_flamegraph_s_options_and_wrong_ones_are_named() {
        let config = Config::parse(
            "[tui]\nflame-short-names = false\nflame-hide-frames = [\"std::*\", \"a*b\"]\n",
        )
        .unwrap();
        let options = config.tui.flame_options();
        assert!(!options.short_names);
        assert!(options.hide, "not set: the default");
        assert_eq!(options.hidden, ["std::*", "a*b"]);
        assert_eq!(
            Config::default().tui.flame_options(),
            crate::state::flame::FlameOptions::default()
        );
        for (text, needle) in [
            ("[tui]\nflame-hide = 1\n", "flame-hide: a integer"),
            ("[tui]\nflame-hide-frames = \"x\"\n", "not a list"),
            ("[tui]\nflame-hide-frames = [1]\n", "no pattern"),
            ("[tui]\nflame-hide-frames = [\"\"]\n", "0 bytes"),
            ("[tui]\ncolour = true\n", "no key 'colour'"),
            ("tui = 1\n", "not a [tui] table"),
        ] {
            let err = Config::parse(text).unwrap_err();
            assert!(err.contains(needle), "{text:?}: {err}");
        }
    }

    #[test]
    fn every_key_is_an_option_of_run_and_attach() {
        use clap::CommandFactory as _;
        let mut command = crate::Cli::command();
        command.build();
        for sub in ["run", "attach"] {
            let sub = command.find_subcommand(sub).unwrap();
            for key in RECORD_KEYS {
                assert!(
                    sub.get_arguments().any(|a| a.get_long() == Some(key)),
                    "{sub:?} has no --{key}"
                );
            }
        }
    }

    #[test]
    fn the_launcher_and_every_workload_start_from_the_config_s_defaults() {
        let config = Config::parse("[record]\nfrequency = 123\nper-thread = true\n").unwrap();
        let cli = crate::Cli::parse_with_config(["benchtop"], &config).unwrap();
        assert_eq!(
            (cli.defaults.frequency, cli.defaults.per_thread),
            (123, true)
        );
        let cli = crate::Cli::parse_with_config(["benchtop", "run", "storm"], &config).unwrap();
        let Some(crate::cli::Command::Run(run)) = cli.command else {
            panic!("not a run")
        };
        assert_eq!((run.record.frequency, run.record.per_thread), (123, true));
        let cli =
            crate::Cli::parse_with_config(["benchtop", "attach", "-p", "1", "-F", "7"], &config)
                .unwrap();
        let Some(crate::cli::Command::Attach(attach)) = cli.command else {
            panic!("not an attach")
        };
        assert_eq!(attach.record.frequency, 7);
        // No config: the built-in defaults.
        let cli = crate::Cli::parse_with_config(["benchtop"], &Config::default()).unwrap();
        assert_eq!(cli.defaults.frequency, 999);
    }
}
