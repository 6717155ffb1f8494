"""The faults as the service met them: every failed provider call a replica logged (its JSON
log), by call and kind, and the scheduler's dropped lifecycle work."""

import json
import re
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
