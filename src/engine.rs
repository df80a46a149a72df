//! The deterministic event engine: one priority queue of events ordered by
//! (time, source component, that source's own counter).
//!
//! Models: a discrete-event scheduler in integer picoseconds. Every event names the
//! component that scheduled it ([`Source`]: an egress port, a wire, an ingress, a NIC, or
//! the workload); each source numbers its own events. Events with equal times pop by
//! source, then in the order their source scheduled them. The order of two simultaneous
//! events therefore depends only on what each component did, never on how the run
//! interleaved components, so a fabric cut into partitions that run on different cores
//! orders every tie exactly as one queue does (the rule of conservative parallel DES:
//! Chandy-Misra-Bryant, and the per-link lookahead of a minimum link latency). A run is a
//! pure function of the scenario and seed. Scheduling into the past is an error in
//! release builds too: it would silently reorder cause and effect.
//!
//! Leaves out: cancellation. Components keep at most one pending event per timer and skip
//! stale ones by a generation number, rather than searching the heap.
//!
//! The [`Event`] enum is the one closed set of things that can happen; the simulation
//! dispatches it with a single `match` (see `sim.rs`). Every payload is a small integer id
//! into an arena, so an event is 12 bytes (the queue keeps it as two words built in
//! registers, `packed`; an entry with its key is 32 bytes) and nothing is allocated per
//! event. Ports keep
//! at most two events pending (end of serialization, next arrival), so the heap grows
//! with the fabric, not with the packets in flight.

use crate::units::SimTime;
use network::{sort_16, sort_32, sort_8};
use packed::Packed;
use std::cmp::Ordering;
use std::collections::BinaryHeap;

mod network;
mod packed;

/// Index of a port (one direction of a link) in the fabric's port arena.
pub type PortId = u32;
/// Index of a packet in the packet pool.
pub type PktId = u32;
/// Index of a flow (a message from one host to another).
pub type FlowId = u32;

/// Everything that can happen in a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// A flow's first byte becomes available at its source host.
    FlowStart { flow: FlowId },
    /// A port finished serializing the packet it was sending.
    TxDone { port: PortId },
    /// The first packet on `port`'s wire reaches the far end (its tail, or its header
    /// for a cut-through switch). A port's packets arrive in the order they were sent, so
    /// each port keeps at most one arrival event pending (htsim's pipe).
    Arrive { port: PortId },
    /// A queue pair's requester timer (local ACK timeout or RNR back-off) may be due.
    QpTimer { qp: u32 },
    /// Out-of-order RC: a queue pair's responder hole timer (`reorder_timeout`) may be
    /// due; scheduled by the responder's host `host` (named here, since the slot may
    /// have been reused by the time a superseded timer comes due).
    HoleTimer { qp: u32, host: u32 },
    /// A host paced by congestion control may send again.
    HostWake { host: u32 },
    /// A PFC frame takes effect at the sending side of `port`: pause its data class, or
    /// resume it.
    Pfc { port: PortId, pause: bool },
    /// The downstream switch may need to refresh the PAUSE it holds against `port`.
    PfcRefresh { port: PortId },
    /// A pause on `port` expires: it may send again.
    PortWake { port: PortId },
    /// `blocks` 64-byte credits come back to the sending side of `port` (those due at
    /// once); with `blocks: 0`, a port waiting for credit looks at those it keeps on
    /// their way back (`EgressPort::credits_returning`).
    Credit { port: PortId, blocks: u32 },
    /// A receiver posts its receive WQEs on queue pair slot `qp`, generation `gen`.
    RecvPost { qp: u32, gen: u32 },
    /// A message reaches the next stage of the host and NIC pipeline (`components::host`).
    FlowStage { flow: FlowId, stage: u8 },
    /// A posting context (CPU thread, proxy or GPU thread) finished its current step.
    PosterDone { nic: u32, poster: u32 },
    /// A NIC's interrupt moderation timer may be due.
    Irq { nic: u32 },
    /// Collective run `run` begins its first iteration.
    CollStart { run: u32 },
    /// Collective run `run`'s launched iteration starts moving data.
    CollWake { run: u32 },
    /// Transfer `xfer` of collective run `run` arrived over the intra-host fabric (one
    /// that books its receiver's reduction engine, or waits behind one that does:
    /// `CollectiveRun::land_at_send`).
    CollArrive { run: u32, xfer: u32 },
    /// Transfer `xfer` of collective run `run` has landed (and been reduced).
    CollDone { run: u32, xfer: u32 },
    /// A clear-to-send of collective run `run` reaches the sender of connection `conn`
    /// (`sender * channels + channel`).
    CollClear { run: u32, conn: u32 },
    /// Training job `job` starts its first step.
    TrainStart { job: u32 },
    /// Training job `job`'s timers (compute phases, NVLink sends) may be due.
    TrainWake { job: u32 },
}

/// Asks the CPU to start loading the cache line holding `x` (the state the next event
/// reads: at scale it is out of the caches, and the load overlaps this event's work).
/// A hint with no effect on what the program computes.
#[inline(always)]
pub fn prefetch<T>(x: &T) {
    prefetch_ptr(x as *const T);
}

/// [`prefetch_ptr`] for both lines of a `T` at `at` when it straddles two, as slots of
/// 40 or 44 bytes mostly do (a packet, a queued packet): the same hint for the part a
/// line-sized prefetch leaves out. `at` need not be valid.
#[inline(always)]
pub fn prefetch_whole<T>(at: *const T) {
    let first = at as *const u8;
    prefetch_ptr(first);
    prefetch_ptr(first.wrapping_add(std::mem::size_of::<T>().max(1) - 1));
}

