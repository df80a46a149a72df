//! Congestion control at the NICs.
//!
//! [`dcqcn`] is DCQCN (Zhu et al., SIGCOMM 2015): ECN marks at switches, CNPs from the
//! receiver, a per-queue-pair rate limiter at the sender. The switches' RED marking and
//! the glue that sends CNPs and paces queue pairs live in `sim.rs`.

pub mod dcqcn;
