//! Shell completions and man pages, generated from the command line and read back by the
//! tools that use them: bash, and groff (which scripts/test installs).

use std::process::Command;

use crate::support::{benchtop, succeeded};

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
