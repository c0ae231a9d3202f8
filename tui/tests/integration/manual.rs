//! Shell completions and man pages, generated from the command line and read back by the
//! tools that use them: bash (in tmux too), groff and man (which scripts/test installs).

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

use crate::support::{benchtop, succeeded};
use crate::terminal::{Tmux, shell_quote};

/// The bash completion script, written into `dir`.
fn bash_script(dir: &Path) -> std::path::PathBuf {
    let script = dir.join("benchtop.bash");
    let out = succeeded(benchtop().args(["completions", "bash"]));
    std::fs::write(&script, out.stdout).unwrap();
    script
}

/// What bash completes for `words` (the last being completed), with the script loaded,
/// in `cwd`.
fn bash_completes(script: &Path, cwd: &Path, words: &[&str]) -> Vec<String> {
    let line = words.join(" ");
    let quoted: Vec<String> = words.iter().map(|w| format!("'{w}'")).collect();
    let out = succeeded(Command::new("bash").current_dir(cwd).arg("-c").arg(format!(
        "source {}; COMP_WORDS=({}); COMP_CWORD={}; COMP_LINE='{line}'; COMP_POINT={}; \
         _benchtop_sessions benchtop '{}' '{}'; printf '%s\\n' \"${{COMPREPLY[@]}}\"",
        shell_quote(script),
        quoted.join(" "),
        words.len() - 1,
        line.len(),
        words[words.len() - 1],
        words.get(words.len().wrapping_sub(2)).copied().unwrap_or(""),
    )));
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
        .collect()
}

#[test]
fn bash_completes_session_directories_for_the_commands_that_read_sessions() {
    let tmp = tempfile::tempdir().unwrap();
    let script = bash_script(tmp.path());
    let cwd = tmp.path().join("work");
    std::fs::create_dir_all(cwd.join("sessions/20261123-154211-ring")).unwrap();
    std::fs::create_dir_all(cwd.join("series")).unwrap();
    std::fs::write(cwd.join("notes.txt"), "not a directory").unwrap();
    for command in ["open", "show", "compare", "export"] {
        let words = bash_completes(&script, &cwd, &["benchtop", command, "se"]);
        assert_eq!(words, ["series", "sessions"], "{command}");
        let words = bash_completes(&script, &cwd, &["benchtop", command, "sessions/"]);
        assert_eq!(words, ["sessions/20261123-154211-ring"], "{command}");
    }
    // compare's second operand too; an option still completes as an option.
    let words = bash_completes(&script, &cwd, &["benchtop", "compare", "series", "se"]);
    assert_eq!(words, ["series", "sessions"]);
    let words = bash_completes(&script, &cwd, &["benchtop", "show", "--ra"]);
    assert_eq!(words, ["--range"]);
    // The value of an option is not a session: clap's script completes it.
    let words = bash_completes(&script, &cwd, &["benchtop", "export", "--format", "pp"]);
    assert_eq!(words, ["pprof"]);
    // Other commands are clap's, and never offer the hidden ones.
    let words = bash_completes(&script, &cwd, &["benchtop", ""]);
    assert!(words.contains(&"open".to_owned()), "{words:?}");
    for hidden in ["worker", "exec-gate"] {
        assert!(!words.contains(&hidden.to_owned()), "{words:?}");
    }
    let words = bash_completes(&script, &cwd, &["benchtop", "run", ""]);
    assert!(words.contains(&"ring".to_owned()), "{words:?}");
    assert!(!words.contains(&"ipc-node".to_owned()), "{words:?}");
}

#[test]
fn in_a_terminal_benchtop_open_tab_completes_a_session_directory() {
    let tmp = tempfile::tempdir().unwrap();
    let script = bash_script(tmp.path());
    let bin = tmp.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_benchtop"), bin.join("benchtop")).unwrap();
    let cwd = tmp.path().join("work");
    std::fs::create_dir_all(cwd.join("sessions/20261123-154211-ring")).unwrap();
    let tmux = Tmux::start_sized(
        &format!(
            "cd {} && PATH={}:\"$PATH\" PS1='$ ' bash --norc --noprofile -i",
            shell_quote(&cwd),
            shell_quote(&bin)
        ),
        80,
        24,
    );
    tmux.type_text(&format!("source {}", shell_quote(&script)));
    tmux.keys("Enter");
    tmux.type_text("benchtop open ses");
    tmux.keys("Tab");
    tmux.wait_for("benchtop open sessions/");
    tmux.keys("Tab");
    let screen = tmux.wait_for("benchtop open sessions/20261123-154211-ring/");
    assert!(!screen.contains("--"), "directories, not flags: {screen}");
}

#[test]
fn completion_scripts_are_generated_for_every_shell_and_bash_loads_its_own() {
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let out = benchtop().args(["completions", shell]).output().unwrap();
        assert!(
            out.status.success(),
            "{shell}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let script = String::from_utf8(out.stdout).unwrap();
        assert!(
            script.contains("compare") && script.contains("record"),
            "{shell}"
        );
    }
    let tmp = tempfile::tempdir().unwrap();
    let script = tmp.path().join("benchtop.bash");
    let out = benchtop().args(["completions", "bash"]).output().unwrap();
    std::fs::write(&script, out.stdout).unwrap();
    succeeded(Command::new("bash").arg("-n").arg(&script));
    // Loaded for real, it completes the subcommands.
    let complete = Command::new("bash")
        .arg("-c")
        .arg(format!(
            "source {}; COMP_WORDS=(benchtop com); COMP_CWORD=1; COMP_LINE='benchtop com'; \
             COMP_POINT=12; _benchtop benchtop com benchtop; printf '%s\\n' \"${{COMPREPLY[@]}}\"",
            script.display()
        ))
        .output()
        .unwrap();
    let words = String::from_utf8_lossy(&complete.stdout);
    assert!(
        words.lines().any(|w| w == "compare") && words.lines().any(|w| w == "completions"),
        "{words}"
    );
}

