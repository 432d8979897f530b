#!/bin/bash
# Gateway vs peers and the cost of tracing. Not part of
# scripts/test. One run, wrk at 1, 16 and 256 connections, DURATION seconds each
# (default 10), against:
#   (u) the canned upstream itself (nginx serving the simulator's captured
#       ontology-query response to the benchmark request) - the baseline;
#   (a) context-loader: ad hoc REST POST /kn/query_object_instance (10 rows, JSON);
#   (b) context-loader: the same call over MCP tools/call in a session (capture
#       disabled, so no bkn_context);
#   (c) nginx proxying the same request to the same upstream;
#   (d) nginx + Lua (libnginx-mod-http-lua, lua-cjson) doing the tool's work.
# Then: (m) the managed MCP call (capture enabled, bkn_context of a started
# interaction: an Operation ensured, the tool run, the attempt completed with a
# receipt) against the same ad hoc call (b), at every connection count. Trace Core is
# a canned stand-in serving the simulator's answers to one managed call, captured once
# by gateway/trace-capture.mjs: gateway/trace-standin.c (one thread, epoll, the answers
# in memory, pipelined requests answered with one send; compiled into the work
# directory at the start) or, with TRACE_STANDIN=nginx, nginx (gateway/trace-core.conf),
# so the gateway, not the Node simulator, is what the (m) rows measure.
# Prints requests/s, p50/p99, latency added over (u), the server's CPU time (user +
# system, its processes and their children) per request, how busy the machine's cores
# were during the cell, the canned upstream's (and, for (m), the canned Trace Core's)
# CPU per call beside the gateway's, the ratios, the CPU per call of the managed and
# the ad hoc MCP call with both stand-ins and wrk counted, and a diff showing
# that (d) corrupts the 64-bit ids and empty arrays that (a) keeps exact.
# Each (m) cell is paired with an ad hoc (b) cell run just before it, PAIRS times (default
# 3): the ratios and the per-call totals use the pair of median ratio; every pair is listed.
# Usage: tests/bench/gateway-bench.sh [BUILD_DIR]   (default build-bench, RelWithDebInfo)
#   DURATION=10 CONNS="1 16 256" NO_BUILD=1 (use BUILD_DIR as it is)
#   WORKERS=N: the gateway runs N worker processes (config key workers; N > 1 starts
#   a redis-server for the shared state store)
#   TRACE_STANDIN=nginx: Trace Core answered by nginx instead of the C stand-in
set -eu
. "$(dirname "$0")/gateway/common.sh"
BUILD=${1:-$ROOT/build-bench}
DURATION=${DURATION:-10}
CONNS=${CONNS:-1 16 256}

bench_install wrk nginx libnginx-mod-http-lua lua-cjson curl nodejs
[ -n "${NO_BUILD:-}" ] || bench_build "$BUILD"
ulimit -n 65536 2>/dev/null || ulimit -n 4096 2>/dev/null || true
bench_work

start_sim disabled
capture_canned
start_upstream
start_trace_core
start_peers
start_gateway CL_TRACE_CORE_CAPTURE_POLICY_TTL_S=1 BKN_TRACE_CORE_URL="$TRACE_CORE"
mcp_session

printf '%s' "$REST_ARGS" >"$WORK/rest.json"
mcp_call_body "$REST_ARGS" >"$WORK/mcp.json"
printf '{"limit":10,"sort":[{"field":"drug_id","direction":"desc"}],"need_total":true}' >"$WORK/upstream.json"
AUTH="authorization: Bearer $TOKEN"
MCPH="$AUTH|accept: $MCP_ACCEPT|mcp-session-id: $SID"

U_URL="$UPSTREAM$OQ_PATH?include_type_info=false&include_logic_params=false"
A_URL="$GW$PREFIX/kn/query_object_instance"
B_URL="$GW$PREFIX/mcp"
C_URL="http://127.0.0.1:$PROXY_PORT/"
D_URL="http://127.0.0.1:$LUA_PORT/"

