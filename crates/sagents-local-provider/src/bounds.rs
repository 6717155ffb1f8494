//! What bounds a sandbox as a whole: its control group (see [`super::cgroup`]), made from
//! the spec's resources or the operator's defaults, and the host uid it runs as, one per
//! sandbox from the configured range.

use std::collections::HashSet;

use super::cgroup::{Bounds, Controller, SandboxCgroup};
use super::engine::{internal, Engine};
use super::error::ApiError;
use super::isolation::Sandboxer;
use super::paths;
use super::process::{self, Leader};
use sagents_plugin_api::spec::Resources;

impl Engine {
    /// Where sandbox `id`'s control group is, one folder per hierarchy, whether or not it
    /// exists (for tests and tools).
    pub fn cgroup_dirs(&self, id: &str) -> Vec<std::path::PathBuf> {
        self.cfg.cgroups.sandbox(id).dirs().to_vec()
    }

    /// Sandbox `id`'s control group, if it has one.
    pub(super) fn cgroup(&self, id: &str) -> Option<SandboxCgroup> {
        let cg = self.cfg.cgroups.sandbox(id);
        cg.exists().then_some(cg)
    }

    /// A host uid for sandbox `id` that no other sandbox of this provider holds (the same
    /// one again for an id that has one).
    /// Sandbox `id`'s uid: the one it holds, else `preferred` when free and in `range`, else
    /// any free one.
    fn allocate_uid(
        &self,
        id: &str,
        range: super::isolation::UidRange,
        preferred: Option<u32>,
    ) -> Result<u32, ApiError> {
        let mut uids = self.uids.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(&uid) = uids.get(id) {
            return Ok(uid);
        }
        let taken: HashSet<u32> = uids.values().copied().collect();
        let fits = |u: &u32| (range.first..=range.last).contains(u) && !taken.contains(u);
        let uid = preferred.filter(fits);
        let uid = uid
            .or_else(|| range.pick(&taken, rand::random()))
            .ok_or_else(|| {
                ApiError::recoverable(
                    "sandbox.capacity",
                    format!("every sandbox uid ({range}) is in use"),
                )
            })?;
        uids.insert(id.to_owned(), uid);
        Ok(uid)
    }

    /// Once sandbox `id`'s compute is gone: frees its uid, and kills whatever is left in its
    /// control group and removes the group in the background (the kernel takes milliseconds
    /// per hierarchy; a group left by a crash is removed at the next start).
    pub(super) fn drop_bounds(&self, id: &str) {
        if let Some(cg) = self.cgroup(id) {
            let id = id.to_owned();
            tokio::task::spawn_blocking(move || {
                cg.kill();
                if let Err(e) = cg.remove() {
                    tracing::warn!(sandbox_id = %id, error = %e, "could not remove the sandbox's cgroup");
                }
            });
        }
        self.uids
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(id);
    }

    /// The spec's bounds, refused (422) when impossible or when it asks for a limit this
    /// host does not let the provider enforce.
    fn bounds(&self, r: &Resources) -> Result<Bounds, ApiError> {
        let bounds = Bounds::from_resources(r, &self.cfg.defaults)
            .map_err(|e| ApiError::invalid("validation.failed", e.to_string()))?;
        let asked = [
            ("max_processes", r.max_processes.is_some(), Controller::Pids),
            ("memory_mb", r.memory_mb.is_some(), Controller::Memory),
            ("cpu_percent", r.cpu_percent.is_some(), Controller::Cpu),
        ];
        for (field, set, c) in asked {
            if set && !self.cfg.cgroups.has(c) {
                return Err(ApiError::invalid(
                    "sandbox.resources_unenforceable",
                    format!(
                        "sandbox_spec.resources.{field}: this host gives the provider no writable `{}` cgroup controller, so the limit cannot be enforced",
                        c.name()
                    ),
                ));
            }
        }
        Ok(bounds)
    }

