"""Sends N GETs one after another on one keep-alive connection and checks each status.

usage: sequential_gets.py PORT PATH N STATUS [HEADER: VALUE]...
"""
import http.client
import sys


def main():
    port, path, n, status = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    headers = dict(h.split(": ", 1) for h in sys.argv[5:])
    conn = http.client.HTTPConnection("127.0.0.1", port)
    for _ in range(n):
        conn.request("GET", path, headers=headers)
        r = conn.getresponse()
        r.read()
        if r.status != status:
            raise SystemExit(f"GET {path} -> {r.status}, expected {status}")


if __name__ == "__main__":
    main()
