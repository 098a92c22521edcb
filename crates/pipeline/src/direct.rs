//! The direct read path: O_DIRECT reads into 4 KiB-aligned memory, so a
//! check neither fills the page cache nor pays for it (page allocation,
//! copies, the kernel's read-ahead).
//!
//! Without the page cache nothing reads ahead, so the check's own hints
//! (inode tables ahead of pass 1, the directory blocks pass 1 finds ahead
//! of pass 2) are served here: [`Ahead`] keeps a bounded store of ranges
//! that one background thread reads, sorted by address, with a deep
//! io_uring queue into an arena registered with the ring (fixed buffers).
//! Workers take their bytes from the store, waiting if a read is still in
//! flight, and read anything else directly themselves ([`DirectReader`]:
//! each batch sorted by address, adjacent requests merged).

use std::collections::{BTreeMap, VecDeque};
use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, Weak};

use io_uring::{opcode, types, IoUring};

use crate::aligned::{align_down, align_up, fill, read_direct, AlignedBuf, ALIGN, ALIGN64};
use crate::read::{ReadReq, Window};

/// The largest single read, read-ahead or merged.
const MAX_IO: u64 = 512 << 10;
/// Bytes the read-ahead store holds or has in flight at most. It is also
/// the arena registered with the ring, so it counts in resident memory.
const STORE_BYTES: u64 = 48 << 20;
/// Reads the read-ahead thread keeps in flight.
const DEPTH: usize = 256;
/// Threads reading ahead when io_uring cannot be used.
const PREAD_THREADS: usize = 4;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The read-ahead memory: one aligned arena, handed out in runs of
/// pages. Runs are asked for and given back in about the same order, so
/// the search for a free run starts where the last one ended.
struct Arena {
    buf: AlignedBuf,
    used: Mutex<Pages>,
}

/// One bit per page, set while the page is in use, and where the next
/// search starts.
struct Pages {
    bits: Vec<u64>,
    cursor: usize,
}

impl Pages {
    fn is_used(&self, p: usize) -> bool {
        self.bits[p / 64] >> (p % 64) & 1 == 1
    }

    /// The first page in use in `[from, to)`, a word at a time.
    fn first_used(&self, from: usize, to: usize) -> Option<usize> {
        let mut p = from;
        while p < to {
            let w = self.bits[p / 64] >> (p % 64);
            if w == 0 {
                p = (p / 64 + 1) * 64;
                continue;
            }
            let q = p + w.trailing_zeros() as usize;
            return (q < to).then_some(q);
        }
        None
    }

    fn set(&mut self, from: usize, to: usize, on: bool) {
        for q in from..to {
            if on {
                self.bits[q / 64] |= 1 << (q % 64);
            } else {
                self.bits[q / 64] &= !(1 << (q % 64));
            }
        }
    }
}

impl Arena {
    fn new(bytes: usize) -> Arena {
        let pages = bytes / ALIGN;
        Arena {
            buf: AlignedBuf::new(bytes),
            used: Mutex::new(Pages {
                bits: vec![0; pages.div_ceil(64)],
                cursor: 0,
            }),
        }
    }

    fn pages(&self) -> usize {
        self.buf.len() / ALIGN
    }

    /// `len` bytes of free pages in one run, or `None` when no run is
    /// long enough.
    fn alloc(self: &Arc<Self>, len: u64) -> Option<Run> {
        let want = usize::try_from(len.div_ceil(ALIGN64)).ok()?.max(1);
        let total = self.pages();
        if want > total {
            return None;
        }
        let mut pages = lock(&self.used);
        let start = pages.cursor.min(total);
        let mut p = start;
        let mut wrapped = false;
        loop {
            if p + want > total {
                if wrapped {
                    return None;
                }
                wrapped = true;
                p = 0;
            }
            if wrapped && p >= start {
                return None;
            }
            match pages.first_used(p, p + want) {
                Some(q) => {
                    // Skip the run in use.
                    p = q + 1;
                    while p < total && pages.is_used(p) {
                        p += 1;
                    }
                }
                None => {
                    pages.set(p, p + want, true);
                    pages.cursor = p + want;
                    return Some(Run {
                        arena: self.clone(),
                        first: p,
                        pages: want,
                    });
                }
            }
        }
    }
}

