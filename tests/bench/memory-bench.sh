#!/bin/bash
# Memory: context-loader's RSS idle after start, after a warm-up,
# with 1,000 and 10,000 open idle keep-alive connections (each answered one request),
# and its growth over a soak of SOAK_SECONDS (default 600) under load (wrk, 8 REST
# + 8 MCP connections of the gateway benchmark request; RSS sampled ten times).
# Not part of scripts/test.
# Usage: tests/bench/memory-bench.sh [BUILD_DIR]  (default build-bench, RelWithDebInfo)
#   SOAK_SECONDS=600 NO_BUILD=1
set -eu
. "$(dirname "$0")/gateway/common.sh"
BUILD=${1:-$ROOT/build-bench}
SOAK_SECONDS=${SOAK_SECONDS:-600}

bench_install wrk nginx curl nodejs
[ -n "${NO_BUILD:-}" ] || bench_build "$BUILD"
# 10,000 connections need as many descriptors in the server and in the client.
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
nofile=$(ulimit -n)
bench_work

start_sim disabled
capture_canned
start_upstream
# idle connections must outlive the benchmark: the default idle timeout is 30 s
start_gateway CL_LIMITS_IDLE_TIMEOUT_S=3600
sleep 1
kb() { awk -v k="$1" 'BEGIN { printf "%.1f MB", k / 1024 }'; }
idle=$(rss_kb "$GW_PID")
echo "== RSS of context-loader (pid $GW_PID)"
printf '%-44s %s\n' "idle after start" "$(kb "$idle")"

mcp_session
printf '%s' "$REST_ARGS" >"$WORK/rest.json"
mcp_call_body "$REST_ARGS" >"$WORK/mcp.json"
AUTH="authorization: Bearer $TOKEN"
MCPH="$AUTH|accept: $MCP_ACCEPT|mcp-session-id: $SID"
for _ in $(seq 20); do
  curl -sf -o /dev/null -X POST "$GW$PREFIX/kn/query_object_instance" -H "$AUTH" \
    -H 'content-type: application/json' --data-binary @"$WORK/rest.json"
done
warm=$(rss_kb "$GW_PID")
printf '%-44s %s\n' "after 20 requests" "$(kb "$warm")"

conns() { # n
  before=$(rss_kb "$GW_PID")
  HOLD_S=120 node "$BENCH_DIR/idle-conns.mjs" "$GW_PORT" "$1" >"$WORK/idle.out" 2>"$WORK/idle.err" &
  cpid=$!; BENCH_PIDS="$BENCH_PIDS $cpid"
  i=0
  until grep -q '^ready' "$WORK/idle.out"; do
    if ! kill -0 "$cpid" 2>/dev/null || [ $i -ge 1200 ]; then
      printf '%-44s %s\n' "$1 idle connections" "FAILED: $(cat "$WORK/idle.err")"; bench_stop "$cpid"; return 0
    fi
    i=$((i + 1)); sleep 0.05
  done
  sleep 1
  r=$(rss_kb "$GW_PID")
  printf '%-44s %s (+%s, %.1f kB per connection)\n' "$1 idle connections" "$(kb "$r")" \
    "$(kb $((r - before)))" "$(awk -v a="$r" -v b="$before" -v n="$1" 'BEGIN { print (a - b) / n }')"
  bench_stop "$cpid"
  sleep 1
}
conns 1000
if [ "$nofile" -ge 10200 ]; then
  conns 10000
else
  printf '%-44s %s\n' "10000 idle connections" "skipped: open-file limit is $nofile (needs 10200)"
fi
# the server drops its records of closed connections once a second and then hands
# the freed heap back to the kernel: give it three sweeps
sleep 3
after=$(rss_kb "$GW_PID")
printf '%-44s %s\n' "3 s after the connections closed" "$(kb "$after")"

# ---- soak, on a fresh server: the heap the idle connections grew is kept by malloc
bench_stop "$GW_PID"
start_gateway
mcp_session
MCPH="$AUTH|accept: $MCP_ACCEPT|mcp-session-id: $SID"
for _ in $(seq 20); do
  curl -sf -o /dev/null -X POST "$GW$PREFIX/kn/query_object_instance" -H "$AUTH" \
    -H 'content-type: application/json' --data-binary @"$WORK/rest.json"
done
warm=$(rss_kb "$GW_PID")
echo
echo "== soak: $SOAK_SECONDS s, wrk 8 REST + 8 MCP connections, fresh server (RSS $(kb "$warm") after 20 requests)"
WRK_BODY_FILE=$WORK/rest.json WRK_HEADERS=$AUTH wrk -t1 -c8 -d"${SOAK_SECONDS}s" --timeout 10s \
  -s "$BENCH_DIR/wrk-post.lua" "$GW$PREFIX/kn/query_object_instance" >"$WORK/soak-rest.out" &
w1=$!; BENCH_PIDS="$BENCH_PIDS $w1"
WRK_BODY_FILE=$WORK/mcp.json WRK_HEADERS=$MCPH wrk -t1 -c8 -d"${SOAK_SECONDS}s" --timeout 10s \
  -s "$BENCH_DIR/wrk-post.lua" "$GW$PREFIX/mcp" >"$WORK/soak-mcp.out" &
w2=$!; BENCH_PIDS="$BENCH_PIDS $w2"
step=$(( SOAK_SECONDS / 10 )); [ "$step" -ge 1 ] || step=1
t=0; first=; last=
while [ $t -lt "$SOAK_SECONDS" ]; do
  sleep "$step"; t=$((t + step))
  r=$(rss_kb "$GW_PID"); [ -n "$first" ] || first=$r; last=$r
  printf '  t=%5ss RSS %s\n' "$t" "$(kb "$r")"
done
wait "$w1" "$w2" 2>/dev/null || true
reqs=$(awk '/^WRK / {s += $5} END {print s + 0}' "$WORK/soak-rest.out" "$WORK/soak-mcp.out")
errs=$(awk '/^WRK / {s += $6 + $7} END {print s + 0}' "$WORK/soak-rest.out" "$WORK/soak-mcp.out")
sleep 1
end=$(rss_kb "$GW_PID")
printf 'requests %s (errors or non-2xx %s); RSS at the first sample %s, at the last %s, growth %s (%s from the fresh server after 20 requests); idle after the soak %s\n' \
  "$reqs" "$errs" "$(kb "$first")" "$(kb "$last")" "$(kb $((last - first)))" "$(kb $((last - warm)))" "$(kb "$end")"
