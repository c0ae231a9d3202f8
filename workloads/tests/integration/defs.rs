//! The defs reader and writer: a fixed point on fixtures covering every attribute and on
//! generated definitions.

use std::path::PathBuf;

use benchtop_workloads::defs::generate::{generate, shape};
use benchtop_workloads::defs::{parse, write};

pub fn data(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/defs")
        .join(name)
}

/// Parse → write → parse gives the same tree, and writing that tree the same text.
fn assert_fixed_point(text: &str, what: &str) {
    let first = parse(text).unwrap_or_else(|e| panic!("{what}: {e}"));
    let written = write(&first);
    let second = parse(&written).unwrap_or_else(|e| panic!("{what} as written: {e}\n{written}"));
    assert_eq!(first, second, "{what}");
    assert_eq!(write(&second), written, "{what}");
}

#[test]
fn every_fixture_is_a_fixed_point_of_parse_and_write() {
    for name in ["every-attribute.def", "ecflow-written.def"] {
        let text = std::fs::read_to_string(data(name)).unwrap();
        assert_fixed_point(&text, name);
    }
}

#[test]
fn the_every_attribute_fixture_has_every_attribute() {
    let text = std::fs::read_to_string(data("every-attribute.def")).unwrap();
    let defs = parse(&text).unwrap();
    let c = defs.counts();
    assert_eq!((c.suites, c.families, c.tasks), (2, 3, 6));
    assert_eq!(c.variables, 5);
    assert_eq!((c.triggers, c.completes), (6, 2));
    assert_eq!((c.events, c.meters, c.labels), (4, 2, 2));
    assert_eq!((c.limits, c.inlimits), (2, 4));
    assert_eq!((c.lates, c.times, c.repeats, c.defstatus), (3, 4, 6, 3));
    assert_eq!(c.others, 6);
    assert_eq!(defs.externs.len(), 2);
    // Eleven trigger and complete lines; two of them share one expression.
    assert_eq!(defs.exprs.len(), 10);
}

#[test]
fn ecflow_output_is_read_whole() {
    let text = std::fs::read_to_string(data("ecflow-written.def")).unwrap();
    let defs = parse(&text).unwrap();
    let c = defs.counts();
    assert_eq!((c.suites, c.families, c.tasks), (1, 2, 4));
    assert_eq!(
        (c.events, c.meters, c.labels, c.times, c.repeats),
        (3, 1, 1, 3, 5)
    );
    assert_eq!(defs.version.as_deref(), Some("5.9.2"));
    assert_eq!(defs.comments, [(1, " enddef".to_owned())]);
    assert_eq!(write(&defs), text);
}

#[test]
fn generated_definitions_are_a_fixed_point_and_keep_their_counts() {
    for (scale, seed) in [(0.0001, 1), (0.003, 2), (0.02, 3)] {
        let defs = generate(scale, seed);
        let text = write(&defs);
        let parsed = parse(&text).unwrap();
        assert_eq!(parsed.counts(), shape(scale), "scale {scale}");
        assert_eq!(parsed.counts(), defs.counts(), "scale {scale}");
        assert_fixed_point(&text, &format!("scale {scale}"));
    }
}

mod workload {
    use std::time::Duration;

    use benchtop_workloads::defs::{CheckpointMode, DefsParams, Format, LogFlush};
    use benchtop_workloads::protocol::WorkerMessage;
    use benchtop_workloads::worker::Workload;

    use crate::support::{RunningWorker, figure};

    fn run(params: DefsParams) -> (Vec<WorkerMessage>, String) {
        let worker = RunningWorker::start(Workload::Defs(params), Duration::from_millis(100));
        let reports = worker.reports.clone();
        let (result, log) = worker.wait(Duration::from_secs(120));
        result.unwrap();
        (reports.messages(), log)
    }