/// Pages of the arena, given back when dropped.
struct Run {
    arena: Arc<Arena>,
    first: usize,
    pages: usize,
}

impl Run {
    fn ptr(&self) -> *mut u8 {
        // SAFETY: `first + pages` lies inside the arena (see `alloc`).
        unsafe { self.arena.buf.as_ptr().add(self.first * ALIGN) }
    }

    fn bytes(&self, n: usize) -> &[u8] {
        let n = n.min(self.pages * ALIGN);
        // SAFETY: the pages are this run's alone until it is dropped, and
        // are only read once the read into them has completed (the slot's
        // mutex orders the two).
        unsafe { std::slice::from_raw_parts(self.ptr(), n) }
    }
}

impl Drop for Run {
    fn drop(&mut self) {
        lock(&self.arena.used).set(self.first, self.first + self.pages, false);
    }
}

/// Where a read-ahead lands.
enum Mem {
    Arena(Run),
    Heap(AlignedBuf),
}

impl Mem {
    fn ptr(&mut self) -> *mut u8 {
        match self {
            Mem::Arena(r) => r.ptr(),
            Mem::Heap(b) => b.as_mut_slice().as_mut_ptr(),
        }
    }

    fn bytes(&self, n: usize) -> &[u8] {
        match self {
            Mem::Arena(r) => r.bytes(n),
            Mem::Heap(b) => &b.as_slice()[..n.min(b.len())],
        }
    }

    fn as_mut_slice(&mut self, n: usize) -> &mut [u8] {
        match self {
            // SAFETY: as in `Run::bytes`; the caller is the only user of
            // the run until the slot is ready.
            Mem::Arena(r) => unsafe {
                std::slice::from_raw_parts_mut(r.ptr(), n.min(r.pages * ALIGN))
            },
            Mem::Heap(b) => {
                let l = n.min(b.len());
                &mut b.as_mut_slice()[..l]
            }
        }
    }
}

enum State {
    Pending,
    Ready { mem: Mem, valid: usize },
    Failed,
}

/// One range read ahead: `len` bytes at device offset `start`.
struct Slot {
    start: u64,
    len: u64,
    state: Mutex<State>,
    ready: Condvar,
    /// Bytes handed to readers so far; the slot leaves the store when
    /// all of it has been taken.
    taken: AtomicU64,
    /// Bytes asked for before this slot (its age).
    asked_before: u64,
}

impl Slot {
    fn finish(&self, st: State) {
        *lock(&self.state) = st;
        self.ready.notify_all();
    }
}

#[derive(Default)]
struct Store {
    slots: BTreeMap<u64, Arc<Slot>>,
    /// Slots in the order they were asked for (the oldest are dropped
    /// first when the store is full).
    order: VecDeque<Weak<Slot>>,
    bytes: u64,
    /// Bytes asked for in all.
    asked: u64,
}

impl Store {
    fn remove(&mut self, s: &Arc<Slot>) {
        if self.slots.get(&s.start).is_some_and(|x| Arc::ptr_eq(x, s)) {
            self.slots.remove(&s.start);
            self.bytes -= s.len;
        }
    }

    fn overlaps(&self, start: u64, end: u64) -> bool {
        self.slots
            .range(..end)
            .next_back()
            .is_some_and(|(_, s)| s.start + s.len > start)
    }

    /// Makes room for `len` bytes. A full store refuses: what it holds
    /// is read ahead of the readers and about to be taken. Only slots
    /// left behind (asked for four stores' worth of reads ago and never
    /// taken, such as the blocks of a range read around a bad block) are
    /// dropped to make room.
    fn make_room(&mut self, len: u64) -> bool {
        let cap = STORE_BYTES;
        while self.bytes + len > cap {
            let Some(w) = self.order.front() else {
                return false;
            };
            let Some(s) = w.upgrade() else {
                self.order.pop_front();
                continue;
            };
            if !self.slots.get(&s.start).is_some_and(|x| Arc::ptr_eq(x, &s)) {
                self.order.pop_front();
                continue;
            }
            if self.asked - s.asked_before < 4 * cap || matches!(*lock(&s.state), State::Pending) {
                return false;
            }
            self.order.pop_front();
            self.remove(&s);
        }
        true
    }
}

