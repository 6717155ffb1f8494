# A service for scripts: the debug `sagents` on a free loopback port with a throwaway SQLite
# database. `service_start TENANT` sets SERVICE_URL, SERVICE_ROOT, SERVICE_LOG, FRONT and
# RUNTIME (tokens for TENANT) and stops the service and removes its folder on exit.
# Needs pg.sh (free_port) sourced first.
service_start() {
  local tenant=$1 bin="${CARGO_TARGET_DIR:-target}/debug/sagents" port
  cargo build --quiet --bin sagents
  SERVICE_ROOT=$(mktemp -d)
  SERVICE_LOG=$SERVICE_ROOT/serve.log
  port=$(free_port)
  export SAGENTS_DATABASE_URL="sqlite://$SERVICE_ROOT/sagents.db"
  "$bin" migrate >/dev/null 2>&1
  FRONT=$("$bin" token create --role frontend --tenant "$tenant")
  RUNTIME=$("$bin" token create --role runtime --tenant "$tenant")
  SAGENTS_LISTEN="127.0.0.1:$port" "$bin" serve >"$SERVICE_LOG" 2>&1 &
  SERVICE_PID=$!
  trap 'kill $SERVICE_PID 2>/dev/null || true; wait $SERVICE_PID 2>/dev/null || true; rm -rf "$SERVICE_ROOT"' EXIT
  SERVICE_URL="http://127.0.0.1:$port"
  for _ in $(seq 200); do
    curl -fsS "$SERVICE_URL/healthz" >/dev/null 2>&1 && return 0
    sleep 0.05
  done
  echo "the service did not start; its log:" >&2
  tail -n 50 "$SERVICE_LOG" >&2
  return 1
}
