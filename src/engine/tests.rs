//! The event queue's order: by time, then source, then each source's own order, for
//! every way events reach it (the two wheels, the far heap, the tick being handled,
//! reserved keys) and every way a refill is sorted (networks, rank, comparison, proxies).

use super::network::{NETWORK_16, NETWORK_32, NETWORK_8};
use super::*;

/// The next state of Marsaglia's xorshift64 (the tests' pseudo-random stream).
fn xorshift(x: &mut u64) {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
}

#[test]
fn a_reserved_key_orders_its_event_as_scheduling_it_then_would_have() {
    // The same four events, the second scheduled at once in one queue and under a
    // key reserved at that moment (scheduled after the others) in the other.
    let ev = |port| Event::TxDone { port };
    let mut a = EventQueue::new(2);
    a.schedule(SimTime(10), 1, ev(1));
    a.schedule(SimTime(10), 1, ev(2));
    a.schedule(SimTime(10), 0, ev(3));
    a.schedule(SimTime(10), 1, ev(4));
    let mut b = EventQueue::new(2);
    b.schedule(SimTime(10), 1, ev(1));
    let key = b.reserve(SimTime(10), 1);
    b.schedule(SimTime(10), 0, ev(3));
    b.schedule(SimTime(10), 1, ev(4));
    b.schedule_reserved(key, ev(2));
    let order = |q: &mut EventQueue| {
        std::iter::from_fn(|| q.pop().map(|(t, e)| (t, e, q.current_key()))).collect::<Vec<_>>()
    };
    let (oa, ob) = (order(&mut a), order(&mut b));
    assert_eq!(oa, ob);
    assert_eq!(
        oa.iter().map(|x| x.1).collect::<Vec<_>>(),
        [ev(3), ev(1), ev(2), ev(4)]
    );
    // A reserved key never scheduled leaves the others' order as it was.
    let mut c = EventQueue::new(2);
    c.schedule(SimTime(10), 1, ev(1));
    let _ = c.reserve(SimTime(10), 1);
    c.schedule(SimTime(10), 0, ev(3));
    c.schedule(SimTime(10), 1, ev(4));
    let oc: Vec<_> = order(&mut c).into_iter().map(|x| x.1).collect();
    assert_eq!(oc, [ev(3), ev(1), ev(4)]);
}

#[test]
fn orders_by_time_then_insertion() {
    let mut q = EventQueue::new(1);
    q.schedule(SimTime(10), 0, Event::TxDone { port: 1 });
    q.schedule(SimTime(5), 0, Event::TxDone { port: 2 });
    q.schedule(SimTime(10), 0, Event::TxDone { port: 3 });
    q.schedule(SimTime(5), 0, Event::TxDone { port: 4 });
    let order: Vec<_> = std::iter::from_fn(|| q.pop())
        .map(|(t, e)| match e {
            Event::TxDone { port } => (t.0, port),
            _ => unreachable!(),
        })
        .collect();
    assert_eq!(order, vec![(5, 2), (5, 4), (10, 1), (10, 3)]);
    assert_eq!(q.events_processed(), 4);
}

fn drain(q: &mut EventQueue) -> Vec<(u64, u32)> {
    std::iter::from_fn(|| q.pop())
        .map(|(t, e)| match e {
            Event::TxDone { port } => (t.0, port),
            _ => unreachable!(),
        })
        .collect()
}

#[test]
fn ties_go_by_source_then_the_sources_own_order_whatever_the_interleaving() {
    // Sources 0 and 1 each schedule two events at t = 5 (ports 10, 11 from source 1;
    // 20, 21 from source 0). However the two sources interleave their calls, as two
    // partitions running at different speeds would, the pop order is the same.
    let interleavings: [&[u32]; 3] = [&[0, 0, 1, 1], &[1, 1, 0, 0], &[1, 0, 1, 0]];
    let mut orders = Vec::new();
    for calls in interleavings {
        let mut q = EventQueue::new(2);
        let mut next = [20u32, 10];
        for &src in calls {
            let port = next[src as usize];
            next[src as usize] += 1;
            q.schedule(SimTime(5), src, Event::TxDone { port });
        }
        orders.push(drain(&mut q));
    }
    assert_eq!(orders[0], vec![(5, 20), (5, 21), (5, 10), (5, 11)]);
    assert!(orders.iter().all(|o| *o == orders[0]), "{orders:?}");
}

