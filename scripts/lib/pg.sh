# For scripts: a throwaway PostgreSQL cluster (pg_start DIR PORT [SERVER OPTION...], pg_stop
# DIR; for benchmarks, its write-ahead log warmed: pg_warm_wal URL, pg_recycle_wal URL), a free
# loopback port (free_port) and waiting for a server (wait_ready PORT PATH [SECONDS]).
# initdb refuses root, so the cluster runs as the `postgres` user when we are root.
pg_bin() {
  local d
  for d in /usr/lib/postgresql/*/bin; do
    [ -x "$d/initdb" ] && { echo "$d"; return; }
  done
  dirname "$(command -v initdb)"
}

as_pg() {
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

pg_start() {
  local dir=$1 port=$2 bin
  shift 2
  bin=$(pg_bin)
  mkdir -p "$dir"
  [ "$(id -u)" = 0 ] && chown postgres "$dir"
  as_pg "$bin/initdb" -D "$dir/data" -U postgres -A trust >/dev/null
  as_pg "$bin/pg_ctl" -D "$dir/data" -l "$dir/log" -w start \
    -o "-p $port -k $dir -c listen_addresses=127.0.0.1 -c max_connections=300 -c shared_buffers=256MB $*" >/dev/null
}

# pg_warm_wal URL: the cluster's write-ahead log made ready as a running cluster's is. A running
# cluster writes into segments its checkpoints recycled; a fresh one creates and zero-fills a
# new 16 MB segment every few seconds under load, and every commit waits 40-50 ms for it.
# Writes about 128 MB of log, then checkpoints, which recycles those segments.
pg_warm_wal() {
  psql -q "$1" -c "CREATE TABLE wal_warmup AS SELECT g, repeat('x', 200) AS pad FROM generate_series(1, 500000) g" \
    -c "DROP TABLE wal_warmup" -c "CHECKPOINT"
}

# pg_recycle_wal URL: before a measured run, the segments written since the last checkpoint
# recycled (as pg_warm_wal's were).
pg_recycle_wal() {
  psql -q "$1" -c "CHECKPOINT"
}

pg_stop() {
  local dir=$1
  as_pg "$(pg_bin)/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null 2>&1 || true
}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# Waits until http://127.0.0.1:PORT/PATH answers 2xx, SECONDS at most (30); exits if it does not.
wait_ready() {
  local tries=$((${3:-30} * 20))
  for _ in $(seq "$tries"); do
    curl -fsS "http://127.0.0.1:$1$2" >/dev/null 2>&1 && return 0
    sleep 0.05
  done
  echo "server on port $1 did not become ready" >&2
  exit 1
}
