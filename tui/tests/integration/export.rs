//! `benchtop export DIR`: the files other tools read, from a session written with known
//! content.

use crate::compare::session;
use crate::support::{benchtop, succeeded};
use benchtop_sessions::Kind;

#[test]
fn export_writes_hgrm_speedscope_and_the_summary_into_the_session() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("s");
    session(&dir, "tell", 1e6, "AskActor::poll", 10);
    let output = benchtop().arg("export").arg(&dir).output().unwrap();
    let listed = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{listed}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    for file in [
        "latency.hgrm",
        "cpu.speedscope.json",
        "summary.md",
        "summary.csv",
        "profile.pb.gz",
        "latency.svg",
    ] {
        assert!(listed.contains(file), "{file} not listed:\n{listed}");
    }
    assert!(
        !dir.join("offcpu.speedscope.json").exists(),
        "no off-CPU stacks to export"
    );

    // 20 intervals of 100 laps: the distribution ends at 100 % of 2000 values.
    let hgrm = std::fs::read_to_string(dir.join("latency.hgrm")).unwrap();
    let last = hgrm
        .lines()
        .rfind(|l| !l.starts_with('#') && !l.trim().is_empty())
        .unwrap();
    let cols: Vec<&str> = last.split_whitespace().collect();
    assert_eq!((cols[1], cols[2]), ("1.000000000000", "2000"), "{hgrm}");
    assert!(hgrm.contains("Total count    =         2000"), "{hgrm}");

    let speedscope: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("cpu.speedscope.json")).unwrap()).unwrap();
    let weights = speedscope["profiles"][0]["weights"].as_array().unwrap();
    let total: u64 = weights.iter().map(|w| w.as_u64().unwrap()).sum();
    assert_eq!(total, 100);
    assert_eq!(speedscope["profiles"][0]["type"], "sampled");

    let csv = std::fs::read_to_string(dir.join("summary.csv")).unwrap();
    assert!(csv.starts_with("section,figure,value,unit\n"), "{csv}");
    assert!(
        csv.lines()
            .any(|l| l.starts_with("latency,lap p99,") && l.ends_with(",ns")),
        "{csv}"
    );
    let svg = std::fs::read_to_string(dir.join("latency.svg")).unwrap();
    assert!(
        svg.starts_with("<svg") && svg.contains("<title>lap</title>"),
        "{svg}"
    );
    let md = std::fs::read_to_string(dir.join("summary.md")).unwrap();
    assert!(md.contains("| latency | lap p99 |"), "{md}");
}

#[test]
fn one_format_goes_where_it_is_told() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, out) = (tmp.path().join("s"), tmp.path().join("out"));
    session(&dir, "tell", 1e6, "AskActor::poll", 10);
    let output = benchtop()
        .arg("export")
        .arg(&dir)
        .args(["--format", "hgrm", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(output.status.success());
    let files: Vec<_> = std::fs::read_dir(&out)
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert_eq!(files, ["latency.hgrm"]);
    let unknown = benchtop()
        .arg("export")
        .arg(&dir)
        .args(["--format", "pdf"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&unknown.stderr);
    assert!(
        !unknown.status.success() && stderr.contains("speedscope"),
        "{stderr}"
    );
}

/// `go`, which scripts/test installs: its `go tool pprof` is the reference reader.
fn go() -> std::process::Command {
    let found = std::process::Command::new("go").arg("version").output();
    assert!(
        found.is_ok_and(|o| o.status.success()),
        "this test reads the profile with `go tool pprof`: install Go (Debian: apt-get install \
         golang-go; scripts/test does)"
    );
    std::process::Command::new("go")
}

#[test]
fn the_pprof_export_reads_back_with_labels_and_go_tool_pprof_lists_our_frames() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("s");
    session(&dir, "tell", 1e6, "AskActor::poll", 30);
    succeeded(
        benchtop()
            .arg("export")
            .arg(&dir)
            .args(["--format", "pprof"]),
    );
    let path = dir.join("profile.pb.gz");
    let profile = benchtop_sessions::pprof::decode(&std::fs::read(&path).unwrap()).unwrap();
    let samples: i64 = profile.sample.iter().map(|s| s.value[0]).sum();
    assert_eq!(samples, 100);
    let hot = profile
        .sample
        .iter()
        .find(|s| profile.frames(s).last() == Some(&"AskActor::poll"))
        .unwrap();
    assert_eq!(profile.frames(hot), ["main", "run", "AskActor::poll"]);
    assert_eq!(hot.value[0], 30);
    assert_eq!(profile.label(hot, "process"), Some("bt-ring"));
    assert_eq!(profile.label(hot, "workload"), Some("ring"));
    assert_eq!(profile.label(hot, "param_mode"), Some("tell"));

    let top = go()
        .args(["tool", "pprof", "-top", "-sample_index=samples"])
        .arg(&path)
        .env("PPROF_TMPDIR", tmp.path())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&top.stdout);
    assert!(
        top.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&top.stderr)
    );
    // `flat` of the hot frame: 30 of 100 samples.
    let line = text
        .lines()
        .find(|l| l.ends_with("AskActor::poll"))
        .unwrap_or_else(|| panic!("AskActor::poll not in pprof -top:\n{text}"));
    assert!(line.trim_start().starts_with("30 30.00%"), "{line}");
    assert!(text.contains("mailbox::send"), "{text}");
}