/// [`prefetch`] for an address that may lie past the end of what it points into (the
/// slot after a ring's last): never read through, so it need not be valid.
#[inline(always)]
pub fn prefetch_ptr<T>(at: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch reads nothing architecturally and cannot fault, whatever the
    // address.
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>(at as *const i8);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = at;
}

/// [`prefetch`] for the first `lines` cache lines of `x` (a component whose hot fields
/// span more than one line); never past its end.
#[inline(always)]
pub fn prefetch_lines<T>(x: &T, lines: usize) {
    let base = x as *const T as *const u8;
    for i in 0..lines.min(std::mem::size_of::<T>().div_ceil(64)) {
        // `wrapping_add` forms the address without a dereference.
        prefetch_ptr(base.wrapping_add(64 * i));
    }
}

/// The component that scheduled an event: an index into the queue's per-source counters
/// (the event loop numbers its components; see `sim::Sources`).
pub type Source = u32;

/// Bits of the key below the time: source above, its counter below.
const COUNTER_BITS: u32 = 40;
/// The most sources a queue can number (16.7 million components).
pub const MAX_SOURCES: usize = 1 << (64 - COUNTER_BITS);

#[derive(Clone, Copy, Debug)]
struct Entry {
    /// (time << 64) | (source << 40) | counter: one comparison orders by time, then
    /// source, then the source's own sequence.
    key: u128,
    event: Packed,
}

