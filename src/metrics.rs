//! Process-wide counters shared by the store, the HTTP layer and the workers.

use std::sync::atomic::{AtomicU64, Ordering};

#[derive(Debug, Default)]
pub struct Metrics {
    pub lease_claims: AtomicU64,
    pub lease_takeovers: AtomicU64,
    pub fenced_rejections: AtomicU64,
}

impl Metrics {
    pub fn inc(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }
}
