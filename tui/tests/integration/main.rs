//! End-to-end tests of the benchtop binary and its recorder: headless, and in a real
//! terminal (tmux).
#![allow(clippy::unwrap_used)]

mod ab;
mod alloc;
mod alloc_stacks;
mod bounded;
mod compare;
mod conventions;
mod defs;
mod deps;
mod disk_full;
mod echo;
mod exact;
mod export;
mod external;
mod history;
mod hostile_args;
mod hostile_sessions;
mod hostile_terminal;
mod kvstore;
mod leftovers;
mod live;
mod long_session;
mod manual;
mod memory;
mod messenger;
mod netns;
mod otlp;
mod process_tree;
mod reap;
mod record;
mod reports;
mod series;
mod setup;
mod signals;
mod source;
mod support;
mod terminal;
mod timeline;
mod waits;
