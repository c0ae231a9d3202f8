//! Sampling as an unprivileged user. CI runs as root, so this test drops to `nobody`
//! (uid and gid 65534) to run `profile-fixture sample`, which samples its own child.

use std::io;
use std::os::unix::process::CommandExt as _;
use std::process::Command;

use crate::fixture::{BURN_FN, COMM, weight_containing};

const NOBODY: libc::uid_t = 65534;

/// The lines of `profile-fixture sample` with key `key`.
fn values<'a>(out: &'a str, key: &'a str) -> impl Iterator<Item = &'a str> + 'a {
    out.lines()
        .filter_map(move |l| l.strip_prefix(key)?.strip_prefix('\t'))
}

/// Runs `cmd` (a `profile-fixture sample`) as nobody: its output, its standard output,
/// and both outputs with its status for an assertion's message.
fn run_as_nobody(mut cmd: Command) -> (std::process::Output, String, String) {
    // SAFETY: only async-signal-safe system calls between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            if libc::setgroups(0, std::ptr::null()) != 0
                || libc::setgid(NOBODY) != 0
                || libc::setuid(NOBODY) != 0
            {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let output = cmd.output().expect("run profile-fixture sample as nobody");
    let out = String::from_utf8_lossy(&output.stdout);
    let report = format!(
        "profile-fixture sample as nobody: {}\nstdout:\n{out}\nstderr:\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    let out = out.into_owned();
    (output, out, report)
}

#[test]
fn sampling_as_nobody_gets_user_frames_and_says_why_kernel_frames_are_missing() {
    // SAFETY: geteuid has no arguments and cannot fail.
    assert_eq!(
        unsafe { libc::geteuid() },
        0,
        "this test needs root to drop to the unprivileged user nobody (uid/gid 65534) and \
         sample as it: run the tests as root (CI does)"
    );
    let paranoid: i32 = std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
        .ok()
        .and_then(|p| p.trim().parse().ok())
        .expect("read kernel.perf_event_paranoid");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_profile-fixture"));
    cmd.args(["sample", "burn", "500", "1"]).current_dir("/");
    let (output, out, report) = run_as_nobody(cmd);

    if paranoid >= 3 {
        // Some distributions' kernels refuse unprivileged perf events altogether.
        let error = values(&out, "error").next().unwrap_or_default();
        assert!(
            error.contains("not permitted") && error.contains(&format!("is {paranoid}")),
            "{report}"
        );
        return;
    }
    assert!(output.status.success(), "{report}");
    assert_eq!(values(&out, "check").next(), Some("ok"), "{report}");
    let warnings: Vec<&str> = values(&out, "warning").collect();
    let kernel_frames = values(&out, "kernel_frames").next() == Some("true");
    if paranoid == 2 {
        assert!(
            !kernel_frames,
            "kernel frames as nobody at paranoid 2: {report}"
        );
        assert!(
            warnings
                .iter()
                .any(|w| w.contains("kernel frames excluded")
                    && w.contains("perf_event_paranoid is 2")),
            "no reason for leaving kernel frames out: {report}"
        );
    } else {
        assert!(
            kernel_frames,
            "paranoid {paranoid} allows kernel frames: {report}"
        );
    }
    // The default buffers fit the default perf_event_mlock_kb: nothing was reduced.
    assert!(
        !warnings.iter().any(|w| w.contains("ring buffers reduced")),
        "{report}"
    );
    let samples: u64 = values(&out, "samples")
        .next()
        .and_then(|s| s.parse().ok())
        .expect(&report);
    let folded: String = values(&out, "folded").flat_map(|l| [l, "\n"]).collect();
    // Enough to judge the split below; how many depends on the CPU the burner got, which
    // a loaded machine cuts (90 in 0.5 s at load 13).
    assert!(samples >= 20, "{report}");
    assert!(
        folded.lines().all(|l| l.starts_with(&format!("{COMM};"))),
        "{report}"
    );
    if !kernel_frames {
        assert!(!folded.contains("_[k]"), "{report}");
    }
    let burning = weight_containing(&folded, BURN_FN);
    assert!(
        burning as f64 >= 0.8 * samples as f64,
        "only {burning} of {samples} samples in {BURN_FN}: {report}"
    );
}

#[test]
fn waits_asked_as_nobody_are_left_out_with_the_reason_and_the_rest_is_recorded() {
    // SAFETY: geteuid has no arguments and cannot fail.
    assert_eq!(
        unsafe { libc::geteuid() },
        0,
        "this test needs root to drop to the unprivileged user nobody (uid/gid 65534) and \
         sample as it: run the tests as root (CI does)"
    );
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_profile-fixture"));
    cmd.args(["sample", "burn", "400", "1"])
        .env("PROFILE_FIXTURE_KINDS", "cpu,waits")
        .current_dir("/");
    let (output, out, report) = run_as_nobody(cmd);
    let paranoid: i32 = std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
        .ok()
        .and_then(|p| p.trim().parse().ok())
        .expect("read kernel.perf_event_paranoid");
    assert!(
        paranoid >= 0,
        "this test checks what an unprivileged user is refused; at perf_event_paranoid \
         {paranoid} nothing is"
    );
    if paranoid >= 3 {
        return;
    }
    assert!(output.status.success(), "{report}");
    // Waits need the tracepoint (tracefs is root's, raw records need CAP_PERFMON): left
    // out, said why, and the on-CPU profile is still taken.
    assert_eq!(values(&out, "kinds").next(), Some("cpu"), "{report}");
    assert!(
        values(&out, "warning").any(|w| w.starts_with("waits not recorded")
            && (w.contains("tracefs") || w.contains("CAP_PERFMON"))),
        "no reason for leaving waits out: {report}"
    );
    let samples: u64 = values(&out, "samples")
        .next()
        .and_then(|s| s.parse().ok())
        .expect(&report);
    assert!(samples >= 20, "{report}");
}
