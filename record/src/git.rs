//! The git commit checked out where a run starts: picked up for the session's `git`
//! field, so that a history of runs is ordered by commit without the user saying so.
//! Picking it up never fails a run: no git, not a checkout, or anything odd in git's
//! answer, and there is simply no commit.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, UNIX_EPOCH};

use benchtop_sessions::meta::GitInfo;

/// The commit checked out in `dir` (its working tree, at any depth) and its committer
/// date; `None` when there is none or git cannot say.
pub fn checkout(dir: &Path) -> Option<GitInfo> {
    let output = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["log", "-1", "--format=%H %ct"])
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_OPTIONAL_LOCKS", "0")
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()?;
    if !output.status.success() {
        return None;
    }
    parse(std::str::from_utf8(&output.stdout).ok()?)
}

/// `<hash> <committer time, seconds since the epoch>` as git prints it.
fn parse(text: &str) -> Option<GitInfo> {
    let mut words = text.split_whitespace();
    let commit = words.next()?;
    let seconds: u64 = words.next()?.parse().ok()?;
    let is_hash = (7..=64).contains(&commit.len()) && commit.bytes().all(|b| b.is_ascii_hexdigit());
    if !is_hash || words.next().is_some() {
        return None;
    }
    let when = UNIX_EPOCH.checked_add(Duration::from_secs(seconds))?;
    Some(GitInfo::new(commit, benchtop_sessions::rfc3339(when)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn git_answers_are_read_and_odd_ones_refused() {
        let info = parse("0123456789abcdef0123456789abcdef01234567 1764336000\n").unwrap();
        assert_eq!(info.commit, "0123456789abcdef0123456789abcdef01234567");
        assert_eq!(info.committed_at, "2025-11-28T13:20:00.000Z");
        assert!(parse("").is_none());
        assert!(parse("nothex 1764336000").is_none());
        assert!(parse("abcdef1 notanumber").is_none());
        assert!(parse("abcdef1 1 extra").is_none());
    }

    #[test]
    fn a_directory_outside_any_checkout_has_no_commit() {
        let dir = tempfile::tempdir().unwrap();
        assert!(checkout(dir.path()).is_none());
    }

    #[test]
    fn a_checkout_gives_its_commit_and_date() {
        let dir = tempfile::tempdir().unwrap();
        let git = |args: &[&str]| {
            let status = Command::new("git")
                .arg("-C")
                .arg(dir.path())
                .args(args)
                .env("GIT_AUTHOR_NAME", "t")
                .env("GIT_AUTHOR_EMAIL", "t@example.com")
                .env("GIT_COMMITTER_NAME", "t")
                .env("GIT_COMMITTER_EMAIL", "t@example.com")
                .env("GIT_COMMITTER_DATE", "2026-01-02T03:04:05Z")
                .status()
                .expect("git is needed for this test: apt-get install git");
            assert!(status.success(), "git {args:?}");
        };
        git(&["init", "-q"]);
        git(&["commit", "-q", "--allow-empty", "-m", "first"]);
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        let info = checkout(&dir.path().join("sub")).unwrap();
        assert_eq!(info.commit.len(), 40);
        assert_eq!(info.committed_at, "2026-01-02T03:04:05.000Z");
    }
}
