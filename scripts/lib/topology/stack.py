"""The compose topology on loopback: PostgreSQL, two replicas, the reference provider and
Debian's nginx with docker/nginx.conf, configured from docker/.env (or docker/.env.example)."""

import base64
import os
import re
import secrets
import socket
import subprocess
import time
from pathlib import Path

from procs import REPO, Managed, Postgres, Provider, Replica, StartError, free_port, get, write_secret

DOCKER = REPO / "docker"
NGINX = Path("/usr/sbin/nginx")
TEMPLATE_VAR = re.compile(r"\$\{(SAGENTS_[A-Z0-9_]+)\}")
# What compose.yaml sets for the nginx template, and what the topology sets instead.
NGINX_VARS = ("SAGENTS_NGINX_LISTEN", "SAGENTS_UPSTREAM_A", "SAGENTS_UPSTREAM_B", "SAGENTS_NGINX_TEMP")
# What every replica gets in compose.yaml besides the values of the .env file.
REPLICA_ENV = {"SAGENTS_LOG_FORMAT": "json"}


def env_file():
    real = DOCKER / ".env"
    return real if real.exists() else DOCKER / ".env.example"


def read_env(path):
    """KEY=VALUE lines as compose reads them (comments, blank lines, optional quotes); a
    variable set in the environment wins, as with compose."""
    values = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, value = line.split("=", 1)
        key, value = key.strip().removeprefix("export "), value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        values[key] = os.environ.get(key, value)
    return values


def throwaway_secrets(values):
    """The example file's `change-me…` placeholders, which the service refuses, replaced by
    fresh secrets for this run alone."""
    for key, value in values.items():
        if not value.startswith("change-me"):
            continue
        if key == "SAGENTS_SECRET_KEY":
            values[key] = base64.b64encode(secrets.token_bytes(32)).decode()
        else:
            values[key] = secrets.token_urlsafe(32)
    return values


def template_vars(text):
    return sorted(set(TEMPLATE_VAR.findall(text)))


def render(text, values):
    """Replaces ${SAGENTS_*} as the nginx image's envsubst does; leaves nginx's $variables."""
    missing = [v for v in template_vars(text) if v not in values]
    if missing:
        raise StartError(f"docker/nginx.conf needs {', '.join(missing)}")
    return TEMPLATE_VAR.sub(lambda m: values[m.group(1)], text)


def port_free(port):
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", port))
        return True
    except OSError:
        return False
    finally:
        s.close()


class Nginx(Managed):
    """nginx in the foreground with its own prefix, pid file and temp folders under `work`."""

    def __init__(self, work, port, upstreams):
        super().__init__("nginx", work / "logs" / "nginx.log", port)
        self.prefix = work / "nginx"
        self.temp = self.prefix / "temp"
        self.temp.mkdir(parents=True)
        self.conf = self.prefix / "nginx.conf"
        values = {"SAGENTS_NGINX_LISTEN": f"127.0.0.1:{port}", "SAGENTS_UPSTREAM_A": upstreams[0],
                  "SAGENTS_UPSTREAM_B": upstreams[1], "SAGENTS_NGINX_TEMP": str(self.temp)}
        self.conf.write_text(render((DOCKER / "nginx.conf").read_text(), values))
        self.url = f"http://127.0.0.1:{port}"

    def argv(self):
        return [str(NGINX), "-p", str(self.prefix), "-c", str(self.conf), "-e", "stderr",
                "-g", f"daemon off; pid {self.prefix / 'nginx.pid'};"]

    def start(self):
        if not NGINX.exists():
            raise StartError(f"{NGINX} is missing (apt-get install nginx)")
        r = subprocess.run(self.argv() + ["-t", "-q"], capture_output=True, text=True)
        if r.returncode != 0:
            raise StartError(f"nginx refused {self.conf}: {r.stderr.strip()}")
        self._spawn(self.argv(), dict(os.environ))
        self.wait_ready(lambda: get(self.port, "/healthz")[0] == 200)

    def access_log(self):
        """Parsed access-log lines: request id -> (status, [upstreams tried])."""
        out = {}
        pat = re.compile(r'^\S+ (\S+) \S+ "[^"]*" (\d+) upstream="([^"]*)"')
        for line in self.log.read_text(errors="replace").splitlines():
            m = pat.match(line)
            if m:
                ups = [u for u in re.split(r"[\s,]+", m.group(3)) if u and u != ":"]
                out[m.group(1)] = (int(m.group(2)), m.group(3), ups)
        return out


