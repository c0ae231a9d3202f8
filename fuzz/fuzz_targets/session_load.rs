//! Session loading on arbitrary bytes: the input is split at NUL bytes into session.json,
//! timeseries.jsonl, latency.hlog, cpu.folded, offcpu.folded and threads.csv (a missing
//! part is an absent file). Loading must return a session or an error, never panic; a
//! loaded session is then summarized, exported and compared with itself, as `show`,
//! `export` and `compare` would.
#![no_main]

use std::path::Path;

use benchtop_sessions::compare::{CompareOptions, compare, movers};
use benchtop_sessions::{Session, SessionFiles, export, pprof};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut parts = data.split(|&b| b == 0).map(<[u8]>::to_vec);
    let mut files = SessionFiles::default();
    files.session_json = parts.next().unwrap_or_default();
    files.timeseries = parts.next();
    files.latency = parts.next();
    files.cpu_folded = parts.next();
    files.offcpu_folded = parts.next();
    files.threads = parts.next();
    let Ok(session) = Session::from_files(Path::new("fuzz"), files) else {
        return;
    };
    let _ = session.summary_text();
    let _ = export::summary_csv(&session);
    let _ = pprof::encode_session(&session);
    let _ = compare(&session, &session, &CompareOptions::default());
    if let Some(cpu) = &session.cpu {
        let _ = movers(cpu, cpu, 10);
    }
});