impl PartialEq for Entry {
    fn eq(&self, o: &Self) -> bool {
        self.key == o.key
    }
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Entry {
    fn cmp(&self, o: &Self) -> Ordering {
        // BinaryHeap is a max-heap; reverse so the earliest key pops first.
        o.key.cmp(&self.key)
    }
}

/// The event queue. `now` only moves forward.
///
/// Two timing wheels in front of a radix heap (Varghese and Lauck, "Hashed and
/// hierarchical timing wheels", SOSP 1987; Brown's calendar queue, CACM 1988, with one
/// slot per tick and no resizing; Ahuja, Mehlhorn, Orlin and Tarjan, "Faster algorithms
/// for the shortest path problem", JACM 1990). Time is taken in ticks of 2^TICK_SHIFT
/// ps. An event for a tick less than `WHEEL` ticks after the one being handled (`base`)
/// waits in that tick's slot, a vector push; a later one within `BLOCKS` blocks of
/// 2^BLOCK_SHIFT ticks (67 us: a host pipeline's stages, a collective's transfers)
/// waits in its block of the second wheel, and moves to its slot when the first wheel
/// holds the block whole; a later one still waits in the radix heap (`far`: timers,
/// the workload's starts), and moves to a wheel when it comes within reach. The
/// events in `base`'s tick are ordered by the whole key, so ties pop by source and
/// counter exactly as one heap of keys would: those a refill brings are sorted once
/// (`due`, earliest last; the slot's vector is taken whole, and the events are gathered
/// into another vector when the refill is small enough to be sorted by rank or large
/// enough to be sorted through proxies, below); one scheduled into that tick while it
/// is being handled joins them when it falls among their last `NEAR_DUE` places (most
/// do: an ACK's end of serialization, a small packet's arrival; 20% of
/// permutation-8192's events are scheduled into their own tick), else waits in a small
/// binary heap (`late`), and a pop takes the earlier of the two. The next slot (or
/// block) holding events is found from four words of occupancy bits.
///
/// History, on this project's 2-core machine. One binary heap of every event: 22-26% of
/// the run time in its `pop` (issue 17's profile). A radix heap on picoseconds, whose
/// refills took 14.6% (permutation) and 22% (allreduce) of the run; the ticks made that
/// 0.907x and 0.911x the wall time (medians of 7 and 3 pairs). The radix heap on ticks
/// moved each event through several of its 64 buckets before its tick came (refills 7%
/// of websearch-128); the wheel moves it once: 0.94x the wall time of websearch-128
/// (11 pairs, 0.88-1.06), 0.98x of a 1,024-GPU ring's first 3 ms (4 pairs), both builds
/// running at once, one per core; permutation-256 with PFC 8.4% fewer instructions
/// (cachegrind). With a binary heap beyond the wheel, `cargo bench --bench engine --
/// event_queue` (every event 0-4 us ahead) fell from 15.5 M to 11.1 M events/s; with
/// the radix heap there it rose to 21.8 M. Measured and not kept: a wheel of 4,096 slots,
/// 1.05x the wall time of websearch-128 and 18 MiB more memory (3 pairs; 1.28x with 2 ns
/// slots): each slot's vector is its own allocation, so pushes scattered over memory
/// where 64 slots stay in the cache. Since, the wheel's 64 slots of 8.2 ns became 256 of
/// 2 ns, the same reach: a large fabric's ticks were crowded (permutation-8192 sorted up
/// to 12,415 events per 8 ns tick at once, 767 on average, with those scheduled into
/// the tick piling up in `late`; websearch-128 at most 90, 26 on average): 0.95x the wall time of permutation-8192
/// (4 pairs, 0.93-0.975), 0.97x of websearch-128 (5 pairs, 0.91-0.99), 0.99x of the ring
/// (4 pairs, 0.98-0.995). Also a least-significant-digit radix sort (8-bit
/// digits over the bits where the keys differ) for batches of 192 events or more: 7%
/// more instructions on that ring than the comparison sort (its batches of about 440
/// events differ over some 70 bits of key: nine passes, each over 256 counters).
/// Even at 2 ns, 80% of permutation-8192's events come in refills of 257 to 4,096 (its
/// flows start together, so its events share exact times), and sorting them was 5.4% of
/// its run (perf); a refill of `PROXY_SORT_MIN` events or more now sorts one `u64` per
/// event instead of the 32-byte entries (`sort_due_by_proxy`), and the sort's share fell
/// to 3% (perf). On the wall time of permutation-8192 that is within this machine's
/// noise: 0.96x with the new build started first (14 pairs, 0.84-1.11), 1.01x with the
/// old one started first (8 pairs, 0.93-1.18). websearch-128's refills hold 12 events on
/// average; proxies from 12 events up measured 1.00x there (6 pairs). On the queue alone
/// with crowded ticks (`cargo bench --bench engine -- event_queue_near`: 10,000 pending
/// events each 0-300 ns ahead, about 130 per tick) 48.2 M events/s, against 26.1 M/s
/// before the proxies and the bound on a slot's allocation. A slot handed an
/// emptied `due` keeps at most `SLOT_KEEP` events' worth of it: permutation-8192 peaked
/// at 261 MiB instead of 297 (each slot had kept its most crowded tick's allocation),
/// in the same wall time (8 pairs, median 1.00). Ticks of 1 ns (512 slots) and 0.5 ns
/// (1,024) were measured and not kept: with those slots, permutation-8192 0.98x and
/// 0.95x, but websearch-128 1.00x and 1.035x. Small refills went to std's insertion
/// sort, whose branches on the keys the CPU cannot guess: with the other small sorts,
/// 10.8% of websearch-128's run (perf). A refill of up to `RANK_SORT_MOST` events is now
/// sorted by counting each event's rank, without a branch on the keys (then
/// `sort_due_by_rank`, now the rank half of `sort_due_small`): websearch-128 0.957x the wall time (10 pairs, 0.924-0.981, both
/// builds at once, one per core, start order alternating), permutation-8192 0.98x (4
/// pairs, within the noise). Up to 32 events, a sorting network now does it (Batcher's,
/// `network`: 19, 63 or 191 comparators, each a minimum and a maximum in registers,
/// where ranking 12 events takes 144 comparisons through memory): websearch-128 0.972x
/// the user time on one thread (6 pinned rounds, each faster) and 0.988x the wall time
/// with `--threads 2` (8 alternating pairs), permutation-8192 0.998x, a 512-GPU ring
/// 1.007x and 1.016x (6 and 4 rounds, within the noise); a network of 64 for 33-63
/// events measured 1.009x on websearch-128 and was not kept, nor the same networks
/// looped over a table of comparators (1.003x the rank sort: places through memory), nor
/// a radix sort of the large refills' proxies (1.012x on the ring, 0.999x on
/// permutation-8192). On a 1,024-GPU ring of 4 KiB pieces 40% of the events (the
/// host pipeline's stages, 1-5 us ahead) went to the radix heap, which moved each 4.4 times
/// between its buckets before it reached the wheel (426 M moves for 96 M events: `far_base`
/// trails the wheel, so a new event's bit of difference is high); the second wheel moves
/// each once, from its block to its slot (56,930 blocks moved, 1,693 events each on
/// average, 24,576 at most: the ring's ranks act in step). Its crowded slots and blocks had
/// grown onto fresh pages after each crowded tick gave its allocation back to the system
/// (466-474 K minor page faults, 1.3-1.4 s of system time in a 33-37 s run); they now grow
/// into the `SPARES` largest allocations given back (`push_spared`, only where the wheels
/// fill in bulk, not on `push_slot`'s hot path): 19 K page faults, 0.03 s. Together, 0.899x
/// the wall time of that ring (4 pairs, 0.853-0.916), websearch-128 0.996x (8 pairs,
/// 0.91-1.08), permutation-8192 0.941x and 237 MiB instead of 244 (3 pairs, 0.885-1.047),
/// the 1,024-GPU bench scenario 0.985x (3 pairs, 0.973-0.987), the 4,096-GPU ring 0.920x
/// with 244 MiB instead of 224 (both builds at once, one per core); the queue alone (`cargo
/// bench --bench engine -- event_queue`, every event 0-4 us ahead) 19.4 -> 42.9 M events/s.
/// A first version that scanned the second wheel's bits at every look at the next event ran
/// websearch-128 1.05x (6 pairs), hence `block_first`.
#[derive(Debug)]
pub struct EventQueue {
    /// Events in `base`'s tick that the last refill brought, sorted with the earliest key
    /// last.
    due: Vec<Entry>,
    /// Events in `base`'s tick scheduled since, earliest key on top.
    late: BinaryHeap<Entry>,
    /// `slots[t % WHEEL]`: the events of tick t, for each tick after `base`'s and
    /// before `base + WHEEL`; `slot_min` the earliest time in each (`u64::MAX` when
    /// empty).
    slots: Vec<Vec<Entry>>,
    slot_min: [u64; WHEEL as usize],
    /// Bit `t % WHEEL` set when tick t's slot holds an event.
    wheel: [u64; WORDS],
    /// The second wheel: `blocks[b % BLOCKS]` holds the events of block b (the ticks
    /// `b << BLOCK_SHIFT` to `(b + 1 << BLOCK_SHIFT) - 1`), for each block from
    /// `block_from` to `block_from + BLOCKS - 1` that the first wheel cannot hold
    /// whole; `block_min` the earliest time in each (`u64::MAX` when empty).
    blocks: Vec<Vec<Entry>>,
    block_min: [u64; BLOCKS as usize],
    /// Bit `b % BLOCKS` set when block b holds an event.
    block_bits: [u64; WORDS],
    /// No block before this one holds an event: two past `base`'s (the first wheel
    /// holds the next one whole).
    block_from: u64,
    /// The earliest time in the second wheel (`u64::MAX` when empty), so that a look
    /// at the next event scans its bits only when a block leaves it.
    block_first: u64,
    /// Events of ticks `base + WHEEL` and later, in a radix heap on ticks:
    /// `far[i]` holds those whose tick first differs from `far_base` at bit i, and
    /// `far_min[i]` is their earliest time (`u64::MAX` when empty).
    far: Vec<Vec<Entry>>,
    far_min: [u64; 64],
    /// Bit i set when `far[i]` holds an event.
    far_occupied: u64,
    /// No far event's tick is earlier.
    far_base: u64,
    /// The tick being handled: no pending event is earlier.
    base: u64,
    len: usize,
    /// Each source's next sequence number.
    counters: Vec<u64>,
    now: SimTime,
    popped: u64,
    /// Pops from `due` since the last refill: how long the events now in `due`'s last
    /// places have been in sight of the prefetches (`peek_ahead`).
    due_pops: usize,
    /// The key of the event popped last (the one being handled).
    current: u128,
    /// Large allocations given back by the wheels after crowded ticks (`keep_spare`),
    /// for the next crowded slot or block to grow into (`push_spared`) instead of onto
    /// fresh pages from the system.
    spares: Vec<Vec<Entry>>,
    /// Scratch for `sort_due_by_proxy`, kept for its allocations (the largest refill's:
    /// 480 KiB for permutation-8192's 12,415 events).
    proxy: Vec<u64>,
    gathered: Vec<Entry>,
    /// Scratch for `sort_due_small`: it becomes `due`, and `due`'s vector becomes it,
    /// so small allocations rotate through it and the slots (which keep at most
    /// `SLOT_KEEP` events' worth) while `gathered` keeps the large one.
    ranked: Vec<Entry>,
}

#[inline(always)]
fn time_of(e: &Entry) -> u64 {
    (e.key >> 64) as u64
}

/// Times in the same tick of 2^TICK_SHIFT ps (2.048 ns) share a slot; the events of the
/// tick being handled are sorted by their whole key.
const TICK_SHIFT: u32 = 11;

/// Ticks the wheel holds ahead of the one being handled (524 ns): 99.8% of the events
/// of permutation-8192 and 99.9% of websearch-128's are scheduled less than 524 ns
/// ahead (counted over their first 300 us).
const WHEEL: u64 = 256;

/// Words of the wheel's occupancy bits.
const WORDS: usize = WHEEL as usize / 64;

/// Ticks per block of the second wheel, as a shift: 128 ticks (262 ns), half the first
/// wheel's reach, so that the first wheel holds a block whole from the tick its
/// previous block begins.
const BLOCK_SHIFT: u32 = 7;

/// Blocks of the second wheel: it holds events up to 256 x 128 ticks (67 us) ahead, a
/// host pipeline's stages and a collective's transfers; timers and the workload's later
/// starts go on to the far heap.
const BLOCKS: u64 = 256;
const _: () = assert!(WHEEL == 2 << BLOCK_SHIFT && BLOCKS as usize == WORDS * 64);

/// The first index at or after `from` whose position on a wheel of `64 x WORDS`
/// positions (the index modulo that) has its bit set in `bits`, if any; each set
/// position stands for one index from `from` to `from + 64 x WORDS - 1`.
#[inline(always)]
fn first_set_from(bits: &[u64; WORDS], from: u64) -> Option<u64> {
    let n = (WORDS * 64) as u64;
    let s = (from % n) as usize;
    let (w0, b0) = (s / 64, s % 64);
    for k in 0..=WORDS {
        let w = (w0 + k) % WORDS;
        let mut word = bits[w];
        if k == 0 {
            word &= !0u64 << b0;
        } else if k == WORDS {
            word &= !(!0u64 << b0);
        }
        if word != 0 {
            let j = w * 64 + word.trailing_zeros() as usize;
            let ahead = (j + n as usize - s) % n as usize;
            return Some(from + ahead as u64);
        }
    }
    None
}

/// An event scheduled into the tick being handled goes into `due`'s last this many
/// places when it falls there (a short move), else into `late`.
const NEAR_DUE: usize = 8;

/// The most events' worth of allocation an empty slot keeps (8 KiB per slot), so that the
/// wheel's memory does not stay at its most crowded ticks'.
const SLOT_KEEP: usize = 256;

/// A refill of this many events or more is sorted through `u64` proxies
/// (`sort_due_by_proxy`).
const PROXY_SORT_MIN: usize = 64;

/// Refills of at most this many events are sorted without a branch on the keys
/// (`sort_due_small`): up to 32 by a sorting network, the rest by counting ranks, n
/// comparisons per event. On websearch-128, against std's sort, 12 measured 1.02x the
/// wall time (6 pairs, noisy), 24 0.985x, 40 0.97x; 64 was 1.035x of 40, 32 1.02x of 40;
/// ranking on the `u64` proxies instead of the keys 0.99x of that.
const RANK_SORT_MOST: usize = 40;

/// Bits of a proxy for an event's place in `due`: below its source's 24 and its time's
/// `TICK_SHIFT` within the tick.
const PROXY_INDEX_BITS: u32 = 64 - TICK_SHIFT - (64 - COUNTER_BITS);

/// An event's place in the order of its tick's events, as one integer: its time within
/// the tick starting at `start` (`TICK_SHIFT` bits), its source (24) and `i`, its place
/// in the batch (`PROXY_INDEX_BITS`); distinct within a batch.
#[inline(always)]
fn proxy_of(e: &Entry, i: usize, start: u64) -> u64 {
    let within = time_of(e) - start;
    let source = (e.key >> COUNTER_BITS) as u64 & (MAX_SOURCES as u64 - 1);
    (within << (64 - TICK_SHIFT)) | (source << PROXY_INDEX_BITS) | i as u64
}

/// How many large allocations (of more than `SLOT_KEEP` events) given back by the
/// wheels are kept for their next crowded slots and blocks: the largest ones.
const SPARES: usize = 4;

/// Keeps `v`'s allocation (its events have left) among `spares`, the largest `SPARES`.
#[cold]
#[inline(never)]
fn keep_spare(spares: &mut Vec<Vec<Entry>>, v: Vec<Entry>) {
    debug_assert!(v.is_empty() && v.capacity() > SLOT_KEEP);
    spares.push(v);
    if spares.len() > SPARES {
        let (i, _) = spares
            .iter()
            .enumerate()
            .min_by_key(|(_, s)| s.capacity())
            .expect("spares");
        spares.swap_remove(i);
    }
}

/// Makes room in a full wheel vector when a spare is larger: its events move to the
/// largest spare (the vector's own allocation becoming a spare if large); else the push
/// grows it as a vector grows.
#[cold]
#[inline(never)]
fn grow_from_spares(v: &mut Vec<Entry>, spares: &mut Vec<Vec<Entry>>) {
    let largest = spares
        .iter()
        .enumerate()
        .max_by_key(|(_, s)| s.capacity())
        .filter(|(_, s)| s.capacity() > v.capacity())
        .map(|(i, _)| i);
    if let Some(i) = largest {
        let mut big = spares.swap_remove(i);
        big.extend_from_slice(v);
        let mut old = std::mem::replace(v, big);
        if old.capacity() > SLOT_KEEP {
            old.clear();
            keep_spare(spares, old);
        }
    }
}

/// Pushes onto a wheel vector, growing it from the spares when full: where the wheels
/// fill crowded slots and blocks in bulk (a block's or a far bucket's events moving
/// in, and pushes beyond the first wheel), not on the hot path of `push_slot`.
#[inline(always)]
fn push_spared(v: &mut Vec<Entry>, spares: &mut Vec<Vec<Entry>>, e: Entry) {
    if v.len() == v.capacity() {
        grow_from_spares(v, spares);
    }
    v.push(e);
}

#[inline(always)]
fn tick_of(t: u64) -> u64 {
    t >> TICK_SHIFT
}

impl EventQueue {
    /// A queue for components numbered `0..sources`.
    pub fn new(sources: usize) -> Self {
        assert!(
            sources <= MAX_SOURCES,
            "{sources} event sources: at most {MAX_SOURCES}"
        );
        EventQueue {
            due: Vec::new(),
            late: BinaryHeap::new(),
            slots: (0..WHEEL).map(|_| Vec::new()).collect(),
            slot_min: [u64::MAX; WHEEL as usize],
            wheel: [0; WORDS],
            blocks: (0..BLOCKS).map(|_| Vec::new()).collect(),
            block_min: [u64::MAX; BLOCKS as usize],
            block_bits: [0; WORDS],
            block_from: 2,
            block_first: u64::MAX,
            far: (0..64).map(|_| Vec::new()).collect(),
            far_min: [u64::MAX; 64],
            far_occupied: 0,
            far_base: 0,
            base: 0,
            len: 0,
            counters: vec![0; sources],
            now: SimTime::ZERO,
            popped: 0,
            due_pops: 0,
            current: 0,
            spares: Vec::new(),
            proxy: Vec::new(),
            gathered: Vec::new(),
            ranked: Vec::new(),
        }
    }

