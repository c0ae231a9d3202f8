//! The reaper ends marked processes whose owner is gone, and nothing else.

use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use benchtop_profilers::process_start_ticks;
use benchtop_profilers::reaper::{
    self, OWNER_ENV, Orphan, Owner, OwnerState, ReapOptions, ReapOutcome, ReapSignal, SESSION_ENV,
};

/// Children that are killed when the test ends, whatever happens.
struct Procs(Vec<Child>);

impl Drop for Procs {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Procs {
    fn spawn(&mut self, mut command: Command) -> u32 {
        command
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let child = command.spawn().expect("spawn a test process");
        let pid = child.id();
        self.0.push(child);
        pid
    }

    fn child(&mut self, pid: u32) -> &mut Child {
        self.0
            .iter_mut()
            .find(|c| c.id() == pid)
            .expect("a child of this test")
    }

    /// The signal that ended `pid`, waiting for it up to a few seconds.
    fn ended_by(&mut self, pid: u32) -> Option<i32> {
        let child = self.child(pid);
        for _ in 0..300 {
            if let Some(status) = child.try_wait().expect("try_wait") {
                return status.signal();
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        None
    }

    fn running(&mut self, pid: u32) -> bool {
        self.child(pid).try_wait().expect("try_wait").is_none()
    }
}

fn unique_session(name: &str) -> String {
    format!("reaper-test-{name}-{}", std::process::id())
}

/// An owner that existed and is gone: a child that ran and was waited for.
fn dead_owner() -> Owner {
    let mut child = Command::new("true").spawn().expect("spawn true");
    // Until it is waited for, the exited child stays in /proc with its start time.
    let start_ticks = process_start_ticks(child.id()).expect("start time of a zombie");
    let owner = Owner {
        pid: child.id(),
        start_ticks,
    };
    child.wait().expect("wait for true");
    assert_eq!(owner.state(), OwnerState::Gone);
    owner
}

fn marked_sleep(owner: &str, session: &str) -> Command {
    let mut command = Command::new("sleep");
    command
        .arg("1000")
        .env(OWNER_ENV, owner)
        .env(SESSION_ENV, session);
    command
}

fn orphans_of(session: &str) -> Vec<Orphan> {
    reaper::find_orphans()
        .expect("list orphans")
        .into_iter()
        .filter(|o| o.session.as_deref() == Some(session))
        .collect()
}

#[test]
fn reap_ends_orphans_and_spares_every_decoy() {
    let session = unique_session("decoys");
    let mut procs = Procs(Vec::new());

    let owner_gone = dead_owner().to_string();
    let orphan = procs.spawn(marked_sleep(&owner_gone, &session));
    // A process that now has some pid; a marker naming that pid with another start time
    // belongs to a dead owner whose pid was reused.
    let reused_pid = procs.spawn({
        let mut c = Command::new("sleep");
        c.arg("1000");
        c
    });
    let reused_owner = Owner {
        pid: reused_pid,
        start_ticks: process_start_ticks(reused_pid).unwrap() + 1,
    };
    let orphan_of_reused = procs.spawn(marked_sleep(&reused_owner.to_string(), &session));
    // Marked, but its owner (this test) is alive.
    let live_owner = Owner::current().unwrap().to_string();
    let owned = procs.spawn(marked_sleep(&live_owner, &session));
    // Unmarked, with the command line of a benchtop worker.
    let lookalike = procs.spawn({
        let mut c = Command::new("sleep");
        c.arg0("benchtop worker ring --transport ipc").arg("1000");
        c.env_remove(OWNER_ENV).env_remove(SESSION_ENV);
        c
    });
    // Give the children time to exec (the environment is the new program's from then on).
    std::thread::sleep(Duration::from_millis(100));

    let all = reaper::find_orphans().unwrap();
    for spared in [reused_pid, owned, lookalike] {
        assert!(
            all.iter().all(|o| o.pid != spared),
            "{spared} listed as an orphan"
        );
    }
    let found = orphans_of(&session);
    let mut pids: Vec<u32> = found.iter().map(|o| o.pid).collect();
    pids.sort_unstable();
    let mut expected = vec![orphan, orphan_of_reused];
    expected.sort_unstable();
    assert_eq!(pids, expected);
    let first = found.iter().find(|o| o.pid == orphan).unwrap();
    assert_eq!(first.owner_state, OwnerState::Gone);
    assert!(first.command.starts_with("sleep 1000"), "{}", first.command);
    assert!(first.rss_bytes > 0);
    let second = found.iter().find(|o| o.pid == orphan_of_reused).unwrap();
    assert_eq!(second.owner_state, OwnerState::PidReused);

    let outcomes = reaper::reap(&found, &ReapOptions::default());
    assert_eq!(outcomes, vec![ReapOutcome::Ended; 2]);
    assert_eq!(procs.ended_by(orphan), Some(libc::SIGTERM));
    assert_eq!(procs.ended_by(orphan_of_reused), Some(libc::SIGTERM));
    for spared in [reused_pid, owned, lookalike] {
        assert!(procs.running(spared), "{spared} was signalled");
    }
}

#[test]
fn an_orphan_ignoring_sigterm_is_killed_after_the_grace_period() {
    let session = unique_session("stubborn");
    let mut procs = Procs(Vec::new());
    let owner = dead_owner().to_string();
    let stubborn = procs.spawn({
        let mut c = Command::new("sh");
        // `exec` so that the shell itself is the orphan; the ignored SIGTERM survives it.
        c.args(["-c", "trap '' TERM; exec sleep 1000"])
            .env(OWNER_ENV, &owner)
            .env(SESSION_ENV, &session);
        c
    });
    std::thread::sleep(Duration::from_millis(100));
    let found = orphans_of(&session);
    assert_eq!(found.len(), 1, "{found:?}");
    let mut opts = ReapOptions::default();
    opts.grace = Duration::from_millis(200);
    assert_eq!(reaper::reap(&found, &opts), vec![ReapOutcome::Killed]);
    assert_eq!(procs.ended_by(stubborn), Some(libc::SIGKILL));
}

#[test]
fn kill_signal_ends_at_once_and_a_vanished_orphan_is_reported_gone() {
    let session = unique_session("kill");
    let mut procs = Procs(Vec::new());
    let owner = dead_owner().to_string();
    let a = procs.spawn(marked_sleep(&owner, &session));
    let b = procs.spawn(marked_sleep(&owner, &session));
    std::thread::sleep(Duration::from_millis(100));
    let mut found = orphans_of(&session);
    found.sort_by_key(|o| o.pid);
    assert_eq!(found.len(), 2);
    // `b` ends before the reaper gets to it.
    procs.child(b).kill().unwrap();
    procs.child(b).wait().unwrap();
    let mut opts = ReapOptions::default();
    opts.signal = ReapSignal::Kill;
    let outcomes = reaper::reap(&found, &opts);
    let outcome_of = |pid: u32| {
        let i = found.iter().position(|o| o.pid == pid).unwrap();
        outcomes[i].clone()
    };
    assert_eq!(outcome_of(a), ReapOutcome::Ended);
    assert_eq!(outcome_of(b), ReapOutcome::AlreadyGone);
    assert_eq!(procs.ended_by(a), Some(libc::SIGKILL));
}
