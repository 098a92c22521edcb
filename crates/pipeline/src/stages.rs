//! Two pipelined stages with workers that move between them.
//!
//! Stage 1 works through a list of entries known in advance (inode table
//! chunks); while doing so it emits stage-2 entries (directory blocks)
//! into a bounded channel, so stage 2 runs at the same time. A stage-2
//! entry that cannot be finished yet — it depends on stage-1 work not done
//! — is deferred and retried once stage 1 has finished (delayed
//! certification). Workers pick their stage by the scheduler's policy:
//! threads in proportion to each stage's weighted pending work, with the
//! weights measured as the run goes. The thread budget may shrink and grow
//! while running.
//!
//! Nothing here knows what the entries are.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crossbeam_channel::{bounded, Receiver, Sender, TrySendError};
use scheduler::policy::{allocate, next_stage, StageLoad};
use scheduler::{Budget, CostMeter, CpuSampler};

/// The work of a two-stage pipeline.
pub trait Job: Sync {
    /// A worker's private context (reader, buffers, outputs).
    type Ctx: Send;
    /// A stage-1 entry.
    type Chunk: Sync;
    /// A stage-2 entry.
    type Work: Send;

    /// Makes a worker's context.
    fn make_ctx(&self) -> Self::Ctx;

    /// Elements in a stage-1 entry (for the scheduler's n_i).
    fn chunk_elements(&self, chunk: &Self::Chunk) -> u64;

    /// Processes a stage-1 entry; `emit` hands stage-2 entries on.
    fn stage1(
        &self,
        ctx: &mut Self::Ctx,
        index: usize,
        chunk: &Self::Chunk,
        emit: &mut dyn FnMut(Self::Work),
    );

    /// Processes stage-2 entries. Entries that must wait for stage 1 go to
    /// `defer`; when `last` is true stage 1 has finished and nothing may
    /// be deferred.
    fn stage2(
        &self,
        ctx: &mut Self::Ctx,
        batch: &mut Vec<Self::Work>,
        last: bool,
        defer: &mut dyn FnMut(Self::Work),
    );
}

/// Knobs of a run.
pub struct RunOptions<'a> {
    /// The thread budget.
    pub budget: &'a Budget,
    /// Capacity of the stage-2 channel (back-pressure on stage 1).
    pub channel_capacity: usize,
    /// Most stage-2 entries handed to one `stage2` call.
    pub batch: usize,
    /// Run workers at SCHED_IDLE.
    pub idle_priority: bool,
}

/// What a run measured.
#[derive(Clone, Debug, Default)]
pub struct RunStats {
    /// Stage-2 entries deferred until stage 1 finished.
    pub deferred: u64,
    /// Nanoseconds per element measured for each stage.
    pub cost_ns: [f64; 2],
    /// Times a worker changed stage.
    pub migrations: u64,
    /// The smallest budget seen (automatic budgets).
    pub min_budget: usize,
}

struct Shared<'a, J: Job> {
    job: &'a J,
    chunks: &'a [J::Chunk],
    next_chunk: AtomicUsize,
    chunks_done: AtomicUsize,
    tx: Sender<J::Work>,
    rx: Receiver<J::Work>,
    deferred: Mutex<Vec<J::Work>>,
    deferred_count: AtomicUsize,
    in_flight: AtomicUsize,
    assigned: [AtomicUsize; 2],
    meters: [CostMeter; 2],
    migrations: AtomicUsize,
    min_budget: AtomicUsize,
    opts: &'a RunOptions<'a>,
    finished: AtomicBool,
    /// Wakes the budget sampler when the run ends.
    wake: (Sender<()>, Receiver<()>),
}

