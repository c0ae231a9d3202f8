//! Two hosts on one machine: two network namespaces joined by a veth pair, created by the
//! test (root), removed on drop. Client/server workloads run one side in each with
//! `--listen` and `--connect`, as on two hosts.

use std::process::{Command, Output};
use std::sync::atomic::{AtomicU32, Ordering};

/// Two namespaces, `a` (address `addr_a`) and `b` (`addr_b`), joined by a veth pair.
pub struct Hosts {
    pub a: String,
    pub b: String,
    pub addr_a: String,
    pub addr_b: String,
}

fn ip(args: &[&str]) -> Output {
    let output = Command::new("ip").args(args).output().unwrap_or_else(|e| {
        panic!("this test needs `ip` (iproute2; scripts/test installs it): {e}")
    });
    assert!(
        output.status.success(),
        "ip {}: {}\nthis test creates network namespaces: it needs root (CAP_NET_ADMIN)",
        args.join(" "),
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

impl Hosts {
    /// Creates the namespaces and the link, with addresses 10.77.N.1 and 10.77.N.2.
    pub fn new() -> Hosts {
        static N: AtomicU32 = AtomicU32::new(0);
        let n = N.fetch_add(1, Ordering::SeqCst);
        let id = format!("{}-{n}", std::process::id() % 100_000);
        let subnet = (std::process::id() % 200 + n) % 250 + 1;
        let hosts = Hosts {
            a: format!("bt-a-{id}"),
            b: format!("bt-b-{id}"),
            addr_a: format!("10.77.{subnet}.1"),
            addr_b: format!("10.77.{subnet}.2"),
        };
        // Interface names have at most 15 bytes.
        let (va, vb) = (format!("bta{id}"), format!("btb{id}"));
        ip(&["netns", "add", &hosts.a]);
        // From here on, drop removes what was made.
        ip(&["netns", "add", &hosts.b]);
        ip(&["link", "add", &va, "type", "veth", "peer", "name", &vb]);
        ip(&["link", "set", &va, "netns", &hosts.a]);
        ip(&["link", "set", &vb, "netns", &hosts.b]);
        for (ns, dev, addr) in [
            (&hosts.a, &va, &hosts.addr_a),
            (&hosts.b, &vb, &hosts.addr_b),
        ] {
            ip(&["-n", ns, "addr", "add", &format!("{addr}/24"), "dev", dev]);
            ip(&["-n", ns, "link", "set", dev, "up"]);
            ip(&["-n", ns, "link", "set", "lo", "up"]);
        }
        hosts
    }

    /// Waits (at most 20 s) until host b can open a TCP connection to `port` on host a:
    /// the server there is up.
    pub fn wait_for_server_on_a(&self, port: u16) {
        crate::support::wait_until(
            "the server in namespace a",
            std::time::Duration::from_secs(20),
            || {
                self.command(&self.b, "bash")
                    .args(["-c", &format!("exec 3<>/dev/tcp/{}/{port}", self.addr_a)])
                    .output()
                    .is_ok_and(|o| o.status.success())
            },
        );
    }

    /// `program args…` inside namespace `ns`.
    pub fn command(&self, ns: &str, program: &str) -> Command {
        let mut command = Command::new("ip");
        command.args(["netns", "exec", ns, program]);
        command
    }
}

impl Drop for Hosts {
    fn drop(&mut self) {
        // Deleting a namespace deletes its end of the veth pair, and with it the other.
        for ns in [&self.a, &self.b] {
            let _ = Command::new("ip").args(["netns", "del", ns]).output();
        }
    }
}