    /// Starts a sandbox's leader: namespaced, or a plain process group without isolation;
    /// in its own control group bounded by `resources` (or the defaults), as its own host
    /// uid. Starting one blocks (bwrap's setup is waited for), so it runs off the async
    /// workers.
    /// `owner`: the uid and gid that own every file in `dir` already, if one pair does; the
    /// sandbox runs as that uid when it is free, and then nothing needs handing over.
    pub(super) async fn spawn_leader(
        &self,
        dir: paths::OpenDir,
        sandbox_id: &str,
        resources: &Resources,
        owner: Option<(u32, u32)>,
    ) -> Result<Leader, ApiError> {
        let bounds = self.bounds(resources)?;
        let range = self.cfg.sandboxer.as_ref().and_then(Sandboxer::uids);
        let preferred = owner.filter(|(u, g)| u == g).map(|(u, _)| u);
        let uid = match range {
            Some(range) => Some(self.allocate_uid(sandbox_id, range, preferred)?),
            None => None,
        };
        let owned = uid.is_some() && uid == preferred;
        let (id, sandboxer, cgroups) = (
            sandbox_id.to_owned(),
            self.cfg.sandboxer.clone(),
            self.cfg.cgroups.clone(),
        );
        let network = resources.network();
        let started = tokio::task::spawn_blocking(move || {
            let cg = match cgroups.is_empty() {
                true => None,
                false => Some(cgroups.create(&id, &bounds)?),
            };
            let fds = match &cg {
                Some(cg) => cg.open_procs()?,
                None => Vec::new(),
            };
            let started = match sandboxer {
                Some(sb) => sb.spawn_leader(&dir, &id, network, uid, owned, fds),
                None => process::spawn_leader(&dir.path, &id, fds),
            };
            if let (Err(_), Some(cg)) = (&started, cg) {
                cg.kill();
                let _ = cg.remove();
            }
            started
        })
        .await
        .map_err(|e| internal("starting the sandbox", std::io::Error::other(e)))
        .and_then(|r| r.map_err(|e| internal("starting the sandbox", e)));
        if started.is_err() {
            self.uids
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(sandbox_id);
        }
        started
    }

    /// Like [`Engine::kill_all`], without an async wait; for teardown in `Drop`.
    pub fn kill_all_now(&self) {
        let mut groups = Vec::new();
        for slot in self.slots() {
            if let Ok(rec) = slot.try_lock() {
                if let Some(l) = rec.leader {
                    l.kill_now();
                }
                groups.extend(self.cgroup(&rec.r#ref.sandbox_id));
            }
        }
        for cg in &groups {
            cg.kill();
        }
        for cg in &groups {
            let _ = cg.remove();
        }
        self.cfg.cgroups.remove_parents();
    }

    /// Kills every sandbox's processes and removes their control groups (used when tearing
    /// down a test or benchmark root).
    pub async fn kill_all(&self) {
        for slot in self.slots() {
            let rec = slot.lock().await;
            let id = rec.r#ref.sandbox_id.clone();
            if let Some(cg) = self.cgroup(&id) {
                cg.kill();
            }
            if let Some(l) = rec.leader {
                let _ = l.kill_group().await;
            }
            if let Some(cg) = self.cgroup(&id) {
                let _ = tokio::task::spawn_blocking(move || cg.remove()).await;
            }
            self.drop_bounds(&id);
        }
        self.cfg.cgroups.remove_parents();
    }
}

#[cfg(test)]
mod tests {
    use super::super::cgroup::Cgroups;
    use super::super::engine::EngineConfig;
    use super::super::faults::FaultPlan;
    use super::super::state::Layout;
    use super::*;
    use sagents_plugin_api::spec::{ResolvedSandboxSpec, WorkspaceMode};
    use sagents_plugin_api::wire::{ProvisionRequest, RequestContext};

    #[tokio::test]
    async fn a_limit_the_host_cannot_enforce_is_refused_not_dropped() {
        let root = tempfile::tempdir().unwrap();
        let cfg = EngineConfig {
            // A host that lets the provider make no cgroup at all.
            cgroups: Cgroups::default(),
            ..EngineConfig::for_tests(root.path())
        };
        let layout = Layout::new(root.path()).unwrap();
        let engine = Engine::load(cfg, layout, FaultPlan::default()).unwrap();
        let req = |key: &str, r: Resources| {
            let mut spec = ResolvedSandboxSpec::example("local", WorkspaceMode::Isolated);
            spec.resources = r;
            ProvisionRequest {
                spec,
                owner_run_id: "run_1".into(),
                tenant_id: "acme".into(),
                idempotency_key: key.into(),
                context: RequestContext::default(),
            }
        };
        for (key, r) in [
            (
                "pids",
                Resources {
                    max_processes: Some(8),
                    ..Resources::default()
                },
            ),
            (
                "mem",
                Resources {
                    memory_mb: Some(64),
                    ..Resources::default()
                },
            ),
            (
                "cpu",
                Resources {
                    cpu_percent: Some(50),
                    ..Resources::default()
                },
            ),
        ] {
            let err = engine.provision(&req(key, r)).await.unwrap_err();
            assert_eq!(err.status.as_u16(), 422, "{key}");
            assert_eq!(err.body.code, "sandbox.resources_unenforceable", "{key}");
        }
        assert!(
            engine.resident_sandboxes() == 0,
            "a refusal created a sandbox"
        );
        // A spec asking for nothing still runs, unbounded as the start log says.
        let (h, _) = engine
            .provision(&req("plain", Resources::default()))
            .await
            .unwrap();
        assert_eq!(h.state, sagents_plugin_api::wire::SandboxState::Ready);
        engine.kill_all().await;
    }
}