#[test]
#[should_panic(expected = "before now")]
fn scheduling_into_the_past_is_caught_in_every_build() {
    let mut q = EventQueue::new(1);
    q.schedule(SimTime(10), 0, Event::FlowStart { flow: 0 });
    q.pop();
    q.schedule(SimTime(9), 0, Event::FlowStart { flow: 1 });
}

#[test]
fn a_random_schedule_pops_in_key_order() {
    // Against a sorted reference: 10,000 events at pseudo-random times, popped while
    // more are scheduled, come out ordered by (time, insertion).
    let mut q = EventQueue::new(1);
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    let mut reference = Vec::new();
    let mut out = Vec::new();
    for i in 0..10_000u32 {
        xorshift(&mut x);
        let t = q.now().0 + x % 1000;
        q.schedule(SimTime(t), 0, Event::TxDone { port: i });
        reference.push((t, i));
        if i % 3 == 0 {
            let (t, e) = q.pop().unwrap();
            if let Event::TxDone { port } = e {
                out.push((t.0, port));
            }
        }
    }
    while let Some((t, Event::TxDone { port })) = q.pop() {
        out.push((t.0, port));
    }
    // Every event came out once, times never decreased, and equal times kept their
    // insertion order.
    assert_eq!(out.len(), reference.len());
    for w in out.windows(2) {
        assert!(
            w[0].0 < w[1].0 || (w[0].0 == w[1].0 && w[0].1 < w[1].1),
            "{w:?}"
        );
    }
}

#[test]
fn events_across_ticks_pop_in_key_order_and_peek_the_earliest() {
    // Three sources scheduling up to 100 us ahead, popped while more
    // are scheduled, some into the tick being processed. Each pop must be the least
    // pending (time, source, the source's own order), as in a sorted reference set,
    // and `peek_time` must name its time.
    let mut q = EventQueue::new(3);
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut pending = std::collections::BTreeSet::new();
    let mut seq = [0u32; 3];
    let mut popped = 0;
    let mut check = |q: &mut EventQueue, pending: &mut std::collections::BTreeSet<_>| {
        let peeked = q.peek_time().unwrap();
        let (t, e) = q.pop().unwrap();
        let Event::TxDone { port } = e else {
            unreachable!()
        };
        let least = pending.pop_first().unwrap();
        assert_eq!((t.0, port >> 24, port), least);
        assert_eq!(peeked, t);
        popped += 1;
    };
    for i in 0..20_000u32 {
        xorshift(&mut x);
        let src = (x % 3) as u32;
        // Within the tick, within the wheel's reach (1 us: 122 ticks, half of them
        // beyond it) and far beyond it (up to 100 us: the far heap's deep buckets).
        let ahead = match i % 5 {
            0 => x % 300,
            1 => x % 100_000_000,
            _ => x % 1_000_000,
        };
        let t = q.now().0 + ahead;
        // The source's sequence number in the low bits, the source above.
        let port = (src << 24) | seq[src as usize];
        seq[src as usize] += 1;
        q.schedule(SimTime(t), src, Event::TxDone { port });
        pending.insert((t, src, port));
        if i % 2 == 0 {
            check(&mut q, &mut pending);
        }
    }
    while !pending.is_empty() {
        check(&mut q, &mut pending);
    }
    assert!(q.is_empty() && q.peek_time().is_none());
    assert_eq!(popped, 20_000);
}

/// What a queue under test should hold: each source's events numbered in the order
/// they were made (a `TxDone` whose port is source << 24 | number), the keys reserved
/// and not scheduled yet, and every pending (time, source, port) in key order.
struct Reference {
    pending: std::collections::BTreeSet<(u64, u32, u32)>,
    made: Vec<u32>,
    held: Vec<(u128, u32)>,
}

impl Reference {
    fn new(sources: u32) -> Self {
        Reference {
            pending: Default::default(),
            made: vec![0; sources as usize],
            held: Vec::new(),
        }
    }

    /// Source `src`'s next event at `t`: scheduled now, or (`hold`) its key reserved now
    /// and the event scheduled at the next `release`, after later events of its source.
    fn add(&mut self, q: &mut EventQueue, t: u64, src: u32, hold: bool) {
        let port = (src << 24) | self.made[src as usize];
        self.made[src as usize] += 1;
        if hold {
            self.held.push((q.reserve(SimTime(t), src), port));
        } else {
            q.schedule(SimTime(t), src, Event::TxDone { port });
        }
        self.pending.insert((t, src, port));
    }

