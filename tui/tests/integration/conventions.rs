//! The command line's conventions: perf's short flags, help that separates the workload's
//! parameters from the recording options, a suggestion for a mistyped workload, a config
//! file's defaults.

use benchtop_sessions::store::Session;

use crate::support::{benchtop, succeeded};

#[test]
fn a_mistyped_workload_gets_the_closest_one_and_the_list() {
    let out = benchtop().args(["run", "rng"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("unknown workload 'rng'"), "{stderr}");
    assert!(
        stderr.contains("a similar workload exists: 'ring'"),
        "{stderr}"
    );
    assert!(stderr.contains("workloads: ring, storm"), "{stderr}");
    // Nothing close: the list alone.
    let out = benchtop().args(["run", "frobnicate"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("similar"), "{stderr}");
    assert!(stderr.contains("udp-echo"), "{stderr}");
}

#[test]
fn a_workload_s_help_puts_the_recording_options_under_a_heading_of_their_own() {
    let out = benchtop().args(["run", "ring", "--help"]).output().unwrap();
    let help = String::from_utf8_lossy(&out.stdout);
    let (workload, recording) = help.split_once("Recording options:").unwrap_or_default();
    assert!(
        workload.contains("--num-nodes") && !workload.contains("--frequency"),
        "{help}"
    );
    assert!(
        recording.contains("-F, --frequency") && recording.contains("-o, --record"),
        "{help}"
    );
}

#[test]
fn perf_s_short_flags_record_where_and_how_often_they_say() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("s");
    succeeded(
        benchtop()
            .args(["run", "ring", "--num-rounds", "50", "-q", "-F", "499", "-o"])
            .arg(&dir),
    );
    let session = Session::load(&dir).unwrap();
    assert_eq!(session.meta.sampling.frequency_hz, 499);
    // attach takes the pid as perf does, with -p, and refuses a pid given twice.
    let out = benchtop()
        .args(["attach", "-p", "2147483646"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && !stderr.contains("required"),
        "{stderr}"
    );
    let out = benchtop()
        .args(["attach", "1", "-p", "1"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn a_config_file_sets_the_defaults_and_the_command_line_wins() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("xdg");
    std::fs::create_dir_all(home.join("benchtop")).unwrap();
    std::fs::write(
        home.join("benchtop/config.toml"),
        "[record]\nfrequency = 299\nprofile = \"cpu\"\ninterval = \"250ms\"\n",
    )
    .unwrap();
    let record = |name: &str, extra: &[&str]| {
        let dir = tmp.path().join(name);
        succeeded(
            benchtop()
                .env("XDG_CONFIG_HOME", &home)
                .args(["run", "ring", "--num-rounds", "50", "-q", "-o"])
                .arg(&dir)
                .args(extra),
        );
        Session::load(&dir).unwrap()
    };
    let from_config = record("config", &[]);
    assert_eq!(from_config.meta.sampling.frequency_hz, 299);
    assert_eq!(from_config.meta.sampling.profile, "cpu");
    let overridden = record("flags", &["-F", "401", "--profile", "both"]);
    assert_eq!(overridden.meta.sampling.frequency_hz, 401);
    assert_eq!(overridden.meta.sampling.profile, "both");
    // The help shows the config's default.
    let out = benchtop()
        .env("XDG_CONFIG_HOME", &home)
        .args(["run", "ring", "--help"])
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("[default: 299]"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

#[test]
fn a_config_file_that_is_wrong_is_named_before_anything_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("config.toml");
    let fifo = tmp.path().join("fifo.toml");
    let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: c is a NUL-terminated path that lives across the call.
    let r = unsafe { libc::mkfifo(c.as_ptr(), 0o600) };
    assert_eq!(r, 0, "mkfifo: {}", std::io::Error::last_os_error());
    for (text, needle) in [
        (
            Some("[record]\nfrequency = 0\n"),
            "frequency = \"0\": invalid value '0'",
        ),
        (Some("[record]\nfreqency = 99\n"), "no key 'freqency'"),
        (Some("[record]\nper-thread = 3\n"), "per-thread"),
        (Some("[record\n"), "line 1"),
        (None, "not a regular file"),
    ] {
        let path = match text {
            Some(text) => {
                std::fs::write(&file, text).unwrap();
                &file
            }
            None => &fifo,
        };
        let dir = tmp.path().join("never");
        let out = benchtop()
            .env("BENCHTOP_CONFIG", path)
            .args(["run", "ring", "-q", "-o"])
            .arg(&dir)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{text:?}: {stderr}");
        assert!(
            stderr.contains("config file") && stderr.contains(needle),
            "{text:?}: {stderr}"
        );
        assert!(!dir.exists(), "{text:?}: a session was created");
    }
    // Asked for by name and missing: an error too; no config anywhere: the defaults.
    let out = benchtop()
        .env("BENCHTOP_CONFIG", tmp.path().join("missing.toml"))
        .args(["show", "/nonexistent"])
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("missing.toml"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn show_json_carries_the_figures_of_the_text_and_the_text_reads_in_human_units() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("s");
    succeeded(
        benchtop()
            .args([
                "run",
                "ring",
                "--num-rounds",
                "200",
                "-q",
                "--profile",
                "cpu",
                "-o",
            ])
            .arg(&dir),
    );
    let text = benchtop().arg("show").arg(&dir).output().unwrap();
    let text = String::from_utf8(text.stdout).unwrap();
    let json = benchtop()
        .arg("show")
        .arg(&dir)
        .arg("--json")
        .output()
        .unwrap();
    assert!(json.status.success());
    let json: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    // Every figure of the workload's summary, by name, in both; the rate in human units.
    let figures = json["session"]["summary"].as_array().unwrap();
    assert!(!figures.is_empty(), "{json}");
    for f in figures {
        let name = f["name"].as_str().unwrap();
        assert!(text.contains(&format!("  {name}: ")), "{name} in\n{text}");
    }
    let rate = text
        .lines()
        .find(|l| l.contains("messages_per_second:"))
        .unwrap();
    // `266.4 k messages/s`, not `266354.0918… messages/s`.
    let value = rate.split_once(": ").unwrap().1;
    let number = value.split(' ').next().unwrap();
    assert!(
        value.ends_with(" messages/s") && number.chars().filter(char::is_ascii_digit).count() <= 4,
        "{rate}"
    );
    // The latency rows: the same metrics and counts.
    let latency = json["overview"]["latency"].as_array().unwrap();
    assert!(!latency.is_empty(), "{json}");
    for row in latency {
        let (metric, count) = (
            row["metric"].as_str().unwrap(),
            row["count"].as_u64().unwrap(),
        );
        assert!(row["p50_ns"].as_u64().unwrap() <= row["p99_ns"].as_u64().unwrap());
        let line = text
            .lines()
            .find(|l| l.trim_start().starts_with(&format!("{metric} ")))
            .unwrap_or_else(|| panic!("{metric} in\n{text}"));
        assert!(
            line.split_whitespace().nth(1) == Some(&count.to_string()),
            "{line} vs {count}"
        );
    }
    // The hottest frames: the same names (shortened together in the text) with the same
    // shares.
    let hottest = json["overview"]["hottest_frames"].as_array().unwrap();
    let names: Vec<&str> = hottest
        .iter()
        .map(|f| f["frame"].as_str().unwrap())
        .collect();
    let labels = benchtop_sessions::names::short_names(&names, 80);
    for (f, label) in hottest.iter().zip(&labels) {
        let line = format!("{:5.1}%  {label}", f["percent"].as_f64().unwrap());
        assert!(text.contains(&line), "{line} in\n{text}");
    }
}

#[test]
fn an_option_of_another_command_is_named_as_such_and_attach_offers_no_baseline() {
    let out = benchtop()
        .args(["run", "ring", "--threshold", "5%"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("'--threshold' found: it is an option of `benchtop compare`")
            && !stderr.contains("--record"),
        "{stderr}"
    );
    // A misspelling is still clap's own suggestion.
    let out = benchtop()
        .args(["run", "ring", "--frequncy", "5"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("'--frequency'"), "{stderr}");
    let out = benchtop().args(["attach", "--help"]).output().unwrap();
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(
        help.contains("--tui") && !help.contains("--baseline"),
        "{help}"
    );
}
