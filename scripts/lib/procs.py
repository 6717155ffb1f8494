"""The processes of a local stack (scripts/chaos, scripts/topology): a throwaway PostgreSQL,
the reference provider, the service replicas."""

import http.client
import json
import os
import random
import signal
import socket
import subprocess
import threading
import time
import urllib.parse
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PG_SH = REPO / "scripts" / "lib" / "pg.sh"


class StartError(RuntimeError):
    pass


def free_port():
    """A free port below the kernel's ephemeral range: a component restarted on it later must
    not find it taken as the local port of some outgoing connection (bind: address in use)."""
    try:
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768
    rng = random.Random()
    for _ in range(1000):
        port = rng.randrange(10000, max(10001, low))
        s = socket.socket()
        try:
            s.bind(("127.0.0.1", port))
            return port
        except OSError:
            continue
        finally:
            s.close()
    raise StartError("no free port below the ephemeral range")


def get(port, path, token=None, timeout=2.0):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        headers = {"authorization": f"Bearer {token}"} if token else {}
        conn.request("GET", path, headers=headers)
        r = conn.getresponse()
        return r.status, r.read()
    finally:
        conn.close()


def exit_reason(path):
    """The error a Rust binary printed as it exited (`Error: …` and its causes), or ''."""
    try:
        text = Path(path).read_text(errors="replace").splitlines()
    except OSError:
        return ""
    starts = [i for i, line in enumerate(text) if line.startswith("Error: ")]
    if not starts:
        return ""
    out = []
    for line in text[starts[-1]:starts[-1] + 12]:
        if line.startswith("Stack backtrace:"):
            break
        out.append(line)
    return "\n".join(out).strip()


def tail(path, lines=40):
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - 64 * 1024))
            data = f.read().decode("utf-8", "replace").splitlines()
        return "\n".join(data[-lines:])
    except OSError as e:
        return f"(no log: {e})"


class Postgres:
    def __init__(self, work, port=None, options=()):
        self.dir = work / "pg"
        self.port = port or free_port()
        self.options = list(options)
        self.url = f"postgres://postgres@127.0.0.1:{self.port}/postgres"
        self.started = False

    def _sh(self, fn, *args):
        cmd = f'. "{PG_SH}"; {fn} "$@"'
        return subprocess.run(["bash", "-c", cmd, "pg", *args], capture_output=True, text=True)

    def start(self):
        r = self._sh("pg_start", str(self.dir), str(self.port), *self.options)
        self.started = True
        if r.returncode != 0:
            raise StartError(f"PostgreSQL did not start: {r.stderr.strip()}\n{tail(self.dir / 'log')}")

    def stop(self):
        if self.started:
            self._sh("pg_stop", str(self.dir))
            self.started = False

    def psql(self, sql):
        """Runs statements as the superuser."""
        r = subprocess.run(
            ["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-h", "127.0.0.1", "-p", str(self.port),
             "-U", "postgres", "-d", "postgres", "-c", sql],
            capture_output=True, text=True, timeout=120)
        if r.returncode != 0:
            raise RuntimeError(f"psql failed: {r.stderr.strip()}")

    def create_database(self, user, password, db):
        """A role and a database it owns, as a deployment's PostgreSQL has; returns its URL."""
        lit = lambda v: "'" + v.replace("'", "''") + "'"
        ident = lambda v: '"' + v.replace('"', '""') + '"'
        self.psql(f"CREATE ROLE {ident(user)} LOGIN PASSWORD {lit(password)}")
        self.psql(f"CREATE DATABASE {ident(db)} OWNER {ident(user)}")
        q = urllib.parse.quote
        return f"postgres://{q(user, safe='')}:{q(password, safe='')}@127.0.0.1:{self.port}/{q(db, safe='')}"

    def psql_json(self, sql):
        """Runs a query returning one JSON value."""
        r = subprocess.run(
            ["psql", "-X", "-q", "-At", "-v", "ON_ERROR_STOP=1", "-h", "127.0.0.1", "-p", str(self.port),
             "-U", "postgres", "-d", "postgres", "-c", sql],
            capture_output=True, text=True, timeout=120)
        if r.returncode != 0:
            raise RuntimeError(f"psql failed: {r.stderr.strip()}\nquery: {sql}")
        out = r.stdout.strip()
        return json.loads(out) if out else None

    def log(self):
        return self.dir / "log"


