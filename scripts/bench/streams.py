"""Holds many idle live-event streams open and measures the server's memory per stream and how
fast a change reaches the streams of the session it happened in.

usage: streams.py BASE_URL FRONTEND_TOKEN RUNTIME_TOKEN SERVER_PID STREAMS SESSIONS

Creates SESSIONS sessions, opens STREAMS `GET /v1/sessions/{id}/events/stream` connections
spread over them (each first gets its session's past events), waits until every one has its
response head, records the server's RSS, then creates a run in the first session and times
until each of its streams has a new event.
"""
import asyncio
import json
import resource
import sys
import time
import urllib.parse
import urllib.request

from longpoll import rss_mb


def post(base, token, path, body):
    req = urllib.request.Request(base + path, data=json.dumps(body).encode(), method="POST",
                                 headers={"authorization": f"Bearer {token}",
                                          "content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read())


async def stream(host, port, token, sid, heads, events, idx):
    reader, writer = await asyncio.open_connection(host, port)
    writer.write((f"GET /v1/sessions/{sid}/events/stream HTTP/1.1\r\nHost: {host}\r\n"
                  f"Authorization: Bearer {token}\r\nAccept: text/event-stream\r\n\r\n").encode())
    await writer.drain()
    status = await reader.readline()
    while (await reader.readline()) not in (b"\r\n", b""):
        pass
    heads.append((idx, status.split()[1].decode() if status else "eof"))
    while True:
        line = await reader.readline()
        if not line:
            return
        if line.startswith(b"id:"):
            events.append((idx, time.perf_counter()))


async def main():
    base, front, runtime, pid, n, n_sessions = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])
    u = urllib.parse.urlparse(base)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    sessions = [post(base, front, "/v1/sessions", {"title": f"s{i}"})["id"] for i in range(n_sessions)]
    before = rss_mb(pid)
    heads, events, tasks = [], [], []
    for i in range(n):
        tasks.append(asyncio.create_task(stream(u.hostname, u.port, front, sessions[i % n_sessions], heads, events, i)))
        if i % 500 == 499:
            await asyncio.sleep(0.05)
    while len(heads) < n:
        await asyncio.sleep(0.05)
        if any(t.done() and t.exception() for t in tasks):
            raise next(t.exception() for t in tasks if t.done() and t.exception())
    await asyncio.sleep(2)
    held = rss_mb(pid)
    statuses = sorted(set(s for _, s in heads))
    first = {i for i in range(n) if i % n_sessions == 0}
    t0 = time.perf_counter()
    post(base, runtime, f"/v1/sessions/{sessions[0]}/runs",
         {"resolved_spec_hash": "sha256:" + "a" * 64, "input": {}})
    def after_change():
        return {i: t for i, t in events if i in first and t >= t0}
    while len(after_change()) < len(first) and time.perf_counter() - t0 < 10:
        await asyncio.sleep(0.001)
    lat = sorted((t - t0) * 1000 for t in after_change().values())
    print(f"streams={n} sessions={n_sessions} statuses={statuses}")
    print(f"rss_before_mb={before:.1f} rss_held_mb={held:.1f} per_stream_kb={(held - before) * 1024 / n:.2f}")
    if lat:
        p99 = lat[min(len(lat) - 1, (len(lat) * 99 + 99) // 100 - 1)]
        print(f"event_after_change_ms: n={len(lat)} of {len(first)} p50={lat[len(lat)//2]:.1f} p99={p99:.1f} max={lat[-1]:.1f}")
    for t in tasks:
        t.cancel()


asyncio.run(main())
