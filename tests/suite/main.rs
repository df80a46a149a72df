//! The integration tests, in one test binary: each file here was a binary of its own, and
//! every binary linked the whole crate (thin LTO), which made the link the longest part
//! of `cargo test --release`. Tests are named `<module>::<test>`, e.g.
//! `cargo test --release --test suite -- rc::` runs the RC tests only.
//!
//! `.ci/run` also runs this suite in a debug build (debug assertions, overflow checks),
//! skipping by name the tests that take over 10 s there; a new slow test belongs in
//! that list.

mod common;

mod cli;
mod collectives;
mod compare;
mod connections;
mod dcqcn;
mod faults;
mod fuzz;
mod host;
mod hpcc;
mod invariants;
mod load_balancing;
mod lossless;
mod nccl;
mod outputs;
mod plan;
mod plot;
mod rc;
mod reference;
mod resources;
mod robustness;
mod shapes;
mod sweep;
mod swift;
mod threads;
mod training;
mod validation;
