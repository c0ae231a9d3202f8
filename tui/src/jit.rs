//! `run --jit`: the environment that makes the common JIT runtimes describe their
//! generated code, so that their frames are named and walked. Only the environment of
//! the command benchtop starts changes; no runtime file is written.

use std::ffi::{OsStr, OsString};

/// CPython 3.12+: a perf trampoline per Python function, named in /tmp/perf-PID.map
/// (as `-X perf`).
const PYTHON: (&str, &str) = ("PYTHONPERFSUPPORT", "1");
/// node: V8 writes /tmp/perf-PID.map, and interpreted functions get frames of their own.
const NODE: (&str, &str) = (
    "NODE_OPTIONS",
    "--perf-basic-prof --interpreted-frames-native-stack",
);
/// The JVM: frame pointers through compiled Java, and /tmp/perf-PID.map written at exit.
const JAVA: (&str, &str) = (
    "JAVA_TOOL_OPTIONS",
    "-XX:+PreserveFramePointer -XX:+UnlockDiagnosticVMOptions -XX:+DumpPerfMapAtExit",
);

/// The variables `--jit` sets, given what the environment holds (`current`): Python's
/// is set, node's and Java's options are appended to the user's own (each option not
/// already there).
pub(crate) fn environment(
    current: impl Fn(&str) -> Option<OsString>,
) -> Vec<(&'static str, OsString)> {
    let mut out = vec![(PYTHON.0, OsString::from(PYTHON.1))];
    for (name, options) in [NODE, JAVA] {
        let mut value = current(name).unwrap_or_default();
        let had: Vec<String> = value
            .to_string_lossy()
            .split_whitespace()
            .map(str::to_owned)
            .collect();
        for option in options.split(' ') {
            if had.iter().any(|h| h == option) {
                continue;
            }
            if !value.is_empty() {
                value.push(" ");
            }
            value.push(option);
        }
        out.push((name, value));
    }
    out
}

/// [`environment`] of this process's own environment.
pub(crate) fn environment_here() -> Vec<(&'static str, OsString)> {
    environment(|name| std::env::var_os(OsStr::new(name)))
}

/// A JIT runtime a process runs, recognized by the files it maps (`/proc/PID/maps`
/// text) and its executable's name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Runtime {
    Jvm,
    Node,
    Python,
}

impl Runtime {
    pub(crate) fn of(exe_name: &str, maps: &str) -> Option<Runtime> {
        let maps_file = |needle: &str| maps.lines().any(|l| l.contains(needle));
        if maps_file("/libjvm.so") {
            Some(Runtime::Jvm)
        } else if exe_name == "node" || maps_file("/libnode.so") {
            Some(Runtime::Node)
        } else if exe_name.starts_with("python3") || maps_file("/libpython3") {
            Some(Runtime::Python)
        } else {
            None
        }
    }

    /// What to do so that `pid`'s generated code is named, when it has no perf map.
    pub(crate) fn advice(self, pid: u32) -> String {
        match self {
            Runtime::Jvm => format!(
                "pid {pid} is a JVM without a perf map: its Java frames will read \
                 [unknown]. Write one now with `jcmd {pid} Compiler.perfmap` (JDK 17+; \
                 again as more code is compiled), and start the JVM with \
                 -XX:+PreserveFramePointer for whole stacks (`benchtop run --jit` does)"
            ),
            Runtime::Node => format!(
                "pid {pid} is node without a perf map: its JavaScript frames will read \
                 [unknown]. Start it with --perf-basic-prof \
                 --interpreted-frames-native-stack (`benchtop run --jit -- node …` does)"
            ),
            Runtime::Python => format!(
                "pid {pid} is CPython without a perf map: its Python functions will not \
                 show. Start CPython 3.12+ with -X perf or PYTHONPERFSUPPORT=1 \
                 (`benchtop run --jit -- python3 …` does)"
            ),
        }
    }
}

/// Whether `maps` (`/proc/PID/maps` text) holds a jitdump's marker mapping.
pub(crate) fn maps_a_jitdump(maps: &str) -> bool {
    maps.lines().any(|l| {
        l.rsplit('/')
            .next()
            .and_then(|n| n.strip_prefix("jit-")?.strip_suffix(".dump"))
            .is_some_and(|pid| !pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit()))
    })
}

