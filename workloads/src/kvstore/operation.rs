//! The service's four operations, which the clients pick, the server serves and the
//! metrics and parameters name.

/// The four operations of the service.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Operation {
    /// Store a new key.
    Create,
    /// Read a key.
    Retrieve,
    /// Replace a key's value.
    Update,
    /// Remove a key.
    Delete,
}

impl Operation {
    /// Every operation, in the order of their histograms.
    pub const ALL: [Operation; 4] = [
        Operation::Create,
        Operation::Retrieve,
        Operation::Update,
        Operation::Delete,
    ];

    /// The operation's name, as its latency histogram is named.
    pub fn name(self) -> &'static str {
        match self {
            Operation::Create => "create",
            Operation::Retrieve => "retrieve",
            Operation::Update => "update",
            Operation::Delete => "delete",
        }
    }

    pub(super) fn index(self) -> usize {
        self as usize
    }
}
