"""Holds many snapshot long-polls open and measures the server's memory and wake-up latency.

usage: longpoll.py HOST PORT FRONTEND_TOKEN SERVER_PID SESSIONS_FILE WAITERS TRIGGERS_FILE

SESSIONS_FILE lines: `<snapshot path> <etag>`. WAITERS connections are spread over the
sessions. Once all are waiting it records the server's RSS. Then, for each line of
TRIGGERS_FILE in turn (the reply path of a pending interaction of the first, second, ...
session), it POSTs an approval, and measures how long that session's waiters take to wake
after the reply's answer. One change wakes WAITERS / sessions waiters; several changes one
after another make the figure less a matter of one moment on a noisy machine.
"""
import asyncio
import http.client
import resource
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


def approve(host, port, token, path):
    conn = http.client.HTTPConnection(host, port, timeout=10)
    conn.request("POST", path, body=b'{"decision":"approve"}',
                 headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    res = conn.getresponse()
    res.read()
    conn.close()
    if res.status != 200:
        raise SystemExit(f"reply {path}: HTTP {res.status}")


def pct(sorted_values, p):
    return sorted_values[min(len(sorted_values) - 1, (len(sorted_values) * p + 99) // 100 - 1)]


async def main():
    host, port, token, pid, sessions_file, n = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), sys.argv[5], int(sys.argv[6])
    triggers = [line.strip() for line in open(sys.argv[7]) if line.strip()]
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
    lat, each, statuses = [], [], set()
    for k, path in enumerate(triggers):
        group = set(range(k, n, len(sessions)))
        # The reply is sent while the loop is blocked: the waiters' answers are read after it.
        approve(host, port, token, path)
        t_trigger = time.perf_counter()
        while len([w for w in woke if w[0] in group]) < len(group):
            await asyncio.sleep(0.001)
            if time.perf_counter() - t_trigger > 10:
                break
        mine = sorted((t - t_trigger) * 1000 for i, t, _ in woke if i in group)
        statuses |= {s for i, _, s in woke if i in group}
        if mine:
            each.append(mine[len(mine) // 2])
        lat += mine
        # Let the server settle between changes.
        await asyncio.sleep(0.2)
    lat.sort()
    print(f"waiters={n} sessions={len(sessions)} answered_early={early}")
    print(f"rss_before_mb={before:.1f} rss_held_mb={held:.1f} per_waiter_kb={(held - before) * 1024 / n:.2f}")
    if lat:
        print(f"wake_after_change_ms: triggers={len(each)} n={len(lat)} p50={lat[len(lat)//2]:.1f} p99={pct(lat, 99):.1f} "
              f"max={lat[-1]:.1f} each_p50={','.join(f'{x:.1f}' for x in each)} statuses={sorted(statuses)}")
    for t in tasks:
        t.cancel()


if __name__ == "__main__":
    asyncio.run(main())