    fn phases(messages: &[WorkerMessage]) -> Vec<&benchtop_workloads::protocol::Phase> {
        messages
            .iter()
            .filter_map(|m| match m {
                WorkerMessage::Phase(p) => Some(p),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn every_phase_is_reported_with_its_figures_and_every_format_compares_equal() {
        let dir = tempfile::tempdir().unwrap();
        let (messages, log) = run(DefsParams {
            scale: 0.005,
            dir: Some(dir.path().to_owned()),
            ..DefsParams::default()
        });
        let names: Vec<&str> = phases(&messages).iter().map(|p| p.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "generate",
                "parse",
                "checkpoint-text",
                "reload-text",
                "compare-text",
                "checkpoint-json",
                "reload-json",
                "compare-json",
                "checkpoint-binary",
                "reload-binary",
                "compare-binary"
            ]
        );
        for phase in phases(&messages) {
            let has = |n: &str| phase.figures.iter().any(|f| f.name == n);
            assert!(has("seconds") && has("peak_rss_bytes"), "{phase:?}");
            // The process's CPU time over the phase: at most what its threads could take
            // in its wall time on every CPU (and what ran since the previous phase ended).
            let value = |n: &str| phase.figures.iter().find(|f| f.name == n).unwrap().value;
            let cpus = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
            let cpu = value("cpu_s");
            assert!(
                (0.0..=value("seconds") * cpus + 0.05).contains(&cpu),
                "{phase:?}"
            );
            if !phase.name.starts_with("compare") {
                assert!(has("bytes") && has("mb_per_s"), "{phase:?}");
            } else {
                let equal = phase.figures.iter().find(|f| f.name == "equal").unwrap();
                assert_eq!(equal.value, 1.0, "{phase:?}");
            }
        }
        let summary = messages.last().unwrap();
        assert_eq!(figure(summary, "nodes"), 1605.0);
        let text = figure(summary, "checkpoint_text_bytes");
        let binary = figure(summary, "checkpoint_binary_bytes");
        assert!(binary < text, "binary {binary} < text {text}");
        assert!(
            log.contains("definition: 1 suites, 527 families, 1077 tasks"),
            "{log}"
        );
        // The checkpoints are left in the directory asked for, whole.
        for format in Format::ALL {
            assert!(dir.path().join(format.file_name()).is_file(), "{format:?}");
        }
    }

    #[test]
    fn a_users_definition_reloads_equal_in_every_format() {
        let dir = tempfile::tempdir().unwrap();
        let fixture = std::fs::read_to_string(crate::defs::data("every-attribute.def")).unwrap();
        // Without its version line, and with a comment after an expression.
        let text = fixture.split_once('\n').unwrap().1.replace(
            "trigger -a t0:named == set",
            "trigger -a t0:named == set # and named",
        );
        let input = dir.path().join("mine.def");
        std::fs::write(&input, text).unwrap();
        let (messages, log) = run(DefsParams {
            input: Some(input),
            ..DefsParams::default()
        });
        let names: Vec<&str> = phases(&messages).iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names[..2], ["read", "parse"]);
        assert_eq!(
            names.iter().filter(|n| n.starts_with("compare-")).count(),
            3
        );
        assert!(log.contains("(11 nodes)"), "{log}");
    }

    #[test]
    fn a_malformed_input_fails_with_line_and_column_and_writes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let input = dir.path().join("bad.def");
        std::fs::write(&input, "suite s\n  task t\n    meter m 0\nendsuite\n").unwrap();
        let out = dir.path().join("out");
        let worker = RunningWorker::start(
            Workload::Defs(DefsParams {
                input: Some(input.clone()),
                dir: Some(out.clone()),
                ..DefsParams::default()
            }),
            Duration::from_millis(100),
        );
        let reports = worker.reports.clone();
        let (result, _) = worker.wait(Duration::from_secs(60));
        let err = result.unwrap_err().to_string();
        assert!(
            err.contains("bad.def") && err.contains("line 3, column 14"),
            "{err}"
        );
        let messages = reports.messages();
        assert!(matches!(messages.last(), Some(WorkerMessage::Error { .. })));
        assert!(phases(&messages).iter().all(|p| p.name == "read"));
        assert_eq!(std::fs::read_dir(&out).unwrap().count(), 0, "no checkpoint");
    }

    fn server_sim(mode: CheckpointMode, dir: &std::path::Path) -> (f64, f64, f64) {
        let (messages, log) = run(DefsParams {
            scale: 0.03,
            formats: vec![Format::Text],
            dir: Some(dir.to_owned()),
            server_sim: true,
            sim_seconds: 3.0,
            rate: 2000,
            checkpoint_every: 0.25,
            checkpoint_mode: mode,
            log_flush: LogFlush::Buffered,
            ..DefsParams::default()
        });
        let summary = messages.last().unwrap();
        let checkpoints = phases(&messages)
            .iter()
            .filter(|p| p.name == "server-checkpoint")
            .count();
        assert!(
            checkpoints >= 4,
            "{mode:?}: {checkpoints} checkpoints\n{log}"
        );
        assert_eq!(figure(summary, "checkpoints"), checkpoints as f64);
        eprintln!("{mode:?}:\n{log}");
        (
            figure(summary, "request_p99_ns"),
            figure(summary, "max_stall_s"),
            figure(summary, "requests"),
        )
    }