/// The read-ahead store and its reading thread.
pub(crate) struct Ahead {
    store: Mutex<Store>,
    tx: Mutex<Option<crossbeam_channel::Sender<Arc<Slot>>>>,
    threads: Mutex<Vec<std::thread::JoinHandle<()>>>,
    /// Device bytes read ahead and taken by a reader, and read ahead in
    /// all (for `-v`).
    hits: AtomicU64,
    fetched: AtomicU64,
    /// Time readers spent waiting for a read in flight, nanoseconds.
    waited_ns: AtomicU64,
}

impl Ahead {
    /// Starts the reading thread (io_uring with a registered arena when
    /// the kernel allows it, else a few pread threads).
    pub(crate) fn start(file: Arc<File>, uring: bool) -> Arc<Ahead> {
        let (tx, rx) = crossbeam_channel::unbounded::<Arc<Slot>>();
        let me = Arc::new(Ahead {
            store: Mutex::new(Store::default()),
            tx: Mutex::new(Some(tx)),
            threads: Mutex::new(Vec::new()),
            hits: AtomicU64::new(0),
            fetched: AtomicU64::new(0),
            waited_ns: AtomicU64::new(0),
        });
        let arena = Arc::new(Arena::new(STORE_BYTES as usize));
        let mut threads = Vec::new();
        let ring = if uring {
            IoUring::new((DEPTH * 2) as u32).ok()
        } else {
            None
        };
        match ring {
            Some(ring) => {
                let (f, a) = (file.clone(), arena.clone());
                let rx = rx.clone();
                threads.push(std::thread::spawn(move || ring_loop(ring, &f, &a, &rx)));
            }
            None => {
                for _ in 0..PREAD_THREADS {
                    let (f, a, rx) = (file.clone(), arena.clone(), rx.clone());
                    threads.push(std::thread::spawn(move || {
                        while let Ok(s) = rx.recv() {
                            pread_one(&f, &a, &s);
                        }
                    }));
                }
            }
        }
        *lock(&me.threads) = threads;
        me
    }

    /// Asks for `len` bytes at device offset `at` to be read ahead. A
    /// hint: ranges already asked for, and anything beyond the store's
    /// room, are left out.
    pub(crate) fn want(&self, at: u64, len: u64) {
        let (mut s, end) = (align_down(at), align_up(at.saturating_add(len)));
        let tx = lock(&self.tx).clone();
        let Some(tx) = tx else { return };
        while s < end {
            let e = (s + MAX_IO).min(end);
            let slot = {
                let mut st = lock(&self.store);
                if st.overlaps(s, e) || !st.make_room(e - s) {
                    s = e;
                    continue;
                }
                let slot = Arc::new(Slot {
                    start: s,
                    len: e - s,
                    state: Mutex::new(State::Pending),
                    ready: Condvar::new(),
                    taken: AtomicU64::new(0),
                    asked_before: st.asked,
                });
                st.asked += e - s;
                st.slots.insert(s, slot.clone());
                st.order.push_back(Arc::downgrade(&slot));
                st.bytes += e - s;
                slot
            };
            self.fetched.fetch_add(e - s, Ordering::Relaxed);
            if let Err(e) = tx.send(slot) {
                e.0.finish(State::Failed);
            }
            s = e;
        }
    }

