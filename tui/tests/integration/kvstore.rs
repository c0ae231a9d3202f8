//! The kvstore workload recorded end to end: with simulated work the off-CPU profile is
//! the work's sleep; without it the on-CPU profile is the RPC stack (tonic, hyper, h2,
//! prost); the summary states the theoretical maximum beside the measured rate.

use benchtop_sessions::Kind;
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
    // The off-CPU profile holds the work's sleeps: its `sleep_for_work` frames weigh
    // what the server measured its threads asleep in the work (the sleeps' own clocks,
    // to the moment each thread ran again). On a loaded machine a request that waited
    // sleeps less, and pool threads wait more for the next one, so the share of all
    // blocked time moves with the load; what was slept and what the profile shows must
    // agree whatever the load.
    let offcpu = session.profile(Kind::OffCpu).expect("off-CPU stacks");
    let mut work_us = 0u64;
    offcpu.for_each_stack(|stack, weight| {
        if stack
            .iter()
            .any(|&f| offcpu.name(f).contains("sleep_for_work"))
        {
            work_us += weight;
        }
    });
    let profiled = work_us as f64 / 1e6;
    let slept = figure(&session, "work_slept_s");
    // 16 RPCs outstanding for 3 s, 40 ms of work each: near 48 s asleep on a quiet
    // machine; far less on a loaded one, where the clients take their RPCs' own cost
    // (tens of ms in a debug build beside CPU hogs) out of the work. The profile may
    // miss the sleeps going on when the sampler first saw the pool's threads and when
    // recording stopped: 16 at most each time, 40 ms each.
    let missed = 2.0 * 16.0 * 0.040;
    assert!(
        slept > 0.5 && (0.95 * slept - missed..=1.02 * slept + 0.05).contains(&profiled),
        "the off-CPU profile holds {profiled:.3} s in sleep_for_work; the work slept \
         {slept:.3} s\n{stdout}"
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
    let cpu = session.profile(Kind::Cpu).expect("on-CPU stacks");
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
