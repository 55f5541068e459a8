# Sourced by the test and bench scripts: a throwaway redis-server on a free loopback port, with
# its files in a temporary directory, killed when the script exits. Never a system service.
#   start_throwaway_redis   sets REDIS_URL (redis://127.0.0.1:PORT)

start_throwaway_redis() {
  local dir port
  dir="$(mktemp -d -t redlock-redis-XXXXXX)"
  port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
  redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --dir "$dir" \
    >"$dir/redis.log" 2>&1 &
  THROWAWAY_REDIS_PID=$!
  THROWAWAY_REDIS_DIR="$dir"
  trap stop_throwaway_redis EXIT
  for _ in $(seq 1 200); do
    if redis-cli -p "$port" ping >/dev/null 2>&1; then
      REDIS_URL="redis://127.0.0.1:$port"
      return 0
    fi
    sleep 0.05
  done
  echo "redis-server did not start on port $port:" >&2
  cat "$dir/redis.log" >&2
  return 1
}

stop_throwaway_redis() {
  if [ -n "${THROWAWAY_REDIS_PID:-}" ]; then
    kill -9 "$THROWAWAY_REDIS_PID" 2>/dev/null || true
    wait "$THROWAWAY_REDIS_PID" 2>/dev/null || true
    THROWAWAY_REDIS_PID=""
  fi
  if [ -n "${THROWAWAY_REDIS_DIR:-}" ]; then
    rm -rf "$THROWAWAY_REDIS_DIR"
    THROWAWAY_REDIS_DIR=""
  fi
}