    /// The time of the event being processed (or last processed).
    #[inline]
    pub fn now(&self) -> SimTime {
        self.now
    }

    /// Number of events popped so far.
    pub fn events_processed(&self) -> u64 {
        self.popped
    }

    /// Number of events waiting.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Schedules `event` at `at` on behalf of component `source`. Scheduling into the past
    /// is a bug, caught in every build.
    #[inline(always)]
    pub fn schedule(&mut self, at: SimTime, source: Source, event: Event) {
        let key = self.reserve(at, source);
        self.schedule_reserved(key, event);
    }

    /// The place in the order (the key) of the event being handled: every event with a
    /// smaller key has been handled, none with a larger one.
    #[inline]
    pub fn current_key(&self) -> u128 {
        self.current
    }

    /// The key an event `source` schedules at `at` would have, numbered now as
    /// `schedule` numbers it, without scheduling anything: for something a component
    /// keeps itself (a credit on its way back) and may schedule later under this key
    /// (`schedule_reserved`), or never, so that the order of every other event is the
    /// same either way.
    #[inline(always)]
    pub fn reserve(&mut self, at: SimTime, source: Source) -> u128 {
        assert!(at >= self.now, "reserved {at} before now {}", self.now);
        let counter = &mut self.counters[source as usize];
        let seq = *counter;
        *counter += 1;
        assert!(seq < 1 << COUNTER_BITS, "source {source}: 2^40 events");
        ((at.0 as u128) << 64) | ((source as u128) << COUNTER_BITS) | seq as u128
    }

