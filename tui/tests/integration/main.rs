//! End-to-end tests of the benchtop binary and its recorder: headless, and in a real
//! terminal (tmux).
#![allow(clippy::unwrap_used)]

mod ab;
mod compare;
mod defs;
mod deps;
mod echo;
mod export;
mod external;
mod kvstore;
mod manual;
mod messenger;
mod netns;
mod process_tree;
mod reap;
mod record;
mod series;
mod setup;
mod support;
mod terminal;
