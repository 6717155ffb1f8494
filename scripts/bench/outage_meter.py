"""What the outage benchmark reads while it waits: a process's CPU time, the service's provider
call counters, and the version of each execution-resource record (every write bumps it)."""

import os
import sqlite3
import threading
import time

from procs import get

TICKS = os.sysconf("SC_CLK_TCK")
CALLS = "sagents_provider_calls_total{"


def cpu_seconds(pid):
    """utime + stime of a process, in seconds."""
    with open(f"/proc/{pid}/stat") as f:
        stat = f.read()
    fields = stat[stat.rfind(")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def provider_calls(port, token):
    """{(endpoint, status): count} from the replica's /metrics."""
    status, body = get(port, "/metrics", token, timeout=10)
    if status != 200:
        raise RuntimeError(f"/metrics answered {status}")
    out = {}
    for line in body.decode().splitlines():
        if not line.startswith(CALLS):
            continue
        labels, value = line[len(CALLS):].rsplit("} ", 1)
        pairs = dict(p.split("=", 1) for p in labels.split(","))
        out[(pairs["endpoint"].strip('"'), pairs["status"].strip('"'))] = int(float(value))
    return out


def calls_between(before, after):
    return {k: n - before.get(k, 0) for k, n in after.items() if n != before.get(k, 0)}


class SqliteRecords:
    """The records, read from the database file with a read-only connection."""

    def __init__(self, path):
        self.path = path

    def rows(self):
        conn = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, timeout=10)
        try:
            return {rid: (version, state) for rid, version, state in
                    conn.execute("SELECT run_id, version, state FROM execution_resources")}
        finally:
            conn.close()


class PgRecords:
    def __init__(self, pg):
        self.pg = pg

    def rows(self):
        rows = self.pg.psql_json(
            "SELECT coalesce(json_agg(json_build_array(run_id, version, state)), '[]') FROM execution_resources")
        return {rid: (version, state) for rid, version, state in rows}


class CpuSampler(threading.Thread):
    """CPU seconds of one process once a second, to find the busiest stretch of a window."""

    def __init__(self, pid):
        super().__init__(name="cpu-sampler", daemon=True)
        self.pid = pid
        self.samples = []
        self.loads = []
        self.done = threading.Event()

    def run(self):
        while True:
            self.samples.append((time.monotonic(), cpu_seconds(self.pid)))
            self.loads.append(os.getloadavg()[0])
            if self.done.wait(1.0):
                self.samples.append((time.monotonic(), cpu_seconds(self.pid)))
                return

    def stop(self):
        self.done.set()
        self.join()

    def worst(self, span=5.0):
        """The highest CPU % of one core over any `span` seconds."""
        worst = 0.0
        for i, (t0, c0) in enumerate(self.samples):
            for t1, c1 in self.samples[i + 1:]:
                if t1 - t0 >= span:
                    worst = max(worst, 100.0 * (c1 - c0) / (t1 - t0))
                    break
        return worst


def window(pid, seconds, read_calls, read_versions=None):
    """CPU, provider calls, record versions and the machine's mean 1-minute load average over
    `seconds`."""
    v0 = read_versions() if read_versions else None
    k0 = read_calls()
    sampler = CpuSampler(pid)
    t0, c0 = time.monotonic(), cpu_seconds(pid)
    sampler.start()
    time.sleep(seconds)
    t1, c1 = time.monotonic(), cpu_seconds(pid)
    sampler.stop()
    k1 = read_calls()
    v1 = read_versions() if read_versions else None
    return {"seconds": t1 - t0, "cpu_pct": 100.0 * (c1 - c0) / (t1 - t0), "cpu_worst_5s": sampler.worst(),
            "load": sum(sampler.loads) / len(sampler.loads),
            "calls": calls_between(k0, k1), "versions": (v0, v1)}
