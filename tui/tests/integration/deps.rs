//! The crates depend on each other in one direction only (DESIGN.md): tui -> all,
//! record -> {protocol, profile, profilers, sessions}, workloads -> protocol,
//! profilers -> profile, sessions -> profile, otlp -> {profile, sessions};
//! the profile model and protocol depend on no benchtop crate, and nothing depends on tui.

use std::collections::BTreeMap;
use std::process::Command;

fn workspace_dependencies() -> BTreeMap<String, Vec<String>> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let output = Command::new(cargo)
        .args([
            "metadata",
            "--no-deps",
            "--format-version",
            "1",
            "--offline",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo metadata runs");
    assert!(
        output.status.success(),
        "cargo metadata failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let meta: serde_json::Value = serde_json::from_slice(&output.stdout).expect("metadata is JSON");
    let mut deps = BTreeMap::new();
    for package in meta["packages"].as_array().expect("packages") {
        let name = package["name"].as_str().expect("name").to_owned();
        let normal: Vec<String> = package["dependencies"]
            .as_array()
            .expect("dependencies")
            .iter()
            .filter(|d| d["kind"].is_null() || d["kind"] == "build")
            .filter_map(|d| d["name"].as_str())
            .filter(|d| d.starts_with("benchtop"))
            .map(str::to_owned)
            .collect();
        deps.insert(name, normal);
    }
    deps
}

#[test]
fn crate_dependencies_point_one_way() {
    let deps = workspace_dependencies();
    let allowed: BTreeMap<&str, &[&str]> = BTreeMap::from([
        (
            "benchtop",
            &[
                "benchtop-otlp",
                "benchtop-profile",
                "benchtop-profilers",
                "benchtop-protocol",
                "benchtop-record",
                "benchtop-sessions",
                "benchtop-workloads",
            ][..],
        ),
        (
            "benchtop-otlp",
            &["benchtop-profile", "benchtop-sessions"][..],
        ),
        ("benchtop-profile", &[][..]),
        // The sampler fills the profile model's types; the session store is not its business.
        ("benchtop-profilers", &["benchtop-profile"][..]),
        (
            "benchtop-record",
            &[
                "benchtop-profile",
                "benchtop-profilers",
                "benchtop-protocol",
                "benchtop-sessions",
            ][..],
        ),
        ("benchtop-protocol", &[][..]),
        ("benchtop-sessions", &["benchtop-profile"][..]),
        ("benchtop-workloads", &["benchtop-protocol"][..]),
    ]);
    assert_eq!(
        deps.keys().map(String::as_str).collect::<Vec<_>>(),
        allowed.keys().copied().collect::<Vec<_>>(),
        "the workspace has exactly the crates of DESIGN.md"
    );
    for (krate, uses) in &deps {
        for dep in uses {
            assert!(
                allowed[krate.as_str()].contains(&dep.as_str()),
                "{krate} must not depend on {dep} (DESIGN.md: tui -> all, record -> {{protocol, profile, profilers, sessions}}, workloads -> protocol, profilers -> profile, sessions -> profile, otlp -> {{profile, sessions}})"
            );
        }
    }
}
