"""Queues runs to claim, through the API as a frontend and a runtime would.

usage: scale_queue.py BASE_URL FRONTEND_TOKEN RUNTIME_TOKEN RUNS SESSIONS

Creates SESSIONS sessions and RUNS `queued` runs spread over them (no sandbox spec, so each is
claimable at once), with four clients.
"""
import sys
import threading

from seed import Client, HASH


def queue(base, front, runtime, sessions, runs):
    c = Client(base)
    sids = [c.call("POST", "/v1/sessions", front, {"title": "queue", "metadata": {}})[0]["id"]
            for _ in range(sessions)]
    for i in range(runs):
        c.call("POST", f"/v1/sessions/{sids[i % len(sids)]}/runs", runtime,
               {"resolved_spec_hash": HASH, "input": {"q": i}})


def main():
    base, front, runtime, runs, sessions = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
    n = 4
    ts = [threading.Thread(target=queue, args=(base, front, runtime, max(1, sessions // n),
                                                runs // n + (i < runs % n))) for i in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    print(f"queued {runs} runs over {sessions} sessions", file=sys.stderr)


if __name__ == "__main__":
    main()
