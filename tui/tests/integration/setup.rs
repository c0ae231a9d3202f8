//! The README's test command installs every external program the tests run: a test that
//! starts a new tool without adding it to scripts/test fails here, not on a fresh machine.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Programs every Debian system has (its Essential packages) or the Rust toolchain that
/// runs the tests brings: no install step needed.
const BASE: &[&str] = &[
    "sh", "bash", "env", "true", "false", "sleep", "cat", "kill", "id", "stty", "mount", "umount",
    "cargo", "rustc",
];

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the tui crate sits in the workspace")
        .to_owned()
}

/// The tools `scripts/test --dry-run` says it installs.
fn installed_by_the_test_command() -> BTreeSet<String> {
    let out = Command::new("bash")
        .arg(workspace().join("scripts/test"))
        .arg("--dry-run")
        .output()
        .expect("scripts/test runs");
    assert!(
        out.status.success(),
        "scripts/test --dry-run failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|line| {
            let mut words = line.split_whitespace();
            (words.next() == Some("tool")).then(|| words.next().map(str::to_owned))?
        })
        .collect()
}

/// The test code of a source file: all of a file under a `tests/` directory, the part of a
/// library file after its first `#[cfg(test)]`.
fn test_code(path: &Path, text: &str) -> Option<String> {
    let in_tests = path.components().any(|c| c.as_os_str() == "tests");
    if in_tests {
        return Some(text.to_owned());
    }
    text.find("#[cfg(test)]").map(|at| text[at..].to_owned())
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name();
        if name == "target" || name == "fuzz" || name == ".git" {
            continue;
        }
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Every program a test starts by name: `Command::new("…")` literals, and the absolute
/// paths of programs (`"/usr/bin/python3"`) that helpers start.
fn programs_the_tests_run() -> BTreeSet<(String, PathBuf)> {
    let mut files = Vec::new();
    rust_files(&workspace(), &mut files);
    let mut found = BTreeSet::new();
    for path in files {
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        let Some(code) = test_code(&path, &text) else {
            continue;
        };
        for (marker, strip) in [("Command::new(\"", false), ("\"/usr/bin/", true)] {
            for (at, _) in code.match_indices(marker) {
                let rest = &code[at + marker.len()..];
                let Some(end) = rest.find('"') else { continue };
                let name = &rest[..end];
                let name = if strip {
                    name
                } else {
                    name.rsplit('/').next().unwrap_or(name)
                };
                let plain = !name.is_empty()
                    && name
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || "-_.+".contains(c));
                if plain {
                    found.insert((name.to_owned(), path.clone()));
                }
            }
        }
    }
    found
}

#[test]
fn every_program_the_tests_run_is_installed_by_the_readme_test_command() {
    let installed = installed_by_the_test_command();
    let programs = programs_the_tests_run();
    assert!(
        programs.iter().any(|(name, _)| name == "tmux"),
        "the scan found no tmux: it no longer sees the tests' commands ({programs:?})"
    );
    let missing: Vec<_> = programs
        .iter()
        .filter(|(name, _)| !BASE.contains(&name.as_str()) && !installed.contains(name))
        .map(|(name, path)| format!("{name} (run in {})", path.display()))
        .collect();
    assert!(
        missing.is_empty(),
        "the tests run programs that scripts/test does not install: {missing:?}; add each to \
         its TOOLS list (it installs {installed:?})"
    );
}

#[test]
fn the_readme_names_the_test_command() {
    let readme = std::fs::read_to_string(workspace().join("README.md")).expect("README.md");
    assert!(
        readme.lines().any(|line| line.trim() == "scripts/test"),
        "README.md must give `scripts/test` as the command that runs the tests"
    );
}
