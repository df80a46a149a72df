//! Transports: how a message crosses the fabric reliably.
//!
//! [`rc`] is InfiniBand's Reliable Connected transport. The simulation runs every flow
//! over an RC queue pair when the scenario has a `transport:` section; without one, hosts
//! send raw packets at line rate with no acknowledgements (the foundation's model).

pub mod rc;