/// The pages a man page names: `benchtop(1)`, `benchtop-run-ring(1)` …
fn pages_named(text: &str) -> BTreeSet<String> {
    let mut named = BTreeSet::new();
    for (at, _) in text.match_indices("benchtop") {
        let rest = &text[at..];
        let end = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '-' || c == '\\'))
            .unwrap_or(rest.len());
        // roff escapes a hyphen as `\-`.
        let name = rest[..end].replace("\\-", "-");
        if rest[end..].starts_with("(1)") {
            named.insert(name);
        }
    }
    named
}

#[test]
fn every_page_man_writes_reads_in_man_and_names_only_pages_that_are_written() {
    let found = Command::new("man").arg("--version").output();
    assert!(
        found.is_ok_and(|o| o.status.success()),
        "man is needed: apt-get install man-db (scripts/test installs it)"
    );
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("man1");
    succeeded(benchtop().args(["man", "--out"]).arg(&dir));
    let written: BTreeSet<String> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            name.strip_suffix(".1").map(str::to_owned)
        })
        .collect();
    for page in [
        "benchtop",
        "benchtop-run",
        "benchtop-run-ring",
        "benchtop-run-storm",
    ] {
        assert!(written.contains(page), "{page}: {written:?}");
    }
    for page in &written {
        let source = std::fs::read_to_string(dir.join(format!("{page}.1"))).unwrap();
        for named in pages_named(&source) {
            assert!(
                written.contains(&named),
                "{page} names {named}(1), which is not written"
            );
        }
        for hidden in [
            "exec-gate",
            "ipc-node",
            "benchtop\\-worker",
            "benchtop worker",
        ] {
            assert!(!source.contains(hidden), "{page} names {hidden}");
        }
        let out = Command::new("man")
            .args(["-l", "-P", "cat"])
            .arg(dir.join(format!("{page}.1")))
            .env("MANWIDTH", "80")
            .env_remove("MAN_KEEP_FORMATTING")
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        let warnings = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success() && warnings.trim().is_empty(),
            "man -l {page}: {warnings}"
        );
        assert!(
            text.contains("NAME") && text.contains("SYNOPSIS"),
            "{page}: {text}"
        );
    }
    // A page names its subcommands' pages; a workload's page has its parameters.
    let run = std::fs::read_to_string(dir.join("benchtop-run.1")).unwrap();
    assert!(pages_named(&run).contains("benchtop-run-ring"), "{run}");
    let top = std::fs::read_to_string(dir.join("benchtop.1")).unwrap();
    assert!(pages_named(&top).contains("benchtop-run"), "{top}");
    let ring = std::fs::read_to_string(dir.join("benchtop-run-ring.1")).unwrap();
    assert!(ring.contains("num\\-nodes"), "{ring}");
}

#[test]
fn man_pages_render_in_groff_one_per_command() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("man1");
    succeeded(benchtop().args(["man", "--out"]).arg(&dir));
    for page in [
        "benchtop",
        "benchtop-run",
        "benchtop-attach",
        "benchtop-compare",
        "benchtop-show",
    ] {
        let path = dir.join(format!("{page}.1"));
        let rendered = Command::new("groff")
            .args(["-k", "-man", "-Tutf8", "-ww", "-P-cbou"])
            .arg(&path)
            .output()
            .unwrap_or_else(|e| panic!("groff is needed (scripts/test installs it): {e}"));
        let text = String::from_utf8_lossy(&rendered.stdout);
        let warnings = String::from_utf8_lossy(&rendered.stderr);
        assert!(
            rendered.status.success() && warnings.trim().is_empty(),
            "{page}: {warnings}"
        );
        assert!(
            text.contains("NAME") && text.contains("SYNOPSIS"),
            "{page}: {text}"
        );
    }
    let run = std::fs::read_to_string(dir.join("benchtop-run.1")).unwrap();
    assert!(run.contains("benchtop run"), "{run}");
    assert!(
        !dir.join("benchtop-worker.1").exists(),
        "hidden commands get no page"
    );
}

#[test]
fn man_pages_are_not_written_into_a_directory_that_holds_something() {
    let tmp = tempfile::tempdir().unwrap();
    let victim = tmp.path().join("victim");
    std::fs::write(&victim, "keep me").unwrap();
    std::os::unix::fs::symlink(&victim, tmp.path().join("benchtop.1")).unwrap();
    let out = benchtop()
        .args(["man", "--out"])
        .arg(tmp.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(stderr.contains("is not an empty directory"), "{stderr}");
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep me");
}

#[test]
fn the_man_page_goes_to_standard_output_without_a_directory() {
    let out = benchtop().arg("man").output().unwrap();
    assert!(out.status.success());
    let page = String::from_utf8_lossy(&out.stdout);
    assert!(
        page.starts_with(".ie") || page.contains(".TH benchtop"),
        "{page}"
    );
}
