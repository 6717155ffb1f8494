//! Test-only fault injection (`--fault-injection SPEC`).
//!
//! Grammar (whitespace around separators is ignored):
//!
//! ```text
//! SPEC     := RULE (';' RULE)*
//! RULE     := POINT '=' ACTION (':' MODIFIER)*
//! POINT    := capabilities | provision | inspect | attach | release | restore | exec
//!           | list_sandboxes | list_checkpoints | delete_checkpoint
//!           | snapshot      (the archive step of snapshot_and_terminate, after the pause;
//!                            it runs inside the release operation, not in the handler)
//!           | resume        (bringing a paused sandbox back after a failed snapshot)
//!           | state_save    (writing a sandbox's state file: the next one fails, as on a
//!                            full disk)
//!           | kill          (killing the sandbox's processes when compute is released)
//!           | create_intent | create_files | create_leader | create_state | create_record
//!                           (the steps of a provision or restore, in order: the key's
//!                            intent recorded, the files made, the leader started, the
//!                            sandbox state saved, the answer recorded)
//! ACTION   := recoverable   (answer 503 retryable, doing nothing)
//!           | terminal      (answer 500 not retryable; the named sandbox is reported lost)
//!           | refused       (answer 409 not retryable, doing nothing: a request problem)
//!           | foreign       (do the work, then name another run as the handle's owner)
//!           | unconfirmed   (do the work, then answer `compute_released: false`)
//!           | drop          (do the work, then cut the connection instead of answering)
//!           | forget        (inspect, attach, release, exec only: first lose the named
//!                            sandbox as if its state were gone (processes killed, state and
//!                            isolated files removed), then handle the call, which answers 404)
//!           | delay_ms=N    (wait N ms, then handle normally; on snapshot the archive
//!                            step takes N ms longer)
//!           | hold          (wait until the plan is opened, then handle normally: a test
//!                            opens it with `FaultPlan::open`; a stopping provider opens
//!                            it, so from the command line the call waits until then; on
//!                            snapshot the archive step waits, and a stopping provider
//!                            abandons it as a killed one would)
//!           | fail          (snapshot / resume / state_save / kill only: that step fails)
//!           | crash         (create_* only: stop right after that step as a killed provider
//!                            would: files and processes stay as they are, nothing else is
//!                            done and the connection is cut; start a provider on the same
//!                            root to see what a restart makes of it)
//! MODIFIER := times=N       (only the first N calls to POINT)
//!           | p=F           (each call with probability F in [0, 1])
//! ```
//!
//! Without a modifier a rule fires on every call. Example:
//! `release=recoverable:times=2;restore=delay_ms=300;snapshot=fail:times=1;inspect=forget:times=1`.
//! The chaos run uses `snapshot=delay_ms=N:p=F` (archives slower than the caller waits) and
//! `state_save=fail:p=F` (a full disk now and then).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::sync::watch;

