"""Entry point of `scripts/topology`: `up` starts the compose topology on loopback in the
foreground; `test` starts it on free ports, runs the checks and prints
`topology: N passed, M failed`."""

import argparse
import shutil
import signal
import sys
import tempfile
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parent.parent))  # procs.py, shared with scripts/chaos

from checks import check_config, check_cycle, check_wake, log  # noqa: E402
from client import Failed  # noqa: E402
from procs import StartError, kill_sandbox_processes, tail  # noqa: E402
from stack import Stack  # noqa: E402
from traffic import check_stop  # noqa: E402


def parse(argv):
    ap = argparse.ArgumentParser(prog="scripts/topology", description=__doc__)
    ap.add_argument("--bin-dir", required=True, type=Path)
    ap.add_argument("command", choices=["up", "test"])
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory and its logs")
    ap.add_argument("--wake-samples", type=int, default=3)
    ap.add_argument("--wake-limit-ms", type=int, default=1000)
    ap.add_argument("--clients", type=int, default=4, help="concurrent clients while replicas stop")
    return ap.parse_args(argv)


def interrupted(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


def up(stack):
    n = stack.nginx.url
    print(f"""topology: up, configured from {stack.env_path}
  nginx       {n}   (UI {n}/ui, API docs {n}/docs)
  replica a   http://{stack.upstream('a')}
  replica b   http://{stack.upstream('b')}
  provider    {stack.provider.url}   (registered as `local`)
  postgres    {stack.pg.url.rsplit('/', 1)[0]}/{stack.cfg['POSTGRES_DB']} (superuser postgres, role {stack.cfg['POSTGRES_USER']})
  logs        {stack.work / 'logs'}
tokens (tenant acme):
  FRONT={stack.tokens['frontend']}
  RUNTIME={stack.tokens['runtime']}
  ADMIN={stack.tokens['admin']}
Ctrl-C stops everything.""", flush=True)
    procs = [stack.nginx, stack.provider, *stack.replicas.values()]
    while True:
        time.sleep(1)
        for m in procs:
            if m.proc.poll() is not None:
                log(f"{m.name} exited with {m.proc.returncode}; stopping\n{tail(m.log, 20)}")
                return 1


def test(stack, a):
    checks = [("config", lambda: check_config(stack)),
              ("cycle through nginx", lambda: check_cycle(stack)),
              ("long-poll on A woken by a reply on B", lambda: check_wake(stack, a.wake_samples, a.wake_limit_ms / 1000)),
              ("replicas stopped under traffic", lambda: check_stop(stack, a.clients))]
    passed = failed = 0
    for name, fn in checks:
        t0 = time.monotonic()
        try:
            detail = fn()
            passed += 1
            log(f"ok   {name} ({time.monotonic() - t0:.1f}s): {detail}")
        except Failed as e:
            failed += 1
            log(f"FAIL {name} ({time.monotonic() - t0:.1f}s): {e}")
        except Exception as e:
            failed += 1
            log(f"FAIL {name}: {e!r}\n{traceback.format_exc()}")
    print(f"topology: {passed} passed, {failed} failed", flush=True)
    return 0 if failed == 0 else 1


def main(argv):
    a = parse(argv)
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, interrupted)
    work = Path(tempfile.mkdtemp(prefix="sagents-topology-"))
    stack = None
    code = 2
    try:
        stack = Stack(work, a.bin_dir, fixed_ports=a.command == "up")
        secs = stack.start()
        log(f"started in {secs:.1f}s: nginx on {stack.ports['nginx']}, replicas on {stack.ports['a']} and "
            f"{stack.ports['b']}, provider on {stack.ports['provider']}, PostgreSQL on {stack.pg.port}; "
            f"work dir {work}")
        code = up(stack) if a.command == "up" else test(stack, a)
    except KeyboardInterrupt:
        log("stopping")
        code = 0 if a.command == "up" else 130
    except StartError as e:
        log(f"a component failed to start: {e}")
        code = 3
    finally:
        if stack is not None:
            if code not in (0, 130):
                for m in [stack.nginx, stack.provider, *stack.replicas.values()]:
                    if m is not None:
                        log(f"--- last lines of {m.log}:\n{tail(m.log, 15)}")
            stack.stop()
            kill_sandbox_processes(stack.provider.root)
        if a.keep or code == 3:
            log(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
