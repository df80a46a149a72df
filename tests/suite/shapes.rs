//! Fabric shapes as data: multi-plane fabrics (`topology.planes`: each plane a
//! leaf-spine fabric of its own, collectives on rails inside their planes, traffic that
//! would have to cross planes refused before the run) and uneven leaves
//! (`hosts_per_leaf` as a list).

use crate::common::{rejected, scenario};
use doorbell::metrics::summarize;
use doorbell::sim::run;

/// 8 servers x 2 GPUs/NICs, rail-wired: rail r is hosts 8r..8r+7, on leaves 2r, 2r + 1.
fn fabric(planes: u32, links: u32, algorithm: &str) -> String {
    format!(
        "topology: {{ leaves: 4, spines: 4, hosts_per_leaf: 4, planes: {planes}, links_per_spine: {links}, host_link: {{ rate: 100Gbps, latency: 200ns }} }}
switch: {{ latency: 300ns, forwarding: cut_through }}
flow_control: {{ mode: ib_credit }}
host: {{ gpus_per_host: 2, nics_per_host: 2, wiring: rail, posting: cpu_proxy, memory: gpu }}
workload:
  - collective: {{ op: allreduce, algorithm: {algorithm}, size: 1MiB, channels: 2, iters: 1, warmup_iters: 0 }}"
    )
}

/// Every algorithm that may run on planes runs correctly there, every transfer stays
/// in its plane, and no spine carries a byte of the other plane. Same switches and
/// cables as one plane (4 spines x 2 links per leaf there, 2 spines x 4 links here):
/// an uncongested ring's busbw is the same within 1% (one flow per path either way).
#[test]
fn rail_collectives_run_inside_their_planes() {
    for algorithm in ["ring", "tree", "hierarchical"] {
        let sc = scenario(&fabric(2, 4, algorithm));
        let topo = &sc.topology;
        let out = run(&sc);
        let s = summarize(&sc, &out);
        assert_eq!(s.collectives[0].rows[0].wrong, 0, "{algorithm}");
        let mut spine_bytes = 0;
        for (i, p) in out.ports.iter().enumerate() {
            let (_, _, switch, to) = topo.port_info(i as u32);
            if p.tx_bytes > 0 {
                if let (Some(sw), doorbell::topology::Node::Switch(t)) = (switch, to) {
                    assert_eq!(
                        topo.plane_of_switch(sw),
                        topo.plane_of_switch(t),
                        "{algorithm}: {}",
                        topo.port_name(i as u32)
                    );
                    spine_bytes += p.tx_bytes;
                }
            }
        }
        assert!(spine_bytes > 0, "{algorithm}: the rails cross their spines");
        for f in &out.flows {
            assert_eq!(topo.plane_of(f.def.src), topo.plane_of(f.def.dst));
        }
    }
    let busbw = |planes, links| {
        let sc = scenario(&fabric(planes, links, "ring"));
        summarize(&sc, &run(&sc)).collectives[0].rows[0].busbw_gbs
    };
    let (one, two) = (busbw(1, 2), busbw(2, 4));
    assert!((two / one - 1.0).abs() < 0.01, "one plane {one}, two {two}");
}

#[test]
fn traffic_across_planes_and_uneven_planes_are_refused() {
    let base = fabric(2, 4, "ring");
    let with = |workload: &str| {
        let i = base.find("workload:").unwrap();
        format!("{}workload:\n  - {workload}", &base[..i])
    };
    let e = rejected(&base.replace("leaves: 4", "leaves: 3"));
    assert!(
        e.contains("topology.leaves: 3 leaves do not split evenly into 2 planes"),
        "{e}"
    );
    let e = rejected(&base.replace("planes: 2", "planes: 0"));
    assert!(
        e.contains("topology.planes: expected 1 to 64 planes, found 0"),
        "{e}"
    );
    let e = rejected(&with("flows: [{ src: 1, dst: 9, size: 1MiB }]"));
    assert!(
        e.contains("workload[0].flows[0].dst: host 1 is in plane 0 and host 9 in plane 1")
            && e.contains("planes); plane 0: hosts 0 to 7, plane 1: hosts 8 to 15"),
        "{e}"
    );
    let e = rejected(&with("permutation: { size: 1MiB }"));
    assert!(
        e.contains("workload[0].permutation: a permutation spreads over every host"),
        "{e}"
    );
    let e = rejected(&with(
        "poisson: { load: 0.1, sizes: websearch, until: 1ms, src_hosts: [0, 1] }",
    ));
    assert!(
        e.contains("workload[0].poisson.dst_hosts: host 0 is in plane 0 and host 8 in plane 1"),
        "{e}"
    );
    // Inside one plane they run.
    scenario(&with("flows: [{ src: 1, dst: 7, size: 1MiB }]"));
    scenario(&with(
        "poisson: { load: 0.1, sizes: websearch, until: 1ms, src_hosts: [8, 9], dst_hosts: [10, 15] }",
    ));
    // A collective whose ranks use their own NICs across planes, and in-network
    // aggregation, are refused; so is a compare set that splits a fabric its traffic
    // cannot cross.
    let e = rejected(&base.replace("channels: 2,", "channels: 2, pxn: false,"));
    assert!(
        e.contains("workload[0].collective.ranks: ranks on host 0 (plane 0) and host 8 (plane 1)"),
        "{e}"
    );
    let e = rejected(&base.replace("algorithm: ring", "algorithm: in_network"));
    assert!(
        e.contains(
            "workload[0].collective.algorithm: `in_network` aggregation over 2 disjoint planes"
        ),
        "{e}"
    );
    let one = fabric(1, 2, "ring");
    let i = one.find("workload:").unwrap();
    let e = rejected(&format!(
        "{}workload:\n  - permutation: {{ size: 1MiB }}\ncompare:\n  - {{ name: split, topology: {{ planes: 2, links_per_spine: 4 }} }}\n",
        &one[..i]
    ));
    assert!(e.contains("permutation spreads over every host"), "{e}");
}

