//! doorbell: a deterministic discrete-event simulator of two-hop (leaf-spine) Clos RDMA
//! fabrics.
//!
//! The modules mirror the model:
//! - [`units`]: integer-picosecond time, bytes, bits per second, unit strings;
//! - [`spec`]: quantities as scenario files write them (the model parameter types use
//!   them; the scenario schema re-exports those types);
//! - [`engine`]: the event queue and the one event enum;
//! - [`scenario`]: YAML schema, validation, defaults, errors with file/line/column;
//! - [`topology`]: the Clos fabric, port layout and next-hop tables; [`routing`]: one
//!   policy per file;
//! - [`components`]: egress ports, wires, ingress, switches, NICs, queue pairs and the
//!   host pipeline, each sans-IO; [`transport`]: RC; [`cc`]: congestion control;
//! - [`packet`]: encapsulation overheads and the packet pool;
//! - [`workload`]: flows, permutation, incast, all-to-all, Poisson with size CDFs,
//!   message streams and ping-pongs;
//! - [`nic`]: the host and NIC model's parameters and interrupt moderation;
//! - [`collective`]: NCCL-style collectives over GPU ranks;
//! - [`sim`]: the wiring and event dispatch;
//! - [`analytic`]: closed forms the simulator is tested against;
//! - [`metrics`] and [`report`]: summaries, CSV/JSON, the stdout table; [`outdir`]:
//!   output folders that are whole (lock, temporary names, completion marker);
//! - [`sweep`]: parameter sweeps, run in parallel, sharded and merged; [`plot`]: curves;
//!   [`plan`]: the cheapest fabric that meets the targets;
//! - [`hugepages`]: the process's allocator: large arrays and the heaps on huge pages.

pub mod analytic;
pub mod cc;
pub mod collective;
pub mod compare;
pub mod components;
pub mod engine;
pub mod hugepages;
pub mod metrics;
pub mod nic;
pub mod outdir;
pub mod packet;
pub mod plan;
pub mod plot;
pub mod report;
pub mod rng;
pub mod routing;
pub mod scenario;
pub mod sim;
pub mod spec;
pub mod sweep;
pub mod topology;
pub mod training;
pub mod transport;
pub mod units;
pub mod workload;

/// Every binary built on the library (the CLI, tests, benches) allocates through it.
#[global_allocator]
static ALLOCATOR: hugepages::HugePageAlloc = hugepages::HugePageAlloc;
