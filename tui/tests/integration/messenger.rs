//! The messenger workload recorded end to end: one instance against two (left and right)
//! through `benchtop compare`, the printed block against the session's figures, and a
//! server and its clients in two network namespaces.

use benchtop_workloads::messenger::progress::{Block, Line};

use crate::support::{benchtop, figure, record_run};

/// The `all(depth=…)` block (or an instance's) printed on `stdout`.
fn block(stdout: &str, title: &str) -> Block {
    let lines: Vec<&str> = stdout.lines().collect();
    let at = lines
        .iter()
        .position(|l| l.starts_with(&format!("{title}(depth=")))
        .unwrap_or_else(|| panic!("no {title} block in {stdout}"));
    Block::parse(&lines[at..]).unwrap()
}

#[test]
fn two_instances_record_left_and_right_and_compare_with_one() {
    let tmp = tempfile::tempdir().unwrap();
    let (one_dir, two_dir) = (tmp.path().join("one"), tmp.path().join("two"));
    let common = [
        "--msgtime",
        "2",
        "--depth",
        "64",
        "--listen",
        "127.0.0.1:0",
        "--profile",
        "cpu",
    ];
    let (output, one) = record_run(&one_dir, &[&["messenger"][..], &common].concat());
    let stdout = String::from_utf8_lossy(&output.stdout);
    let all = block(&stdout, "all");
    assert_eq!(all.messages as f64, figure(&one, "messages"), "{stdout}");
    assert!(
        (all.iops - figure(&one, "iops")).abs() < 1e-3 * all.iops,
        "{stdout}"
    );
    assert!(
        stdout.lines().any(|l| Line::parse(l, false).is_some()),
        "{stdout}"
    );

    let (output, two) = record_run(
        &two_dir,
        &[&["messenger", "--instances", "2"][..], &common].concat(),
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    let (left, right) = (block(&stdout, "left"), block(&stdout, "right"));
    assert_eq!(
        left.messages as f64,
        figure(&two, "left.messages"),
        "{stdout}"
    );
    assert_eq!(
        right.messages as f64,
        figure(&two, "right.messages"),
        "{stdout}"
    );
    assert_eq!(
        figure(&two, "messages"),
        figure(&two, "left.messages") + figure(&two, "right.messages")
    );
    let tags: std::collections::BTreeSet<&str> =
        two.latency.iter().map(|i| i.tag.as_str()).collect();
    for tag in ["latency", "latency.left", "latency.right"] {
        assert!(tags.contains(tag), "{tags:?}");
    }
    assert!(
        stdout
            .lines()
            .any(|l| Line::parse(l, true).is_some_and(|l| l.tag == "left")),
        "{stdout}"
    );

    let compared = benchtop()
        .arg("compare")
        .arg(&one_dir)
        .arg(&two_dir)
        .arg("--out")
        .arg(tmp.path().join("diff"))
        .output()
        .unwrap();
    let table = String::from_utf8_lossy(&compared.stdout);
    assert!(
        compared.status.success(),
        "{table}{}",
        String::from_utf8_lossy(&compared.stderr)
    );
    for row in ["iops", "latency_ms", "latency p99", "instances"] {
        assert!(table.contains(row), "{row}: {table}");
    }
    // The differential flamegraph of one large instance against two small ones.
    assert!(tmp.path().join("diff").join("diff-cpu.svg").exists());
}

#[test]
fn server_and_clients_in_two_network_namespaces_meet_over_listen_and_connect() {
    let hosts = crate::netns::Hosts::new();
    let tmp = tempfile::tempdir().unwrap();
    let (server_dir, client_dir) = (tmp.path().join("server"), tmp.path().join("client"));
    let bin = env!("CARGO_BIN_EXE_benchtop");
    let listen = format!("{}:9010", hosts.addr_a);
    let mut server = hosts
        .command(&hosts.a, bin)
        .args(["run", "messenger", "--role", "server", "--listen", &listen])
        .args(["--msgtime", "6", "--profile", "none", "--quiet", "--record"])
        .arg(&server_dir)
        .spawn()
        .unwrap();
    hosts.wait_for_server_on_a(9010);
    let client = hosts
        .command(&hosts.b, bin)
        .args(["run", "messenger", "--role", "client", "--connect", &listen])
        .args(["--msgtime", "1", "--depth", "64"])
        .args(["--profile", "none", "--quiet", "--record"])
        .arg(&client_dir)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&client.stdout);
    assert!(
        client.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&client.stderr)
    );
    assert!(server.wait().unwrap().success());
    let client = benchtop_sessions::Session::load(&client_dir).unwrap();
    let server = benchtop_sessions::Session::load(&server_dir).unwrap();
    let messages = figure(&client, "messages");
    assert!(messages > 100.0, "{stdout}");
    assert_eq!(
        figure(&server, "messages_served"),
        messages,
        "every message echoed by the other host"
    );
    assert_eq!(
        server.meta.workload.params["listen"],
        serde_json::json!(listen)
    );
}

#[test]
fn a_cpu_the_machine_does_not_have_is_refused_before_anything_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("bad");
    let output = crate::support::run_command(
        &dir,
        &["messenger", "--server-cpuset", "0,4095", "--msgtime", "1"],
    )
    .output()
    .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert!(
        stderr.contains("--server-cpuset 0,4095: this machine has no CPU 4095"),
        "{stderr}"
    );
    assert!(!dir.exists(), "no session for a run that never started");
}

#[test]
fn parameters_that_need_more_memory_than_the_machine_has_are_refused_before_anything_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("huge");
    let output = crate::support::run_command(
        &dir,
        &[
            "messenger",
            "--msg-size",
            "16777216",
            "--depth",
            "65536",
            "--clients",
            "1024",
            "--conns-per-client",
            "1024",
            "--msgtime",
            "1",
        ],
    )
    .output()
    .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert!(
        stderr.contains(
            "1048576 connection(s) of 16777216-byte messages at depth 65536 would need about"
        ),
        "{stderr}"
    );
    assert!(stderr.contains("available"), "{stderr}");
    assert!(!dir.exists(), "no session for a run that never started");
}