class Stack:
    """Everything compose starts, on 127.0.0.1. `fixed_ports`: the ports of the .env file
    (nginx on SAGENTS_PORT, the replicas on the next two, the provider on
    SAGENTS_PROVIDER_PORT); otherwise free ones, so a test can run next to anything."""

    def __init__(self, work, bin_dir, fixed_ports):
        self.work = work
        self.bin_dir = bin_dir
        self.env_path = env_file()
        self.cfg = read_env(self.env_path)
        if self.env_path.name == ".env.example":
            self.cfg = throwaway_secrets(self.cfg)
        need = ("POSTGRES_USER", "POSTGRES_PASSWORD", "POSTGRES_DB", "SAGENTS_GRANT_SECRET",
                "SAGENTS_PROVIDER_TOKEN", "SAGENTS_SECRET_KEY")
        missing = [k for k in need if not self.cfg.get(k)]
        if missing:
            raise StartError(f"{self.env_path} does not set {', '.join(missing)}")
        (work / "logs").mkdir(exist_ok=True)
        self.secrets = work / "secrets"
        self.secrets.mkdir(mode=0o700)
        if fixed_ports:
            base = int(self.cfg.get("SAGENTS_PORT", "8080"))
            ports = {"nginx": base, "a": base + 1, "b": base + 2,
                     "provider": int(self.cfg.get("SAGENTS_PROVIDER_PORT", "9100"))}
            busy = [f"{k} {p}" for k, p in ports.items() if not port_free(p)]
            if busy:
                raise StartError(f"ports in use: {', '.join(busy)} (set SAGENTS_PORT / SAGENTS_PROVIDER_PORT)")
        else:
            ports = {k: free_port() for k in ("nginx", "a", "b", "provider")}
        self.ports = ports
        self.pg = Postgres(work)
        self.provider = Provider(work, bin_dir, self.cfg["SAGENTS_PROVIDER_TOKEN"], self.cfg["SAGENTS_GRANT_SECRET"],
                                 port=ports["provider"], secret_dir=self.secrets,
                                 log_level=self.cfg.get("RUST_LOG", "info"),
                                 env={"SAGENTS_PROVIDER_ISOLATION": self.cfg.get("SAGENTS_PROVIDER_ISOLATION",
                                                                                 "namespaces")})
        self.replicas = {}
        self.nginx = None
        self.tokens = {}
        self.env = None

    def sagents(self, *args, timeout=120):
        r = subprocess.run([str(self.bin_dir / "sagents"), *args], env=self.env, capture_output=True,
                           text=True, timeout=timeout)
        if r.returncode != 0:
            raise StartError(f"sagents {' '.join(args)} failed: {r.stderr.strip()[-2000:]}")
        return r.stdout.strip()

    def replica(self, name):
        return self.replicas[name]

    def start(self, tenant="acme"):
        t0 = time.monotonic()
        self.pg.start()
        c = self.cfg
        url = self.pg.create_database(c["POSTGRES_USER"], c["POSTGRES_PASSWORD"], c["POSTGRES_DB"])
        self.env = dict(os.environ, SAGENTS_DATABASE_URL=url, SAGENTS_GRANT_SECRET=c["SAGENTS_GRANT_SECRET"],
                        SAGENTS_SECRET_KEY=c["SAGENTS_SECRET_KEY"], RUST_LOG=c.get("RUST_LOG", "info"), **REPLICA_ENV)
        self.sagents("migrate")
        self.tokens = {"admin": self.sagents("token", "create", "--role", "admin"),
                       "metrics": self.sagents("token", "create", "--role", "metrics"),
                       "frontend": self.sagents("token", "create", "--role", "frontend", "--tenant", tenant),
                       "runtime": self.sagents("token", "create", "--role", "runtime", "--tenant", tenant)}
        self.provider.start()
        for name in ("a", "b"):
            r = Replica(name, self.work, self.bin_dir, dict(self.env, HOSTNAME=f"sagents-{name}"), [],
                        port=self.ports[name])
            self.replicas[name] = r
            r.start()
        self.sagents("provider", "register", "--id", "local", "--url", self.provider.url,
                     "--token-file", str(self.secrets / "provider-token"))
        self.nginx = Nginx(self.work, self.ports["nginx"],
                           [f"127.0.0.1:{self.ports['a']}", f"127.0.0.1:{self.ports['b']}"])
        self.nginx.start()
        return time.monotonic() - t0

    def upstream(self, name):
        return f"127.0.0.1:{self.ports[name]}"

    def stop(self):
        for m in [self.nginx, *self.replicas.values(), self.provider]:
            if m is not None:
                try:
                    m.stop()
                except Exception:
                    pass
        self.pg.stop()
