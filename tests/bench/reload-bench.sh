#!/bin/sh
# Reload benchmark: time of POST /admin/reload for the shipped tools dir
# and for 200 generated tools. Prints, per directory, the server-side build+swap time
# (duration_ms of /admin/tools) and the client-side round trip (curl), as min/median/max
# over RUNS reloads. Target: under 100 ms for 200 tools. Not part of scripts/test.
# Usage: tests/bench/reload-bench.sh [BUILD_DIR] (default build); RUNS=20.
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build}
bin=$build/context-loader
runs=${RUNS:-20}
[ -x "$bin" ] || { echo "reload-bench: build $bin first" >&2; exit 1; }
command -v curl >/dev/null || { echo "reload-bench: needs curl" >&2; exit 1; }
work=$(mktemp -d /tmp/cl-bench.XXXXXX)
pid=
cleanup() {
  if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT INT TERM
sh "$root/tests/bench/gen-tools.sh" "$work/tools200" 200

stats() { # reads numbers, prints min/median/max
  sort -n | awk '{v[NR]=$1} END {printf "min %.1f  median %.1f  max %.1f ms", v[1], v[int((NR+1)/2)], v[NR]}'
}

bench() { # label tools_dir
  log=$work/server.log
  CL_LISTEN=127.0.0.1:0 CL_ADMIN_LISTEN=127.0.0.1:0 CL_TOOLS_DIR=$2 CL_LUA_DIR=$root/lua CL_ACCESS_LOG=false \
    "$bin" --config "$root/etc/context-loader.conf" 2>"$log" &
  pid=$!
  i=0
  until grep -q '"listener":"admin"' "$log"; do
    i=$((i + 1)); [ $i -lt 200 ] || { cat "$log" >&2; exit 1; }; sleep 0.05
  done
  port=$(grep '"listener":"admin"' "$log" | sed 's/.*"port":\([0-9]*\).*/\1/')
  ntools=$(curl -s "http://127.0.0.1:$port/admin/tools" | grep -o '"sha256"' | wc -l)
  : > "$work/server_ms"; : > "$work/client_ms"
  r=0
  while [ $r -lt "$runs" ]; do
    t=$(curl -s -o /dev/null -w '%{time_total}' -X POST "http://127.0.0.1:$port/admin/reload")
    echo "$t" | awk '{print $1 * 1000}' >> "$work/client_ms"
    curl -s "http://127.0.0.1:$port/admin/tools" | grep -o '"duration_ms":[0-9]*' | sed 's/.*://' >> "$work/server_ms"
    r=$((r + 1))
  done
  rss=$(awk '/VmRSS/ {print $2}' "/proc/$pid/status")
  printf '%-10s %3d tools  reload (server) %s | round trip %s | RSS %s kB\n' "$1" "$ntools" \
    "$(stats < "$work/server_ms")" "$(stats < "$work/client_ms")" "$rss"
  kill "$pid"; wait "$pid" 2>/dev/null || true; pid=
}

bench shipped "$root/tools"
bench generated "$work/tools200"