    /// Fills `buf` from the store if a read-ahead covers `buf.len()`
    /// bytes at device offset `at`, waiting for it if it is in flight.
    /// `false` when it does not (the caller reads the device itself).
    pub(crate) fn take(&self, at: u64, buf: &mut [u8]) -> bool {
        let len = buf.len() as u64;
        let Some(end) = at.checked_add(len) else {
            return false;
        };
        let slot = {
            let st = lock(&self.store);
            st.slots
                .range(..=at)
                .next_back()
                .filter(|(_, s)| s.start + s.len >= end)
                .map(|(_, s)| s.clone())
        };
        let Some(slot) = slot else { return false };
        let served = {
            let mut g = lock(&slot.state);
            if matches!(*g, State::Pending) {
                let since = std::time::Instant::now();
                while matches!(*g, State::Pending) {
                    g = slot.ready.wait(g).unwrap_or_else(|e| e.into_inner());
                }
                let waited = u64::try_from(since.elapsed().as_nanos()).unwrap_or(u64::MAX);
                self.waited_ns.fetch_add(waited, Ordering::Relaxed);
            }
            match &*g {
                State::Ready { mem, valid } => {
                    let from = (at - slot.start) as usize;
                    let bytes = mem.bytes(*valid);
                    match bytes.get(from..from + buf.len()) {
                        Some(b) => {
                            buf.copy_from_slice(b);
                            true
                        }
                        None => false,
                    }
                }
                _ => false,
            }
        };
        let done = !served || slot.taken.fetch_add(len, Ordering::Relaxed) + len >= slot.len;
        if done {
            lock(&self.store).remove(&slot);
        }
        if served {
            self.hits.fetch_add(len, Ordering::Relaxed);
        }
        served
    }

    /// Bytes read ahead, bytes of those a reader took, and the time
    /// readers spent waiting for reads in flight (nanoseconds, summed
    /// over readers).
    pub(crate) fn counts(&self) -> (u64, u64, u64) {
        (
            self.fetched.load(Ordering::Relaxed),
            self.hits.load(Ordering::Relaxed),
            self.waited_ns.load(Ordering::Relaxed),
        )
    }
}

impl Drop for Ahead {
    fn drop(&mut self) {
        lock(&self.tx).take();
        for t in lock(&self.threads).drain(..) {
            let _ = t.join();
        }
    }
}

/// Reads one slot with pread (the fallback thread's work, and the ring's
/// when it refuses a read).
fn pread_one(file: &File, arena: &Arc<Arena>, s: &Slot) {
    let mut mem = arena
        .alloc(s.len)
        .map(Mem::Arena)
        .unwrap_or_else(|| Mem::Heap(AlignedBuf::new(s.len as usize)));
    let st = finish_with_pread(file, &mut mem, s);
    s.finish(match st {
        Some(valid) => State::Ready { mem, valid },
        None => State::Failed,
    });
}

fn finish_with_pread(file: &File, mem: &mut Mem, s: &Slot) -> Option<usize> {
    let n = s.len as usize;
    fill(file, mem.as_mut_slice(n), s.start, n).ok()
}

/// The io_uring read-ahead loop: keeps up to `DEPTH` reads in flight,
/// each new group sorted by address, into the registered arena.
fn ring_loop(
    mut ring: IoUring,
    file: &File,
    arena: &Arc<Arena>,
    rx: &crossbeam_channel::Receiver<Arc<Slot>>,
) {
    let iov = libc::iovec {
        iov_base: arena.buf.as_ptr().cast(),
        iov_len: arena.buf.len(),
    };
    // SAFETY: the arena outlives the ring: this function holds an Arc to
    // it, and the ring is dropped (unregistering it) before returning or
    // leaked with the arena on a failure (see below).
    let fixed = unsafe { ring.submitter().register_buffers(&[iov]) }.is_ok();
    let fd = types::Fd(file.as_raw_fd());
    let mut flight: Vec<Option<(Arc<Slot>, Mem)>> = (0..DEPTH).map(|_| None).collect();
    let mut free: Vec<usize> = (0..DEPTH).rev().collect();
    let mut fresh = Vec::new();
    loop {
        let busy = DEPTH - free.len();
        if busy == 0 {
            match rx.recv() {
                Ok(s) => fresh.push(s),
                Err(_) => return,
            }
        }
        while busy + fresh.len() < DEPTH {
            match rx.try_recv() {
                Ok(s) => fresh.push(s),
                Err(_) => break,
            }
        }
        fresh.sort_unstable_by_key(|s| s.start);
        for s in fresh.drain(..) {
            let mut mem = arena
                .alloc(s.len)
                .map(Mem::Arena)
                .unwrap_or_else(|| Mem::Heap(AlignedBuf::new(s.len as usize)));
            let Some(idx) = free.pop() else {
                pread_one(file, arena, &s);
                continue;
            };
            let len = s.len as u32;
            let sqe = match (&mem, fixed) {
                (Mem::Arena(_), true) => opcode::ReadFixed::new(fd, mem.ptr(), len, 0)
                    .offset(s.start)
                    .build(),
                _ => opcode::Read::new(fd, mem.ptr(), len)
                    .offset(s.start)
                    .build(),
            }
            .user_data(idx as u64);
            // SAFETY: the memory belongs to `mem`, kept in `flight` until
            // the read's completion is reaped (or leaked if the ring fails).
            if unsafe { ring.submission().push(&sqe) }.is_err() {
                free.push(idx);
                pread_one(file, arena, &s);
                continue;
            }
            flight[idx] = Some((s, mem));
        }
        if let Err(e) = ring.submit_and_wait(1) {
            let transient = matches!(
                e.raw_os_error(),
                Some(libc::EINTR) | Some(libc::EAGAIN) | Some(libc::EBUSY)
            );
            if !transient {
                abandon(ring, arena, flight, file, rx);
                return;
            }
        }
        let done: Vec<(u64, i32)> = ring
            .completion()
            .map(|c| (c.user_data(), c.result()))
            .collect();
        for (idx, res) in done {
            let Some((s, mut mem)) = flight.get_mut(idx as usize).and_then(Option::take) else {
                continue;
            };
            free.push(idx as usize);
            let valid = if res >= 0 {
                Some(res as usize)
            } else {
                // Refused or failed: pread decides.
                finish_with_pread(file, &mut mem, &s)
            };
            s.finish(match valid {
                Some(valid) => State::Ready { mem, valid },
                None => State::Failed,
            });
        }
    }
}