impl<J: Job> Shared<'_, J> {
    fn stage1_left(&self) -> usize {
        self.chunks
            .len()
            .saturating_sub(self.next_chunk.load(Ordering::Relaxed))
    }

    fn stage1_done(&self) -> bool {
        self.chunks_done.load(Ordering::Acquire) == self.chunks.len()
    }

    /// Sends an entry, doing stage-2 work while the channel is full.
    fn emit(&self, ctx: &mut J::Ctx, w: J::Work) {
        let mut w = w;
        loop {
            match self.tx.try_send(w) {
                Ok(()) => return,
                Err(TrySendError::Full(back)) => {
                    w = back;
                    self.run_stage2(ctx);
                }
                Err(TrySendError::Disconnected(back)) => {
                    // Cannot happen while we hold the receiver; keep it.
                    self.deferred
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .push(back);
                    return;
                }
            }
        }
    }

    /// Takes and processes one batch from the channel (or, once stage 1
    /// is done, from the deferred queue). Returns false if there was none.
    ///
    /// A worker counts itself in flight before it takes anything, so that
    /// "nothing queued and nobody in flight" really means the end.
    fn run_stage2(&self, ctx: &mut J::Ctx) -> bool {
        self.in_flight.fetch_add(1, Ordering::AcqRel);
        let mut batch: Vec<J::Work> = Vec::with_capacity(self.opts.batch);
        while batch.len() < self.opts.batch {
            match self.rx.try_recv() {
                Ok(w) => batch.push(w),
                Err(_) => break,
            }
        }
        // Whether stage 1 has finished is read after taking the batch: if
        // it has, nothing in the batch may be deferred.
        let last = self.stage1_done();
        if batch.is_empty() && last {
            let mut d = self.deferred.lock().unwrap_or_else(|e| e.into_inner());
            let n = d.len().min(self.opts.batch);
            let at = d.len() - n;
            batch.extend(d.drain(at..));
        }
        if batch.is_empty() {
            self.in_flight.fetch_sub(1, Ordering::AcqRel);
            return false;
        }
        let n = batch.len() as u64;
        let t = Instant::now();
        let mut deferred = Vec::new();
        self.job
            .stage2(ctx, &mut batch, last, &mut |w| deferred.push(w));
        self.meters[1].record(n - deferred.len() as u64, t.elapsed());
        if !deferred.is_empty() {
            self.deferred_count
                .fetch_add(deferred.len(), Ordering::Relaxed);
            self.deferred
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .append(&mut deferred);
        }
        self.in_flight.fetch_sub(1, Ordering::AcqRel);
        true
    }

    fn run_stage1(&self, ctx: &mut J::Ctx) -> bool {
        self.in_flight.fetch_add(1, Ordering::AcqRel);
        let i = self.next_chunk.fetch_add(1, Ordering::AcqRel);
        let Some(chunk) = self.chunks.get(i) else {
            self.in_flight.fetch_sub(1, Ordering::AcqRel);
            return false;
        };
        let t = Instant::now();
        // Entries are collected and sent after the chunk's inode work so
        // the cost meter measures stage 1 alone.
        let mut out = Vec::new();
        self.job.stage1(ctx, i, chunk, &mut |w| out.push(w));
        self.meters[0].record(self.job.chunk_elements(chunk), t.elapsed());
        for w in out {
            self.emit(ctx, w);
        }
        self.chunks_done.fetch_add(1, Ordering::AcqRel);
        self.in_flight.fetch_sub(1, Ordering::AcqRel);
        true
    }

    /// The end: stage 1 finished, then (in this order) nobody in flight,
    /// nothing in the channel, nothing deferred. Work only moves from
    /// the channel or the deferred queue into a worker that is already in
    /// flight, and a worker pushes what it produced before it leaves, so
    /// reading in this order cannot miss any.
    fn all_done(&self) -> bool {
        self.stage1_done()
            && self.in_flight.load(Ordering::Acquire) == 0
            && self.rx.is_empty()
            && self.deferred.lock().map(|d| d.is_empty()).unwrap_or(true)
    }

    /// Marks the run finished and wakes the sampler.
    fn finish(&self) {
        self.finished.store(true, Ordering::Release);
        let _ = self.wake.0.try_send(());
    }

    /// One worker: pick a stage by the policy, do an entry, repeat until
    /// every stage is empty and nothing is in flight.
    fn work_loop(&self, id: usize) -> J::Ctx {
        if self.opts.idle_priority {
            let _ = scheduler::budget::set_idle_priority();
        }
        let mut ctx = self.job.make_ctx();
        let mut stage: Option<usize> = None;
        let mut idle_spins = 0u32;
        let per_entry = self
            .chunks
            .first()
            .map_or(1, |c| self.job.chunk_elements(c)) as f64;
        while !self.finished.load(Ordering::Acquire) {
            // Workers beyond the budget wait.
            let budget = self.opts.budget.get();
            if id >= budget {
                if let Some(s) = stage.take() {
                    self.assigned[s].fetch_sub(1, Ordering::AcqRel);
                }
                if self.all_done() {
                    self.finish();
                    break;
                }
                std::thread::sleep(Duration::from_millis(2));
                continue;
            }
            let last = self.stage1_done();
            let left = self.stage1_left();
            let deferred = if last {
                self.deferred.lock().map(|d| d.len()).unwrap_or(0)
            } else {
                0
            };
            let queued = self.rx.len() + deferred;
            let loads = [
                StageLoad {
                    queued: left as f64,
                    per_entry,
                    weight: self.meters[0].ns(),
                },
                StageLoad {
                    queued: queued as f64,
                    per_entry: 1.0,
                    weight: self.meters[1].ns(),
                },
            ];
            let targets = allocate(budget, &loads);
            let mut assigned = [
                self.assigned[0].load(Ordering::Acquire),
                self.assigned[1].load(Ordering::Acquire),
            ];
            if let Some(s) = stage {
                assigned[s] = assigned[s].max(1);
            }
            let choice = next_stage(stage, &assigned, &targets, &[left > 0, queued > 0]);
            if choice != stage {
                if let Some(s) = stage {
                    self.assigned[s].fetch_sub(1, Ordering::AcqRel);
                    self.migrations.fetch_add(1, Ordering::Relaxed);
                }
                if let Some(s) = choice {
                    self.assigned[s].fetch_add(1, Ordering::AcqRel);
                }
                stage = choice;
            }
            let worked = match stage {
                Some(0) => self.run_stage1(&mut ctx),
                Some(_) => self.run_stage2(&mut ctx),
                None => false,
            };
            if worked {
                idle_spins = 0;
                continue;
            }
            if self.all_done() {
                self.finish();
                break;
            }
            // Nothing ready: another worker is still producing.
            idle_spins += 1;
            if idle_spins < 64 {
                std::thread::yield_now();
            } else {
                std::thread::sleep(Duration::from_micros(200));
            }
        }
        if let Some(s) = stage {
            self.assigned[s].fetch_sub(1, Ordering::AcqRel);
        }
        ctx
    }
}

