"""The faults as the service met them: every failed provider call a replica logged (its JSON
log), by call and kind, and the scheduler's dropped lifecycle work."""

import json
import re
import time
from datetime import datetime
from collections import Counter
from pathlib import Path

KINDS = [
    (r"Connection refused|tcp connect error", "provider down (refused)"),
    (r"ConnectionLost", "answer lost (dropped or provider killed)"),
    (r"sandbox\.snapshot_failed", "snapshot failed, recoverable"),
    (r"injected recoverable", "recoverable 503"),
    (r"injected terminal", "terminal 500"),
    (r"sandbox\.lost: snapshot failed", "terminal: snapshot and resume failed"),
    (r"sandbox\.lost", "terminal: sandbox lost"),
    (r"injected refusal", "refused 409"),
    (r"sandbox\.not_found", "404: sandbox unknown"),
    (r"sandbox\.not_running: the sandbox is terminated", "409: sandbox terminated"),
    (r"sandbox\.not_running: the sandbox is lost", "409: sandbox lost"),
    (r"sandbox\.terminated", "409: sandbox terminated"),
    (r"workspace_in_use", "409: workspace in use"),
]


def kind_of(error):
    for pattern, kind in KINDS:
        if re.search(pattern, error):
            return kind
    return "other: " + re.sub(r"sbx_\w+|run_\w+|https?://\S+", "…", error)[:80]


def count(log_dir):
    calls = Counter()
    for path in sorted(Path(log_dir).glob("replica-*.log")):
        with open(path, errors="replace") as f:
            for line in f:
                if '"WARN"' not in line and '"ERROR"' not in line:
                    continue
                try:
                    d = json.loads(line)
                except ValueError:
                    continue
                msg = d.get("message", "")
                if msg.endswith(" failed") and "error" in d:
                    calls[(msg[: -len(" failed")], kind_of(d["error"]))] += 1
                elif msg.startswith("lease not kept"):
                    calls[("scheduler", "lease not kept: lifecycle work dropped")] += 1
    return calls


ANSI = re.compile(r"\x1b\[[0-9;]*m")
DELAYED = re.compile(r"^(\S+)\s+INFO .*snapshot delayed \(injected fault\).*owner_run_id=(\S+).*delay_ms=(\d+)")


def delayed_snapshots(log_dir):
    """The snapshots the provider held on purpose (`snapshot=delay_ms`): for each run, the
    windows (monotonic seconds, this process's clock) in which its snapshot was held."""
    offset = time.time() - time.monotonic()
    out = {}
    path = Path(log_dir) / "provider.log"
    if not path.exists():
        return out
    with open(path, errors="replace") as f:
        for line in f:
            if "snapshot delayed" not in line:
                continue
            m = DELAYED.match(ANSI.sub("", line))
            if m is None:
                continue
            try:
                at = datetime.fromisoformat(m.group(1).replace("Z", "+00:00")).timestamp() - offset
            except ValueError:
                continue
            out.setdefault(m.group(2), []).append((at, at + int(m.group(3)) / 1000.0))
    return out
