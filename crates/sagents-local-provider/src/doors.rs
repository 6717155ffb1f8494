//! What the provider lets a caller ask for at all: the host's network only where the operator
//! allowed it, and a bounded number of commands running at once in one sandbox.

use std::collections::HashMap;
use std::sync::Mutex;

use super::error::ApiError;
use sagents_plugin_api::spec::{NetworkMode, ResolvedSandboxSpec};

pub const DEFAULT_MAX_EXECS_PER_SANDBOX: usize = 16;

/// Commands running per sandbox, capped.
pub(super) struct ExecSlots {
    max: usize,
    running: Mutex<HashMap<String, usize>>,
}

/// One running command's place; dropping it frees the place.
pub(super) struct ExecSlot<'a> {
    slots: &'a ExecSlots,
    sandbox_id: String,
}

impl ExecSlots {
    pub(super) fn new(max: usize) -> Self {
        ExecSlots {
            max: max.max(1),
            running: Mutex::new(HashMap::new()),
        }
    }

    /// A place for one more command in `sandbox_id`, or `429 exec.too_many` (retryable).
    pub(super) fn take(&self, sandbox_id: &str) -> Result<ExecSlot<'_>, ApiError> {
        let mut running = self.running.lock().unwrap_or_else(|e| e.into_inner());
        let n = running.get(sandbox_id).copied().unwrap_or(0);
        if n >= self.max {
            return Err(ApiError::too_many(
                "exec.too_many",
                format!(
                    "the sandbox already runs {n} commands, the most it may run at once; retry when one ends"
                ),
            ));
        }
        running.insert(sandbox_id.to_owned(), n + 1);
        Ok(ExecSlot {
            slots: self,
            sandbox_id: sandbox_id.to_owned(),
        })
    }
}

impl Drop for ExecSlot<'_> {
    fn drop(&mut self) {
        let mut running = self.slots.running.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = running.get_mut(&self.sandbox_id) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                running.remove(&self.sandbox_id);
            }
        }
    }
}

/// Refuses `network: host` unless the provider was started with `--allow-host-network`:
/// the host's network reaches the service, its database and every loopback port.
pub(super) fn check_network(
    allow_host_network: bool,
    spec: &ResolvedSandboxSpec,
) -> Result<(), ApiError> {
    if spec.resources.network() == NetworkMode::Host && !allow_host_network {
        return Err(ApiError::invalid(
            "sandbox.host_network_refused",
            "resources.network `host` is not allowed on this provider (it was started without --allow-host-network); ask for `none`",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn execs_beyond_the_cap_are_refused_per_sandbox_until_one_ends() {
        let slots = ExecSlots::new(2);
        let a1 = slots.take("a").unwrap();
        let _a2 = slots.take("a").unwrap();
        let refused = slots.take("a").err().unwrap();
        assert_eq!(refused.status.as_u16(), 429);
        assert_eq!(refused.body.code, "exec.too_many");
        assert!(refused.body.retryable);
        let _b = slots.take("b").unwrap();
        drop(a1);
        let _a3 = slots.take("a").unwrap();
    }
}
