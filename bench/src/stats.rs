//! Percentiles and medians of measured samples.

use std::time::Duration;

/// p in [0, 100] of `samples` (sorted here).
pub fn percentile(samples: &mut [Duration], p: f64) -> Duration {
    if samples.is_empty() {
        return Duration::ZERO;
    }
    samples.sort();
    let idx = ((p / 100.0) * (samples.len() - 1) as f64).round() as usize;
    samples[idx]
}

pub fn median(values: &mut [f64]) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    values.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let mid = values.len() / 2;
    if values.len().is_multiple_of(2) {
        (values[mid - 1] + values[mid]) / 2.0
    } else {
        values[mid]
    }
}

pub fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// One figure over interleaved rounds: the median, and the min–max so a
/// reader sees how much the rounds disagreed.
#[derive(Clone, Copy, Default)]
pub struct Spread {
    pub median: f64,
    pub min: f64,
    pub max: f64,
}

impl Spread {
    pub fn of(values: &[f64]) -> Spread {
        let mut v = values.to_vec();
        Spread {
            median: median(&mut v),
            min: v.first().copied().unwrap_or(0.0),
            max: v.last().copied().unwrap_or(0.0),
        }
    }

    /// "190 (180–205)": a whole-number figure.
    pub fn whole(&self) -> String {
        format!("{:.0} ({:.0}–{:.0})", self.median, self.min, self.max)
    }

    /// "0.95x (0.90–0.98)": a ratio.
    pub fn ratio(&self) -> String {
        format!("{:.2}x ({:.2}–{:.2})", self.median, self.min, self.max)
    }
}
