//! How many worker threads may run. A fixed budget never changes; an
//! automatic one starts at every core and is trimmed while other programs
//! keep CPUs busy, so they keep their share.

use std::io;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The thread budget shared by the workers.
pub struct Budget {
    max: usize,
    current: AtomicUsize,
    auto: bool,
}

impl Budget {
    /// Exactly `n` threads (at least 1).
    pub fn fixed(n: usize) -> Self {
        let n = n.max(1);
        Budget {
            max: n,
            current: AtomicUsize::new(n),
            auto: false,
        }
    }

    /// Up to `max` threads, adjusted by [`CpuSampler`] readings.
    pub fn auto(max: usize) -> Self {
        let max = max.max(1);
        Budget {
            max,
            current: AtomicUsize::new(max),
            auto: true,
        }
    }

    /// Whether the budget follows the machine's load.
    pub fn is_auto(&self) -> bool {
        self.auto
    }

    /// The most threads the budget can ever allow.
    pub fn max(&self) -> usize {
        self.max
    }

    /// Threads allowed now.
    pub fn get(&self) -> usize {
        self.current.load(Ordering::Relaxed)
    }

    /// Sets the allowance (automatic budgets only; clamped to 1..=max).
    pub fn set(&self, n: usize) {
        if self.auto {
            self.current.store(n.clamp(1, self.max), Ordering::Relaxed);
        }
    }
}

/// CPU time counters read from /proc.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CpuTimes {
    /// All ticks of all CPUs.
    pub total: u64,
    /// Idle and I/O-wait ticks.
    pub idle: u64,
    /// Ticks this process used.
    pub own: u64,
}

/// Parses the aggregate `cpu` line of /proc/stat: (total, idle + iowait).
pub fn parse_proc_stat(s: &str) -> Option<(u64, u64)> {
    let line = s.lines().find(|l| l.starts_with("cpu "))?;
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|x| x.parse().ok())
        .collect();
    if v.len() < 5 {
        return None;
    }
    // user nice system idle iowait irq softirq steal (guest is in user).
    let total: u64 = v.iter().take(8).sum();
    Some((total, v[3] + v[4]))
}

/// Parses utime + stime (fields 14 and 15) of /proc/self/stat.
pub fn parse_self_stat(s: &str) -> Option<u64> {
    // The command name may contain spaces; fields start after the last ')'.
    let rest = &s[s.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let utime: u64 = f.get(11)?.parse().ok()?;
    let stime: u64 = f.get(12)?.parse().ok()?;
    Some(utime + stime)
}

/// The budget to allow given two readings: every core, less the cores
/// other programs kept busy in between.
pub fn budget_from(ncpu: usize, prev: CpuTimes, cur: CpuTimes) -> usize {
    let total = cur.total.saturating_sub(prev.total);
    if total == 0 || ncpu == 0 {
        return ncpu.max(1);
    }
    let idle = cur.idle.saturating_sub(prev.idle);
    let own = cur.own.saturating_sub(prev.own);
    let busy = total.saturating_sub(idle);
    let others = busy.saturating_sub(own) as f64;
    let per_cpu = total as f64 / ncpu as f64;
    // Round down a little so that background noise does not cost a core.
    let other_cores = (others / per_cpu - 0.25).max(0.0).ceil() as usize;
    ncpu.saturating_sub(other_cores).max(1)
}

/// Samples /proc/stat and /proc/self/stat.
pub struct CpuSampler {
    ncpu: usize,
    prev: Option<CpuTimes>,
}

impl CpuSampler {
    /// A sampler for `ncpu` CPUs.
    pub fn new(ncpu: usize) -> Self {
        CpuSampler { ncpu, prev: None }
    }

    fn read() -> io::Result<CpuTimes> {
        let stat = std::fs::read_to_string("/proc/stat")?;
        let me = std::fs::read_to_string("/proc/self/stat")?;
        let bad = || io::Error::new(io::ErrorKind::InvalidData, "unexpected /proc format");
        let (total, idle) = parse_proc_stat(&stat).ok_or_else(bad)?;
        let own = parse_self_stat(&me).ok_or_else(bad)?;
        Ok(CpuTimes { total, idle, own })
    }

    /// Takes a reading; returns the budget once two readings exist.
    pub fn sample(&mut self) -> Option<usize> {
        let cur = Self::read().ok()?;
        let out = self.prev.map(|p| budget_from(self.ncpu, p, cur));
        self.prev = Some(cur);
        out
    }
}

/// Runs the calling thread at SCHED_IDLE, so it only gets CPUs nothing
/// else wants.
pub fn set_idle_priority() -> io::Result<()> {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: sched_setscheduler reads `param`, which lives for the call;
    // pid 0 is the calling thread.
    let rc = unsafe { libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_proc_files() {
        let stat = "cpu  100 5 50 800 20 3 2 0 0 0\ncpu0 50 2 25 400 10 1 1 0 0 0\n";
        assert_eq!(parse_proc_stat(stat), Some((980, 820)));
        let me = "1234 (my (odd) prog) R 1 2 3 4 5 6 7 8 9 10 77 33 0 0 20 0 1 0";
        assert_eq!(parse_self_stat(me), Some(110));
    }

    #[test]
    fn shrinks_for_other_programs() {
        let a = CpuTimes {
            total: 0,
            idle: 0,
            own: 0,
        };
        // 4 CPUs, 400 ticks: we used 100, others 200, 100 idle.
        let b = CpuTimes {
            total: 400,
            idle: 100,
            own: 100,
        };
        assert_eq!(budget_from(4, a, b), 2);
        // Nobody else busy: every core.
        let c = CpuTimes {
            total: 400,
            idle: 300,
            own: 100,
        };
        assert_eq!(budget_from(4, a, c), 4);
        // Everything busy elsewhere: still one thread.
        let d = CpuTimes {
            total: 400,
            idle: 0,
            own: 0,
        };
        assert_eq!(budget_from(4, a, d), 1);
    }

    #[test]
    fn fixed_budget_ignores_samples() {
        let b = Budget::fixed(3);
        b.set(1);
        assert_eq!(b.get(), 3);
        let a = Budget::auto(8);
        a.set(2);
        assert_eq!(a.get(), 2);
        a.set(100);
        assert_eq!(a.get(), 8);
    }
}
