//! The kvstore workload recorded end to end: with simulated work the off-CPU profile is
//! the work's sleep; without it the on-CPU profile is the RPC stack (tonic, hyper, h2,
//! prost); the summary states the theoretical maximum beside the measured rate.

use benchtop_sessions::StackTree;

use crate::support::{figure, record_run};

/// The share of `tree`'s weight in stacks that contain a frame matching `any`.
fn share(tree: &StackTree, any: &[&str]) -> f64 {
    let mut hit = 0u64;
    tree.for_each_stack(|stack, weight| {
        if stack
            .iter()
            .any(|&f| any.iter().any(|needle| tree.name(f).contains(needle)))
        {
            hit += weight;
        }
    });
    hit as f64 / tree.total_weight().max(1) as f64
}

#[test]
fn with_work_the_off_cpu_profile_is_the_simulated_work_and_the_summary_states_the_maximum() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("kv-work");
    // 16 RPCs outstanding: 16 threads of the server's blocking pool asleep in the work,
    // against the handful of runtime and reporting threads that wait for them.
    let (output, session) = record_run(
        &dir,
        &[
            "kvstore",
            "--listen",
            "127.0.0.1:0",
            "--concurrency",
            "16",
            "--duration",
            "3s",
            "--mean-value-size",
            "1024",
            "--interval",
            "500ms",
        ],
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.contains("theoretical_max_rpcs_per_second: 400"),
        "{stdout}"
    );
    assert!(figure(&session, "rpcs_per_second") > 50.0, "{stdout}");
    assert_eq!(figure(&session, "failures"), 0.0, "{stdout}");
    // Where threads blocked, as `show` ranks it: by the innermost frame that is not the
    // kernel's. The work's sleep is the largest, and a large share of all blocked time
    // (the rest: runtime threads waiting for it, idle pool threads, the reporter).
    let offcpu = session.offcpu.as_ref().expect("off-CPU stacks");
    let work = share(offcpu, &["sleep_for_work"]);
    let mut sites: std::collections::HashMap<String, u64> = std::collections::HashMap::new();
    offcpu.for_each_stack(|stack, weight| {
        let site = stack
            .iter()
            .map(|&f| offcpu.name(f))
            .rfind(|name| !name.ends_with("_[k]"))
            .unwrap_or("")
            .to_owned();
        *sites.entry(site).or_default() += weight;
    });
    let (top, top_weight) = sites.iter().max_by_key(|(_, w)| **w).unwrap();
    let total = offcpu.total_weight() as f64;
    assert!(
        work > 0.4 && (*top_weight as f64 / total - work).abs() < 0.05,
        "the simulated work is {:.0}% of the blocked time; the largest site is {top} at \
         {:.0}%",
        work * 100.0,
        *top_weight as f64 / total * 100.0
    );
    // Per-operation latency histograms are in the session.
    let tags: std::collections::BTreeSet<&str> =
        session.latency.iter().map(|i| i.tag.as_str()).collect();
    for tag in ["rpc", "create", "retrieve", "update", "delete"] {
        assert!(tags.contains(tag), "{tags:?}");
    }
}

#[test]
fn without_work_the_on_cpu_profile_is_the_rpc_stack() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("kv-rpc");
    let (output, session) = record_run(
        &dir,
        &[
            "kvstore",
            "--disable-work-simulation",
            "--listen",
            "127.0.0.1:0",
            "--concurrency",
            "8",
            "--duration",
            "2s",
            "--profile",
            "cpu",
        ],
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.contains("theoretical_max_rpcs_per_second: none"),
        "{stdout}"
    );
    let cpu = session.cpu.as_ref().expect("on-CPU stacks");
    let rpc = share(cpu, &["tonic::", "hyper::", "h2::", "prost::"]);
    assert!(
        rpc > 0.3,
        "the RPC stack is {:.0}% of the samples",
        rpc * 100.0
    );
}

#[test]
fn client_and_server_in_two_network_namespaces_talk_over_listen_and_connect() {
    let hosts = crate::netns::Hosts::new();
    let tmp = tempfile::tempdir().unwrap();
    let (server_dir, client_dir) = (tmp.path().join("server"), tmp.path().join("client"));
    let benchtop = env!("CARGO_BIN_EXE_benchtop");
    let listen = format!("{}:50051", hosts.addr_a);
    let mut server = hosts
        .command(&hosts.a, benchtop)
        .args([
            "run",
            "kvstore",
            "--role",
            "server",
            "--disable-work-simulation",
        ])
        .args([
            "--listen",
            &listen,
            "--duration",
            "6s",
            "--profile",
            "none",
            "--quiet",
        ])
        .arg("--record")
        .arg(&server_dir)
        .spawn()
        .unwrap();
    hosts.wait_for_server_on_a(50051);
    let client = hosts
        .command(&hosts.b, benchtop)
        .args([
            "run",
            "kvstore",
            "--role",
            "client",
            "--disable-work-simulation",
        ])
        .args([
            "--connect",
            &listen,
            "--concurrency",
            "4",
            "--duration",
            "1s",
        ])
        .args([
            "--mean-value-size",
            "512",
            "--profile",
            "none",
            "--quiet",
            "--record",
        ])
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
    let rpcs = figure(&client, "rpcs");
    assert!(rpcs > 10.0, "{stdout}");
    assert_eq!(figure(&client, "failures"), 0.0, "{stdout}");
    assert_eq!(
        figure(&server, "rpcs_served"),
        rpcs,
        "every RPC answered by the other host"
    );
    assert_eq!(
        server.meta.workload.params["listen"],
        serde_json::json!(listen)
    );
}
