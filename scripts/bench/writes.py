"""Targets for the write phases of the HTTP benchmark.

usage: writes.py sessions BASE_URL FRONTEND_TOKEN COUNT OUT   # COUNT sessions, one id a line
       writes.py claim BASE_URL RUNTIME_TOKEN OUT              # every queued run claimed once:
                                                               #   "suspend path<TAB>fencing token"
       writes.py pending BASE_URL FRONTEND_TOKEN SESSIONS OUT  # one reply path per pending
                                                               #   interaction of those sessions
Prints how many lines it wrote.
"""
import sys
import threading

from seed import Client


def sessions(base, token, count, out):
    c = Client(base)
    with open(out, "w") as f:
        for _ in range(count):
            s, _ = c.call("POST", "/v1/sessions", token, {"title": "bench writes", "metadata": {"k": "v"}})
            f.write(s["id"] + "\n")
    return count


def claim(base, token, out):
    c = Client(base)
    seen = set()
    with open(out, "w") as f:
        while True:
            got, _ = c.call("POST", "/v1/runtime/claims", token, {"worker_id": "bench-writes", "max": 100, "wait_seconds": 0})
            for cl in got["claims"]:
                run_id = cl["run"]["id"]
                # A run claimed again: its first lease expired while a long queue was walked.
                if run_id in seen:
                    return len(seen)
                seen.add(run_id)
                f.write(f"/v1/runs/{run_id}/suspend\t{cl['lease']['fencing_token']}\n")
            if len(got["claims"]) < 100:
                return len(seen)


def pending(base, token, sessions_file, out):
    sids = [line.strip() for line in open(sessions_file) if line.strip()]
    paths, lock = [], threading.Lock()

    def work(part):
        c = Client(base)
        for sid in part:
            snap, _ = c.call("GET", f"/v1/sessions/{sid}/snapshot", token)
            found = [f"/v1/sessions/{sid}/interactions/{p['id']}/reply" for p in snap["pending_interactions"]]
            with lock:
                paths.extend(found)

    threads = [threading.Thread(target=work, args=(sids[i::8],)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    with open(out, "w") as f:
        f.writelines(p + "\n" for p in paths)
    return len(paths)


def main():
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "sessions":
        n = sessions(args[0], args[1], int(args[2]), args[3])
    elif cmd == "claim":
        n = claim(args[0], args[1], args[2])
    elif cmd == "pending":
        n = pending(args[0], args[1], args[2], args[3])
    else:
        raise SystemExit(__doc__)
    print(n)


if __name__ == "__main__":
    main()
