//! The collectives' speed target: a 1024-GPU ring allreduce of 256 MiB
//! (`benches/scenarios/allreduce-1024.yaml`) must simulate in under 30 s of wall time
//! on one core. One run (it takes seconds: criterion's ten samples would take minutes);
//! prints wall time, events and events per second, and fails above the target.
//!
//! Run: `cargo bench --bench allreduce_1024`.

use doorbell::metrics::summarize;
use doorbell::scenario::{load, Overrides};
use std::path::Path;
use std::time::Instant;

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let sc = load(
        &root.join("benches/scenarios/allreduce-1024.yaml"),
        &Overrides::default(),
    )
    .expect("bench scenario");
    let wall = Instant::now();
    let out = doorbell::sim::run(&sc);
    let secs = wall.elapsed().as_secs_f64();
    let s = summarize(&sc, &out);
    let c = &s.collectives[0];
    let row = &c.rows[0];
    println!(
        "allreduce-1024: {} ranks, {} B in {:.1} us simulated (busbw {:.2} GB/s, #wrong {}); {} events in {secs:.2} s wall ({:.1} M events/s)",
        c.ranks,
        row.size,
        row.time_us,
        row.busbw_gbs,
        row.wrong,
        out.events,
        out.events as f64 / secs / 1e6
    );
    assert!(
        c.complete && row.wrong == 0,
        "the allreduce completed correctly"
    );
    assert!(secs < 30.0, "{secs:.1} s is over the 30 s target");
}
