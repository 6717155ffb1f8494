"""Entry point of `scripts/chaos`: start everything, drive cycles under faults, settle, check,
print one summary line (stdout) and exit non-zero when an invariant does not hold."""

import argparse
import os
import random
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parent.parent))  # procs.py, shared with scripts/topology

from checks import check, settle  # noqa: E402
from client import Service  # noqa: E402
from context import Context  # noqa: E402
from faults import ProviderChaos, ReplicaKiller  # noqa: E402
from odd import behaviours, phases  # noqa: E402
from outage import OutageMeter  # noqa: E402
from humans import Human  # noqa: E402
from proxy import LyingProxy  # noqa: E402
from procs import Postgres, Provider, Replica, StartError, kill_sandbox_processes, tail, exit_reason  # noqa: E402
from report import report  # noqa: E402
from runtimes import JobFinisher, Runtime  # noqa: E402
from stats import Stats, Stop  # noqa: E402


def parse(argv):
    ap = argparse.ArgumentParser(prog="scripts/chaos", description=__doc__)
    ap.add_argument("--bin-dir", required=True, type=Path)
    ap.add_argument("--short", action="store_true", help="CI run: 300 cycles in under 3 minutes")
    ap.add_argument("--cycles", type=int, help="cycles to drive (default 10000, --short 300)")
    ap.add_argument("--replicas", type=int, default=3)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory and its logs")
    ap.add_argument("--concurrency", type=int, default=None, help="simultaneous cycles (humans)")
    ap.add_argument("--lease-ttl", type=int, default=3)
    ap.add_argument("--kill-interval", type=float, default=4.0, help="mean seconds between replica kills")
    ap.add_argument("--phase-seconds", type=float, default=None, help="mean provider fault phase length")
    ap.add_argument("--deadline", type=float, default=None, help="global wall-time limit in seconds")
    ap.add_argument("--p99-limit-ms", type=int, default=2000,
                    help="fail when approve_to_resume p99 is above this (default 2000)")
    ap.add_argument("--extra-faults", default="", help="provider fault rules added to every phase")
    on_off = argparse.BooleanOptionalAction
    ap.add_argument("--odd-providers", action=on_off, default=True,
                    help="the odd-provider behaviours below that are not named (default on)")
    ap.add_argument("--proxy", action=on_off, default=None, help="a proxy that answers HTML 404/502 pages in its phases")
    ap.add_argument("--provider-down", action=on_off, default=None, help="the provider stopped for --outage-seconds")
    ap.add_argument("--slow-snapshots", action=on_off, default=None,
                    help="snapshots slower than the release timeout (needs a provider with snapshot=delay_ms)")
    ap.add_argument("--state-save-fail", action=on_off, default=None,
                    help="the provider's state save fails (needs a provider with the state_save point)")
    ap.add_argument("--child-sessions", action=on_off, default=None, help="sub-agents in child sessions")
    ap.add_argument("--outage-seconds", type=float, default=None, help="provider outage length (10 short, 30)")
    ap.add_argument("--proxy-lie-seconds", type=float, default=3.0, help="mean length of a proxy lie phase")
    ap.add_argument("--release-timeout", type=int, default=3,
                    help="the replicas' provider release timeout with slow snapshots (seconds)")
    ap.add_argument("--outage-write-budget", type=int, default=30,
                    help="record writes a resuming run may make in any outage, on top of the rate below")
    ap.add_argument("--outage-writes-per-minute", type=int, default=60,
                    help="record writes per minute of outage a resuming run may make")
    a = ap.parse_args(argv)
    a.cycles = a.cycles or (300 if a.short else 10000)
    a.seed = a.seed if a.seed is not None else random.randrange(1 << 31)
    a.concurrency = a.concurrency or (24 if a.short else 32)
    a.phase_seconds = a.phase_seconds or (8.0 if a.short else 15.0)
    a.deadline = a.deadline or (175.0 if a.short else 600.0 + a.cycles * 0.6)
    a.outage_seconds = a.outage_seconds or (10.0 if a.short else 30.0)
    for name in ("proxy", "provider_down", "slow_snapshots", "state_save_fail", "child_sessions"):
        if getattr(a, name) is None and not a.odd_providers:
            setattr(a, name, False)
    return a


