//! The process's memory on transparent huge pages (Linux with glibc): its allocator.
//!
//! Why: at scale the simulator reads its big arrays (ports, wires, switches, the packet
//! pool, queue pairs, the event queue) and its many small blocks (a port's queue, a
//! flow's record) at random, one cache line here and one there. With 4 KiB pages nearly
//! every such read also misses the TLB, and in a virtual machine each miss walks two page
//! tables (the guest's and the host's: nested paging). Backed by 2 MiB pages, the same
//! memory needs 512 times fewer TLB entries. Linux backs a region with huge pages when
//! asked (`madvise(MADV_HUGEPAGE)`), which is all its `transparent_hugepage` setting
//! `madvise` (the default of Debian and others) allows; with `always` it does so
//! unasked, with `never` not at all.
//!
//! What it does, on top of the system allocator (glibc's malloc):
//! - a block of [`LARGE`] bytes or more is placed on a 2 MiB boundary and advised before
//!   anything touches it (a zeroed one is zeroed after the advice, so its pages are
//!   faulted in huge);
//! - smaller blocks come from glibc's heaps, never mapped alone (`M_MMAP_THRESHOLD` at
//!   [`LARGE`]), and those heaps are advised: the main one up to its break each time it
//!   grows, another thread's arena whole when its first block is seen;
//! - the main heap grows in steps of 16 MiB and is never trimmed (`M_TOP_PAD`,
//!   `M_TRIM_THRESHOLD`), so that what is advised stays advised.
//!
//! The advice is a hint: results never depend on where memory lies. Elsewhere than
//! Linux with glibc, only the placement of large blocks remains.
//!
//! Measured (issue 17, stop 62; the 2-core AMD EPYC VM with a 32 MiB L3, both builds at
//! once with `scripts/side-by-side.sh`): permutation-8192 0.81x the user time with
//! glibc's own switch for this (`GLIBC_TUNABLES=glibc.malloc.hugetlb=1`, 4 rounds),
//! 0.94x of that with this module (4 rounds), which advised 200 MiB of a 230 MiB run,
//! where large blocks alone made 86 MiB huge and ran 1.08x of glibc's switch. More in
//! the README's performance section.
//!
//! Sources: Linux, `Documentation/admin-guide/mm/transhuge.rst` (the `madvise` mode,
//! `MADV_HUGEPAGE`, `AnonHugePages` and the `hg` flag in `/proc/PID/smaps`);
//! `madvise(2)`; `mallopt(3)`; glibc, `malloc/arena.c` (`HEAP_MAX_SIZE`, `heap_for_ptr`).
//!
//! Leaves out: heaps past the 64 a table holds (a run has one per thread that
//! allocates); explicit huge pages (`hugetlbfs`, which need the administrator).
//!
//! What it costs: resident memory may round up to whole 2 MiB pages (`peak_rss_mib` in
//! `perf.json`), and freed heap memory stays with the process for its next blocks.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Once;

static SET_UP: Once = Once::new();

/// A huge page (x86-64 and most other 64-bit systems Linux runs on).
pub const HUGE_PAGE: usize = 2 << 20;

/// A base page, to which `madvise` wants its start aligned.
const PAGE: usize = 4096;

/// Allocations from this size up are placed and advised as huge-page memory: two huge
/// pages, so that at most half of one is rounding.
pub const LARGE: usize = 2 * HUGE_PAGE;

/// The process's allocator (`lib.rs` registers it): [`System`], its memory advised as
/// huge pages.
pub struct HugePageAlloc;

/// The layout a large allocation takes: its own, on a huge page's boundary.
#[inline]
fn placed(layout: Layout) -> Option<Layout> {
    if layout.size() < LARGE {
        return None;
    }
    Layout::from_size_align(layout.size(), layout.align().max(HUGE_PAGE)).ok()
}