/// profile.json.gz of `dir`, exported into `out`, parsed.
pub(crate) fn firefox_export(
    dir: &std::path::Path,
    out: &std::path::Path,
) -> (serde_json::Value, String) {
    let output = benchtop()
        .args(["export", "--format", "firefox", "--out"])
        .arg(out)
        .arg(dir)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(output.status.success(), "{stderr}");
    let file = std::fs::File::open(out.join("profile.json.gz")).unwrap();
    let json = serde_json::from_reader(flate2::read::GzDecoder::new(file)).unwrap();
    (json, stderr)
}

/// The sum of the weights of the on-CPU tracks' samples.
fn on_cpu_weight(profile: &serde_json::Value) -> u64 {
    profile["threads"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| !t["name"].as_str().unwrap().ends_with("(off-CPU)"))
        .flat_map(|t| t["samples"]["weight"].as_array().unwrap())
        .map(|w| w.as_u64().unwrap())
        .sum()
}

#[test]
fn a_firefox_profile_has_each_sampled_thread_over_the_run_and_every_sample() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("s");
    succeeded(
        benchtop()
            .args([
                "run",
                "ring",
                "--num-rounds",
                "100000000",
                "--duration",
                "2s",
            ])
            .args(["--interval", "250ms", "-q", "-o"])
            .arg(&dir),
    );
    let session = benchtop_sessions::store::Session::load(&dir).unwrap();
    let folded = session.profile(Kind::Cpu).unwrap().total_weight();
    assert!(folded > 0);
    let (profile, _) = firefox_export(&dir, &tmp.path().join("ff"));
    // The processed format as fxprof-processed-profile 0.8.1 writes it.
    assert_eq!(profile["meta"]["version"], 24, "{}", profile["meta"]);
    assert_eq!(profile["meta"]["preprocessedProfileVersion"], 55);
    assert_eq!(
        on_cpu_weight(&profile),
        folded,
        "every sample of cpu.folded"
    );
    let run_ms = session.duration().unwrap().as_secs_f64() * 1e3;
    let threads = profile["threads"].as_array().unwrap();
    let names: Vec<&str> = threads
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    // The main thread is named after the process, as the format shows processes.
    let pid = session.meta.worker.pid.unwrap().to_string();
    assert!(
        threads
            .iter()
            .any(|t| t["isMainThread"] == true && t["name"] == "ring" && t["tid"] == pid),
        "{names:?}"
    );
    // One on-CPU track with samples per thread that has samples in stacks.jsonl.
    let stacks = benchtop_sessions::intervals::IntervalStacks::load(&dir, &Default::default())
        .unwrap()
        .unwrap();
    let sampled: std::collections::BTreeSet<u32> = stacks
        .intervals
        .values()
        .flat_map(|i| i.weights[Kind::Cpu].iter().map(|&(tid, _, _)| tid))
        .collect();
    let tracks = threads
        .iter()
        .filter(|t| !t["name"].as_str().unwrap().ends_with("(off-CPU)"))
        .filter(|t| t["samples"]["length"].as_u64().unwrap() > 0)
        .count();
    assert_eq!(tracks, sampled.len(), "{names:?} for {sampled:?}");
    for t in threads {
        let samples = &t["samples"];
        assert_eq!(
            samples["length"],
            samples["stack"].as_array().unwrap().len()
        );
        assert!(t["stackTable"]["length"].as_u64().unwrap() > 0 || samples["length"] == 0);
        // Sample times are deltas from the profile's start; each lies within the run.
        let mut at = 0.0;
        for d in samples["timeDeltas"].as_array().unwrap() {
            at += d.as_f64().unwrap();
            assert!(
                (0.0..=run_ms + 1.0).contains(&at),
                "{} at {at} ms of {run_ms}",
                t["name"]
            );
        }
    }
    // The run is a marker on the main thread; RSS and the ring's count are counters.
    let main = threads.iter().find(|t| t["isMainThread"] == true).unwrap();
    assert!(
        main["markers"]["length"].as_u64().unwrap() >= 1,
        "{}",
        main["markers"]
    );
    let counters: Vec<&str> = profile["counters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert!(
        counters.contains(&"RSS") && counters.len() == 2,
        "{counters:?}"
    );

    // Recorded before per-interval stacks: the whole run's samples, and a warning.
    std::fs::remove_file(dir.join("stacks.jsonl")).unwrap();
    let (profile, stderr) = firefox_export(&dir, &tmp.path().join("ff1"));
    assert!(stderr.contains("no per-interval stacks"), "{stderr}");
    assert_eq!(on_cpu_weight(&profile), folded);
}