/// The advice for `pid` when it runs a JIT runtime and neither its perf map
/// (`/proc/PID/root/tmp/perf-NSPID.map`) nor a jitdump is there.
pub(crate) fn advice_for(pid: u32) -> Option<String> {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).ok()?;
    let exe = std::fs::read_link(format!("/proc/{pid}/exe")).ok()?;
    let exe_name = exe.file_name()?.to_string_lossy().into_owned();
    let runtime = Runtime::of(&exe_name, &maps)?;
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let ns_pid = status
        .lines()
        .find_map(|l| l.strip_prefix("NSpid:"))
        .and_then(|f| f.split_whitespace().last()?.parse::<u32>().ok())
        .unwrap_or(pid);
    let map = format!("/proc/{pid}/root/tmp/perf-{ns_pid}.map");
    let has_map = std::fs::symlink_metadata(map).is_ok() || maps_a_jitdump(&maps);
    (!has_map).then(|| runtime.advice(pid))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runtimes_are_known_by_what_they_map_and_said_what_to_run() {
        let jvm = "7f00-7f10 r-xp 0 08:01 1 /usr/lib/jvm/java-17/lib/server/libjvm.so\n";
        assert_eq!(Runtime::of("java", jvm), Some(Runtime::Jvm));
        assert_eq!(Runtime::of("node", ""), Some(Runtime::Node));
        let py = "7f00-7f10 r-xp 0 08:01 1 /opt/py/lib/libpython3.12.so.1.0\n";
        assert_eq!(Runtime::of("myapp", py), Some(Runtime::Python));
        assert_eq!(Runtime::of("python3.12", ""), Some(Runtime::Python));
        assert_eq!(Runtime::of("sqlite3", "/usr/lib/libc.so.6\n"), None);
        assert!(Runtime::Jvm.advice(42).contains("jcmd 42 Compiler.perfmap"));
        assert!(Runtime::Node.advice(42).contains("--perf-basic-prof"));
        assert!(Runtime::Python.advice(42).contains("-X perf"));
        assert!(maps_a_jitdump(
            "7f00-7f01 r-xp 0 08:01 9 /tmp/jit-4242.dump\n"
        ));
        assert!(!maps_a_jitdump(
            "7f00-7f01 r-xp 0 08:01 9 /tmp/jit-x.dump\n"
        ));
        // This test's own process runs no JIT runtime.
        assert_eq!(advice_for(std::process::id()), None);
    }

    fn get<'a>(env: &'a [(&str, OsString)], name: &str) -> &'a str {
        env.iter()
            .find(|(n, _)| *n == name)
            .and_then(|(_, v)| v.to_str())
            .expect(name)
    }

    #[test]
    fn an_empty_environment_gets_every_runtime_s_options() {
        let env = environment(|_| None);
        assert_eq!(get(&env, "PYTHONPERFSUPPORT"), "1");
        assert_eq!(
            get(&env, "NODE_OPTIONS"),
            "--perf-basic-prof --interpreted-frames-native-stack"
        );
        assert_eq!(
            get(&env, "JAVA_TOOL_OPTIONS"),
            "-XX:+PreserveFramePointer -XX:+UnlockDiagnosticVMOptions -XX:+DumpPerfMapAtExit"
        );
    }

    #[test]
    fn the_user_s_own_options_are_kept_and_not_repeated() {
        let env = environment(|name| match name {
            "NODE_OPTIONS" => Some("--max-old-space-size=4096 --perf-basic-prof".into()),
            "JAVA_TOOL_OPTIONS" => Some("-Xmx1g".into()),
            _ => None,
        });
        assert_eq!(
            get(&env, "NODE_OPTIONS"),
            "--max-old-space-size=4096 --perf-basic-prof --interpreted-frames-native-stack"
        );
        assert_eq!(
            get(&env, "JAVA_TOOL_OPTIONS"),
            "-Xmx1g -XX:+PreserveFramePointer -XX:+UnlockDiagnosticVMOptions \
             -XX:+DumpPerfMapAtExit"
        );
    }
}