    /// Starts loading `source`'s counter, which its next `schedule` reads. A hint only.
    #[inline(always)]
    pub fn prefetch_source(&self, source: Source) {
        if let Some(c) = self.counters.get(source as usize) {
            prefetch(c);
        }
    }

    /// Schedules `event` under a key `reserve` gave (its time, source and number).
    #[inline(always)]
    pub fn schedule_reserved(&mut self, key: u128, event: Event) {
        let at = SimTime((key >> 64) as u64);
        assert!(
            at >= self.now,
            "scheduled {event:?} at {at} before now {}",
            self.now
        );
        let e = Entry {
            key,
            event: Packed::new(event),
        };
        self.len += 1;
        // `base` is never later than `now`'s tick when a component schedules (it moves
        // only in `pop`, to the tick that pops).
        let ahead = tick_of(at.0) - self.base;
        if ahead == 0 {
            // Into the tick being handled: among `due`'s last few places when that is
            // where it falls (most do: an ACK's end of serialization, a small packet's
            // arrival), else into `late`.
            let n = self.due.len();
            let near = n.saturating_sub(NEAR_DUE);
            if n <= NEAR_DUE || self.due[near].key > key {
                let pos = near + self.due[near..].partition_point(|x| x.key > key);
                self.due.insert(pos, e);
            } else {
                self.late.push(e);
            }
        } else if ahead < WHEEL {
            self.push_slot(e);
        } else {
            self.push_beyond(e);
        }
    }