    #[test]
    fn background_checkpoints_keep_the_request_p99_below_blocking_ones() {
        let dir = tempfile::tempdir().unwrap();
        let (blocking_p99, blocking_stall, _) = server_sim(CheckpointMode::Blocking, dir.path());
        let (background_p99, background_stall, requests) =
            server_sim(CheckpointMode::Background, dir.path());
        assert!(requests > 1000.0, "{requests}");
        assert!(
            background_stall < blocking_stall,
            "stall: background {background_stall} s, blocking {blocking_stall} s"
        );
        assert!(
            background_p99 < blocking_p99,
            "p99: background {background_p99} ns, blocking {blocking_p99} ns"
        );
    }

    #[test]
    fn every_write_logging_makes_a_write_call_per_request() {
        let dir = tempfile::tempdir().unwrap();
        let mut counts = Vec::new();
        for log_flush in [LogFlush::EveryWrite, LogFlush::Buffered] {
            let (messages, _) = run(DefsParams {
                scale: 0.001,
                dir: Some(dir.path().to_owned()),
                server_sim: true,
                sim_seconds: 0.5,
                rate: 2000,
                checkpoint_every: 10.0,
                log_flush,
                ..DefsParams::default()
            });
            let summary = messages.last().unwrap();
            counts.push((
                figure(summary, "write_syscalls"),
                figure(summary, "requests"),
            ));
        }
        let (every, requests) = counts[0];
        let (buffered, _) = counts[1];
        assert!(
            every >= requests,
            "{every} write calls for {requests} requests"
        );
        assert!(
            buffered < requests / 10.0,
            "{buffered} write calls buffered"
        );
    }
}

mod killed {
    use std::time::{Duration, Instant};

    use benchtop_workloads::defs::generate::shape;
    use benchtop_workloads::defs::parse;
    use benchtop_workloads::protocol::WorkerMessage;

    use crate::fixture::{FixtureWorker, Reports};

    fn temps(dir: &std::path::Path) -> Vec<String> {
        std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.contains(".tmp-"))
            .collect()
    }

    #[test]
    fn a_worker_killed_while_checkpointing_never_leaves_a_truncated_checkpoint() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let dir_arg = dir.display().to_string();
        let nodes = shape(0.05).nodes();
        let mut interrupted = 0;
        for round in 0..5u64 {
            let before = temps(dir);
            // Blocking checkpoints back to back: the loop is nearly always writing one.
            let worker = FixtureWorker::start(
                &[
                    "defs",
                    "--scale",
                    "0.05",
                    "--formats",
                    "text",
                    "--dir",
                    &dir_arg,
                    "--server-sim",
                    "--sim-seconds",
                    "120",
                    "--rate",
                    "100",
                    "--checkpoint-every",
                    "0.01",
                ],
                Reports::Fd3,
            );
            let deadline = Instant::now() + Duration::from_secs(60);
            while !worker
                .messages()
                .iter()
                .any(|m| matches!(m, WorkerMessage::Phase(p) if p.name == "server-checkpoint"))
            {
                assert!(Instant::now() < deadline, "no checkpoint within 60 s");
                std::thread::sleep(Duration::from_millis(5));
            }
            // Whatever an earlier, killed worker left half-written is gone.
            let now = temps(dir);
            assert!(
                before.iter().all(|t| !now.contains(t)),
                "{before:?} {now:?}"
            );
            std::thread::sleep(Duration::from_millis(17 * round + 5));
            // SAFETY: kill(2) on our own child's pid.
            unsafe {
                libc::kill(worker.pid() as libc::pid_t, libc::SIGKILL);
            }
            let ended = worker.wait(Duration::from_secs(30));
            assert!(!ended.status.success());
            interrupted += temps(dir).len();
            let text = std::fs::read_to_string(dir.join("checkpoint.def")).unwrap();
            let defs = parse(&text).unwrap_or_else(|e| panic!("round {round}: {e}"));
            assert_eq!(defs.counts().nodes(), nodes, "round {round}");
        }
        eprintln!("{interrupted} of 5 kills interrupted a checkpoint's write");
    }
}