post() { # url body-file headers(|-separated)
  hdr=()
  IFS='|' read -r -a hs <<<"$3"
  for h in "${hs[@]}"; do [ -n "$h" ] && hdr+=(-H "$h"); done
  curl -s -X POST "$1" -H 'content-type: application/json' "${hdr[@]}" --data-binary @"$2"
}

# ---- correctness first: every target answers 200 with the rows
post "$U_URL" "$WORK/upstream.json" "" >"$WORK/out-u.json"
post "$A_URL" "$WORK/rest.json" "$AUTH" >"$WORK/out-a.json"
post "$B_URL" "$WORK/mcp.json" "$MCPH" >"$WORK/out-b.json"
post "$C_URL" "$WORK/upstream.json" "" >"$WORK/out-c.json"
post "$D_URL" "$WORK/rest.json" "" >"$WORK/out-d.json"
for t in u a b c d; do
  grep -q '阿司匹林肠溶片' "$WORK/out-$t.json" || { echo "target $t gave:" >&2; head -c 600 "$WORK/out-$t.json" >&2; exit 1; }
done
cmp -s "$WORK/canned.json" "$WORK/out-c.json" || { echo "(c) does not pass the body through" >&2; exit 1; }

first_row() { # file: the first drug_id, batch_no, tags and ext (key order may differ)
  for f in drug_id batch_no tags ext; do
    grep -o "\"$f\":[^,]*" "$1" | head -1 | sed 's/^\("tags":\[[^]]*\]\).*/\1/; s/^\("ext":{}\).*/\1/' | tr '\n' ' '
  done
}
echo "== Fidelity: first row, upstream vs gateway (a) vs nginx+Lua (d)"
echo "upstream : $(first_row "$WORK/canned.json")"
echo "gateway  : $(first_row "$WORK/out-a.json")"
echo "nginx+Lua: $(first_row "$WORK/out-d.json")"
diff <(tr ',' '\n' <"$WORK/out-a.json" | grep -E '"(drug_id|batch_no|tags|ext|_instance_identity)"' | head -6) \
  <(tr ',' '\n' <"$WORK/out-d.json" | grep -E '"(drug_id|batch_no|tags|ext|_instance_identity)"' | head -6) |
  sed 's/^/  /' || true
grep -q '"drug_id":9007199254740993,.*"batch_no":12345678901234567890123,"tags":\[\],"ext":{}' "$WORK/out-a.json" ||
  { echo "gateway (a) changed the row" >&2; exit 1; }
if grep -q '"drug_id":9007199254740993' "$WORK/out-d.json"; then d_exact=yes; else d_exact=no; fi
echo "gateway keeps ids and [] exact: yes; nginx+Lua: $d_exact"
echo