/// The ring cannot be entered any more. Reads the kernel may still hold
/// keep their memory (leaked with the ring and the arena) and are marked
/// failed, so their readers read the device themselves; the rest of the
/// work is done with pread.
fn abandon(
    ring: IoUring,
    arena: &Arc<Arena>,
    flight: Vec<Option<(Arc<Slot>, Mem)>>,
    file: &File,
    rx: &crossbeam_channel::Receiver<Arc<Slot>>,
) {
    std::mem::forget(arena.clone());
    std::mem::forget(ring);
    for (s, mem) in flight.into_iter().flatten() {
        std::mem::forget(mem);
        s.finish(State::Failed);
    }
    while let Ok(s) = rx.recv() {
        pread_one(file, arena, &s);
    }
}

/// A worker's reader on the direct path.
pub(crate) struct DirectReader {
    w: Window,
    ahead: Option<Arc<Ahead>>,
    ring: Option<IoUring>,
    bounce: Option<AlignedBuf>,
}

impl DirectReader {
    pub(crate) fn new(w: Window, ahead: Option<Arc<Ahead>>, uring: bool) -> Self {
        DirectReader {
            w,
            ahead,
            ring: if uring {
                IoUring::new(DEPTH as u32).ok()
            } else {
                None
            },
            bounce: None,
        }
    }

    fn read_one(&mut self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        if !self.w.holds(offset, buf.len()) {
            return self.w.read_exact_at(buf, offset);
        }
        let at = self.w.dev_offset(offset);
        if self.ahead.as_ref().is_some_and(|a| a.take(at, buf)) {
            return Ok(());
        }
        read_direct(&self.w.file, buf, at, &mut self.bounce)
    }