#[test]
fn kept_samples_put_each_firefox_sample_at_its_own_time() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("s");
    succeeded(
        benchtop()
            .args([
                "run",
                "ring",
                "--num-rounds",
                "100000000",
                "--duration",
                "1500ms",
                "--keep-samples",
            ])
            .args(["--interval", "500ms", "-q", "-o"])
            .arg(&dir),
    );
    let session = benchtop_sessions::store::Session::load(&dir).unwrap();
    let stacks = benchtop_sessions::intervals::IntervalStacks::load(&dir, &Default::default())
        .unwrap()
        .unwrap();
    // Every sample of the intervals' weights is kept, in time order, within the run.
    let kept = stacks.samples.len() as u64;
    assert!(kept > 0);
    assert_eq!(kept, stacks.cpu_samples());
    let run_ns = session.duration().unwrap().as_nanos() as u64;
    assert!(stacks.samples.windows(2).all(|w| w[0].t_ns <= w[1].t_ns));
    assert!(stacks.samples.iter().all(|s| s.t_ns <= run_ns + 1_000_000));
    // Each sample's time falls in the interval that counts it.
    for s in &stacks.samples {
        let holding = stacks
            .intervals
            .values()
            .find(|i| (i.t0_ns..i.t1_ns.max(i.t0_ns + 1)).contains(&s.t_ns));
        if let Some(i) = holding {
            assert!(
                i.weights[Kind::Cpu]
                    .iter()
                    .any(|&(tid, stack, _)| tid == s.tid && stack == s.stack),
                "a sample at {} ns not counted in its interval",
                s.t_ns
            );
        }
    }

    let (profile, _) = firefox_export(&dir, &tmp.path().join("ff"));
    assert_eq!(on_cpu_weight(&profile), kept);
    // Placed at their own times: (nearly) every sample time of the profile is a kept
    // sample's time, not a point spread over an interval.
    let own: std::collections::BTreeSet<u64> =
        stacks.samples.iter().map(|s| s.t_ns / 1_000).collect();
    let mut times = std::collections::BTreeSet::new();
    for t in profile["threads"].as_array().unwrap() {
        if t["name"].as_str().unwrap().ends_with("(off-CPU)") {
            continue;
        }
        let mut at = 0.0;
        for d in t["samples"]["timeDeltas"].as_array().unwrap() {
            at += d.as_f64().unwrap();
            times.insert((at * 1e3).round() as u64);
        }
    }
    let matched = times
        .iter()
        .filter(|&&us| (us.saturating_sub(1)..=us + 1).any(|u| own.contains(&u)))
        .count();
    assert!(
        matched * 10 >= times.len() * 9,
        "{matched} of {} sample times are kept samples' times",
        times.len()
    );
}
