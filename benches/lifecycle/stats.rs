//! Medians, percentiles and the figures the table prints.

pub fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// Nearest-rank percentile of sorted samples.
fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// Latency samples in milliseconds and the rate they were taken at.
#[derive(Debug, Clone, Default)]
pub struct Latency {
    pub n: usize,
    pub p50: f64,
    pub p95: f64,
    pub p99: f64,
    pub max: f64,
    pub mean: f64,
    /// Suspends per second actually achieved.
    pub rate: f64,
}

impl Latency {
    pub fn of(mut samples: Vec<f64>, rate: f64) -> Self {
        samples.sort_by(f64::total_cmp);
        let mean = samples.iter().sum::<f64>() / samples.len().max(1) as f64;
        Latency {
            mean,
            n: samples.len(),
            p50: percentile(&samples, 50.0),
            p95: percentile(&samples, 95.0),
            p99: percentile(&samples, 99.0),
            max: samples.last().copied().unwrap_or(f64::NAN),
            rate,
        }
    }

    pub fn cell(&self) -> String {
        if self.n == 0 {
            return "–".into();
        }
        format!("{:.1} / {:.1} / {:.1}", self.p50, self.p95, self.p99)
    }
}

/// `1234` for rates, one decimal under 100.
pub fn rate(v: f64) -> String {
    if v.is_nan() {
        "–".into()
    } else if v >= 100.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

/// Every repetition, for the raw-figures lines.
pub fn list(v: &[f64]) -> String {
    v.iter().map(|x| rate(*x)).collect::<Vec<_>>().join(", ")
}