    /// Reads the requests `todo` (indices into `reqs`, in window
    /// bounds) as merged extents, calling `done` for each request.
    fn read_merged(
        &mut self,
        reqs: &mut [ReadReq<'_>],
        mut todo: Vec<usize>,
        done: &mut dyn FnMut(usize, &ReadReq<'_>),
    ) {
        todo.sort_unstable_by_key(|&i| reqs[i].offset);
        // Extents: (device start, device end, first and last index in todo).
        let mut ext: Vec<(u64, u64, usize, usize)> = Vec::new();
        for (k, &i) in todo.iter().enumerate() {
            let at = self.w.dev_offset(reqs[i].offset);
            let (s, e) = (align_down(at), align_up(at + reqs[i].buf.len() as u64));
            match ext.last_mut() {
                Some(x) if s <= x.1 && e.max(x.1) - x.0 <= MAX_IO => {
                    x.1 = x.1.max(e);
                    x.3 = k;
                }
                _ => ext.push((s, e, k, k)),
            }
        }
        let total: u64 = ext.iter().map(|x| x.1 - x.0).sum();
        if self
            .bounce
            .as_ref()
            .is_none_or(|b| (b.len() as u64) < total)
        {
            self.bounce = Some(AlignedBuf::new(total as usize));
        }
        let Some(mut bounce) = self.bounce.take() else {
            return;
        };
        // Where each extent lands in the bounce buffer, and how many of
        // its bytes arrived (None: the read failed).
        let mut at_mem = Vec::with_capacity(ext.len());
        let mut pos = 0usize;
        for x in &ext {
            at_mem.push(pos);
            pos += (x.1 - x.0) as usize;
        }
        let mut got: Vec<Option<usize>> = vec![None; ext.len()];
        let mem = bounce.as_mut_slice();
        let mut ring_ok = true;
        if let Some(ring) = self.ring.as_mut() {
            ring_ok = submit_extents(ring, &self.w.file, &ext, &at_mem, mem, &mut got);
        } else {
            for (j, x) in ext.iter().enumerate() {
                let n = (x.1 - x.0) as usize;
                got[j] = fill(&self.w.file, &mut mem[at_mem[j]..at_mem[j] + n], x.0, n).ok();
            }
        }
        if !ring_ok {
            // Reads the kernel took may still land in the bounce buffer
            // and the ring's queues: both are leaked, and every request
            // is read again alone.
            if let Some(r) = self.ring.take() {
                std::mem::forget(r);
            }
            got.iter_mut().for_each(|g| *g = None);
        }
        let w = &self.w;
        for (j, &(s, _, a, b)) in ext.iter().enumerate() {
            for &i in &todo[a..=b] {
                let r = &mut reqs[i];
                let from = (w.dev_offset(r.offset) - s) as usize;
                let len = r.buf.len();
                r.result = match got[j] {
                    Some(n) if from + len <= n => {
                        let m = at_mem[j] + from;
                        r.buf.copy_from_slice(&mem[m..m + len]);
                        Ok(())
                    }
                    // A failed or short extent: each of its requests is
                    // read alone, so only the bad ones fail.
                    _ => read_direct(&w.file, r.buf, w.dev_offset(r.offset), &mut None),
                };
                r.cached = false;
                done(i, r);
            }
        }
        if ring_ok {
            self.bounce = Some(bounce);
        } else {
            std::mem::forget(bounce);
        }
    }
}

/// Reads the extents through `ring`, at most a ring's worth at a time,
/// recording the bytes each got. `false` if the ring failed (the extents
/// not yet read are left `None`; the ring is not used again).
fn submit_extents(
    ring: &mut IoUring,
    file: &File,
    ext: &[(u64, u64, usize, usize)],
    at_mem: &[usize],
    mem: &mut [u8],
    got: &mut [Option<usize>],
) -> bool {
    let fd = types::Fd(file.as_raw_fd());
    let base = mem.as_mut_ptr();
    for group in (0..ext.len()).collect::<Vec<_>>().chunks(DEPTH) {
        let mut queued = 0;
        for &j in group {
            let (s, e, _, _) = ext[j];
            // SAFETY: `at_mem[j] + (e - s)` lies inside `mem` (the bounce
            // buffer was sized for all extents).
            let ptr = unsafe { base.add(at_mem[j]) };
            let sqe = opcode::Read::new(fd, ptr, (e - s) as u32)
                .offset(s)
                .build()
                .user_data(j as u64);
            // SAFETY: `mem` outlives every read queued here: each is
            // reaped before this function returns.
            if unsafe { ring.submission().push(&sqe) }.is_ok() {
                queued += 1;
            }
        }
        while queued > 0 {
            if let Err(e) = ring.submit_and_wait(1) {
                if !matches!(
                    e.raw_os_error(),
                    Some(libc::EINTR) | Some(libc::EAGAIN) | Some(libc::EBUSY)
                ) {
                    // The reads the kernel took may still land in `mem`:
                    // the caller leaks it.
                    return false;
                }
            }
            for c in ring.completion() {
                queued -= 1;
                if let Some(g) = got.get_mut(c.user_data() as usize) {
                    *g = (c.result() >= 0).then_some(c.result() as usize);
                }
            }
        }
    }
    true
}

impl crate::Reader for DirectReader {
    fn read_at(&mut self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.read_one(buf, offset)
    }

    fn read_batch_with(
        &mut self,
        reqs: &mut [ReadReq<'_>],
        done: &mut dyn FnMut(usize, &ReadReq<'_>),
    ) {
        let mut todo = Vec::new();
        for (i, r) in reqs.iter_mut().enumerate() {
            if !self.w.holds(r.offset, r.buf.len()) {
                r.result = self.w.read_exact_at(r.buf, r.offset);
                done(i, r);
                continue;
            }
            let at = self.w.dev_offset(r.offset);
            if self.ahead.as_ref().is_some_and(|a| a.take(at, r.buf)) {
                r.result = Ok(());
                r.cached = false;
                done(i, r);
                continue;
            }
            todo.push(i);
        }
        if !todo.is_empty() {
            self.read_merged(reqs, todo, done);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arena_runs_are_disjoint_and_come_back() {
        let a = Arc::new(Arena::new(16 * ALIGN));
        let r1 = a.alloc(3 * ALIGN64).expect("first run");
        let r2 = a.alloc(ALIGN64 + 1).expect("second run");
        assert_eq!((r1.first, r1.pages), (0, 3));
        assert_eq!((r2.first, r2.pages), (3, 2));
        // Too long for what is left, then fits once a run is back.
        assert!(a.alloc(12 * ALIGN64).is_none());
        drop(r1);
        let r3 = a.alloc(11 * ALIGN64).expect("after the cursor");
        assert_eq!(r3.first, 5);
        let r4 = a.alloc(3 * ALIGN64).expect("wrapped to the start");
        assert_eq!(r4.first, 0);
        assert!(a.alloc(ALIGN64).is_none());
        drop((r2, r3, r4));
        assert!(a.alloc(16 * ALIGN64).is_some());
        assert!(a.alloc(17 * ALIGN64).is_none());
    }

    #[test]
    fn unaligned_reads_and_the_end_of_a_file() {
        let p = std::env::temp_dir().join(format!("direct-{}", std::process::id()));
        let data: Vec<u8> = (0..3 * ALIGN + 100).map(|i| (i % 251) as u8).collect();
        std::fs::write(&p, &data).expect("write");
        let Ok(f) = crate::aligned::open_direct(&p, 0) else {
            eprintln!("skipping: O_DIRECT refused in the temporary directory");
            let _ = std::fs::remove_file(&p);
            return;
        };
        let mut bounce = None;
        let mut b = vec![0u8; 5000];
        read_direct(&f, &mut b, 10, &mut bounce).expect("read");
        assert_eq!(&b[..], &data[10..5010]);
        // The file's last, partial page.
        let mut b = vec![0u8; 150];
        read_direct(&f, &mut b, data.len() as u64 - 150, &mut bounce).expect("tail");
        assert_eq!(&b[..], &data[data.len() - 150..]);
        let mut b = vec![0u8; 10];
        assert!(read_direct(&f, &mut b, data.len() as u64 - 5, &mut bounce).is_err());
        // Read ahead, then taken in pieces; the slot leaves the store
        // once all of it is taken.
        let ahead = Ahead::start(Arc::new(f), true);
        ahead.want(0, 2 * ALIGN64);
        let mut b = vec![0u8; ALIGN];
        assert!(ahead.take(ALIGN64, &mut b));
        assert_eq!(&b[..], &data[ALIGN..2 * ALIGN]);
        assert!(ahead.take(0, &mut b));
        assert!(!ahead.take(0, &mut b), "taken in full, the range is gone");
        let (fetched, taken, _) = ahead.counts();
        assert_eq!((fetched, taken), (2 * ALIGN64, 2 * ALIGN64));
        drop(ahead);
        let _ = std::fs::remove_file(&p);
    }
}