/// Asks the kernel to back `[at, at + len)` with huge pages (a hint: its answer is not
/// looked at). `at` is page-aligned.
#[inline]
fn advise(at: *mut u8, len: usize) {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: the range is memory this process mapped (an allocation, or the heap up to
    // its break), and the advice changes how the kernel backs it, never its contents or
    // who may read it.
    unsafe {
        sys::madvise(at.cast(), len, sys::MADV_HUGEPAGE);
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    let _ = (at, len);
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
mod sys {
    use std::ffi::c_void;
    extern "C" {
        pub fn madvise(addr: *mut c_void, len: usize, advice: i32) -> i32;
        pub fn sbrk(increment: isize) -> *mut c_void;
        pub fn mallopt(param: i32, value: i32) -> i32;
    }
    /// Linux, `include/uapi/asm-generic/mman-common.h`.
    pub const MADV_HUGEPAGE: i32 = 14;
    /// glibc, `malloc/malloc.h`.
    pub const M_TRIM_THRESHOLD: i32 = -1;
    pub const M_TOP_PAD: i32 = -2;
    pub const M_MMAP_THRESHOLD: i32 = -3;
}

/// The heap's (glibc's main arena, grown by `brk`) start and how far it is advised.
static HEAP_START: AtomicUsize = AtomicUsize::new(0);
static HEAP_ADVISED: AtomicUsize = AtomicUsize::new(0);

/// The heaps of glibc's other arenas (threads' small blocks), advised whole when their
/// first block is seen: each is a reservation of [`ARENA_HEAP`] bytes on a boundary of
/// that size (glibc, `malloc/arena.c`: `new_heap`, `heap_for_ptr`). A table, since a
/// run has few: one per thread that allocates, at most 8 a core.
static ARENA_HEAPS: [AtomicUsize; 64] = [const { AtomicUsize::new(0) }; 64];

/// glibc's `HEAP_MAX_SIZE` on 64-bit systems: twice its largest mmap threshold (32 MiB).
const ARENA_HEAP: usize = 64 << 20;

/// Sets the system allocator up once, before its first block: blocks below [`LARGE`]
/// from the heaps (glibc would map some alone, too small for a huge page), the main
/// heap grown in steps of huge pages and never trimmed (a heap that shrinks and grows
/// again would need its regrown part advised again; a sweep's next run reuses it).
#[cold]
fn set_up() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: glibc's documented parameters (`mallopt(3)`), set before this process's
    // first allocation through this allocator.
    unsafe {
        sys::mallopt(sys::M_MMAP_THRESHOLD, LARGE as i32);
        sys::mallopt(sys::M_TOP_PAD, (8 * HUGE_PAGE) as i32);
        sys::mallopt(sys::M_TRIM_THRESHOLD, -1);
        let start = sys::sbrk(0) as usize;
        HEAP_START.store(start, Ordering::Relaxed);
        HEAP_ADVISED.store(start.next_multiple_of(PAGE), Ordering::Relaxed);
    }
}

/// A small block at `at`: if it lies in the main heap past what is advised, the heap is
/// advised up to its break (the kernel keeps a grown heap's new part apart from the
/// advised one, so each growth is advised again); if in another arena's heap not yet
/// seen, that heap is advised whole. Returns the block.
#[inline]
fn heap_block(at: *mut u8) -> *mut u8 {
    let a = at as usize;
    let start = HEAP_START.load(Ordering::Relaxed);
    let advised = (start..HEAP_ADVISED.load(Ordering::Relaxed)).contains(&a);
    if !advised && start != 0 && !at.is_null() {
        advise_heap_of(a, start);
    }
    at
}

/// [`heap_block`]'s work for a block at `a` outside the advised part of the main heap,
/// which starts at `start`.
#[cold]
fn advise_heap_of(a: usize, start: usize) {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: `sbrk(0)` reads the break and changes nothing.
        let brk = unsafe { sys::sbrk(0) } as usize;
        if (start..brk).contains(&a) {
            let from = HEAP_ADVISED.swap(brk, Ordering::Relaxed) & !(PAGE - 1);
            if from < brk {
                advise(from as *mut u8, brk - from);
            }
            return;
        }
        let heap = a & !(ARENA_HEAP - 1);
        for slot in &ARENA_HEAPS {
            match slot.compare_exchange(0, heap, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => {
                    advise(heap as *mut u8, ARENA_HEAP);
                    return;
                }
                Err(seen) if seen == heap => return,
                Err(_) => {}
            }
        }
        // More heaps than the table holds: those past it stay on small pages.
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    let _ = (a, start);
}

// SAFETY: every block is obtained from and returned to `System` with one layout: a large
// one's placed layout (`placed`) both ways, the others' own; `realloc` keeps to that.
unsafe impl GlobalAlloc for HugePageAlloc {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        match placed(layout) {
            Some(l) => {
                let at = System.alloc(l);
                if !at.is_null() {
                    advise(at, l.size());
                }
                at
            }
            None => {
                SET_UP.call_once(set_up);
                heap_block(System.alloc(layout))
            }
        }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        match placed(layout) {
            Some(_) => {
                // Advised first, then zeroed: its pages are faulted in as huge pages.
                let at = self.alloc(layout);
                if !at.is_null() {
                    std::ptr::write_bytes(at, 0, layout.size());
                }
                at
            }
            None => {
                SET_UP.call_once(set_up);
                heap_block(System.alloc_zeroed(layout))
            }
        }
    }

    #[inline]
    unsafe fn dealloc(&self, at: *mut u8, layout: Layout) {
        System.dealloc(at, placed(layout).unwrap_or(layout))
    }

    #[inline]
    unsafe fn realloc(&self, at: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let new = Layout::from_size_align_unchecked(new_size, layout.align());
        if placed(layout).is_none() && placed(new).is_none() {
            return heap_block(System.realloc(at, layout, new_size));
        }
        // Into, out of or within the large ones: a new block, then the copy.
        let to = self.alloc(new);
        if !to.is_null() {
            std::ptr::copy_nonoverlapping(at, to, layout.size().min(new_size));
            self.dealloc(at, layout);
        }
        to
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Large blocks land on a huge page's boundary, keep their contents through growth
    /// and shrinking across the threshold, and come back zeroed when asked.
    #[test]
    fn large_blocks_are_placed_and_keep_their_bytes() {
        let a = HugePageAlloc;
        unsafe {
            let small = Layout::from_size_align(1000, 8).unwrap();
            let p = a.alloc(small);
            assert!(!p.is_null());
            for i in 0..1000 {
                *p.add(i) = (i % 251) as u8;
            }
            // Small to large: placed, bytes kept.
            let q = a.realloc(p, small, LARGE + 5);
            assert_eq!(q as usize % HUGE_PAGE, 0);
            assert!((0..1000).all(|i| *q.add(i) == (i % 251) as u8));
            *q.add(LARGE + 4) = 7;
            // Large to larger, then back to small.
            let big = Layout::from_size_align(LARGE + 5, 8).unwrap();
            let r = a.realloc(q, big, 3 * LARGE);
            assert_eq!(r as usize % HUGE_PAGE, 0);
            assert_eq!(*r.add(LARGE + 4), 7);
            assert!((0..1000).all(|i| *r.add(i) == (i % 251) as u8));
            let bigger = Layout::from_size_align(3 * LARGE, 8).unwrap();
            let s = a.realloc(r, bigger, 100);
            assert!((0..100).all(|i| *s.add(i) == (i % 251) as u8));
            a.dealloc(s, Layout::from_size_align(100, 8).unwrap());
            // Zeroed.
            let z = Layout::from_size_align(LARGE, 64).unwrap();
            let zp = a.alloc_zeroed(z);
            assert_eq!(zp as usize % HUGE_PAGE, 0);
            assert!((0..LARGE).step_by(4093).all(|i| *zp.add(i) == 0));
            a.dealloc(zp, z);
        }
    }

    /// The threshold: one byte short of it stays with the system's own placement.
    #[test]
    fn only_large_blocks_are_placed() {
        assert!(placed(Layout::from_size_align(LARGE - 1, 8).unwrap()).is_none());
        let l = placed(Layout::from_size_align(LARGE, 8).unwrap()).unwrap();
        assert_eq!((l.size(), l.align()), (LARGE, HUGE_PAGE));
    }

    /// The advice reaches the kernel: the mappings holding a large block and a small one
    /// (this thread's heap) carry the huge-page flag (`hg` in `/proc/self/smaps`). Not
    /// whether the kernel found huge pages to back them, which depends on its free
    /// memory; skipped where the kernel has no transparent huge pages.
    #[test]
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    fn large_blocks_and_the_heap_are_advised() {
        if !std::path::Path::new("/sys/kernel/mm/transparent_hugepage/enabled").exists() {
            eprintln!("skipped: this kernel has no transparent huge pages");
            return;
        }
        let large = vec![1u8; 3 * LARGE];
        let small = Box::new([2u8; 100]);
        let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
        let advised = |at: usize| {
            let mut inside = false;
            for line in smaps.lines() {
                let head = line.split_whitespace().next().unwrap_or("");
                if let Some((lo, hi)) = head.split_once('-') {
                    if let (Ok(lo), Ok(hi)) =
                        (usize::from_str_radix(lo, 16), usize::from_str_radix(hi, 16))
                    {
                        inside = (lo..hi).contains(&at);
                        continue;
                    }
                }
                if inside {
                    if let Some(flags) = line.strip_prefix("VmFlags:") {
                        return flags.split_whitespace().any(|f| f == "hg");
                    }
                }
            }
            false
        };
        assert!(advised(large.as_ptr() as usize), "the large block");
        assert!(advised(small.as_ptr() as usize), "the small block's heap");
        assert_eq!(large[3 * LARGE - 1] + small[99], 3);
    }
}
