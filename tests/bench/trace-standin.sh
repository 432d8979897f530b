#!/bin/bash
# The canned Trace Core stand-ins alone: gateway/trace-standin.c (the default of the
# gateway scripts) and nginx (TRACE_STANDIN=nginx, gateway/trace-core.conf), each
# started as start_trace_core starts it for gateway-bench.sh and driven by the same wrk
# command (CONNS connections, default 16, DURATION seconds, default 5) POSTing an
# operations:ensure body, one request at a time on each connection (gateway/wrk-post.lua)
# and, for each depth > 1 in DEPTHS (default "1 4"), that many requests written at once
# (pipelined, gateway/wrk-post.lua with WRK_DEPTH); prints req/s and the stand-in's CPU time
# (user + system, its process and children, from /proc) and its wake-ups (voluntary
# context switches: sleeps in epoll_wait) per request. wrk drives the stand-in alone
# here; inside a managed run it gets fewer requests per wake-up and costs more per
# request. First, gateway/trace-standin-check.mjs checks the C stand-in's HTTP handling
# (pipelined requests answered in order, a request split over writes, the refusals). No
# gateway involved. Not part of scripts/test.
# Usage: tests/bench/trace-standin.sh   (DURATION=5 CONNS=16 DEPTHS="1 4" RUNS=1)
set -eu
. "$(dirname "$0")/gateway/common.sh"
DURATION=${DURATION:-5}
CONNS=${CONNS:-16}
RUNS=${RUNS:-1}
DEPTHS=${DEPTHS:-1 4}

bench_install wrk nginx curl nodejs
bench_work
start_sim disabled
HZ=$(getconf CLK_TCK)
cpu_ticks() { # pid: user + system ticks of it and its children
  for p in $1 $(pgrep -P "$1" 2>/dev/null); do
    awk '{ sub(/^.*\) /, ""); print $12 + $13 }' "/proc/$p/stat" 2>/dev/null || echo 0
  done | awk '{ s += $1 } END { print s + 0 }'
}
wakeups() { # pid: voluntary context switches (sleeps in epoll_wait) of it and its children
  for p in $1 $(pgrep -P "$1" 2>/dev/null); do
    awk '/^voluntary_ctxt_switches/ { print $2 }' "/proc/$p/status" 2>/dev/null || echo 0
  done | awk '{ s += $1 } END { print s + 0 }'
}
# an operations:ensure body of the managed benchmark call's size
printf '%s' '{"operation_key":"op_bench","tool_name":"query_object_instance","protocol":"mcp","source_module":"context-loader","input":{"mode":"inline","media_type":"application/json","byte_length":131,"inline":{"kn_id":"kn_medical","ot_id":"ot_drug","limit":10,"sort":[{"field":"drug_id","direction":"desc"}],"response_format":"json"}},"required":true,"lease_token":"lease_0123456789abcdef0123456789abcdef","lease_epoch":1}' \
  >"$WORK/ensure-body.json"
ENSURE_PATH=/api/agent-observability/v1/conversations/conv_bench/interactions/int_bench/operations:ensure

for standin in c nginx; do
  TRACE_STANDIN=$standin start_trace_core
  [ "$standin" = nginx ] || node "$BENCH_DIR/trace-standin-check.mjs" "$TRACE_PORT" "$WORK/tc" >/dev/null
  curl -sf -X POST "$TRACE_CORE$ENSURE_PATH" --data-binary @"$WORK/ensure-body.json" | cmp -s - <(tr -d '\n' <"$WORK/tc/ensure.json") ||
    { echo "$standin: the ensure answer differs from the capture" >&2; exit 1; }
  for depth in $DEPTHS; do
    for run in $(seq "$RUNS"); do
      c0=$(cpu_ticks "$TRACE_PID"); w0=$(wakeups "$TRACE_PID")
      line=$(WRK_BODY_FILE=$WORK/ensure-body.json WRK_DEPTH=$depth wrk -t1 -c"$CONNS" -d"${DURATION}s" \
        -s "$BENCH_DIR/wrk-post.lua" "$TRACE_CORE$ENSURE_PATH" | grep '^WRK ')
      c1=$(cpu_ticks "$TRACE_PID"); w1=$(wakeups "$TRACE_PID")
      echo "$line" | awk -v s="$standin" -v d="$depth" -v r="$run" -v t=$((c1 - c0)) -v w=$((w1 - w0)) -v hz="$HZ" \
        '{ if ($6 + $7 > 0) { print s ": " $6 + $7 " failed requests" > "/dev/stderr"; exit 1 }
           printf "%-6s depth %d run %d: %9.0f req/s  %6.2f us CPU per request  %5.3f wake-ups per request  (%d requests)\n",
                  s, d, r, $2, t * 1e6 / hz / $5, w / $5, $5 }'
    done
  done
  bench_stop "$TRACE_PID"
done
