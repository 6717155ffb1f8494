"""Holds many snapshot long-polls open and measures the server's memory and wake-up latency.

usage: longpoll.py HOST PORT FRONTEND_TOKEN SERVER_PID SESSIONS_FILE WAITERS TRIGGER_CMD...

SESSIONS_FILE lines: `<snapshot path> <etag>`. WAITERS connections are spread over the
sessions. Once all are waiting it records the server's RSS, runs TRIGGER_CMD (which must
change the first session), and measures how long the first session's waiters take to wake.
"""
import asyncio
import resource
import subprocess
import sys
import time


def rss_mb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


async def waiter(host, port, token, path, etag, ready, woke, idx):
    reader, writer = await asyncio.open_connection(host, port)
    req = (f"GET {path}?wait_seconds=60 HTTP/1.1\r\nHost: {host}\r\n"
           f"Authorization: Bearer {token}\r\nIf-None-Match: {etag}\r\n\r\n")
    writer.write(req.encode())
    await writer.drain()
    ready.append(idx)
    status = await reader.readline()
    woke.append((idx, time.perf_counter(), status.split()[1].decode() if status else "eof"))
    writer.close()


async def main():
    host, port, token, pid, sessions_file, n = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), sys.argv[5], int(sys.argv[6])
    trigger = sys.argv[7:]
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    sessions = [line.split(" ", 1) for line in open(sessions_file).read().splitlines() if line]
    before = rss_mb(pid)
    ready, woke = [], []
    tasks = []
    for i in range(n):
        path, etag = sessions[i % len(sessions)]
        tasks.append(asyncio.create_task(waiter(host, port, token, path, etag.strip(), ready, woke, i)))
        if i % 500 == 499:
            await asyncio.sleep(0.05)
    while len(ready) < n:
        await asyncio.sleep(0.05)
    # Give the server a moment to read every request before measuring.
    await asyncio.sleep(2)
    held = rss_mb(pid)
    early = len(woke)
    first = [i for i in range(n) if i % len(sessions) == 0]
    t0 = time.perf_counter()
    subprocess.run(trigger, check=True, stdout=subprocess.DEVNULL)
    t_trigger = time.perf_counter()
    while len([w for w in woke if w[0] in first]) < len(first):
        await asyncio.sleep(0.001)
        if time.perf_counter() - t0 > 10:
            break
    lat = sorted((t - t_trigger) * 1000 for i, t, _ in woke if i in first)
    print(f"waiters={n} sessions={len(sessions)} answered_early={early}")
    print(f"rss_before_mb={before:.1f} rss_held_mb={held:.1f} per_waiter_kb={(held - before) * 1024 / n:.2f}")
    if lat:
        p99 = lat[min(len(lat) - 1, (len(lat) * 99 + 99) // 100 - 1)]
        print(f"wake_after_change_ms: n={len(lat)} p50={lat[len(lat)//2]:.1f} p99={p99:.1f} max={lat[-1]:.1f} statuses={sorted(set(s for i, _, s in woke if i in first))}")
    for t in tasks:
        t.cancel()


if __name__ == "__main__":
    asyncio.run(main())
