//! Interoperability with ecFlow itself, through Debian's python3-ecflow (which scripts/test
//! installs): what benchtop writes loads in ecFlow with the same node and attribute
//! counts, and what ecFlow writes parses in benchtop with the same counts.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use benchtop_workloads::defs::generate::generate;
use benchtop_workloads::defs::{Attr, Defs, State, parse, write};

use crate::defs::data;

/// The Python with ecFlow's module: Debian installs it for the system's python3.
/// `BENCHTOP_PYTHON` names another.
fn python() -> Command {
    let program = std::env::var("BENCHTOP_PYTHON").unwrap_or_else(|_| "/usr/bin/python3".into());
    let check = Command::new(&program)
        .args(["-c", "import ecflow"])
        .output();
    match check {
        Ok(out) if out.status.success() => Command::new(program),
        Ok(out) => panic!(
            "{program} cannot import ecflow ({}): install Debian's python3-ecflow \
             (apt-get install python3-ecflow, as scripts/test does) or name a Python that has it \
             in BENCHTOP_PYTHON",
            String::from_utf8_lossy(&out.stderr).trim()
        ),
        Err(e) => panic!(
            "cannot run {program} ({e}): install python3 and Debian's python3-ecflow \
             (apt-get install python3-ecflow, as scripts/test does)"
        ),
    }
}

/// ecFlow's counts of the definition in `file`, and what its check() said.
/// Runs the ecFlow script `script` of the test data with `args`, which must succeed.
fn run_script(script: &str, args: &[&Path]) {
    let out = python().arg(data(script)).args(args).output().unwrap();
    assert!(
        out.status.success(),
        "{script}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn ecflow_counts(file: &Path) -> (BTreeMap<String, u64>, String) {
    let out = python()
        .arg(data("ecflow_counts.py"))
        .arg(file)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "ecFlow could not load {}: {}",
        file.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let counts = serde_json::from_value(json["counts"].clone()).unwrap();
    (
        counts,
        json["check"].as_str().unwrap_or_default().to_owned(),
    )
}

/// benchtop's counts, as ecFlow counts them: a `defstatus queued` is the default, which
/// ecFlow does not keep.
fn our_counts(defs: &Defs) -> BTreeMap<String, u64> {
    let c = defs.counts();
    let mut queued = 0;
    defs.walk(|node, _| {
        queued += node
            .attrs
            .iter()
            .filter(|a| matches!(a, Attr::Defstatus(State::Queued)))
            .count() as u64;
    });
    BTreeMap::from([
        ("suites".to_owned(), c.suites),
        ("families".to_owned(), c.families),
        ("tasks".to_owned(), c.tasks),
        ("variables".to_owned(), c.variables),
        ("triggers".to_owned(), c.triggers),
        ("completes".to_owned(), c.completes),
        ("lates".to_owned(), c.lates),
        ("events".to_owned(), c.events),
        ("meters".to_owned(), c.meters),
        ("labels".to_owned(), c.labels),
        ("limits".to_owned(), c.limits),
        ("inlimits".to_owned(), c.inlimits),
        ("times".to_owned(), c.times),
        ("repeats".to_owned(), c.repeats),
        ("defstatus".to_owned(), c.defstatus - queued),
    ])
}

#[test]
fn definitions_benchtop_writes_load_in_ecflow_with_the_same_counts() {
    let dir = tempfile::tempdir().unwrap();
    let fixture = parse(&std::fs::read_to_string(data("every-attribute.def")).unwrap()).unwrap();
    for (name, defs) in [
        ("every-attribute", fixture),
        ("generated-0.01", generate(0.01, 11)),
        ("generated-0.05", generate(0.05, 12)),
    ] {
        let file = dir.path().join(format!("{name}.def"));
        std::fs::write(&file, write(&defs)).unwrap();
        let (theirs, check) = ecflow_counts(&file);
        assert_eq!(theirs, our_counts(&defs), "{name}");
        // ecFlow's own check resolves every trigger, complete and inlimit reference.
        assert_eq!(check, "", "{name}");
    }
}

#[test]
fn definitions_ecflow_writes_parse_in_benchtop_with_the_same_counts() {
    let dir = tempfile::tempdir().unwrap();
    let built = dir.path().join("built.def");
    run_script("ecflow_build.py", &[&built]);
    for file in [built, data("ecflow-written.def")] {
        let text = std::fs::read_to_string(&file).unwrap();
        let defs = parse(&text).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        let (theirs, _) = ecflow_counts(&file);
        assert_eq!(our_counts(&defs), theirs, "{}", file.display());
        // And benchtop writes it back as ecFlow did.
        assert_eq!(write(&defs), text, "{}", file.display());
    }
}

#[test]
fn ecflow_saves_a_generated_definition_byte_for_byte_as_benchtop_wrote_it() {
    let dir = tempfile::tempdir().unwrap();
    let ours = dir.path().join("ours.def");
    let theirs = dir.path().join("theirs.def");
    let text = write(&generate(0.02, 13));
    std::fs::write(&ours, &text).unwrap();
    run_script("ecflow_resave.py", &[&ours, &theirs]);
    let saved = std::fs::read_to_string(&theirs).unwrap();
    // ecFlow ends its files with a comment of its own.
    let saved = saved.strip_suffix("# enddef\n").unwrap_or(&saved);
    if saved != text {
        let (line, (a, b)) = text
            .lines()
            .zip(saved.lines())
            .enumerate()
            .find(|(_, (a, b))| a != b)
            .unwrap_or((0, ("", "")));
        panic!("line {}: benchtop wrote {a:?}, ecFlow {b:?}", line + 1);
    }
}

#[test]
fn what_ecflow_writes_round_trips_through_every_checkpoint_format_and_parses_alike_in_parallel() {
    use benchtop_workloads::defs::checkpoint::{Format, load, save};
    use benchtop_workloads::defs::{parse_in, parse_serial};

    let dir = tempfile::tempdir().unwrap();
    let built = dir.path().join("built.def");
    let resaved = dir.path().join("resaved.def");
    let generated = dir.path().join("generated.def");
    run_script("ecflow_build.py", &[&built]);
    // Two suites, so the parallel parse has a cut to make.
    std::fs::write(&generated, write(&generate(0.09, 21))).unwrap();
    run_script("ecflow_resave.py", &[&generated, &resaved]);
    for file in [built, resaved] {
        let text = std::fs::read_to_string(&file).unwrap();
        let defs = parse_serial(&text).unwrap();
        assert_eq!(parse_in(&text, 4).unwrap(), defs, "{}", file.display());
        for format in Format::ALL {
            let path = dir.path().join(format.file_name());
            save(&defs, format, &path).unwrap();
            let (back, _) = load(&path, format).unwrap();
            assert_eq!(back, defs, "{} {format:?}", file.display());
        }
    }
}
