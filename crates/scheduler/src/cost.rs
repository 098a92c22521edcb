//! Measured cost per work element of a stage: an exponentially weighted
//! moving average of nanoseconds per element, updated lock-free by the
//! workers as they finish entries.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// The running cost estimate of one stage.
pub struct CostMeter {
    /// f64 bits of the average nanoseconds per element.
    ns_per_element: AtomicU64,
    /// Elements measured so far.
    samples: AtomicU64,
}

impl CostMeter {
    /// A meter that starts from a prior estimate (used until the first
    /// measurement arrives).
    pub fn new(prior_ns: f64) -> Self {
        CostMeter {
            ns_per_element: AtomicU64::new(prior_ns.to_bits()),
            samples: AtomicU64::new(0),
        }
    }

    /// Records that `elements` took `elapsed`.
    pub fn record(&self, elements: u64, elapsed: Duration) {
        if elements == 0 {
            return;
        }
        let sample = elapsed.as_nanos() as f64 / elements as f64;
        let n = self.samples.fetch_add(elements, Ordering::Relaxed);
        // The first samples replace the prior; later ones move it by a
        // fraction that favours recent work.
        let alpha = if n == 0 { 1.0 } else { 0.2 };
        let _ = self
            .ns_per_element
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |bits| {
                let old = f64::from_bits(bits);
                Some((old + alpha * (sample - old)).to_bits())
            });
    }

    /// The current estimate, in nanoseconds per element.
    pub fn ns(&self) -> f64 {
        f64::from_bits(self.ns_per_element.load(Ordering::Relaxed))
    }

    /// Elements measured so far.
    pub fn samples(&self) -> u64 {
        self.samples.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn converges_to_recent_cost() {
        let m = CostMeter::new(1000.0);
        assert_eq!(m.ns(), 1000.0);
        m.record(10, Duration::from_nanos(500));
        assert_eq!(m.ns(), 50.0);
        for _ in 0..100 {
            m.record(1, Duration::from_nanos(200));
        }
        assert!((m.ns() - 200.0).abs() < 1.0);
        assert_eq!(m.samples(), 110);
    }
}