    /// Puts an event beyond the first wheel's reach in its block of the second wheel,
    /// or, beyond that one's too, in the far heap.
    #[inline(always)]
    fn push_beyond(&mut self, e: Entry) {
        let b = tick_of(time_of(&e)) >> BLOCK_SHIFT;
        if b - (self.base >> BLOCK_SHIFT) < BLOCKS {
            self.push_block(e, b);
        } else {
            self.push_far(e);
        }
    }

    /// Puts an event in block `b` of the second wheel.
    #[inline(always)]
    fn push_block(&mut self, e: Entry, b: u64) {
        debug_assert!(b >= self.block_from, "a block the first wheel holds");
        let j = (b % BLOCKS) as usize;
        let t = time_of(&e);
        push_spared(&mut self.blocks[j], &mut self.spares, e);
        self.block_min[j] = self.block_min[j].min(t);
        self.block_first = self.block_first.min(t);
        self.block_bits[j / 64] |= 1 << (j % 64);
    }

    /// The earliest block after `b` that holds an event, if any.
    #[inline(always)]
    fn next_block_after(&self, b: u64) -> Option<u64> {
        first_set_from(&self.block_bits, b + 1)
    }

    /// Moves block `b`'s events to their slots of the first wheel, which holds the
    /// block whole.
    fn cascade(&mut self, b: u64) {
        let j = (b % BLOCKS) as usize;
        let mut v = std::mem::take(&mut self.blocks[j]);
        self.block_bits[j / 64] &= !(1 << (j % 64));
        self.block_min[j] = u64::MAX;
        for e in v.drain(..) {
            self.push_slot_spared(e);
        }
        // The blocks are in time order: the next one holds the earliest left.
        self.block_first = self
            .next_block_after(b)
            .map_or(u64::MAX, |n| self.block_min[(n % BLOCKS) as usize]);
        if v.capacity() > SLOT_KEEP {
            keep_spare(&mut self.spares, v);
        } else {
            self.blocks[j] = v;
        }
    }

    /// Puts a far event in its radix bucket (its tick is later than `far_base`: it is
    /// at least `WHEEL` ticks past `base`, which is past every tick a far refill took).
    #[inline(always)]
    fn push_far(&mut self, e: Entry) {
        let t = time_of(&e);
        debug_assert!(tick_of(t) > self.far_base, "a far event after the far base");
        let i = 63 - (tick_of(t) ^ self.far_base).leading_zeros() as usize;
        self.far[i].push(e);
        self.far_min[i] = self.far_min[i].min(t);
        self.far_occupied |= 1 << i;
    }

    /// The earliest time of a far event, if any.
    #[inline(always)]
    fn far_first(&self) -> Option<u64> {
        (self.far_occupied != 0).then(|| self.far_min[self.far_occupied.trailing_zeros() as usize])
    }

    /// Puts an event of a tick within the wheel's reach in its slot.
    #[inline(always)]
    fn push_slot(&mut self, e: Entry) {
        let j = self.slot_for(time_of(&e));
        self.slots[j].push(e);
    }

    /// `push_slot` growing the slot from the spares (`push_spared`).
    #[inline(always)]
    fn push_slot_spared(&mut self, e: Entry) {
        let j = self.slot_for(time_of(&e));
        push_spared(&mut self.slots[j], &mut self.spares, e);
    }

    /// The slot of an event at `t` about to go into it, marked as holding it (its
    /// occupancy bit, its earliest time).
    #[inline(always)]
    fn slot_for(&mut self, t: u64) -> usize {
        let j = (tick_of(t) % WHEEL) as usize;
        self.slot_min[j] = self.slot_min[j].min(t);
        self.wheel[j / 64] |= 1 << (j % 64);
        j
    }

    /// The tick of the earliest slot after `base`'s that holds an event, if any.
    #[inline(always)]
    fn next_slot_tick(&self) -> Option<u64> {
        first_set_from(&self.wheel, self.base + 1)
    }