def log(msg):
    print(f"chaos: {msg}", file=sys.stderr, flush=True)


def token(bin_dir, env, role, tenant=None):
    argv = [str(bin_dir / "sagents"), "token", "create", "--role", role] + (["--tenant", tenant] if tenant else [])
    r = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        raise StartError(f"token create --role {role} failed: {r.stderr.strip()}")
    return r.stdout.strip()


def grant_cli(bin_dir, env, command):
    """`sagents grant COMMAND`: a new Ed25519 signing key, or the public key of the configured one."""
    r = subprocess.run([str(bin_dir / "sagents"), "grant", command], env=env, capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        raise StartError(f"sagents grant {command} failed: {r.stderr.strip()}")
    return r.stdout.strip()


def interrupted(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv):
    a = parse(argv)
    t_start = time.monotonic()
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, interrupted)
    random.seed(a.seed)
    work = Path(tempfile.mkdtemp(prefix="sagents-chaos-"))
    os.chmod(work, 0o755)
    (work / "logs").mkdir()
    stats = Stats(work / "logs" / "chaos-events.jsonl")
    stop = Stop()
    # Commit times let the checks order a child's creation against its parent's release ask.
    pg = Postgres(work, options=("-c", "track_commit_timestamp=on"))
    signing_key = grant_cli(a.bin_dir, os.environ, "generate-key")
    public_key = grant_cli(a.bin_dir, dict(os.environ, SAGENTS_GRANT_SIGNING_KEY=signing_key), "public-key")
    provider = Provider(work, a.bin_dir, secrets.token_hex(18), public_key)
    replicas = []
    ctx = None
    proxy = None
    code = 2
    log(f"seed {a.seed}, {a.cycles} cycles, {a.replicas} replicas, concurrency {a.concurrency}, work dir {work}")
    try:
        on, skipped = behaviours(a, provider.bin)
        log("odd providers: " + ", ".join(f"{k}={'on' if v else 'off'}" for k, v in on.items())
            + "".join(f"; {k}: the provider refuses it ({why})" for k, why in skipped.items()))
        pg.start()
        env = dict(os.environ, SAGENTS_DATABASE_URL=pg.url, SAGENTS_GRANT_SIGNING_KEY=signing_key,
                   RUST_LOG=os.environ.get("CHAOS_SERVICE_LOG", "info"))
        if on["slow_snapshots"]:
            env["SAGENTS_PROVIDER_RELEASE_TIMEOUT_SECONDS"] = str(a.release_timeout)
        tenant = "chaos"
        r = subprocess.run([str(a.bin_dir / "sagents"), "migrate"], env=env, capture_output=True, text=True, timeout=120)
        if r.returncode != 0:
            raise StartError(f"sagents migrate failed: {r.stderr.strip()[-2000:]}")
        tokens = {"admin": token(a.bin_dir, env, "admin"),
                  "frontend": token(a.bin_dir, env, "frontend", tenant),
                  "runtime": token(a.bin_dir, env, "runtime", tenant)}
        args = ["--lease-ttl-seconds", str(a.lease_ttl), "--long-poll-max-seconds", "3", "--workers", "4",
                "--lifecycle-lease-ttl-seconds", "1", "--reconcile-interval-seconds", "2", "--reconcile-min-age-seconds", "20",
                "--log-format", "json"]
        replicas = [Replica(i, work, a.bin_dir, env, args) for i in range(a.replicas)]
        svc = Service(replicas, stats, stop)
        ctx = Context(a, svc, stats, stop, tokens, tenant, pg, provider, replicas)
        ctx.behaviours, ctx.skipped, ctx.children = on, skipped, on["child_sessions"]
        if on["proxy"]:
            proxy = ctx.proxy = LyingProxy(provider.port)
            proxy.start()
            ctx.base_url = proxy.url
        if on["provider_down"]:
            ctx.meter = OutageMeter(pg, a.outage_write_budget, a.outage_writes_per_minute)
        plan = phases(a, on, random.Random(f"{a.seed}-phases"))
        pchaos = ProviderChaos(ctx, plan, a.phase_seconds, 3, a.extra_faults, proxy, ctx.meter)
        provider.start(pchaos.first_spec())
        for r in replicas:
            r.start()
        ctx.register_provider()
        ctx.outside_sandbox()
        log(f"phases: {', '.join(p.name for p in plan)}")
        log(f"started in {time.monotonic() - t_start:.1f}s: PostgreSQL on {pg.port}, provider on {provider.port}"
            f"{f' behind the proxy on {proxy.port}' if proxy else ''}, "
            f"replicas on {', '.join(str(r.port) for r in replicas)}")

        ctx.watchdog(t_start + a.deadline - 20)
        ctx.jobs = JobFinisher(ctx)
        ctx.jobs.start()
        runtimes = [Runtime(i, ctx) for i in range(a.concurrency + 6)]
        humans = [Human(i, ctx) for i in range(a.concurrency)]
        killer = ReplicaKiller(ctx, a.kill_interval, 1.0)
        for th in runtimes + humans + [pchaos, killer]:
            th.start()
        t_run = time.monotonic()
        run_budget = (a.deadline - 85) if a.short else (a.deadline - 240)
        ctx.progress_until(lambda: all(not h.is_alive() for h in humans),
                           t_start + run_budget)
        stop.soft.set()
        run_secs = time.monotonic() - t_run
        log(f"faults stop after {run_secs:.0f}s: {ctx.cycles_started()} cycles started")
        killer.stop()
        pchaos.stop()
        for r in replicas:
            if not r.up:
                r.start()
        provider.stop()
        provider.start("")
        if proxy is not None:
            proxy.accept()
        t_settle = time.monotonic()
        ctx.progress_until(lambda: all(not h.is_alive() for h in humans), t_settle + (25 if a.short else 120))
        wait_secs, leak_secs, items = settle(ctx, 25 if a.short else 120, 10 if a.short else 60)
        settle_secs = time.monotonic() - t_settle
        stop.hard.set()
        found = check(ctx, items)
        code = report(ctx, found, {"run": run_secs, "settle": settle_secs, "settle_wait": wait_secs,
                                   "leak_wait": leak_secs, "total": time.monotonic() - t_start,
                                   "phases": pchaos.phase_log}, work / "logs" / "report.json")
        if ctx.failure:
            log(ctx.failure)
            code = 3
    except KeyboardInterrupt as e:
        log(f"interrupted ({e}); cleaning up")
        code = 130
    except StartError as e:
        log(f"a component failed to start: {e}")
        code = 3
    except Exception as e:
        log(f"error: {e!r}")
        for m in [provider] + replicas:
            log(f"--- last lines of {m.log}:\n{tail(m.log, 20)}")
        code = 3
    finally:
        stop.soft.set()
        stop.hard.set()
        if code not in (0, 1):
            for m in [provider] + replicas:
                if m.proc is not None and m.proc.poll() is not None and m.proc.returncode not in (0, -9, -15):
                    log(f"--- {m.name} exited with {m.proc.returncode}; last lines of {m.log}:\n{tail(m.log, 30)}")
                    reason = exit_reason(m.log)
                    if reason:
                        log(f"--- {m.name} said as it exited:\n{reason}")
        for m in replicas + [provider]:
            try:
                m.stop()
            except Exception:
                pass
        if proxy is not None:
            proxy.stop()
        kill_sandbox_processes(provider.root)
        pg.stop()
        if a.keep:
            log(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
