//! `defs`: ecFlow definition parse, checkpoint and reload at the scale of a real
//! operational suite.
//!
//! [`parse`] reads ecFlow `.def` text into a [`Defs`] tree and [`write()`] writes it back
//! as ecFlow 5.9 does; writing and reading again gives the same tree.
//!
//! ```
//! use benchtop_workloads::defs::{parse, write};
//!
//! let text = "#5.9.2\nsuite s\n  family f\n    task a\n    task b\n      trigger a == complete\n  endfamily\nendsuite\n";
//! let defs = parse(text)?;
//! assert_eq!(defs.counts().triggers, 1);
//! assert_eq!(write(&defs), text);
//! # Ok::<(), benchtop_workloads::defs::ParseError>(())
//! ```

pub mod expr;
pub mod generate;
pub mod model;
mod parse;
mod write;

pub use self::model::{Attr, Counts, Defs, ExprId, Node, NodeKind, PathId, State};
pub use self::parse::{ParseError, parse};
pub use self::write::{DEFAULT_VERSION, write, write_into};