    /// Schedules the events whose keys were reserved.
    fn release(&mut self, q: &mut EventQueue) {
        for (key, port) in self.held.drain(..) {
            q.schedule_reserved(key, Event::TxDone { port });
        }
    }

    /// Pops the next event and checks that it is the least pending; its time.
    fn pop_least(&mut self, q: &mut EventQueue) -> SimTime {
        let (t, e) = q.pop().expect("an event pending");
        let Event::TxDone { port } = e else {
            unreachable!()
        };
        assert_eq!((t.0, port >> 24, port), self.pending.pop_first().unwrap());
        t
    }

    /// `pop_least`, having checked that `peek_time` names the time it pops at.
    fn pop_least_peeked(&mut self, q: &mut EventQueue) -> SimTime {
        let peeked = q.peek_time().expect("an event pending");
        let t = self.pop_least(q);
        assert_eq!(t, peeked);
        t
    }

    /// Pops everything pending, each in its place, and finds the queue empty.
    fn drain(&mut self, q: &mut EventQueue) {
        while !self.pending.is_empty() {
            self.pop_least(q);
        }
        assert!(q.pop().is_none());
    }
}

#[test]
fn crowded_ticks_pop_in_key_order() {
    // Ties by the thousand, as a synchronized permutation makes them: 200 sources
    // schedule at a few exact times per tick (batches far above the proxy sort's
    // threshold), some from beyond the wheel, some within it, some into the tick
    // being handled, some under keys reserved before they are scheduled (so pushed
    // after later ones of their source: the insertion pass must put them right).
    // Each pop must be the least pending (time, source, the source's own order).
    const SOURCES: u32 = 200;
    let mut q = EventQueue::new(SOURCES as usize);
    let mut r = Reference::new(SOURCES);
    let mut x: u64 = 0x0123_4567_89ab_cdef;
    let tick = 1u64 << TICK_SHIFT;
    for i in 0..200_000u32 {
        xorshift(&mut x);
        let src = (x % SOURCES as u64) as u32;
        let now = q.now().0;
        // One of four exact times: in the tick being handled, in one of the next
        // two, just beyond the wheel, or at the second next multiple of twice the
        // wheel (beyond it too, aimed at while `far_base` changes, so over several
        // of the far heap's buckets).
        let epoch = 2 * WHEEL * tick;
        let aim = match (x >> 20) % 8 {
            0 => now + (WHEEL + 44) * tick,
            1 => now,
            2 => (now / epoch + 2) * epoch,
            k => now + (k % 3) * tick,
        };
        let t = aim / tick * tick + (x >> 40) % 4 * (tick / 4);
        // One in eight under a key reserved now, scheduled at the end of the burst.
        r.add(&mut q, t.max(now), src, (x >> 30) % 8 == 0);
        // Bursts of 5,000 schedules, then 4,000 pops.
        if i % 5_000 == 4_999 {
            r.release(&mut q);
            for _ in 0..4_000 {
                r.pop_least(&mut q);
            }
        }
    }
    r.drain(&mut q);
    // The proxies' scratch grows only in the proxy sort: refills of many times its
    // threshold went through it.
    assert!(
        q.proxy.capacity() >= 4 * PROXY_SORT_MIN,
        "{}",
        q.proxy.capacity()
    );
    // Emptied, the wheel keeps no crowded tick's allocation.
    assert!(q.slots.iter().all(|s| s.capacity() <= SLOT_KEEP));
}

