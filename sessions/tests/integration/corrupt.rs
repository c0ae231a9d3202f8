//! Corrupt, truncated, foreign and newer sessions (tests/data/corrupt/<case>/, each a copy
//! of the v1 session with one thing broken, described in its README) give the errors
//! docs/session-format.md documents, named in `expected-error.txt` beside them with the
//! case's directory written as `<session>`. Re-bless with `BENCHTOP_BLESS=1`.

use std::fs;
use std::path::PathBuf;

use benchtop_sessions::{Session, SessionError};

#[test]
fn every_corrupt_fixture_gives_its_documented_error() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/corrupt");
    let mut cases: Vec<PathBuf> = fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    cases.sort();
    assert!(cases.len() >= 10, "fixtures missing in {}", root.display());
    let mut wrong = Vec::new();
    for dir in &cases {
        let err = match Session::load(dir) {
            Ok(_) => {
                wrong.push(format!("{}: loaded", dir.display()));
                continue;
            }
            Err(e) => e,
        };
        // Every error is one of the documented kinds.
        assert!(
            matches!(
                err,
                SessionError::Corrupt { .. }
                    | SessionError::UnsupportedSchema { .. }
                    | SessionError::NotASession { .. }
                    | SessionError::NotAFile { .. }
            ),
            "{}: {err:?}",
            dir.display()
        );
        let text = format!("{err}\n").replace(&dir.display().to_string(), "<session>");
        let expected_path = dir.join("expected-error.txt");
        if std::env::var_os("BENCHTOP_BLESS").is_some() {
            fs::write(&expected_path, &text).unwrap();
        }
        let expected = fs::read_to_string(&expected_path).unwrap_or_default();
        if text != expected {
            wrong.push(format!(
                "{}:\n  got:      {text}  expected: {expected}",
                dir.display()
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
