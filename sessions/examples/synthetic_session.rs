//! Writes a long synthetic session (see `benchtop_sessions::synthetic`), for the load
//! benchmark (benches/session_load.py).
//!
//! Usage: synthetic_session DIR [INTERVALS] [BODY_NS] [SEED] [VALUES_PER_INTERVAL]

use std::process::ExitCode;

use benchtop_sessions::synthetic::SyntheticSession;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(dir) = args.first() else {
        eprintln!(
            "usage: synthetic_session DIR [INTERVALS] [BODY_NS] [SEED] [VALUES_PER_INTERVAL]"
        );
        return ExitCode::FAILURE;
    };
    let mut session = SyntheticSession::default();
    let number = |i: usize| args.get(i).and_then(|a| a.parse::<u64>().ok());
    if let Some(n) = number(1) {
        session.intervals = usize::try_from(n).unwrap_or(usize::MAX);
    }
    if let Some(body) = number(2) {
        session.body_ns = body;
    }
    if let Some(seed) = number(3) {
        session.seed = seed;
    }
    if let Some(values) = number(4) {
        session.values_per_interval = values;
    }
    match session.write(std::path::Path::new(dir)) {
        Ok(dir) => {
            println!("{}", dir.display());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("synthetic_session: {e}");
            ExitCode::FAILURE
        }
    }
}
