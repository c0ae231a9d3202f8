//! Which side of a client/server workload (`udp-echo`, `kvstore`, `messenger`) a worker
//! runs: `--role server|client|both`.

/// Which side(s) of the benchmark this process runs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// The server only, on `--listen`, until stopped or its duration passes.
    Server,
    /// The clients only, against the server on `--connect`.
    Client,
    /// Server and clients on this host (the default).
    #[default]
    Both,
}

impl Role {
    /// The name on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Server => "server",
            Role::Client => "client",
            Role::Both => "both",
        }
    }

    /// Whether this side runs a server.
    pub fn serves(self) -> bool {
        self != Role::Client
    }

    /// Whether this side runs clients.
    pub fn sends(self) -> bool {
        self != Role::Server
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_role_names_itself_and_says_what_it_runs() {
        assert_eq!(
            [Role::Server, Role::Client, Role::Both].map(Role::as_str),
            ["server", "client", "both"]
        );
        assert!(Role::Server.serves() && !Role::Server.sends());
        assert!(!Role::Client.serves() && Role::Client.sends());
        assert!(Role::Both.serves() && Role::Both.sends());
    }
}