/// Runs a job to completion on up to `budget.max()` workers and returns
/// every worker's context (in worker order) with the run's statistics.
pub fn run<J: Job>(job: &J, chunks: &[J::Chunk], opts: &RunOptions<'_>) -> (Vec<J::Ctx>, RunStats) {
    let (tx, rx) = bounded(opts.channel_capacity.max(1));
    let shared = Shared {
        job,
        chunks,
        next_chunk: AtomicUsize::new(0),
        chunks_done: AtomicUsize::new(0),
        tx,
        rx,
        deferred: Mutex::new(Vec::new()),
        deferred_count: AtomicUsize::new(0),
        in_flight: AtomicUsize::new(0),
        assigned: [AtomicUsize::new(0), AtomicUsize::new(0)],
        // Priors: a directory block costs about twice an inode (pFSCK).
        meters: [CostMeter::new(1000.0), CostMeter::new(2000.0)],
        migrations: AtomicUsize::new(0),
        min_budget: AtomicUsize::new(opts.budget.get()),
        opts,
        finished: AtomicBool::new(false),
        wake: bounded(1),
    };
    let nworkers = opts.budget.max().max(1);
    let ctxs: Mutex<Vec<(usize, J::Ctx)>> = Mutex::new(Vec::new());
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(nworkers + 1)
        .thread_name(|i| format!("ext4chk-worker-{i}"))
        .build();
    match pool {
        Ok(p) => p.scope(|s| spawn_all(s, &shared, &ctxs, nworkers)),
        // Without a pool of our own, the global one still runs the scope.
        Err(_) => rayon::scope(|s| spawn_all(s, &shared, &ctxs, nworkers)),
    }
    let mut v = ctxs.into_inner().unwrap_or_else(|e| e.into_inner());
    v.sort_by_key(|(id, _)| *id);
    let stats = RunStats {
        deferred: shared.deferred_count.load(Ordering::Relaxed) as u64,
        cost_ns: [shared.meters[0].ns(), shared.meters[1].ns()],
        migrations: shared.migrations.load(Ordering::Relaxed) as u64,
        min_budget: shared.min_budget.load(Ordering::Relaxed),
    };
    (v.into_iter().map(|(_, c)| c).collect(), stats)
}