/// Three racks of 4, 4 and 2 hosts under 2 spines: each host sits under the right leaf
/// (the half-full rack's too), every flow of a permutation over all 10 finishes, and a
/// flow alone on the fabric, within a leaf or across the spines, takes its ideal time.
#[test]
fn uneven_leaves_carry_traffic_to_every_host() {
    let sc = scenario(
        "topology: { leaves: 3, spines: 2, hosts_per_leaf: [4, 4, 2], links_per_spine: 2, host_link: { rate: 100Gbps, latency: 200ns } }
workload:
  - flows: [{ src: 9, dst: 0, size: 64KiB }, { src: 3, dst: 8, size: 64KiB }, { src: 8, dst: 9, size: 64KiB }]
  - permutation: { size: 256KiB, start: 100us }",
    );
    let t = &sc.topology;
    assert_eq!(t.hosts(), 10);
    assert_eq!(
        (0..10).map(|h| t.leaf_of(h)).collect::<Vec<_>>(),
        [0, 0, 0, 0, 1, 1, 1, 1, 2, 2]
    );
    assert_eq!(t.port_name(t.host_up(9)), "host9->leaf2");
    let out = run(&sc);
    assert!(
        out.flows.iter().all(|f| f.finish.is_some()),
        "every flow finished"
    );
    // Alone on the fabric, flow 2 (8 -> 9, one leaf) and flow 0 (9 -> 0, via a spine)
    // take their ideal times within 5% (the ideal is the model's own closed form).
    for i in [0, 2] {
        let f = &out.flows[i];
        let fct = f.finish.unwrap().0 - f.def.start.0;
        let ideal = doorbell::analytic::ideal_fct(&sc, f.def.src, f.def.dst, f.def.size).0;
        assert!(
            (fct as f64) < ideal as f64 * 1.05 && fct >= ideal,
            "flow {i}: {fct} ps vs ideal {ideal} ps"
        );
    }
    let s = summarize(&sc, &out);
    assert_eq!(s.topology.leaf_hosts, Some(vec![4, 4, 2]));
    assert_eq!(s.topology.hosts_per_leaf, 4);
    // Equal counts are the even fabric: same shape, no list in the summary.
    let even = scenario(
        "topology: { leaves: 2, spines: 1, hosts_per_leaf: [3, 3], host_link: { rate: 100Gbps } }
workload:
  - flows: [{ src: 0, dst: 5, size: 64KiB }]",
    );
    assert!(even.topology.first_host.is_empty());
    assert_eq!(even.topology.hosts_per_leaf, 3);
}

#[test]
fn uneven_leaf_lists_are_checked() {
    let yaml = |list: &str| {
        format!(
            "topology: {{ leaves: 3, spines: 2, hosts_per_leaf: {list}, host_link: {{ rate: 100Gbps }} }}
workload:
  - flows: [{{ src: 0, dst: 1, size: 64KiB }}]"
        )
    };
    let e = rejected(&yaml("[4, 4]"));
    assert!(
        e.contains(
            "topology.hosts_per_leaf: expected one host count per leaf (3 leaves), found 2 counts"
        ),
        "{e}"
    );
    let e = rejected(&yaml("[4, 0, 2]"));
    assert!(
        e.contains("topology.hosts_per_leaf[1]: expected 1 to 4096 hosts under a leaf, found 0"),
        "{e}"
    );
    let e = rejected(&yaml("[4, 2.5, 2]"));
    assert!(
        e.contains("topology.hosts_per_leaf[1]: invalid type: floating point `2.5`, expected a whole number of hosts under this leaf"),
        "{e}"
    );
    let e = rejected(&yaml("four"));
    assert!(
        e.contains("expected a host count (`8`) or one count per leaf (`[8, 8, 4]`)"),
        "{e}"
    );
    let e = rejected(&yaml("[4, 4, 2]").replace("dst: 1", "dst: 10"));
    assert!(
        e.contains("host 10 does not exist: the fabric has 10 hosts"),
        "{e}"
    );
}
