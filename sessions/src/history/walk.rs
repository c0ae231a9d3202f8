//! Finding the sessions and series under a history's directories: recursively, without
//! following a symbolic link, within bounds on the directories visited, the depth and the
//! recordings found. A directory holding session.json is a session and one holding
//! series.json a series: neither is walked further (a series' runs are its own).

use std::fs;
use std::path::{Path, PathBuf};

use crate::SessionError;
use crate::escape::EscapedPath;
use crate::series::SERIES_FILE;
use crate::store::SESSION_FILE;

/// Directories visited at most; past them the walk stops, saying so.
pub const MAX_DIRS: usize = 100_000;
/// Sessions and series found at most.
pub const MAX_RECORDED: usize = 10_000;
/// Directories below a given one the walk goes at most.
pub const MAX_DEPTH: usize = 32;

/// A recording found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Found {
    /// A session directory.
    Session(PathBuf),
    /// A series directory.
    Series(PathBuf),
}

/// What a walk found, and what it could not read or left out.
#[derive(Debug, Default)]
pub(crate) struct Walked {
    pub(crate) found: Vec<Found>,
    pub(crate) warnings: Vec<String>,
}

/// Whether `dir/name` is a regular file (a link is not).
fn holds(dir: &Path, name: &str) -> bool {
    fs::symlink_metadata(dir.join(name)).is_ok_and(|m| m.file_type().is_file())
}

/// Walks `roots` in order, each in name order. A root that is not a directory is an
/// error; a directory below one that cannot be read is a warning.
pub(crate) fn walk(roots: &[PathBuf]) -> Result<Walked, SessionError> {
    let mut out = Walked::default();
    let mut visited = 0usize;
    for root in roots {
        // The directory the user named may be a link; links below it are not followed.
        match fs::metadata(root) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => {
                return Err(SessionError::NotADirectory { path: root.clone() });
            }
            Err(source) => {
                return Err(SessionError::Io {
                    path: root.clone(),
                    source,
                });
            }
        }
        let mut stack = vec![(root.clone(), 0usize)];
        while let Some((dir, depth)) = stack.pop() {
            visited += 1;
            if visited > MAX_DIRS {
                out.warnings.push(format!(
                    "stopped after {MAX_DIRS} directories; the rest of {} and what follows \
                     were not read",
                    EscapedPath(root)
                ));
                return Ok(out);
            }
            let found = if holds(&dir, SESSION_FILE) {
                Some(Found::Session(dir.clone()))
            } else if holds(&dir, SERIES_FILE) {
                Some(Found::Series(dir.clone()))
            } else {
                None
            };
            if let Some(found) = found {
                if out.found.len() >= MAX_RECORDED {
                    out.warnings.push(format!(
                        "more than {MAX_RECORDED} sessions and series; {} and what follows \
                         were not read",
                        EscapedPath(&dir)
                    ));
                    return Ok(out);
                }
                out.found.push(found);
                continue;
            }
            if depth >= MAX_DEPTH {
                out.warnings.push(format!(
                    "{}: more than {MAX_DEPTH} directories deep; not read",
                    EscapedPath(&dir)
                ));
                continue;
            }
            let entries = match fs::read_dir(&dir) {
                Ok(entries) => entries,
                Err(e) => {
                    out.warnings
                        .push(format!("{}: not read: {e}", EscapedPath(&dir)));
                    continue;
                }
            };
            let mut subdirs: Vec<PathBuf> = entries
                .flatten()
                .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                .map(|e| e.path())
                .collect();
            // Reversed onto the stack, so that they are visited in name order.
            subdirs.sort_unstable_by(|a, b| b.cmp(a));
            stack.extend(subdirs.into_iter().map(|d| (d, depth + 1)));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sessions_and_series_are_found_in_name_order_and_not_walked_into() {
        let root = tempfile::tempdir().unwrap();
        let r = root.path();
        for d in ["b/s2", "a/s1", "c/series/run-1", "d/empty/deeper"] {
            fs::create_dir_all(r.join(d)).unwrap();
        }
        fs::write(r.join("a/s1/session.json"), "{}").unwrap();
        fs::write(r.join("b/s2/session.json"), "{}").unwrap();
        fs::write(r.join("c/series/series.json"), "{}").unwrap();
        fs::write(r.join("c/series/run-1/session.json"), "{}").unwrap();
        let walked = walk(&[r.to_path_buf()]).unwrap();
        assert_eq!(
            walked.found,
            vec![
                Found::Session(r.join("a/s1")),
                Found::Session(r.join("b/s2")),
                Found::Series(r.join("c/series")),
            ]
        );
        assert!(walked.warnings.is_empty(), "{:?}", walked.warnings);
    }

    #[test]
    fn links_are_not_followed_and_a_file_is_not_a_root() {
        let root = tempfile::tempdir().unwrap();
        let r = root.path();
        let elsewhere = tempfile::tempdir().unwrap();
        fs::create_dir(elsewhere.path().join("s")).unwrap();
        fs::write(elsewhere.path().join("s/session.json"), "{}").unwrap();
        std::os::unix::fs::symlink(elsewhere.path(), r.join("link")).unwrap();
        fs::create_dir(r.join("t")).unwrap();
        std::os::unix::fs::symlink(
            elsewhere.path().join("s/session.json"),
            r.join("t/session.json"),
        )
        .unwrap();
        let walked = walk(&[r.to_path_buf()]).unwrap();
        assert!(walked.found.is_empty(), "{:?}", walked.found);
        fs::write(r.join("file"), "").unwrap();
        assert!(walk(&[r.join("file")]).is_err());
        assert!(walk(&[r.join("missing")]).is_err());
    }

    #[test]
    fn a_deep_tree_stops_at_the_depth_bound_with_a_warning() {
        let root = tempfile::tempdir().unwrap();
        let mut deep = root.path().to_path_buf();
        for _ in 0..MAX_DEPTH + 3 {
            deep.push("d");
        }
        fs::create_dir_all(&deep).unwrap();
        fs::write(deep.join("session.json"), "{}").unwrap();
        let walked = walk(&[root.path().to_path_buf()]).unwrap();
        assert!(walked.found.is_empty());
        assert_eq!(walked.warnings.len(), 1, "{:?}", walked.warnings);
        assert!(walked.warnings[0].contains("deep"));
    }
}
