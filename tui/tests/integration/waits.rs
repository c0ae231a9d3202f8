//! `--profile waits` through the binary: a recorded run's wakers, `open A B` of two such
//! runs in a terminal, and `attach` to a process already running. The sampler's own
//! tests (profilers/tests/integration/waits.rs) check the join against fixtures with
//! known answers; these check that every command a user reaches it by carries it.

use std::path::Path;
use std::time::Duration;

use benchtop_sessions::Status;
use benchtop_sessions::store::Session;
use benchtop_sessions::waits::WOKEN_BY;

use crate::support::{attach_to_shell, benchtop, record_run, succeeded};
use crate::terminal::{Tmux, shell_quote};

/// The waits of `dir`: (blocked stack, waker stack, µs) of each line of waits.folded.
fn waits(dir: &Path) -> Vec<(String, String, u64)> {
    let folded = std::fs::read_to_string(dir.join("waits.folded")).unwrap_or_else(|e| {
        panic!(
            "waits.folded in {dir:?}: {e} (recording waits needs root or CAP_PERFMON and \
             tracefs)"
        )
    });
    folded
        .lines()
        .filter_map(|line| {
            let (stack, weight) = line.rsplit_once(' ')?;
            let (blocked, waker) = stack.split_once(WOKEN_BY)?;
            Some((
                blocked.to_owned(),
                waker.trim_start_matches(';').to_owned(),
                weight.parse().ok()?,
            ))
        })
        .collect()
}

/// A ring run of one second with waits.
fn ring_with_waits(dir: &Path, mode: &str) -> Session {
    let (_, session) = record_run(
        dir,
        &[
            "ring",
            "--mode",
            mode,
            "--profile",
            "waits",
            "--duration",
            "1s",
            "--interval",
            "250ms",
        ],
    );
    assert_eq!(session.meta.status, Status::Complete);
    session
}

#[test]
fn a_run_with_waits_records_their_wakers_and_open_a_b_shows_their_difference() {
    let tmp = tempfile::tempdir().unwrap();
    let (a, b) = (tmp.path().join("tell"), tmp.path().join("ask"));
    ring_with_waits(&a, "tell");
    ring_with_waits(&b, "ask");
    for dir in [&a, &b] {
        let joined = waits(dir);
        assert!(
            joined
                .iter()
                .any(|(_, waker, us)| !waker.is_empty() && *us > 0),
            "no blocked time joined to a waker in {dir:?}: {joined:?}"
        );
        let shown = succeeded(benchtop().arg("show").arg(dir));
        let shown = String::from_utf8_lossy(&shown.stdout);
        assert!(shown.contains("what woke them"), "{shown}");
    }

    let benchtop = shell_quote(Path::new(env!("CARGO_BIN_EXE_benchtop")));
    let tmux = Tmux::start_sized(
        &format!(
            "{benchtop} open {} {}; echo EXIT=$?; sleep 60",
            shell_quote(&a),
            shell_quote(&b)
        ),
        160,
        48,
    );
    tmux.wait_for_all(&["diff: B against A", "d diff/B only"]);
    // Into the flamegraph, then `o` through the kinds both sides have, to the waits.
    tmux.keys("3");
    let mut screen = tmux.screen();
    for _ in 0..6 {
        if screen.contains("waits diff: B against A") {
            break;
        }
        tmux.keys("o");
        std::thread::sleep(Duration::from_millis(300));
        screen = tmux.screen();
    }
    assert!(screen.contains("waits diff: B against A"), "{screen}");
    tmux.wait_for("— woken by —");
    // B alone, then the difference again.
    tmux.keys("d");
    tmux.wait_for("waits of B");
    tmux.keys("d");
    tmux.wait_for("waits diff: B against A");
    tmux.keys("q");
    let screen = tmux.wait_for("EXIT=");
    assert!(screen.contains("EXIT=0"), "{screen}");
    assert!(!tmux.alternate_screen(), "the terminal was not restored");
}

#[test]
fn attach_with_waits_names_the_children_that_woke_a_waiting_shell() {
    // A shell that waits for one short child after another: each of its waits in
    // `wait4` is ended by the child's exit, a process that did not exist at the attach.
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("attach");
    let (output, still_running) = attach_to_shell(
        "while :; do sleep 0.02; done",
        &["--profile", "waits", "--interval", "250ms"],
        &dir,
    );
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(still_running, "attach ended the process");
    let session = Session::load(&dir).unwrap();
    assert_eq!(session.meta.status, Status::Complete);

    let joined = waits(&dir);
    let in_wait4 = |(blocked, _, _): &&(String, String, u64)| blocked.contains("wait4");
    let waited: u64 = joined.iter().filter(in_wait4).map(|w| w.2).sum();
    let by_sleep: u64 = joined
        .iter()
        .filter(in_wait4)
        .filter(|(_, waker, _)| waker.split(';').next() == Some("sleep"))
        .map(|w| w.2)
        .sum();
    // About 50 children in the second; a loaded machine may miss some wake-ups (they go
    // under `[woken: not seen]`) or name a child by its pid before its exec is read.
    assert!(
        waited > 0 && by_sleep > 0,
        "the shell's waits in wait4 ({waited} µs) woken by `sleep` ({by_sleep} µs): \
         {joined:#?}"
    );
}