mod checkpoints {
    use benchtop_workloads::defs::checkpoint::{Format, decode, encode, load, save};
    use benchtop_workloads::defs::generate::generate;
    use benchtop_workloads::defs::{Defs, parse, parse_in, parse_serial, write};

    use crate::defs::data;

    /// Every fixture, including what ecFlow wrote, and generated definitions.
    fn definitions() -> Vec<(String, Defs)> {
        let mut all = Vec::new();
        for name in ["every-attribute.def", "ecflow-written.def"] {
            let text = std::fs::read_to_string(data(name)).unwrap();
            all.push((name.to_owned(), parse(&text).unwrap()));
        }
        for (scale, seed) in [(0.0001, 1), (0.01, 2)] {
            let text = write(&generate(scale, seed));
            all.push((format!("generated {scale}"), parse(&text).unwrap()));
        }
        // As generated (tables in the generator's order, not the reader's).
        all.push(("generated, unparsed".to_owned(), generate(0.002, 5)));
        all
    }

    #[test]
    fn every_format_round_trips_every_definition_to_an_equal_tree() {
        let dir = tempfile::tempdir().unwrap();
        for (name, defs) in definitions() {
            for format in Format::ALL {
                let path = dir.path().join(format.file_name());
                let written = save(&defs, format, &path).unwrap();
                let (back, read) = load(&path, format).unwrap();
                assert_eq!(written, read, "{name} {format:?}");
                if format == Format::Text && name.ends_with("unparsed") {
                    // Read from text, the tables come in the text's order, not the
                    // generator's: the same definition, other ids.
                    assert_eq!(write(&back), write(&defs), "{name} {format:?}");
                } else {
                    assert_eq!(back, defs, "{name} {format:?}");
                }
                // And the encoding in memory is the file.
                assert_eq!(
                    encode(&defs, format).unwrap(),
                    std::fs::read(&path).unwrap(),
                    "{name} {format:?}"
                );
            }
        }
    }

    #[test]
    fn truncated_and_bit_flipped_binary_checkpoints_are_refused_with_the_offset() {
        let path = std::path::Path::new("/ck/checkpoint.bin");
        let text = std::fs::read_to_string(data("ecflow-written.def")).unwrap();
        let bytes = encode(&parse(&text).unwrap(), Format::Binary).unwrap();
        let offset = |err: String| -> u64 {
            let rest = err
                .split_once("at byte offset ")
                .unwrap_or_else(|| panic!("no offset in {err:?}"))
                .1;
            rest.split(':').next().unwrap().parse().unwrap()
        };
        for len in (0..bytes.len()).step_by(7) {
            let err = decode(&bytes[..len], Format::Binary, path)
                .unwrap_err()
                .to_string();
            assert!(
                err.starts_with("binary checkpoint /ck/checkpoint.bin"),
                "{err}"
            );
            assert!(offset(err) <= len as u64);
        }
        for i in 0..bytes.len() {
            let mut bad = bytes.clone();
            bad[i] ^= 1 << (i % 8);
            let err = decode(&bad, Format::Binary, path).unwrap_err().to_string();
            assert!(offset(err) < bytes.len() as u64, "byte {i}");
        }
    }

    #[test]
    fn the_parallel_parse_gives_the_serial_tree() {
        let mut texts: Vec<(String, String)> = ["every-attribute.def", "ecflow-written.def"]
            .iter()
            .map(|n| (n.to_string(), std::fs::read_to_string(data(n)).unwrap()))
            .collect();
        // Two suites of 5 MB: above PARALLEL_MIN_BYTES, so parse() itself cuts it.
        texts.push(("generated".to_owned(), write(&generate(0.09, 7))));
        // Suites that share names, paths and expressions, with top-level comments and
        // externs between them.
        let mut mixed = String::from("\u{feff}#5.9.2\n");
        for s in 0..6 {
            mixed.push_str(&format!(
                "# before {s}\nextern /x{s}\nsuite s{}\n  edit V 'v{}'\n  family f\n    task t\n      trigger /s0/f/t == complete and ../f:e\n  endfamily\nendsuite\n",
                s % 3,
                s % 2
            ));
        }
        texts.push(("mixed".to_owned(), mixed));
        for (name, text) in &texts {
            let serial = parse_serial(text).unwrap();
            for pieces in [2, 3, 5, 16] {
                assert_eq!(
                    parse_in(text, pieces).unwrap(),
                    serial,
                    "{name} in {pieces}"
                );
            }
            assert_eq!(parse(text).unwrap(), serial, "{name}");
        }
    }
}