class Managed:
    """A process we start, kill and restart on the same port; its log is appended to."""

    def __init__(self, name, log, port):
        self.name = name
        self.log = log
        self.port = port
        self.proc = None
        self.up = False
        self.generation = 0
        self.kills = []
        self.lock = threading.Lock()

    def _spawn(self, argv, env):
        with open(self.log, "ab") as out:
            out.write(f"\n=== starting {self.name} at {time.time():.3f}: {' '.join(argv)}\n".encode())
            out.flush()
            self.proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         env=env, start_new_session=True)

    def wait_ready(self, probe, timeout=30.0):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                said = exit_reason(self.log) or tail(self.log)
                raise StartError(f"{self.name} exited with {self.proc.returncode}\n{said}")
            try:
                if probe():
                    with self.lock:
                        self.generation += 1
                        self.up = True
                    return
            except OSError:
                pass
            time.sleep(0.05)
        raise StartError(f"{self.name} was not ready within {timeout:.0f}s\n{tail(self.log)}")

    def kill(self, sig=signal.SIGKILL):
        with self.lock:
            self.up = False
            self.kills.append(time.monotonic())
        if self.proc and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, sig)
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=5)

    def terminate(self, grace):
        """SIGTERM, then SIGKILL if it still runs after `grace` seconds. Returns whether it
        exited by itself, and when (monotonic)."""
        with self.lock:
            self.up = False
            self.kills.append(time.monotonic())
        if not self.proc or self.proc.poll() is not None:
            return True, time.monotonic()
        os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=grace)
            return True, time.monotonic()
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=5)
            return False, time.monotonic()

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.up = False
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
                self.proc.wait(timeout=8)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                try:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                self.proc.wait(timeout=5)

    def killed_between(self, t0, t1):
        with self.lock:
            return any(t0 <= k <= t1 for k in self.kills)


class Provider(Managed):
    """The reference provider. Its secrets go through the environment, or through 0600 files
    in `secret_dir` when given (as a container reads them from /run/secrets); never argv.
    `grant_key` is the service's public key (`ed25519-pub:...`) or a shared HMAC secret."""

    def __init__(self, work, bin_dir, token, grant_key, port=None, secret_dir=None, log_level=None, env=None):
        super().__init__("provider", work / "logs" / "provider.log", port or free_port())
        self.bin = bin_dir / "sagents-local-provider"
        self.root = work / "provider"
        work.chmod(0o711)  # the sandboxes' own user passes through to their folders under it
        self.token = token
        self.grant_key = grant_key
        self.secret_dir = secret_dir
        self.log_level = log_level or os.environ.get("CHAOS_PROVIDER_LOG", "info")
        self.extra_env = env or {}
        self.spec = ""
        self.url = f"http://127.0.0.1:{self.port}"

    def _secrets(self):
        public = self.grant_key.startswith("ed25519-pub:")
        grant = "grant-public-key" if public else "grant-secret"
        if self.secret_dir is None:
            var = "SAGENTS_PROVIDER_GRANT_PUBLIC_KEY" if public else "SAGENTS_PROVIDER_GRANT_SECRET"
            return [], {"SAGENTS_PROVIDER_TOKEN": self.token, var: self.grant_key}
        files = {"token": self.token, grant: self.grant_key}
        for name, value in files.items():
            write_secret(self.secret_dir / f"provider-{name}", value)
        return ["--token-file", str(self.secret_dir / "provider-token"),
                f"--{grant}-file", str(self.secret_dir / f"provider-{grant}")], {}

    def start(self, spec=""):
        self.spec = spec
        argv = [str(self.bin), "serve", "--listen", f"127.0.0.1:{self.port}", "--root", str(self.root)]
        if spec:
            argv.append(f"--fault-injection={spec}")
        args, secret_env = self._secrets()
        env = dict(os.environ, RUST_LOG=self.log_level, **self.extra_env, **secret_env)
        self._spawn(argv + args, env)
        self.wait_ready(lambda: get(self.port, "/v3/capabilities", self.token)[0] == 200)

    def fault_help(self):
        r = subprocess.run([str(self.bin), "serve", "--help"], capture_output=True, text=True)
        return r.stdout

    def state_files(self):
        d = self.root / "state" / "sandboxes"
        return sorted(d.glob("*.json")) if d.exists() else []


class Replica(Managed):
    def __init__(self, index, work, bin_dir, env, args, port=None):
        super().__init__(f"replica-{index}", work / "logs" / f"replica-{index}.log", port or free_port())
        self.index = index
        self.bin = bin_dir / "sagents"
        self.env = env
        self.args = args

    def start(self):
        argv = [str(self.bin), "serve", "--listen", f"127.0.0.1:{self.port}", *self.args]
        self._spawn(argv, self.env)
        self.wait_ready(lambda: get(self.port, "/readyz")[0] == 200)


def write_secret(path, value):
    """A secret file only its owner reads."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(value)


def kill_sandbox_processes(root):
    """SIGKILLs every process group whose working directory lies under the provider's root."""
    root = str(Path(root).resolve())
    killed = 0
    for pid_dir in Path("/proc").iterdir():
        if not pid_dir.name.isdigit():
            continue
        try:
            cwd = os.readlink(pid_dir / "cwd")
        except OSError:
            continue
        if cwd == root or cwd.startswith(root + "/"):
            pid = int(pid_dir.name)
            try:
                os.killpg(os.getpgid(pid), signal.SIGKILL)
                killed += 1
            except (ProcessLookupError, PermissionError):
                pass
    return killed


def kill_group_of_state(path):
    """Kills the process group a provider state file names, if its leader still lives."""
    try:
        rec = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return False
    leader = rec.get("leader") or {}
    pid, start = leader.get("pid"), leader.get("start_time")
    if not pid:
        return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        fields = stat[stat.rfind(")") + 1:].split()
        if fields[0] in ("Z", "X", "x") or int(fields[19]) != start:
            return False
        os.killpg(pid, signal.SIGKILL)
        return True
    except (OSError, ValueError, IndexError):
        return False