/// A shell waits for `sleep`, then for `napper` (a copy of sleep) started with the pid
/// `sleep` had: the kernel's `ns_last_pid` is set so that the next fork reuses it
/// (tried until no other fork on the machine came between), then put back at once, so
/// that the machine's other processes do not get recently used pids again.
const PID_REUSE_SH: &str = r#"
nap="$1"; out="$2"
sleep 0.3 & a=$!
wait $a
i=0
while [ $i -lt 50 ]; do
  read last < /proc/sys/kernel/ns_last_pid
  echo $((a - 1)) > /proc/sys/kernel/ns_last_pid
  "$nap" 0.3 & b=$!
  echo "$last" > /proc/sys/kernel/ns_last_pid
  if [ "$b" = "$a" ]; then
    wait $b
    echo "reused $a" > "$out"
    exit 0
  fi
  kill $b
  wait $b 2>/dev/null
  i=$((i + 1))
done
echo "not reused: $a, last $b" > "$out"
"#;

#[test]
fn a_pid_reused_during_a_run_names_each_waker_by_the_process_that_had_it_then() {
    let tmp = tempfile::tempdir().unwrap();
    let nap = tmp.path().join("napper");
    std::fs::copy("/bin/sleep", &nap).unwrap();
    let script = tmp.path().join("reuse.sh");
    std::fs::write(&script, PID_REUSE_SH).unwrap();
    let said = tmp.path().join("said");
    let dir = tmp.path().join("reuse");
    succeeded(
        benchtop()
            .args(["run", "--quiet", "--record"])
            .arg(&dir)
            .args(["--profile", "waits", "--interval", "250ms", "--", "sh"])
            .args([&script, &nap, &said]),
    );
    let said = std::fs::read_to_string(&said).unwrap();
    let pid = said
        .strip_prefix("reused ")
        .unwrap_or_else(|| {
            panic!("the fixture could not reuse a pid (writing ns_last_pid needs root): {said}")
        })
        .trim();

    // threads.csv has both processes under the one pid, each with its own name.
    let session = Session::load(&dir).unwrap();
    let names: Vec<&str> = session
        .threads
        .iter()
        .filter(|t| t.pid.to_string() == pid)
        .map(|t| t.process.as_str())
        .collect();
    assert!(
        names.contains(&"sleep") && names.contains(&"napper"),
        "pid {pid}: {names:?}"
    );

    // The shell's waits (dash's `wait` for a job blocks in sigsuspend until SIGCHLD):
    // each child's 0.3 s under the child that ended it.
    let joined = waits(&dir);
    let by = |name: &str| -> u64 {
        joined
            .iter()
            .filter(|(blocked, waker, _)| {
                blocked.split(';').next() == Some("sh") && waker.split(';').next() == Some(name)
            })
            .map(|w| w.2)
            .sum()
    };
    let (sleep_us, napper_us) = (by("sleep"), by("napper"));
    // Each waited about 300 ms (a loaded machine starts a child late, not early); the
    // napper's wait under `sleep` would make sleep's 600 ms and the napper's nothing.
    assert!(
        (200_000..2_000_000).contains(&sleep_us) && (200_000..2_000_000).contains(&napper_us),
        "sleep {sleep_us} µs, napper {napper_us} µs: {joined:#?}"
    );

    // The Firefox export marks the waits on the shell's track with the same wakers.
    let (profile, _) = crate::export::firefox_export(&dir, &tmp.path().join("ff"));
    let marks = wait_markers(&profile);
    for name in ["sleep", "napper"] {
        assert!(
            marks
                .iter()
                .any(|(ms, waker)| waker.starts_with(&format!("{name} ({name})")) && *ms > 200.0),
            "no wait of over 200 ms woken by {name}: {marks:#?}"
        );
    }
}

/// (length in ms, waker) of each wait marker of the Firefox profile, on every track.
fn wait_markers(profile: &serde_json::Value) -> Vec<(f64, String)> {
    let mut out = Vec::new();
    for thread in profile["threads"].as_array().unwrap() {
        let m = &thread["markers"];
        for i in 0..m["length"].as_u64().unwrap() as usize {
            let data = &m["data"][i];
            if data["type"] == "BenchtopWait" {
                let ms = m["endTime"][i].as_f64().unwrap() - m["startTime"][i].as_f64().unwrap();
                // "unique-string": an index into the thread's string table.
                let waker = data["waker"].as_u64().unwrap_or(u64::MAX) as usize;
                let waker = thread["stringArray"][waker].as_str().unwrap_or_default();
                out.push((ms, waker.to_owned()));
            }
        }
    }
    out
}