#[test]
fn crowds_on_the_second_wheel_pop_in_key_order_and_reuse_their_allocations() {
    // A collective's ranks in lockstep: bursts of thousands of events at a few exact
    // times 0.5 to 80 us ahead (over the second wheel's blocks, the first wheel's
    // last slots where a block overlaps them, and beyond both), with events into the
    // first wheel and the tick being handled between them, and some under keys
    // reserved early. Each pop must be the least pending key and `peek_time` its time.
    const SOURCES: u32 = 64;
    let mut q = EventQueue::new(SOURCES as usize);
    let mut r = Reference::new(SOURCES);
    let mut x: u64 = 0x6a09_e667_f3bc_c908;
    let tick = 1u64 << TICK_SHIFT;
    let block = tick << BLOCK_SHIFT;
    let mut overlapped = 0;
    for round in 0..300u64 {
        xorshift(&mut x);
        let now = q.now().0;
        // Two crowded times: one anywhere up to 80 us ahead, one in the second block
        // after `now`'s (beyond the first wheel when it is pushed; once the wheel has
        // moved on, within its reach).
        let far = now + 500_000 + (x % 80_000_000) / tick * tick;
        let near_block = (now / block + 2) * block;
        let n = if round % 10 == 9 { 6_000 } else { 1_500 };
        for j in 0..n {
            let y = x.rotate_left((j % 61) as u32) ^ j;
            let t = match j % 8 {
                0 => now + (y >> 13) % (WHEEL * tick),
                1 => now,
                2 | 3 => near_block + (y >> 17) % 3 * (tick / 2),
                _ => far + (y >> 23) % 2 * tick,
            };
            r.add(&mut q, t, (y % SOURCES as u64) as u32, (y >> 37) % 16 == 0);
        }
        r.release(&mut q);
        for k in 0..n * 9 / 10 {
            r.pop_least_peeked(&mut q);
            if k % 64 == 0 {
                // An event in the first wheel's last slot: a block still on the second
                // wheel may start before it, and the refill must take the earlier.
                let late_slot = (q.now().0 / tick + WHEEL - 1) * tick;
                let earliest = q.blocks.iter().flatten().map(time_of).min();
                assert_eq!(q.block_first, earliest.unwrap_or(u64::MAX));
                if q.block_first < late_slot {
                    overlapped += 1;
                }
                r.add(&mut q, late_slot, (k % SOURCES as u64) as u32, false);
            }
        }
    }
    while !r.pending.is_empty() {
        r.pop_least_peeked(&mut q);
    }
    assert!(q.pop().is_none() && q.peek_time().is_none());
    assert!(overlapped > 100, "{overlapped}");
    // Crowded slots and blocks grew into the spares they gave back: at most `SPARES`
    // large allocations are kept, and no slot or block keeps one.
    assert!(!q.spares.is_empty() && q.spares.len() <= SPARES);
    assert!(q
        .slots
        .iter()
        .chain(&q.blocks)
        .all(|s| s.capacity() <= SLOT_KEEP));
}

#[test]
fn small_ticks_pop_in_key_order() {
    // Ticks of 2 to 40 events (sorted by networks of 8, 16 and 32 places, and by rank
    // beyond), a few sources at a few exact times
    // each, a quarter of them under keys reserved before later ones of their source
    // and scheduled after them (pushed out of their keys' order: the insertion pass by
    // the whole key must put them right). Each pop must be the least pending key.
    const SOURCES: u32 = 6;
    let mut q = EventQueue::new(SOURCES as usize);
    let mut r = Reference::new(SOURCES);
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let tick = 1u64 << TICK_SHIFT;
    let mut sizes = std::collections::BTreeSet::new();
    for _ in 0..20_000 {
        xorshift(&mut x);
        // One tick a few ticks ahead, filled with 2 to 40 events at up to 3 times.
        let at = (q.now().0 / tick + 1 + (x >> 50) % 3) * tick;
        let n = 2 + (x % 39) as u32;
        for j in 0..n {
            let y = x.rotate_left(7 * j);
            let t = at + (y >> 20) % 3 * (tick / 3);
            r.add(&mut q, t, (y % SOURCES as u64) as u32, (y >> 33) % 4 == 0);
        }
        r.release(&mut q);
        // Pop what is due before the tick just filled, and some of it.
        while let Some(t) = q.peek_time() {
            if t.0 >= at && (x >> 40) % 2 == 0 {
                break;
            }
            if r.pop_least(&mut q).0 >= at {
                break;
            }
        }
        sizes.insert(q.due.len() + 1);
    }
    r.drain(&mut q);
    // Refills of many sizes in each network's range and up to the rank sort's
    // threshold.
    for (least, most) in [(2, 8), (9, 16), (17, 32), (33, RANK_SORT_MOST)] {
        assert!(
            sizes.range(least..=most).count() > (most - least) / 2,
            "{sizes:?}"
        );
    }
}

