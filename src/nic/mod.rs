//! The NIC and its host: doorbells, WQE fetch, PCIe DMA, completions and interrupts.
//!
//! Built so far: [`interrupts`], the completion-queue interrupt moderator (fixed and
//! DIM-like adaptive), sans-IO and unit-tested. The posting pipeline, PCIe and the host's
//! CPU accounting come next (the NIC issue); until then hosts post instantly.

pub mod interrupts;
