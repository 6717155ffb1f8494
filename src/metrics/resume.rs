//! How long each stage of a resume took: reply written → lifecycle claim → provider call sent
//! → provider answered → bind saved → runtime claim offered. The coordinator notes a bind of a
//! resuming run; the runtime claim that offers the run back on this replica completes it.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Upper bounds (seconds) of the resume stage histograms' buckets.
pub const RESUME_STAGE_BUCKETS: [f64; 14] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0, 60.0,
];
/// The `stage` labels, in order; `total` is reply written → claim offered.
pub const RESUME_STAGES: [&str; 6] = ["claim", "call", "provider", "save", "offer", "total"];
/// Binds noted and not offered here (the runtime claimed on another replica, or the run
/// ended) are forgotten after this long.
const FORGET_AFTER: Duration = Duration::from_secs(600);
const MAX_PENDING: usize = 10_000;

/// A bind of a resuming run as the coordinator saw it.
#[derive(Debug, Clone, Copy)]
pub struct BoundResume {
    pub kind: &'static str,
    /// From the reply's write (the run's move to `resuming`) to the lifecycle claim.
    pub reply_to_claim: Duration,
    pub claimed: Instant,
    pub sent: Instant,
    pub answered: Instant,
    /// Unset while the save is under way: a claim may offer the run before it is noted.
    pub saved: Option<Instant>,
}

/// One resume's stages, in the order of [`RESUME_STAGES`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ResumeTimings {
    pub kind: &'static str,
    pub stages: [Duration; 6],
}

#[derive(Debug, Default)]
struct Stage {
    buckets: [u64; RESUME_STAGE_BUCKETS.len()],
    count: u64,
    sum_seconds: f64,
}

#[derive(Debug, Default)]
pub struct ResumeStages {
    pending: Mutex<HashMap<String, BoundResume>>,
    stages: Mutex<[Stage; 6]>,
}

impl ResumeStages {
    /// The provider answered a bind of a resuming run; its save follows.
    pub fn answered(&self, run_id: &str, bound: BoundResume) {
        let mut pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        if pending.len() >= MAX_PENDING {
            pending.retain(|_, b| b.answered.elapsed() < FORGET_AFTER);
            if pending.len() >= MAX_PENDING {
                return;
            }
        }
        pending.insert(run_id.to_owned(), bound);
    }

    /// The bind was saved (`true`) and the run may be offered, or it was not.
    pub fn saved(&self, run_id: &str, landed: bool) {
        let mut pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        if !landed {
            pending.remove(run_id);
        } else if let Some(b) = pending.get_mut(run_id) {
            b.saved.get_or_insert_with(Instant::now);
        }
    }

    /// A runtime claim offers the run: its stages, when this replica bound it.
    pub fn offered(&self, run_id: &str) -> Option<ResumeTimings> {
        let b = self
            .pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(run_id)?;
        let offered = Instant::now();
        let saved = b.saved.unwrap_or(offered);
        let since = |later: Instant, earlier: Instant| later.saturating_duration_since(earlier);
        let stages = [
            b.reply_to_claim,
            since(b.sent, b.claimed),
            since(b.answered, b.sent),
            since(saved, b.answered),
            since(offered, saved),
            b.reply_to_claim + since(offered, b.claimed),
        ];
        let mut hist = self.stages.lock().unwrap_or_else(|e| e.into_inner());
        for (stage, took) in hist.iter_mut().zip(stages) {
            let secs = took.as_secs_f64();
            for (n, bound) in stage.buckets.iter_mut().zip(RESUME_STAGE_BUCKETS) {
                if secs <= bound {
                    *n += 1;
                }
            }
            stage.count += 1;
            stage.sum_seconds += secs;
        }
        Some(ResumeTimings {
            kind: b.kind,
            stages,
        })
    }

    /// Resumes observed so far.
    pub fn count(&self) -> u64 {
        self.stages.lock().unwrap_or_else(|e| e.into_inner())[0].count
    }

    pub(super) fn render(&self, out: &mut String) {
        let name = "sagents_resume_stage_seconds";
        let _ = writeln!(
            out,
            "# HELP {name} Each stage of a resume offered on this replica: reply written → lifecycle claim (claim) → provider call sent (call) → answered (provider) → bind saved (save) → runtime claim offered (offer); total from the reply.\n# TYPE {name} histogram"
        );
        let hist = self.stages.lock().unwrap_or_else(|e| e.into_inner());
        for (label, stage) in RESUME_STAGES.iter().zip(hist.iter()) {
            for (n, bound) in stage.buckets.iter().zip(RESUME_STAGE_BUCKETS) {
                let _ = writeln!(out, "{name}_bucket{{stage=\"{label}\",le=\"{bound}\"}} {n}");
            }
            let _ = writeln!(
                out,
                "{name}_bucket{{stage=\"{label}\",le=\"+Inf\"}} {c}\n{name}_sum{{stage=\"{label}\"}} {s}\n{name}_count{{stage=\"{label}\"}} {c}",
                c = stage.count,
                s = stage.sum_seconds
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bound(at: Instant) -> BoundResume {
        let ms = Duration::from_millis;
        BoundResume {
            kind: "restore",
            reply_to_claim: ms(2),
            claimed: at,
            sent: at + ms(1),
            answered: at + ms(41),
            saved: None,
        }
    }

    #[test]
    fn a_noted_bind_is_timed_once_by_the_claim_that_offers_it() {
        let m = ResumeStages::default();
        let at = Instant::now() - Duration::from_millis(100);
        m.answered("run_a", bound(at));
        m.saved("run_a", true);
        let t = m.offered("run_a").unwrap();
        let ms = |d: Duration| d.as_millis();
        assert_eq!(
            (ms(t.stages[0]), ms(t.stages[1]), ms(t.stages[2])),
            (2, 1, 40)
        );
        assert!(t.stages[3] >= Duration::from_millis(59), "{t:?}");
        assert!(t.stages[5] >= Duration::from_millis(102), "{t:?}");
        assert!(m.offered("run_a").is_none());
        assert_eq!(m.count(), 1);
        let mut out = String::new();
        m.render(&mut out);
        assert!(out.contains("sagents_resume_stage_seconds_count{stage=\"provider\"} 1"));
        assert!(out.contains("sagents_resume_stage_seconds_bucket{stage=\"call\",le=\"0.001\"} 1"));
    }

    #[test]
    fn a_bind_that_did_not_land_or_an_unknown_run_is_not_timed() {
        let m = ResumeStages::default();
        m.answered("run_a", bound(Instant::now()));
        m.saved("run_a", false);
        assert!(m.offered("run_a").is_none());
        assert!(m.offered("run_b").is_none());
        assert_eq!(m.count(), 0);
    }

    #[test]
    fn an_offer_before_the_save_was_noted_counts_the_save_up_to_the_offer() {
        let m = ResumeStages::default();
        m.answered("run_a", bound(Instant::now()));
        let t = m.offered("run_a").unwrap();
        assert_eq!(t.stages[4], Duration::ZERO);
    }
}