fn spawn_all<'scope, J: Job>(
    s: &rayon::Scope<'scope>,
    shared: &'scope Shared<'scope, J>,
    ctxs: &'scope Mutex<Vec<(usize, J::Ctx)>>,
    nworkers: usize,
) {
    let opts = shared.opts;
    if opts.budget.is_auto() {
        s.spawn(move |_| {
            let mut sampler = CpuSampler::new(opts.budget.max());
            while !shared.finished.load(Ordering::Acquire) {
                if let Some(b) = sampler.sample() {
                    opts.budget.set(b);
                    shared
                        .min_budget
                        .fetch_min(opts.budget.get(), Ordering::Relaxed);
                }
                // Sleep until the next sample, or until the run ends.
                let _ = shared.wake.1.recv_timeout(Duration::from_millis(100));
            }
        });
    }
    for id in 0..nworkers {
        s.spawn(move |_| {
            let ctx = shared.work_loop(id);
            ctxs.lock()
                .unwrap_or_else(|e| e.into_inner())
                .push((id, ctx));
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU64;

    /// Stage 1 "checks" numbers and emits each multiple of 3; stage 2
    /// needs the chunk after its own to be done first, so many entries
    /// are deferred.
    struct Toy {
        done: Vec<AtomicBool>,
        seen: Vec<AtomicU64>,
    }

    struct ToyCtx {
        stage1_items: u64,
        stage2_items: u64,
    }

    impl Job for Toy {
        type Ctx = ToyCtx;
        type Chunk = std::ops::Range<u64>;
        type Work = u64;

        fn make_ctx(&self) -> ToyCtx {
            ToyCtx {
                stage1_items: 0,
                stage2_items: 0,
            }
        }

        fn chunk_elements(&self, c: &Self::Chunk) -> u64 {
            c.end - c.start
        }

        fn stage1(
            &self,
            ctx: &mut ToyCtx,
            index: usize,
            c: &Self::Chunk,
            emit: &mut dyn FnMut(u64),
        ) {
            for x in c.clone() {
                ctx.stage1_items += 1;
                if x % 3 == 0 {
                    emit(x);
                }
            }
            self.done[index].store(true, Ordering::Release);
        }

        fn stage2(
            &self,
            ctx: &mut ToyCtx,
            batch: &mut Vec<u64>,
            last: bool,
            defer: &mut dyn FnMut(u64),
        ) {
            for x in batch.drain(..) {
                let next = (x / 100 + 1) as usize;
                let ready = next >= self.done.len() || self.done[next].load(Ordering::Acquire);
                if !ready && !last {
                    defer(x);
                    continue;
                }
                assert!(ready, "entry {x} processed before its dependency");
                ctx.stage2_items += 1;
                self.seen[x as usize].fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    fn run_toy(budget: &Budget) -> RunStats {
        let n = 10_000u64;
        let chunks: Vec<_> = (0..n / 100).map(|i| i * 100..(i + 1) * 100).collect();
        let toy = Toy {
            done: (0..chunks.len()).map(|_| AtomicBool::new(false)).collect(),
            seen: (0..n).map(|_| AtomicU64::new(0)).collect(),
        };
        let opts = RunOptions {
            budget,
            channel_capacity: 16,
            batch: 8,
            idle_priority: false,
        };
        let (ctxs, stats) = run(&toy, &chunks, &opts);
        assert_eq!(ctxs.len(), budget.max());
        assert_eq!(ctxs.iter().map(|c| c.stage1_items).sum::<u64>(), n);
        assert_eq!(
            ctxs.iter().map(|c| c.stage2_items).sum::<u64>(),
            n.div_ceil(3)
        );
        for (x, s) in toy.seen.iter().enumerate() {
            let want = u64::from(x % 3 == 0);
            assert_eq!(s.load(Ordering::Relaxed), want, "entry {x}");
        }
        stats
    }

    #[test]
    fn every_entry_once_with_any_budget() {
        for n in [1, 2, 3, 8] {
            run_toy(&Budget::fixed(n));
        }
        run_toy(&Budget::auto(4));
    }

    #[test]
    fn repeated_runs_do_not_lose_deferred_work() {
        for _ in 0..20 {
            run_toy(&Budget::fixed(4));
        }
    }
}