RES=$WORK/results.txt; : >"$RES"
# CPU time (user + system, clock ticks) of a server: its process and its children
# (nginx's workers). Per request it is what bounds a saturated single worker, and it
# moves less with the machine's load than requests/s do.
cpu_ticks() { # pid
  for p in $1 $(pgrep -P "$1" 2>/dev/null); do
    awk '{ sub(/^.*\) /, ""); print $12 + $13 }' "/proc/$p/stat" 2>/dev/null || echo 0
  done | awk '{ s += $1 } END { print s + 0 }'
}
server_pid() { # target label
  case $1 in u) echo "$UPSTREAM_PID" ;; a | b | m) echo "$GW_PID" ;; *) echo "$PEERS_PID" ;; esac
}
HZ=$(getconf CLK_TCK)
# The whole machine's busy and total ticks (all cores): a cell whose machine was not
# near 100% busy was not bounded by CPU (or something else ran beside it).
machine_ticks() { awk '/^cpu / { t = 0; for (i = 2; i <= NF; i++) t += $i; print t - $5 - $6, t }' /proc/stat; }
# The gateway's cells also count the canned upstream's CPU (it serves every one of
# their calls) and the managed cells the canned Trace Core's: what a call costs the
# machine beside the gateway.
run_wrk() { # label conns url body headers
  t=1; [ "$2" -gt 1 ] && t=2
  sp=$(server_pid "$1"); t0=$(cpu_ticks "$sp")
  u0=$(cpu_ticks "$UPSTREAM_PID"); c0=$(cpu_ticks "$TRACE_PID"); set -- "$@" $(machine_ticks)
  # `times` after wrk, in the same subshell: its last line is wrk's CPU (user, system)
  out=$(WRK_BODY_FILE=$4 WRK_HEADERS=$5 wrk -t"$t" -c"$2" -d"${DURATION}s" --timeout 10s \
    -s "$BENCH_DIR/wrk-post.lua" "$3" || true; times)
  line=$(printf '%s\n' "$out" | grep '^WRK ' || true)
  wrk_us=$(printf '%s\n' "$out" | tail -1 | awk '{ s = 0
    for (i = 1; i <= 2; i++) { split($i, a, "m"); sub(/s$/, "", a[2]); s += a[1] * 60 + a[2] }
    printf "%d", s * 1e6 }')
  t1=$(cpu_ticks "$sp"); u1=$(cpu_ticks "$UPSTREAM_PID"); c1=$(cpu_ticks "$TRACE_PID")
  set -- "$@" $(machine_ticks)
  [ -n "$line" ] || line="WRK 0 0 0 0 1 0"
  up=-1; tc=-1
  case $1 in a | b | m) up=$((u1 - u0)) ;; esac
  [ "$1" != m ] || tc=$((c1 - c0))
  echo "$1 $2 ${line#WRK } $((t1 - t0)) $(( (${8} - ${6}) * 100 / (${9} - ${7} + 1) )) $up $tc $wrk_us" >>"$RES"
}
warm() { WRK_BODY_FILE=$3 WRK_HEADERS=$4 wrk -t2 -c16 -d2s -s "$BENCH_DIR/wrk-post.lua" "$2" >/dev/null; }
warm u "$U_URL" "$WORK/upstream.json" ""
warm a "$A_URL" "$WORK/rest.json" "$AUTH"
warm b "$B_URL" "$WORK/mcp.json" "$MCPH"
warm c "$C_URL" "$WORK/upstream.json" ""
warm d "$D_URL" "$WORK/rest.json" ""

for c in $CONNS; do
  run_wrk u "$c" "$U_URL" "$WORK/upstream.json" ""
  run_wrk a "$c" "$A_URL" "$WORK/rest.json" "$AUTH"
  run_wrk b "$c" "$B_URL" "$WORK/mcp.json" "$MCPH"
  run_wrk c "$c" "$C_URL" "$WORK/upstream.json" ""
  run_wrk d "$c" "$D_URL" "$WORK/rest.json" ""
done

# ---- tracing: switch the canned Trace Core's capture policy to enabled; the gateway
# re-reads the policy within a second (CL_TRACE_CORE_CAPTURE_POLICY_TTL_S=1).
trace_core_capture enabled
sleep 2
post "$B_URL" "$WORK/mcp.json" "$MCPH" >"$WORK/out-refused.json"
grep -q 'bkn_start_interaction' "$WORK/out-refused.json" ||
  { echo "capture enabled, but an MCP call without bkn_context was not refused:" >&2; head -c 400 "$WORK/out-refused.json" >&2; exit 1; }
# Every managed call names the captured interaction: the canned Trace Core answers it
# as often as asked (the simulator allows 128 operations per interaction).
cp "$WORK/tc/managed.json" "$WORK/managed.json"
post "$B_URL" "$WORK/managed.json" "$MCPH" >"$WORK/out-m.json"
grep -q 'bkn_receipt' "$WORK/out-m.json" && grep -q '"drug_id":9007199254740993' "$WORK/out-m.json" ||
  { echo "managed call has no receipt or rows:" >&2; head -c 600 "$WORK/out-m.json" >&2; exit 1; }