    /// Moves to the earliest tick that holds an event: its events to `due`, sorted, and
    /// the far events that come within the wheel's reach to their slots.
    #[inline(never)]
    fn refill(&mut self) {
        // Every event on either wheel is earlier than every far one; the first wheel's
        // last slots and the second wheel's first block may overlap in time.
        let slot = self.next_slot_tick();
        let block = (self.block_first != u64::MAX).then(|| tick_of(self.block_first));
        let next = match (slot, block) {
            (Some(s), Some(b)) => s.min(b),
            (s, b) => s
                .or(b)
                .or_else(|| self.far_first().map(tick_of))
                .expect("a refill with events pending"),
        };
        self.base = next;
        // The blocks the first wheel now holds whole go to their slots.
        let next_block = next >> BLOCK_SHIFT;
        while self.block_first != u64::MAX {
            let b = tick_of(self.block_first) >> BLOCK_SHIFT;
            if b > next_block + 1 {
                break;
            }
            self.cascade(b);
        }
        self.block_from = next_block + 2;
        // The far events within the second wheel's reach: the lowest radix bucket holds
        // the earliest; it is spread around its earliest tick, over the wheels and the
        // buckets below it.
        while let Some(first) = self.far_first() {
            if (tick_of(first) >> BLOCK_SHIFT) - next_block >= BLOCKS {
                break;
            }
            let i = self.far_occupied.trailing_zeros() as usize;
            let mut v = std::mem::take(&mut self.far[i]);
            self.far_occupied &= !(1 << i);
            self.far_min[i] = u64::MAX;
            self.far_base = tick_of(first);
            for e in v.drain(..) {
                let t = tick_of(time_of(&e));
                if t - next < WHEEL {
                    self.push_slot_spared(e);
                } else if (t >> BLOCK_SHIFT) - next_block < BLOCKS {
                    self.push_block(e, t >> BLOCK_SHIFT);
                } else {
                    self.push_far(e);
                }
            }
            // Keep the bucket's allocation for the events to come.
            self.far[i] = v;
        }
        let j = (next % WHEEL) as usize;
        // `due` is empty: its allocation goes to the slot for the events to come.
        std::mem::swap(&mut self.due, &mut self.slots[j]);
        // ...but no more of it than `SLOT_KEEP` events' worth: a larger one is kept
        // among the spares.
        if self.slots[j].capacity() > SLOT_KEEP {
            let v = std::mem::take(&mut self.slots[j]);
            keep_spare(&mut self.spares, v);
        }
        self.wheel[j / 64] &= !(1 << (j % 64));
        self.slot_min[j] = u64::MAX;
        // Earliest key last, so that pops take from the end.
        if self.due.len() <= RANK_SORT_MOST {
            self.sort_due_small();
        } else if self.due.len() >= PROXY_SORT_MIN && self.due.len() < 1 << PROXY_INDEX_BITS {
            self.sort_due_by_proxy();
        } else {
            self.sort_due_by_key();
        }
        self.due_pops = 0;
    }

    /// Sorts a small `due` (all in `base`'s tick), earliest key last, without a branch
    /// on the keys: up to 32 events by the smallest sorting network that holds them
    /// (`sort_due_by_network`); more by rank, each event's place being the number of
    /// greater proxies among the others (the proxies of `sort_due_by_proxy`, distinct by
    /// their place in `due`), the events put in their places in `ranked`. Events of one
    /// source at one time keep the order they were pushed in, which is their keys'
    /// unless a key was reserved early; `settle_by_key` puts those right.
    fn sort_due_small(&mut self) {
        let n = self.due.len();
        if n < 2 {
            return;
        }
        let start = self.base << TICK_SHIFT;
        if n <= 8 {
            return self.sort_due_by_network(start, sort_8);
        } else if n <= 16 {
            return self.sort_due_by_network(start, sort_16);
        } else if n <= 32 {
            return self.sort_due_by_network(start, sort_32);
        }
        let mut proxy = [0u64; RANK_SORT_MOST];
        for (i, e) in self.due.iter().enumerate() {
            proxy[i] = proxy_of(e, i, start);
        }
        let proxy = &proxy[..n];
        self.ranked.clear();
        self.ranked.resize(n, self.due[0]);
        for (i, &p) in proxy.iter().enumerate() {
            let place: usize = proxy.iter().map(|&o| (o > p) as usize).sum();
            self.ranked[place] = self.due[i];
        }
        std::mem::swap(&mut self.due, &mut self.ranked);
        self.settle_by_key();
    }

    /// Sorts a small `due` (all in `base`'s tick, at most `N` events), earliest key
    /// last, by a sorting network (`sort`) over the proxies of `sort_due_by_proxy`,
    /// padded with values greater than any proxy; then as the rank sort of `sort_due_small`.
    #[inline(always)]
    fn sort_due_by_network<const N: usize>(&mut self, start: u64, sort: fn(&mut [u64; N])) {
        let n = self.due.len();
        let mut p = [u64::MAX; N];
        for (i, e) in self.due.iter().enumerate() {
            p[i] = proxy_of(e, i, start);
        }
        sort(&mut p);
        self.ranked.clear();
        let due = &self.due;
        self.ranked.extend(
            p[..n]
                .iter()
                .rev()
                .map(|&x| due[(x & ((1 << PROXY_INDEX_BITS) - 1)) as usize]),
        );
        std::mem::swap(&mut self.due, &mut self.ranked);
        self.settle_by_key();
    }

