"""The odd providers: which behaviours a run turns on (flags, and whether the provider binary
knows the fault points they need), and the provider phases in their order."""

import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections import namedtuple
from pathlib import Path

Phase = namedtuple("Phase", "name spec proxy down seconds", defaults=("", None, False, None))

BASE = [
    ("snapshot_recoverable", "snapshot=fail:p=0.3"),
    ("drop", "release=drop:p=0.15;provision=drop:p=0.05;restore=drop:p=0.08;attach=drop:p=0.1;inspect=drop:p=0.1"),
    ("terminal", "release=terminal:p=0.05;release=forget:p=0.03;snapshot=fail:p=0.08;resume=fail:p=0.5"),
    ("refused", "release=refused:p=0.2;restore=refused:p=0.03;attach=refused:p=0.05"),
    ("unconfirmed", "release=unconfirmed:p=0.25"),
    ("delay", "release=delay_ms=400:p=0.3;restore=delay_ms=300:p=0.3;provision=delay_ms=250:p=0.3;"
              "attach=delay_ms=200:p=0.3;inspect=delay_ms=200:p=0.3"),
    ("recoverable", "release=recoverable:p=0.15;restore=recoverable:p=0.1;provision=recoverable:p=0.05;"
                    "attach=recoverable:p=0.1;inspect=recoverable:p=0.1"),
]
SLOW_SNAPSHOT = "snapshot=delay_ms={ms}:p=0.3"
STATE_SAVE = "state_save=fail:p=0.15"
NEEDS_NEW_PROVIDER = {"slow_snapshots": SLOW_SNAPSHOT.format(ms=1), "state_save_fail": STATE_SAVE}


def behaviours(a, provider_bin):
    """What this run turns on: the flag when given, else on; a behaviour that needs a fault
    point the provider binary refuses is off unless forced (then the start fails clearly)."""
    on = {"proxy": a.proxy, "provider_down": a.provider_down, "child_sessions": a.child_sessions}
    skipped = {}
    for name, probe in NEEDS_NEW_PROVIDER.items():
        flag = getattr(a, name)
        if flag is False:
            on[name] = False
            continue
        refused = refuses(provider_bin, probe)
        on[name] = flag is True or not refused
        if refused:
            skipped[name] = refused
    for name in ("proxy", "provider_down", "child_sessions"):
        on[name] = on[name] is not False
    return on, skipped


def refuses(provider_bin, spec):
    """The provider's complaint when it refuses `spec` at start, else None."""
    root = Path(tempfile.mkdtemp(prefix="sagents-chaos-probe-"))
    os.chmod(root, 0o711)
    env = dict(os.environ, RUST_BACKTRACE="0", SAGENTS_PROVIDER_TOKEN="p" * 40, SAGENTS_PROVIDER_GRANT_SECRET="g" * 40)
    argv = [str(provider_bin), "serve", "--listen", "127.0.0.1:0", "--root", str(root / "p"),
            f"--fault-injection={spec}"]
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        _, err = proc.communicate(timeout=3)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=5)
        err = b""
    finally:
        time.sleep(0.05)
        shutil.rmtree(root, ignore_errors=True)
    for line in err.decode("utf-8", "replace").splitlines():
        if "invalid fault injection rule" in line:
            return line.strip()
    return None


def phases(a, on, rng):
    """The provider phases of one round, in order: the odd ones between the classic ones, so
    that a short run meets each of them, the outage early, while many cycles are under way."""
    base = {name: Phase(name, spec) for name, spec in BASE}
    lie = a.proxy_lie_seconds
    order = [base["snapshot_recoverable"]]
    if on["provider_down"]:
        order.append(Phase("provider_down", down=True, seconds=a.outage_seconds))
    order.append(base["drop"])
    if on["proxy"]:
        order.append(Phase("proxy_html404", proxy=404, seconds=lie))
    if on["slow_snapshots"]:
        ms = rng.randrange(4000, 6001, 250)
        order.append(Phase("slow_snapshot", SLOW_SNAPSHOT.format(ms=ms)))
    order.append(base["terminal"])
    if on["proxy"]:
        order.append(Phase("proxy_html502", proxy=502, seconds=lie))
    if on["state_save_fail"]:
        order.append(Phase("state_save_fail", STATE_SAVE))
    order += [base[n] for n in ("refused", "unconfirmed", "delay", "recoverable")]
    return order