warm m "$B_URL" "$WORK/managed.json" "$MCPH"
# Each managed cell runs right after an ad hoc cell (b) at the same connection count
# (capture switched off and on around it; the gateway re-reads the policy within a
# second), and that later (b) cell is the one the report pairs with it: a slow minute of
# the machine weighs on both cells of the ratio alike. PAIRS such pairs run in turn
# (default 3) and the report takes the pair whose ratio is the median, printing every
# pair's; so one cell that something outside the bench slowed moves neither the ratio
# nor the cells shown. PAIRS=0 keeps the (b) cells of the first pass.
PAIRS=${PAIRS:-3}
MAIN_RES=$RES
for c in $CONNS; do
  : >"$WORK/pairs-$c.txt"
  if [ "$PAIRS" -ge 1 ]; then
    for k in $(seq "$PAIRS"); do
      trace_core_capture disabled
      sleep 2
      RES=$WORK/pair-b.txt; : >"$RES"
      run_wrk b "$c" "$B_URL" "$WORK/mcp.json" "$MCPH"
      trace_core_capture enabled
      sleep 2
      RES=$WORK/pair-m.txt; : >"$RES"
      run_wrk m "$c" "$B_URL" "$WORK/managed.json" "$MCPH"
      awk -v k="$k" 'NR == FNR { b = $0; brps = $3; next }
        { printf "%.4f|%d|%s|%s\n", (brps > 0 ? $3 / brps : 0), k, b, $0 }' \
        "$WORK/pair-b.txt" "$WORK/pair-m.txt" >>"$WORK/pairs-$c.txt"
    done
    RES=$MAIN_RES
    sort -t'|' -k1,1n "$WORK/pairs-$c.txt" | awk -F'|' -v n="$PAIRS" 'NR == int((n + 1) / 2) { print $3; print $4 }' >>"$RES"
  else
    run_wrk m "$c" "$B_URL" "$WORK/managed.json" "$MCPH"
  fi
done

