//! Session loading on arbitrary bytes, from memory and from a directory of hostile files.
//!
//! The input is split at NUL bytes into session.json, timeseries.jsonl, latency.hlog,
//! cpu.folded, offcpu.folded, threads.csv and stacks.jsonl (a missing part is an absent
//! file; stacks.jsonl, when present, is always a regular file on disk). An input
//! whose first byte is a control character below 0x20 starts with a 9-byte header instead:
//! that byte's low bits pick small count limits (intervals, stacks, parameters, tags), the
//! next six bytes what each file is on disk (a regular file, absent, a FIFO, a link to
//! /dev/zero, a directory, or a link to a regular file elsewhere), the next two a size limit
//! in bytes (little-endian; 0xffff: the defaults).
//!
//! Loading from memory (`Session::from_files_with`) and from the directory
//! (`Session::load_with`) must return a session or an error, never panic nor hang (a FIFO
//! is never opened blocking); a loaded session is then summarized, exported and compared
//! with itself, as `show`, `export` and `compare` would, and with its stacks.jsonl
//! exported for the Firefox Profiler.
#![no_main]

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use benchtop_sessions::compare::{CompareOptions, compare, movers};
use benchtop_sessions::intervals::{IntervalStacks, STACKS_FILE};
use benchtop_sessions::limits::LoadOptions;
use benchtop_sessions::{Kind, Session, SessionFiles, export, firefox, pprof};
use libfuzzer_sys::fuzz_target;
use rustix::fs::{FileType, Mode};

/// The files, in the order of the input's parts.
const NAMES: [&str; 6] = [
    "session.json",
    "timeseries.jsonl",
    "latency.hlog",
    "cpu.folded",
    "offcpu.folded",
    "threads.csv",
];

static RUNS: AtomicU64 = AtomicU64::new(0);

fuzz_target!(|data: &[u8]| {
    let (kinds, opts, body) = match data.first() {
        Some(&control) if control < 0x20 && data.len() >= 9 => {
            let mut opts = LoadOptions::default();
            if control & 1 != 0 {
                opts.max_intervals = 3;
                opts.max_stacks = 3;
                opts.max_params = 2;
                opts.max_tags = 2;
                opts.max_stack_nodes = 6;
                opts.max_frames = 4;
                opts.max_interval_bytes = 4096;
                opts.max_row_bytes = 4096;
            }
            let limit = u16::from_le_bytes([data[7], data[8]]);
            if limit != u16::MAX {
                opts.max_file_bytes = Some(u64::from(limit));
            }
            let mut kinds = [0u8; 6];
            kinds.copy_from_slice(&data[1..7]);
            (kinds, opts, &data[9..])
        }
        _ => ([0u8; 6], LoadOptions::default(), data),
    };
    let parts: Vec<Option<Vec<u8>>> = {
        let mut split = body.split(|&b| b == 0).map(<[u8]>::to_vec);
        (0..=NAMES.len()).map(|_| split.next()).collect()
    };
    if let Some(stacks) = &parts[NAMES.len()]
        && let Ok(stacks) = IntervalStacks::parse(stacks, Path::new(STACKS_FILE), &opts)
    {
        exercise_stacks(&stacks);
    }

    let mut files = SessionFiles::default();
    files.session_json = parts[0].clone().unwrap_or_default();
    files.timeseries = parts[1].clone();
    files.latency = parts[2].clone();
    files.folded[Kind::Cpu] = parts[3].clone();
    files.folded[Kind::OffCpu] = parts[4].clone();
    files.threads = parts[5].clone();
    if let Ok(session) = Session::from_files_with(Path::new("fuzz"), files, &opts) {
        exercise(&session);
    }

    let dir = scratch_dir();
    if plant(&dir, &kinds, &parts).is_ok() {
        let session = Session::load_with(&dir.join("s"), &opts).ok();
        if let Some(session) = &session {
            exercise(session);
        }
        if let Ok(Some(stacks)) = IntervalStacks::load(&dir.join("s"), &opts) {
            exercise_stacks(&stacks);
            // The Firefox export places every interval's stacks, kept sample and long
            // wait (a marker naming its waker).
            if let Some(session) = &session {
                let (profile, _) = firefox::firefox_profile(session, Some(&stacks));
                let _ = firefox::write_gz(&profile, std::io::sink());
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
});

/// What `show`, `export` and `compare` do with a loaded session.
fn exercise(session: &Session) {
    let _ = session.summary_text();
    let _ = export::summary_csv(session);
    let _ = export::summary_markdown(session);
    let _ = pprof::encode_session_to(session, std::io::sink());
    let _ = compare(session, session, &CompareOptions::default());
    if let Some(cpu) = session.profile(Kind::Cpu) {
        let _ = export::write_speedscope(cpu, "fuzz", "none", std::io::sink());
        let _ = movers(cpu, cpu, 10);
    }
}

/// What `show --range` does with per-interval stacks.
fn exercise_stacks(stacks: &IntervalStacks) {
    let (from, to) = stacks.span_ns().unwrap_or((0, u64::MAX));
    let half = from + (to - from) / 2;
    let _ = stacks.tree_in(Kind::Cpu, from, half).to_folded();
    let _ = stacks.tree_in(Kind::OffCpu, half, u64::MAX).to_folded();
    let _ = stacks.cpu_samples();
}

/// A new directory of this process's own under the temporary directory.
fn scratch_dir() -> PathBuf {
    let n = RUNS.fetch_add(1, Ordering::Relaxed);
    std::env::temp_dir().join(format!("benchtop-fuzz-{}-{n}", std::process::id()))
}

/// Writes the session directory `dir/s`, each file as its kind says; a file elsewhere in
/// `dir` is the target of kind 5's link.
fn plant(dir: &Path, kinds: &[u8; 6], parts: &[Option<Vec<u8>>]) -> std::io::Result<()> {
    let session = dir.join("s");
    std::fs::create_dir_all(&session)?;
    if let Some(Some(bytes)) = parts.get(NAMES.len()) {
        std::fs::write(session.join(STACKS_FILE), bytes)?;
    }
    for ((name, kind), part) in NAMES.iter().zip(kinds).zip(parts) {
        let path = session.join(name);
        match kind % 6 {
            0 => {
                if let Some(bytes) = part {
                    std::fs::write(&path, bytes)?;
                }
            }
            1 => {}
            2 => rustix::fs::mknodat(
                rustix::fs::CWD,
                &path,
                FileType::Fifo,
                Mode::from_raw_mode(0o600),
                0,
            )?,
            3 => std::os::unix::fs::symlink("/dev/zero", &path)?,
            4 => std::fs::create_dir(&path)?,
            _ => {
                let target = dir.join(format!("elsewhere-{name}"));
                std::fs::write(&target, part.as_deref().unwrap_or_default())?;
                std::os::unix::fs::symlink(&target, &path)?;
            }
        }
    }
    Ok(())
}
