//! End-to-end tests of the benchtop binary and its recorder, headless.
#![allow(clippy::unwrap_used)]

mod deps;
mod record;
mod support;
