//! Time source, injectable so tests can move time (lease expiry, backoff) without sleeping.

use chrono::{DateTime, Duration, DurationRound, Utc};
use std::sync::{Arc, Mutex};

pub trait Clock: Send + Sync + 'static {
    /// The current time, truncated to milliseconds (the precision the store keeps).
    fn now(&self) -> DateTime<Utc>;
}

#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> DateTime<Utc> {
        truncate_ms(Utc::now())
    }
}

/// A clock that only moves when told to.
#[derive(Debug, Clone)]
pub struct ManualClock(Arc<Mutex<DateTime<Utc>>>);

impl ManualClock {
    pub fn new(start: DateTime<Utc>) -> Self {
        Self(Arc::new(Mutex::new(truncate_ms(start))))
    }

    pub fn advance(&self, by: Duration) {
        let mut now = self.0.lock().unwrap_or_else(|e| e.into_inner());
        *now += by;
    }
}

impl Clock for ManualClock {
    fn now(&self) -> DateTime<Utc> {
        *self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

pub fn truncate_ms(t: DateTime<Utc>) -> DateTime<Utc> {
    t.duration_trunc(Duration::milliseconds(1)).unwrap_or(t)
}

pub fn to_millis(t: DateTime<Utc>) -> i64 {
    t.timestamp_millis()
}

pub fn from_millis(ms: i64) -> DateTime<Utc> {
    DateTime::from_timestamp_millis(ms).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manual_clock_moves_only_when_advanced() {
        let c = ManualClock::new(Utc::now());
        let a = c.now();
        assert_eq!(c.now(), a);
        c.advance(Duration::seconds(31));
        assert_eq!(c.now() - a, Duration::seconds(31));
        assert_eq!(from_millis(to_millis(a)), a);
    }
}
