"""Fault injection from outside: provider fault phases (the provider is SIGKILLed and
restarted with the next spec), lost provider state, a sandbox no record owns, and replicas
SIGKILLed and restarted every few seconds."""

import http.client
import json
import random
import threading
import time
import uuid

from humans import POLICY_HASH, SPEC_HASH
from procs import StartError, kill_group_of_state

BACKGROUND = ("snapshot=fail:p=0.03;release=drop:p=0.02;release=unconfirmed:p=0.02;release=refused:p=0.02;"
              "release=delay_ms=150:p=0.1;restore=delay_ms=150:p=0.1")


class ProviderChaos(threading.Thread):
    """Provider phases (`odd.phases`): each restarts the provider with its rules; a phase may
    make the proxy lie, or keep the provider down (the proxy refusing too) while the record
    writes of resuming runs are measured."""

    def __init__(self, ctx, phases, phase_seconds, forget_every, extra_spec, proxy=None, meter=None):
        super().__init__(name="provider-chaos", daemon=True)
        self.ctx = ctx
        self.p = ctx.provider
        self.phases = phases
        self.phase_seconds = phase_seconds
        self.forget_every = forget_every
        self.extra = extra_spec
        self.proxy = proxy
        self.meter = meter
        self.rng = random.Random(f"{ctx.seed}-provider")
        self.done = threading.Event()
        self.phase_log = []
        self.current = None

    def spec(self, phase):
        parts = [phase.spec, BACKGROUND] + ([self.extra] if self.extra else [])
        return ";".join(p for p in parts if p)

    def length(self, phase):
        return (phase.seconds or self.phase_seconds) * (0.7 + 0.6 * self.rng.random())

    def run(self):
        i = 0
        self.enter(self.phases[0])
        while not self.done.wait(self.length(self.current)):
            i += 1
            phase = self.phases[i % len(self.phases)]
            was_down = self.current.down
            self.leave()
            if phase.down and self.proxy is not None:
                self.proxy.refuse()
            if not was_down:
                self.p.kill()
                self.ctx.stats.inc("provider_kills")
            if self.forget_every and i % self.forget_every == 0:
                self.forget()
            if phase.down:
                self.ctx.stats.inc("provider_outages")
                if self.meter is not None:
                    self.meter.begin()
            else:
                try:
                    self.p.start(self.spec(phase))
                except StartError as e:
                    self.ctx.fail(f"the provider did not come back: {e}")
                    return
                if was_down and self.proxy is not None:
                    self.proxy.accept()
            self.enter(phase)
            if i % 5 == 2 and not phase.down:
                self.ctx.outside_sandbox()

    def enter(self, phase):
        self.current = phase
        if self.proxy is not None and phase.proxy:
            self.proxy.lie(phase.proxy)
        self.phase_log.append((time.monotonic(), phase.name))
        self.ctx.stats.inc(f"provider_phase_{phase.name}")
        self.ctx.stats.note("provider_phase", name=phase.name, spec=self.spec(phase), down=phase.down,
                            proxy=phase.proxy)

    def leave(self):
        if self.proxy is not None:
            self.proxy.lie(None)
        if self.current is not None and self.current.down and self.meter is not None:
            self.meter.end()

    def first_spec(self):
        return self.spec(self.phases[0])

    def forget(self):
        """While the provider is down: a live sandbox of an unfinished run loses its state file
        (and its processes, which nothing could find again)."""
        candidates = []
        with self.ctx.stats.lock:
            live = [(t.sandbox_id, t.run_id) for t in self.ctx.stats.tracks.values()
                    if t.done_at is None and t.sandbox_id]
        for sid, owner in live:
            f = self.p.root / "state" / "sandboxes" / f"{sid}.json"
            try:
                rec = json.loads(f.read_text())
            except (OSError, ValueError):
                continue
            if rec.get("state") == "ready" and rec.get("ref", {}).get("owner_run_id") == owner:
                candidates.append((f, rec, owner))
        if not candidates:
            self.ctx.stats.inc("forget_no_candidate")
            return
        f, rec, owner = self.rng.choice(candidates)
        kill_group_of_state(f)
        f.unlink(missing_ok=True)
        self.ctx.stats.inc("provider_forgot_sandbox")
        self.ctx.forgotten.append((rec["ref"]["sandbox_id"], owner))
        self.ctx.stats.note("forget", sandbox_id=rec["ref"]["sandbox_id"], run_id=owner)

    def stop(self):
        """Ends the phases: no lie, an outage measured up to now; the caller restarts the
        provider (and lets the proxy accept again)."""
        self.done.set()
        self.join(timeout=20)
        self.leave()


def create_outside_sandbox(provider, seed, n, tenant):
    """A sandbox created straight at the provider: no run, no record owns it."""
    owner = f"run_outofrecord{seed}x{n}"
    body = {"spec": {"spec_version": "sagents.sandbox-spec/v3", "provider_id": "local", "spec_hash": SPEC_HASH,
                     "policy_hash": POLICY_HASH, "workspace_mode": "isolated"},
            "owner_run_id": owner, "tenant_id": tenant, "idempotency_key": uuid.uuid4().hex,
            "context": {"actor": "chaos"}}
    data = json.dumps(body).encode()
    for _ in range(40):
        conn = http.client.HTTPConnection("127.0.0.1", provider.port, timeout=10)
        try:
            conn.request("POST", "/v3/sandboxes", body=data,
                         headers={"authorization": f"Bearer {provider.token}", "content-type": "application/json"})
            res = conn.getresponse()
            out = res.read()
            if res.status in (200, 201):
                return json.loads(out)["ref"]["sandbox_id"], owner
        except (OSError, http.client.HTTPException, ValueError):
            pass
        finally:
            conn.close()
        time.sleep(0.25)
    return None, owner


class ReplicaKiller(threading.Thread):
    def __init__(self, ctx, interval, downtime):
        super().__init__(name="replica-killer", daemon=True)
        self.ctx = ctx
        self.interval = interval
        self.downtime = downtime
        self.rng = random.Random(f"{ctx.seed}-killer")
        self.done = threading.Event()

    def run(self):
        while not self.done.wait(self.interval * (0.6 + 0.8 * self.rng.random())):
            up = [r for r in self.ctx.replicas if r.up]
            if len(up) < 2:
                continue
            victim = self.rng.choice(up)
            victim.kill()
            self.ctx.stats.inc("replica_kills")
            self.ctx.stats.note("replica_kill", replica=victim.name)
            time.sleep(self.downtime * (0.5 + self.rng.random()))
            try:
                victim.start()
            except StartError as e:
                self.ctx.fail(f"{victim.name} did not come back: {e}")
                return

    def stop(self):
        self.done.set()
        self.join(timeout=20)
