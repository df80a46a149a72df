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
//! - another thread's heap is also made readable and writable whole when first seen
//!   (`open_arena_heap`), as glibc makes it bit by bit as it grows: the kernel backs an
//!   address with a huge page only where the whole 2 MiB around it lies in one mapping,
//!   so a heap grown a few pages at a time got 4 KiB pages at each edge it grew past
//!   (a split run's partitions: 147 of 354 MiB in huge pages, 356 of 377 opened);
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
//! where large blocks alone made 86 MiB huge and ran 1.08x of glibc's switch. Stop 64
//! (the threads' heaps opened whole): permutation-8192 with `--threads 2` 0.931x the wall
//! time of the build before (`scripts/split-gain.sh`, 4 rounds, each faster). More in
//! the README's performance section.
//!
//! Sources: Linux, `Documentation/admin-guide/mm/transhuge.rst` (the `madvise` mode,
//! `MADV_HUGEPAGE`, `AnonHugePages` and the `hg` flag in `/proc/PID/smaps`);
//! `madvise(2)`; `mallopt(3)`; `mprotect(2)`; `proc(5)` (`/proc/self/maps`); glibc,
//! `malloc/arena.c` (`HEAP_MAX_SIZE`, `new_heap`, `grow_heap`, `heap_for_ptr`).
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
        pub fn mprotect(addr: *mut c_void, len: usize, prot: i32) -> i32;
        pub fn open(path: *const u8, flags: i32, ...) -> i32;
        pub fn read(fd: i32, buf: *mut c_void, count: usize) -> isize;
        pub fn close(fd: i32) -> i32;
    }
    /// Linux, `include/uapi/asm-generic/mman-common.h`.
    pub const MADV_HUGEPAGE: i32 = 14;
    /// glibc, `malloc/malloc.h`.
    pub const M_TRIM_THRESHOLD: i32 = -1;
    pub const M_TOP_PAD: i32 = -2;
    pub const M_MMAP_THRESHOLD: i32 = -3;
    /// Linux, `include/uapi/asm-generic/mman-common.h`.
    pub const PROT_READ_WRITE: i32 = 0x1 | 0x2;
    /// Linux, `include/uapi/asm-generic/fcntl.h`.
    pub const O_RDONLY_CLOEXEC: i32 = 0o2000000;
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
        // Every block of a thread's arena comes here: the table is read first, so that
        // the threads only share its line (a write, even a failed exchange, would take
        // it from the other cores at each block).
        if ARENA_HEAPS
            .iter()
            .any(|slot| slot.load(Ordering::Relaxed) == heap)
        {
            return;
        }
        for slot in &ARENA_HEAPS {
            match slot.compare_exchange(0, heap, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => {
                    open_arena_heap(heap);
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

/// Makes the rest of glibc's heap at `heap` (a thread's arena, [`ARENA_HEAP`] bytes
/// reserved on a boundary of that size) readable and writable now, where glibc would
/// make it so a few pages at a time as the heap grows (`grow_heap`). The kernel gives an
/// address a huge page only where the 2 MiB around it lie in one mapping, so each edge
/// the heap grew past was left on 4 KiB pages. Nothing is resident until touched;
/// glibc's own later `mprotect` of a part is then a no-op. Done only when
/// `/proc/self/maps` shows the reservation as glibc leaves it: an anonymous private
/// mapping that is readable and writable from `heap`, then (if the heap has not grown
/// to its end) an anonymous one with no access up to the reservation's end; anything
/// else is left as it is.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[cold]
fn open_arena_heap(heap: usize) {
    let end = heap + ARENA_HEAP;
    let mut writable_to = None;
    let mut closed = None;
    for_each_mapping(|m| {
        if m.start == heap && m.anonymous && m.perms.starts_with(b"rw") {
            writable_to = Some(m.end);
        } else if Some(m.start) == writable_to && m.anonymous && m.perms == *b"---p" {
            closed = Some((m.start, m.end));
        }
    });
    if let Some((from, to)) = closed {
        if to == end {
            // SAFETY: the range is the unused tail of this arena's reservation, which
            // glibc itself makes readable and writable as the heap grows; nothing reads
            // or writes it before glibc hands a block of it out.
            unsafe {
                sys::mprotect(from as *mut _, end - from, sys::PROT_READ_WRITE);
            }
        }
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn open_arena_heap(_heap: usize) {}

/// One line of `/proc/self/maps`: what [`open_arena_heap`] looks at.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
struct Mapping {
    start: usize,
    end: usize,
    perms: [u8; 4],
    /// No file (inode 0) and no name but glibc's or the kernel's for anonymous memory.
    anonymous: bool,
}

/// Calls `f` with each mapping of this process, read from `/proc/self/maps` without
/// allocating (this runs inside the allocator): a line's first [`MAPS_LINE`] bytes are
/// enough for its fields.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn for_each_mapping(mut f: impl FnMut(&Mapping)) {
    // SAFETY: a NUL-terminated path; the descriptor is closed below.
    let fd = unsafe { sys::open(c"/proc/self/maps".as_ptr().cast(), sys::O_RDONLY_CLOEXEC) };
    if fd < 0 {
        return;
    }
    let mut buf = [0u8; 4096];
    let mut line = [0u8; MAPS_LINE];
    let mut len = 0;
    loop {
        // SAFETY: `buf` is writable for its length.
        let n = unsafe { sys::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
        if n <= 0 {
            break;
        }
        for &b in &buf[..n as usize] {
            if b == b'\n' {
                if let Some(m) = parse_mapping(&line[..len]) {
                    f(&m);
                }
                len = 0;
            } else if len < MAPS_LINE {
                line[len] = b;
                len += 1;
            }
        }
    }
    // SAFETY: the descriptor opened above.
    unsafe {
        sys::close(fd);
    }
}

/// How much of a `/proc/self/maps` line is kept: its fields and a name's start.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const MAPS_LINE: usize = 160;

/// `start-end perms offset dev inode [name]` (`proc(5)`), or `None` if it does not read
/// so.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn parse_mapping(line: &[u8]) -> Option<Mapping> {
    let mut fields = line.split(|&b| b == b' ').filter(|f| !f.is_empty());
    let range = fields.next()?;
    let dash = range.iter().position(|&b| b == b'-')?;
    let start = hex(&range[..dash])?;
    let end = hex(&range[dash + 1..])?;
    let perms: [u8; 4] = fields.next()?.try_into().ok()?;
    let (_offset, _dev) = (fields.next()?, fields.next()?);
    let inode = fields.next()?;
    let name = fields.next();
    let anonymous = inode == b"0" && name.map_or(true, |n| n.starts_with(b"[anon:"));
    Some(Mapping {
        start,
        end,
        perms,
        anonymous,
    })
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn hex(digits: &[u8]) -> Option<usize> {
    if digits.is_empty() || digits.len() > 16 {
        return None;
    }
    digits.iter().try_fold(0usize, |v, &d| {
        let x = (d as char).to_digit(16)?;
        Some(v << 4 | x as usize)
    })
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

    /// Whether this kernel has no transparent huge pages (then the tests that look for
    /// them are skipped, and say so).
    fn no_transparent_huge_pages() -> bool {
        let none = !std::path::Path::new("/sys/kernel/mm/transparent_hugepage/enabled").exists();
        if none {
            eprintln!("skipped: this kernel has no transparent huge pages");
        }
        none
    }

    /// `/proc/self/maps` lines read as `proc(5)` writes them; other lines are not taken.
    #[test]
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    fn maps_lines_are_read() {
        let m = parse_mapping(b"7f3b0c000000-7f3b0ffaf000 rw-p 00000000 00:00 0 ").unwrap();
        assert_eq!((m.start, m.end), (0x7f3b_0c00_0000, 0x7f3b_0ffa_f000));
        assert_eq!((&m.perms, m.anonymous), (b"rw-p", true));
        let m = parse_mapping(b"7f3b0ffaf000-7f3b10000000 ---p 00000000 00:00 0").unwrap();
        assert_eq!((&m.perms, m.anonymous), (b"---p", true));
        let named =
            b"7f3b10000000-7f3b10001000 rw-p 00000000 00:00 0    [anon:glibc: malloc arena]";
        assert!(parse_mapping(named).unwrap().anonymous);
        let file = b"55b88abf1000-55b88bc59000 r--p 00000000 fe:01 1234  /usr/lib/libc.so.6";
        assert!(!parse_mapping(file).unwrap().anonymous);
        assert!(
            !parse_mapping(b"55b8-55b9 rw-p 0 00:00 0 [heap]")
                .unwrap()
                .anonymous
        );
        assert!(parse_mapping(b"not a mapping").is_none());
        assert!(parse_mapping(b"").is_none());
        assert!(parse_mapping(b"12-zz rw-p 0 00:00 0").is_none());
    }

    /// A thread's heap (glibc's arena for it) is advised and readable and writable to the
    /// end of its reservation once its first block is seen, so that the kernel can back
    /// all of it with huge pages; without `open_arena_heap` its end is still closed. Not
    /// checked where the thread's block comes from the main heap (glibc gives a thread
    /// the main arena once it has as many arenas as it allows).
    #[test]
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    fn a_threads_heap_is_opened_whole() {
        if no_transparent_huge_pages() {
            return;
        }
        let (at, small) = std::thread::spawn(|| {
            let b = Box::new([3u8; 200]);
            (b.as_ptr() as usize, b)
        })
        .join()
        .unwrap();
        // SAFETY: `sbrk(0)` reads the break and changes nothing.
        let brk = unsafe { sys::sbrk(0) } as usize;
        if (HEAP_START.load(Ordering::Relaxed)..brk).contains(&at) {
            eprintln!("skipped: the thread's block is in the main heap");
            return;
        }
        let heap = at & !(ARENA_HEAP - 1);
        let last = heap + ARENA_HEAP - 1;
        let mut found = None;
        for_each_mapping(|m| {
            if (m.start..m.end).contains(&last) {
                found = Some((m.start, m.perms));
            }
        });
        let (start, perms) = found.expect("the heap's reservation is mapped");
        assert_eq!(
            &perms[..2],
            b"rw",
            "the heap's end is readable and writable"
        );
        assert_eq!(start, heap, "the heap is one mapping");
        assert_eq!(small[199], 3);
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
        if no_transparent_huge_pages() {
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
