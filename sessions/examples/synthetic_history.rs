//! Writes a synthetic history (see `benchtop_sessions::synthetic::SyntheticHistory`): one
//! short session a point, for the history benchmark (benches/history_scale.py).
//!
//! Usage: synthetic_history DIR POINTS [CV] [SEED] [AT:STEP …]  (e.g. 80:0.08 150:-0.06)

use std::process::ExitCode;

use benchtop_sessions::synthetic::SyntheticHistory;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(dir), Some(points)) = (args.first(), args.get(1).and_then(|a| a.parse().ok())) else {
        eprintln!("usage: synthetic_history DIR POINTS [CV] [SEED] [AT:STEP …]");
        return ExitCode::FAILURE;
    };
    let cv = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(0.02);
    let seed = args.get(3).and_then(|a| a.parse().ok()).unwrap_or(1);
    let mut history = SyntheticHistory::new(points, cv, seed);
    for step in args.iter().skip(4) {
        let parsed = step
            .split_once(':')
            .and_then(|(at, f)| Some((at.parse().ok()?, f.parse().ok()?)));
        match parsed {
            Some(step) => history.steps.push(step),
            None => {
                eprintln!("synthetic_history: {step:?} is not AT:STEP");
                return ExitCode::FAILURE;
            }
        }
    }
    if let Err(e) = std::fs::create_dir_all(dir) {
        eprintln!("synthetic_history: {dir}: {e}");
        return ExitCode::FAILURE;
    }
    match history.write(std::path::Path::new(dir)) {
        Ok(dirs) => {
            println!("{} sessions in {dir}", dirs.len());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("synthetic_history: {e}");
            ExitCode::FAILURE
        }
    }
}