/// Batcher's odd-even merge sort of `n` places (a power of two), as its comparators in
/// order (Knuth, TAOCP vol. 3, 5.3.4, exercise 32's construction).
fn batcher(n: usize) -> Vec<(usize, usize)> {
    fn merge(lo: usize, hi: usize, r: usize, out: &mut Vec<(usize, usize)>) {
        let step = 2 * r;
        if step < hi - lo {
            merge(lo, hi, step, out);
            merge(lo + r, hi, step, out);
            out.extend((lo + r..hi - r).step_by(step).map(|i| (i, i + r)));
        } else {
            out.push((lo, lo + r));
        }
    }
    fn sort(lo: usize, hi: usize, out: &mut Vec<(usize, usize)>) {
        if hi > lo {
            let mid = lo + (hi - lo) / 2;
            sort(lo, mid, out);
            sort(mid + 1, hi, out);
            merge(lo, hi, 1, out);
        }
    }
    let mut out = Vec::new();
    sort(0, n - 1, &mut out);
    out
}

#[test]
fn the_small_ticks_sorting_networks_sort() {
    // The written-out networks are Batcher's (19, 63 and 191 comparators)...
    for (net, n, size) in [
        (NETWORK_8, 8, 19),
        (NETWORK_16, 16, 63),
        (NETWORK_32, 32, 191),
    ] {
        assert_eq!(net, batcher(n).as_slice(), "{n} places");
        assert_eq!(net.len(), size);
    }
    // ...and Batcher's construction sorts: every input of zeros and ones for 8 and 16
    // places (the zero-one principle: a network that sorts those sorts everything),
    // and random inputs with ties for 32.
    let apply = |net: &[(usize, usize)], v: &mut [u64]| {
        for &(i, j) in net {
            let (a, b) = (v[i], v[j]);
            (v[i], v[j]) = (a.min(b), a.max(b));
        }
    };
    for n in [8usize, 16] {
        let net = batcher(n);
        for bits in 0u32..1 << n {
            let mut v: Vec<u64> = (0..n).map(|i| (bits >> i) as u64 & 1).collect();
            apply(&net, &mut v);
            assert!(v.windows(2).all(|w| w[0] <= w[1]), "{n} places, {bits:b}");
        }
    }
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    for _ in 0..20_000 {
        let mut v: Vec<u64> = (0..32)
            .map(|_| {
                xorshift(&mut x);
                x % 40
            })
            .collect();
        let mut sorted = v.clone();
        sorted.sort_unstable();
        apply(NETWORK_32, &mut v);
        assert_eq!(v, sorted);
    }
    // The queue's own copies (`sort_8`, `sort_16`, `sort_32`) sort what `apply` sorts,
    // padded as the queue pads them.
    for n in [3usize, 8, 11, 16, 29, 32] {
        xorshift(&mut x);
        let v: Vec<u64> = (0..n)
            .map(|i| (x.rotate_left(i as u32 * 5) % 50) << 8 | i as u64)
            .collect();
        let mut want = v.clone();
        want.sort_unstable();
        let got: Vec<u64> = if n <= 8 {
            let mut p = [u64::MAX; 8];
            p[..n].copy_from_slice(&v);
            sort_8(&mut p);
            p[..n].to_vec()
        } else if n <= 16 {
            let mut p = [u64::MAX; 16];
            p[..n].copy_from_slice(&v);
            sort_16(&mut p);
            p[..n].to_vec()
        } else {
            let mut p = [u64::MAX; 32];
            p[..n].copy_from_slice(&v);
            sort_32(&mut p);
            p[..n].to_vec()
        };
        assert_eq!(got, want, "{n} values");
    }
}

#[test]
fn reserved_keys_scheduled_in_reverse_pop_in_key_order() {
    // One source's 2,000 keys for one time, reserved in order and scheduled in
    // reverse, in a tick after the one being handled: the proxy sort's insertion pass
    // would need 2 million moves, so it gives way to the comparison sort.
    let mut q = EventQueue::new(2);
    q.schedule(SimTime(0), 1, Event::CollWake { run: 0 });
    let at = SimTime(5 << TICK_SHIFT);
    let keys: Vec<u128> = (0..2_000).map(|_| q.reserve(at, 0)).collect();
    for (i, &key) in keys.iter().enumerate().rev() {
        q.schedule_reserved(key, Event::TxDone { port: i as u32 });
    }
    assert_eq!(q.pop(), Some((SimTime(0), Event::CollWake { run: 0 })));
    for i in 0..2_000 {
        assert_eq!(q.pop(), Some((at, Event::TxDone { port: i })));
    }
    assert!(q.pop().is_none());
}

#[test]
fn event_is_small() {
    assert!(std::mem::size_of::<Event>() <= 12);
}