    /// Sorts a large `due` (all in `base`'s tick), earliest key last, through one `u64`
    /// per event: its time within the tick (`TICK_SHIFT` bits), its source (24) and its
    /// place in `due` (29), sorted as integers; the events are then gathered in that
    /// order. Events of one source at one time come out in the order they were pushed,
    /// which is their counters' order unless a key was reserved before later ones of its
    /// source were scheduled (`reserve`: returning IB credits). Far events keep their
    /// order: those of one tick share a radix bucket until it is emptied, and all move
    /// to their slot before anything is scheduled there directly. An insertion pass by
    /// the whole key puts the reserved few right (`settle_by_key`), so the result is
    /// exactly the sort by key.
    fn sort_due_by_proxy(&mut self) {
        let start = self.base << TICK_SHIFT;
        self.proxy.clear();
        self.proxy.extend(
            self.due
                .iter()
                .enumerate()
                .map(|(i, e)| proxy_of(e, i, start)),
        );
        self.proxy.sort_unstable();
        self.gathered.clear();
        let due = &self.due;
        self.gathered.extend(
            self.proxy
                .iter()
                .rev()
                .map(|&p| due[(p & ((1 << PROXY_INDEX_BITS) - 1)) as usize]),
        );
        std::mem::swap(&mut self.due, &mut self.gathered);
        self.settle_by_key();
    }

    /// `due` sorted by its proxies (time, source, place): an insertion pass by the whole
    /// key, descending, moves only ties of time and source (n - 1 comparisons when there
    /// are none). Past a budget of moves (many reserved keys out of order) it gives way to
    /// the comparison sort, so the worst case stays n log n.
    fn settle_by_key(&mut self) {
        let mut budget = 8 * self.due.len();
        for i in 1..self.due.len() {
            let mut j = i;
            while j > 0 && self.due[j - 1].key < self.due[j].key {
                if budget == 0 {
                    self.sort_due_by_key();
                    return;
                }
                budget -= 1;
                self.due.swap(j - 1, j);
                j -= 1;
            }
        }
    }

    /// Sorts `due` by the whole key, earliest last (the comparison sort).
    fn sort_due_by_key(&mut self) {
        self.due.sort_unstable_by_key(|e| std::cmp::Reverse(e.key));
    }

    /// Pops the earliest event and advances `now` to its time.
    #[inline(always)]
    pub fn pop(&mut self) -> Option<(SimTime, Event)> {
        if self.due.is_empty() && self.late.is_empty() {
            if self.len == 0 {
                return None;
            }
            self.refill();
        }
        let e = if self.due_first() {
            self.due_pops += 1;
            self.due.pop()
        } else {
            self.late.pop()
        }?;
        let t = SimTime(time_of(&e));
        debug_assert!(t >= self.now);
        self.now = t;
        self.current = e.key;
        self.len -= 1;
        self.popped += 1;
        Some((t, e.event.event()))
    }

    /// The `k`-th event after the first of those the last refill brought (`due`), if
    /// there is one: the event `pop` returns `k` events after the next one when nothing
    /// scheduled in the meantime comes first. A hint for fetching its state early.
    #[inline(always)]
    pub fn peek_ahead(&self, k: usize) -> Option<Event> {
        let n = self.due.len();
        (n > k).then(|| self.due[n - 1 - k].event.event())
    }

    /// Pops from the refill's events (`due`) since the refill: an event `peek_ahead(k)`
    /// names has been in sight of `peek_ahead(j)`, for each j from k to `k + due_age()`.
    #[inline(always)]
    pub fn due_age(&self) -> usize {
        self.due_pops
    }

    /// The event `pop` returns next, if it is already known (in the tick being handled):
    /// the event loop starts fetching its state while it handles this one.
    #[inline(always)]
    pub fn peek_next(&self) -> Option<Event> {
        if self.due_first() {
            self.due.last().map(|e| e.event.event())
        } else {
            self.late.peek().map(|e| e.event.event())
        }
    }

    /// Whether the earliest event of the tick being handled is `due`'s (else `late`'s,
    /// if any).
    #[inline(always)]
    fn due_first(&self) -> bool {
        match (self.due.last(), self.late.peek()) {
            (Some(d), Some(l)) => d.key < l.key,
            (d, _) => d.is_some(),
        }
    }

    /// Every pending event.
    fn entries(&self) -> impl Iterator<Item = &Entry> {
        self.due
            .iter()
            .chain(self.late.iter())
            .chain(self.slots.iter().flatten())
            .chain(self.blocks.iter().flatten())
            .chain(self.far.iter().flatten())
    }

    /// Time of the earliest pending event that `pred` accepts: a scan of the whole
    /// queue, for rare questions (the watchdog's), never per event.
    pub fn earliest_where(&self, pred: impl Fn(&Event) -> bool) -> Option<SimTime> {
        self.entries()
            .filter(|e| pred(&e.event.event()))
            .map(|e| e.key)
            .min()
            .map(|k| SimTime((k >> 64) as u64))
    }

    /// Time of the earliest pending event.
    #[inline]
    pub fn peek_time(&self) -> Option<SimTime> {
        let due = self.due.last().map(time_of);
        let late = self.late.peek().map(time_of);
        if let Some(t) = due.into_iter().chain(late).min() {
            return Some(SimTime(t));
        }
        let slot = self
            .next_slot_tick()
            .map(|t| self.slot_min[(t % WHEEL) as usize]);
        let block = (self.block_first != u64::MAX).then_some(self.block_first);
        match (slot, block) {
            (Some(s), Some(b)) => Some(s.min(b)),
            (s, b) => s.or(b).or_else(|| self.far_first()),
        }
        .map(SimTime)
    }
}

#[cfg(test)]
mod tests;