# ---- report
awk -v dur="$DURATION" -v nproc="$(nproc)" -v workers="${WORKERS:-1}" -v hz="$HZ" '
  { rps[$1","$2] = $3; p50[$1","$2] = $4 / 1000; p99[$1","$2] = $5 / 1000; err[$1","$2] = $7 + $8
    cpu[$1","$2] = $6 > 0 ? $9 * 1e6 / hz / $6 : 0; busy[$1","$2] = NF >= 10 ? $10 "%" : "-"
    if (NF >= 12 && $6 > 0) {
      if ($11 >= 0) upc[$1","$2] = $11 * 1e6 / hz / $6
      if ($12 >= 0) tcc[$1","$2] = $12 * 1e6 / hz / $6
    }
    if (NF >= 13 && $6 > 0) wrkc[$1","$2] = $13 / $6
    if (!($2 in seen)) { seen[$2] = 1; order[++n] = $2 } }
  END {
    name["u"] = "(u) canned upstream (nginx)"; name["a"] = "(a) gateway REST ad hoc"
    name["b"] = "(b) gateway MCP ad hoc"; name["c"] = "(c) nginx proxy"
    name["d"] = "(d) nginx + Lua + cjson"; name["m"] = "(m) gateway MCP managed"
    printf "== wrk, %d s per cell, %d cores shared by wrk, nginx and the gateway (%s worker(s))\n", dur, nproc, workers
    printf "%-5s %-30s %10s %9s %9s %10s %10s %7s %8s %6s %7s %7s\n", "conns", "target", "req/s", "p50 ms", "p99 ms", "+p50 ms", "+p99 ms", "failed", "cpu us", "busy", "up us", "tc us"
    for (i = 1; i <= n; i++) {
      c = order[i]
      split("u a b c d m", ts, " ")
      for (j = 1; j <= 6; j++) {
        t = ts[j]; k = t "," c
        if (!(k in rps)) continue
        printf "%-5s %-30s %10.0f %9.3f %9.3f %10s %10s %7d %8.1f %6s %7s %7s\n", c, name[t], rps[k], p50[k], p99[k],
          t == "u" ? "-" : sprintf("%.3f", p50[k] - p50["u," c]),
          t == "u" ? "-" : sprintf("%.3f", p99[k] - p99["u," c]), err[k], cpu[k], busy[k],
          (k in upc) ? sprintf("%.1f", upc[k]) : "-", (k in tcc) ? sprintf("%.1f", tcc[k]) : "-"
      }
    }
    print ""
    print "== Ratios (throughput)"
    printf "%-5s %12s %12s %12s %14s %16s\n", "conns", "(a)/(d)", "(a)/(c)", "(b)/(a)", "managed/(b)", "cpu (c)/(a)"
    for (i = 1; i <= n; i++) {
      c = order[i]
      printf "%-5s %12s %12s %12s %14s %16s\n", c,
        rps["d," c] ? sprintf("%.2fx", rps["a," c] / rps["d," c]) : "-",
        rps["c," c] ? sprintf("%.2fx", rps["a," c] / rps["c," c]) : "-",
        rps["a," c] ? sprintf("%.2fx", rps["b," c] / rps["a," c]) : "-",
        (("m," c) in rps) && rps["b," c] ? sprintf("%.2fx", rps["m," c] / rps["b," c]) : "-",
        cpu["a," c] && cpu["c," c] ? sprintf("%.2fx", cpu["c," c] / cpu["a," c]) : "-"
    }
    print ""
    print "== Tracing cost (managed MCP call, two round trips to the canned Trace Core, vs the same ad hoc call)"
    for (i = 1; i <= n; i++) {
      c = order[i]; k = "m," c
      if (!(k in rps)) continue
      printf "%-5s managed %8.0f req/s p50 %.3f ms p99 %.3f ms | ad hoc %8.0f req/s p50 %.3f ms | +p50 %.3f ms%s\n",
        c, rps[k], p50[k], p99[k], rps["b," c], p50["b," c], p50[k] - p50["b," c],
        err[k] ? sprintf("  INVALID: %d calls failed", err[k]) : ""
    }
    print ""
    print "== CPU per call, us (user + system): gateway + canned upstream + canned Trace Core + wrk; ad hoc/managed"
    print "   is the requests/s ratio the cores allow when they are the bound (busy near 100%)"
    for (i = 1; i <= n; i++) {
      c = order[i]; k = "m," c
      if (!(k in rps) || !(k in upc) || !(("b," c) in upc)) continue
      tb = cpu["b," c] + upc["b," c] + wrkc["b," c]; tm = cpu[k] + upc[k] + tcc[k] + wrkc[k]
      printf "%-5s managed %.1f (gateway %.1f, upstream %.1f, Trace Core %.1f, wrk %.1f) | ad hoc %.1f (gateway %.1f, upstream %.1f, wrk %.1f) | ad hoc/managed %.2fx\n",
        c, tm, cpu[k], upc[k], tcc[k], wrkc[k], tb, cpu["b," c], upc["b," c], wrkc["b," c], tm ? tb / tm : 0
    }
  }' "$RES"
if [ "$PAIRS" -ge 1 ]; then
  echo
  echo "== managed/(b) of every pair, in the order run (each: (m) req/s / (b) req/s; the cells above are the median pair's)"
  for c in $CONNS; do
    awk -F'|' -v c="$c" '{ split($3, b, " "); split($4, m, " ")
        s = s sprintf("%s%.2fx (%.0f / %.0f)", NR > 1 ? ", " : "", $1, m[3], b[3]) }
      END { printf "%-5s %s\n", c, s }' "$WORK/pairs-$c.txt"
  done
fi
if [ -n "${RESULTS_FILE:-}" ]; then cp "$RES" "$RESULTS_FILE"; fi
