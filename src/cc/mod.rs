//! Congestion control at the NICs.
//!
//! [`dcqcn`] is DCQCN (Zhu et al., SIGCOMM 2015): ECN marks at switches, CNPs from the
//! receiver, a per-queue-pair rate limiter at the sender. The fabric's ECN marking and the
//! glue that paces queue pairs come with the lossless-fabric issue.

pub mod dcqcn;