sagents_text_enum::text_enum! {
    pub enum FaultPoint as "fault point" {
        Capabilities => "capabilities",
        Provision => "provision",
        Inspect => "inspect",
        Attach => "attach",
        Release => "release",
        Restore => "restore",
        Exec => "exec",
        ListSandboxes => "list_sandboxes",
        ListCheckpoints => "list_checkpoints",
        DeleteCheckpoint => "delete_checkpoint",
        Snapshot => "snapshot",
        Resume => "resume",
        StateSave => "state_save",
        Kill => "kill",
        CreateIntent => "create_intent",
        CreateFiles => "create_files",
        CreateLeader => "create_leader",
        CreateState => "create_state",
        CreateRecord => "create_record",
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultAction {
    Recoverable,
    Terminal,
    Refused,
    Foreign,
    Unconfirmed,
    Drop,
    Delay(Duration),
    Hold,
    Fail,
    Forget,
    Crash,
}

#[derive(Debug)]
pub struct FaultRule {
    pub point: FaultPoint,
    pub action: FaultAction,
    pub times: Option<u64>,
    pub probability: Option<f64>,
    calls: AtomicU64,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid fault injection rule `{rule}`: {reason}")]
pub struct FaultSpecError {
    pub rule: String,
    pub reason: String,
}

/// What to do for one call.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FaultDecision {
    pub delay: Option<Duration>,
    /// Wait for [`FaultPlan::open`] before handling the call.
    pub hold: bool,
    /// The first non-delay action that fired.
    pub action: Option<FaultAction>,
}

#[derive(Debug)]
pub struct FaultPlan {
    rules: Vec<FaultRule>,
    opened: watch::Sender<bool>,
    held: AtomicU64,
}

impl Default for FaultPlan {
    fn default() -> Self {
        Self {
            rules: Vec::new(),
            opened: watch::Sender::new(false),
            held: AtomicU64::new(0),
        }
    }
}

impl FaultPlan {
    pub fn parse(spec: &str) -> Result<Self, FaultSpecError> {
        let rules = spec
            .split(';')
            .map(str::trim)
            .filter(|r| !r.is_empty())
            .map(parse_rule)
            .collect::<Result<_, _>>()?;
        Ok(Self {
            rules,
            ..Self::default()
        })
    }

    /// Lets every held call, and every later one, go on.
    pub fn open(&self) {
        self.opened.send_replace(true);
    }

    /// How many calls a `hold` rule has stopped so far.
    pub fn held_calls(&self) -> u64 {
        self.held.load(Ordering::SeqCst)
    }

    /// Waits until the plan is opened.
    pub async fn hold(&self) {
        self.held.fetch_add(1, Ordering::SeqCst);
        let mut opened = self.opened.subscribe();
        // The sender lives as long as the plan, so the wait ends only when it is opened.
        let _ = opened.wait_for(|o| *o).await;
    }

    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// Counts this call against every rule of `point` and returns what fires.
    pub fn decide(&self, point: FaultPoint) -> FaultDecision {
        let mut out = FaultDecision::default();
        for rule in self.rules.iter().filter(|r| r.point == point) {
            let n = rule.calls.fetch_add(1, Ordering::SeqCst) + 1;
            if rule.times.is_some_and(|t| n > t) {
                continue;
            }
            if let Some(p) = rule.probability {
                if rand::random::<f64>() >= p {
                    continue;
                }
            }
            match rule.action {
                FaultAction::Delay(d) => *out.delay.get_or_insert(Duration::ZERO) += d,
                FaultAction::Hold => out.hold = true,
                a => {
                    out.action.get_or_insert(a);
                }
            }
        }
        out
    }

    /// Whether an internal step (`snapshot`, `resume`, `state_save`, `kill`) must fail on this
    /// call.
    pub fn step_fails(&self, point: FaultPoint) -> bool {
        self.decide(point).action.is_some()
    }

    /// Whether the provider must stop as if killed right after this create step.
    pub fn crashes_after(&self, point: FaultPoint) -> bool {
        !self.rules.is_empty() && self.decide(point).action == Some(FaultAction::Crash)
    }
}

impl FaultPoint {
    fn is_create_step(self) -> bool {
        matches!(
            self,
            FaultPoint::CreateIntent
                | FaultPoint::CreateFiles
                | FaultPoint::CreateLeader
                | FaultPoint::CreateState
                | FaultPoint::CreateRecord
        )
    }
}

fn parse_rule(rule: &str) -> Result<FaultRule, FaultSpecError> {
    let err = |reason: &str| FaultSpecError {
        rule: rule.chars().take(120).collect(),
        reason: reason.into(),
    };
    let (point, rest) = rule
        .split_once('=')
        .ok_or_else(|| err("expected POINT=ACTION"))?;
    let point: FaultPoint = point.trim().parse().map_err(|e| err(&format!("{e}")))?;
    let mut parts = rest.split(':').map(str::trim);
    let action = match parts.next().unwrap_or_default() {
        "recoverable" => FaultAction::Recoverable,
        "terminal" => FaultAction::Terminal,
        "refused" => FaultAction::Refused,
        "foreign" => FaultAction::Foreign,
        "unconfirmed" => FaultAction::Unconfirmed,
        "drop" => FaultAction::Drop,
        "fail" => FaultAction::Fail,
        "forget" => FaultAction::Forget,
        "crash" => FaultAction::Crash,
        "hold" => FaultAction::Hold,
        other => match other.strip_prefix("delay_ms=") {
            Some(ms) => FaultAction::Delay(Duration::from_millis(
                ms.parse().map_err(|_| err("delay_ms needs an integer"))?,
            )),
            None => return Err(err(
                "ACTION must be recoverable, terminal, refused, foreign, unconfirmed, drop, forget, \
                     fail, crash, hold or delay_ms=N",
            )),
        },
    };
    let fits = match point {
        FaultPoint::Snapshot => matches!(
            action,
            FaultAction::Fail | FaultAction::Delay(_) | FaultAction::Hold
        ),
        FaultPoint::Resume | FaultPoint::StateSave | FaultPoint::Kill => {
            action == FaultAction::Fail
        }
        _ => action != FaultAction::Fail,
    };
    if !fits {
        return Err(err(
            "`fail` is the only action for resume, state_save and kill, and only for the \
             steps (snapshot also takes delay_ms=N and hold)",
        ));
    }
    if point.is_create_step() != (action == FaultAction::Crash) {
        return Err(err(
            "`crash` is the only action for the create_* steps, and only for them",
        ));
    }
    let names_a_sandbox = matches!(
        point,
        FaultPoint::Inspect | FaultPoint::Attach | FaultPoint::Release | FaultPoint::Exec
    );
    if action == FaultAction::Forget && !names_a_sandbox {
        return Err(err(
            "`forget` needs a call that names a sandbox: inspect, attach, release or exec",
        ));
    }
    let mut times = None;
    let mut probability = None;
    for m in parts {
        match m.split_once('=') {
            Some(("times", n)) => {
                times = Some(n.parse().map_err(|_| err("times needs an integer"))?)
            }
            Some(("p", f)) => {
                let p: f64 = f.parse().map_err(|_| err("p needs a number"))?;
                if !(0.0..=1.0).contains(&p) {
                    return Err(err("p must be within [0, 1]"));
                }
                probability = Some(p);
            }
            _ => return Err(err("MODIFIER must be times=N or p=F")),
        }
    }
    Ok(FaultRule {
        point,
        action,
        times,
        probability,
        calls: AtomicU64::new(0),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_documented_example_parses() {
        let plan = FaultPlan::parse(
            "release=recoverable:times=2; restore=delay_ms=300 ;release=drop:p=0.5;snapshot=fail:times=1",
        )
        .unwrap();
        assert_eq!(plan.rules.len(), 4);
        assert_eq!(
            plan.decide(FaultPoint::Restore).delay,
            Some(Duration::from_millis(300))
        );
        assert!(plan.step_fails(FaultPoint::Snapshot));
        assert!(!plan.step_fails(FaultPoint::Snapshot));
    }

    #[test]
    fn times_counts_the_first_calls_only() {
        let plan = FaultPlan::parse("release=recoverable:times=2").unwrap();
        let fired: Vec<_> = (0..4)
            .map(|_| plan.decide(FaultPoint::Release).action)
            .collect();
        assert_eq!(
            fired,
            vec![
                Some(FaultAction::Recoverable),
                Some(FaultAction::Recoverable),
                None,
                None
            ]
        );
        assert_eq!(plan.decide(FaultPoint::Attach), FaultDecision::default());
    }

    #[test]
    fn probabilities_zero_and_one_are_deterministic() {
        let plan = FaultPlan::parse("exec=terminal:p=0;attach=drop:p=1").unwrap();
        assert!((0..20).all(|_| plan.decide(FaultPoint::Exec).action.is_none()));
        assert!((0..20).all(|_| plan.decide(FaultPoint::Attach).action == Some(FaultAction::Drop)));
    }

    #[test]
    fn bad_specs_say_what_is_wrong() {
        for bad in [
            "release",
            "nowhere=recoverable",
            "release=explode",
            "release=fail",
            "snapshot=recoverable",
            "release=recoverable:times=x",
            "release=recoverable:p=2",
            "release=delay_ms=soon",
            "release=recoverable:often",
            "provision=forget",
            "list_sandboxes=forget",
            "snapshot=forget",
            "delete_checkpoint=fail",
            "provision=crash",
            "create_leader=fail",
            "create_state=recoverable",
            "state_save=recoverable",
            "kill=delay_ms=5",
            "resume=hold",
        ] {
            assert!(FaultPlan::parse(bad).is_err(), "{bad}");
        }
        assert!(FaultPlan::parse("").unwrap().is_empty());
    }

    #[tokio::test]
    async fn a_held_call_goes_on_once_the_plan_is_opened() {
        let plan = std::sync::Arc::new(FaultPlan::parse("release=hold:times=1").unwrap());
        assert!(plan.decide(FaultPoint::Release).hold);
        assert!(!plan.decide(FaultPoint::Release).hold);
        let held = tokio::spawn({
            let plan = plan.clone();
            async move { plan.hold().await }
        });
        while plan.held_calls() == 0 {
            tokio::task::yield_now().await;
        }
        assert!(!held.is_finished());
        plan.open();
        held.await.unwrap();
        plan.hold().await;
        assert_eq!(plan.held_calls(), 2);
    }

    #[test]
    fn the_release_steps_fail_and_the_snapshot_also_waits() {
        let plan = FaultPlan::parse(
            "snapshot=delay_ms=40:p=1;snapshot=fail:times=1;state_save=fail:times=1;kill=fail;snapshot=hold:times=1",
        )
        .unwrap();
        let first = plan.decide(FaultPoint::Snapshot);
        assert_eq!(
            (first.delay, first.hold, first.action),
            (
                Some(Duration::from_millis(40)),
                true,
                Some(FaultAction::Fail)
            )
        );
        let second = plan.decide(FaultPoint::Snapshot);
        assert_eq!((second.hold, second.action), (false, None));
        assert!(plan.step_fails(FaultPoint::StateSave));
        assert!(!plan.step_fails(FaultPoint::StateSave));
        assert!(plan.step_fails(FaultPoint::Kill) && plan.step_fails(FaultPoint::Kill));
    }

    #[test]
    fn crash_fires_only_where_it_is_named() {
        let plan = FaultPlan::parse("create_leader=crash:times=1").unwrap();
        assert!(!plan.crashes_after(FaultPoint::CreateIntent));
        assert!(plan.crashes_after(FaultPoint::CreateLeader));
        assert!(!plan.crashes_after(FaultPoint::CreateLeader));
    }

    #[test]
    fn forget_and_the_inventory_points_parse() {
        let plan = FaultPlan::parse(
            "inspect=forget:times=1;exec=forget;list_sandboxes=recoverable;\
             delete_checkpoint=drop:times=1;list_checkpoints=delay_ms=5",
        )
        .unwrap();
        assert_eq!(
            plan.decide(FaultPoint::Inspect).action,
            Some(FaultAction::Forget)
        );
        assert_eq!(plan.decide(FaultPoint::Inspect).action, None);
        assert_eq!(
            plan.decide(FaultPoint::Exec).action,
            Some(FaultAction::Forget)
        );
        assert_eq!(
            plan.decide(FaultPoint::DeleteCheckpoint).action,
            Some(FaultAction::Drop)
        );
        assert_eq!(
            plan.decide(FaultPoint::ListCheckpoints).delay,
            Some(Duration::from_millis(5))
        );
    }
}
