//! The integration tests, in one test binary: each file here was a binary of its own, and
//! every binary linked the whole crate (thin LTO), which made the link the longest part
//! of `cargo test --release`. Tests are named `<module>::<test>`, e.g.
//! `cargo test --release --test suite -- rc::` runs the RC tests only.
//!
//! `reference` and the slow tests of `robustness` are skipped by the debug-build step of
//! `.ci/run`; see there.

mod common;

mod cli;
mod collectives;
mod compare;
mod connections;
mod dcqcn;
mod faults;
mod host;
mod lossless;
mod plan;
mod plot;
mod rc;
mod reference;
mod robustness;
mod sweep;
mod validation;
