#!/bin/bash
# Instructions per request, stable on a noisy machine: runs
# context-loader under valgrind --tool=callgrind with collection on only inside
# event_base_loop (so start-up, tool loading and shutdown are excluded), sends a fixed
# mix - an MCP initialize, then N ad hoc REST reads and N MCP tools/call of the
# benchmark query_object_instance request, one at a time - against the canned upstream,
# and prints instructions per request and the top functions (callgrind_annotate).
# Then, on the same server (each phase's counts dumped apart): N ad hoc MCP calls
# alone, and N managed MCP calls (capture enabled on the simulated Trace Core, each
# call bound to a started interaction, recording an Operation and returning a
# receipt): the managed call's instructions, what it adds over the ad hoc one, and
# its Trace Core round trips (the simulator's request log); and the two lifecycle
# calls on their own: LC_N (default 20, at least one per 100 managed calls)
# bkn_start_interaction (conversation_mode new), then, after the managed calls, as
# many bkn_finish_interaction (outcome completed with an answer), each with its
# instructions and Trace Core round trips per call.
# Before the managed phase, the same ad hoc MCP call N times on an open session and N
# times in the stateless protocol era (no session), each counted apart, in
# ERA_ROUNDS phases per era (default 16, alternating which goes first), each after a
# reload of the tools and ERA_WARM (default 2) uncounted calls of its era, so both
# start from the same Lua heap (the collector's steps fall alike).
# CONC=256 counts the same mix under concurrency instead: CONC clients at once, each on
# its own connection (gateway/conc.mjs), one uncounted warm-up round each, then ROUNDS
# rounds (default 4) of one REST read and one MCP call each, counted; so the collector's
# and the allocator's cost with up to CONC calls in flight shows. The managed phases are
# skipped then.
# MIX=rest counts only the N REST reads (no MCP session), so the REST path has its own
# figure; the managed phases still run unless MANAGED=0.
# Not part of scripts/test.
# Usage: tests/bench/callgrind.sh [BUILD_DIR]   (default build-bench, RelWithDebInfo)
#   N=200 TOP=10 NO_BUILD=1; KEEP_WORK=1 keeps the callgrind.out files; MCP_FORMAT=toon
#   asks the MCP calls for TOON text instead of JSON; MANAGED=0 skips the managed phases;
#   CONC=256 ROUNDS=4 the concurrent mix; MIX=rest the REST reads alone; LC_N=20 the
#   lifecycle calls counted; ERA_ROUNDS=16 the phases of each era (N calls each),
#   ERA_WARM=2 the uncounted calls before each.
set -eu
. "$(dirname "$0")/gateway/common.sh"
BUILD=${1:-$ROOT/build-bench}
N=${N:-200}
TOP=${TOP:-10}
CONC=${CONC:-}
MIX=${MIX:-}
case "$MIX" in '' | rest) ;; *) echo "MIX=rest or unset" >&2; exit 2 ;; esac
[ -z "$CONC" ] || [ -z "$MIX" ] || { echo "MIX=rest does not go with CONC" >&2; exit 2; }
[ -z "$CONC" ] || MANAGED=0

bench_install valgrind nginx curl nodejs
[ -n "${NO_BUILD:-}" ] || bench_build "$BUILD"
bench_work

start_sim disabled
capture_canned
start_upstream
GW_WRAP="valgrind --tool=callgrind --collect-atstart=no --toggle-collect=event_base_loop
  --callgrind-out-file=$WORK/callgrind.out" start_gateway
# Each dump holds the counts since the previous one: callgrind.out.$mix_dump is the mix.
dumps=0
mix_dump=1
if [ -n "$CONC" ]; then
  # callgrind.out.1: the session and the warm-up round (not counted)
  sent=$(BARRIER="callgrind_control -d $GW_PID >/dev/null 2>&1; until [ -s $WORK/callgrind.out.1 ]; do sleep 0.1; done; sleep 0.5" \
    node "$BENCH_DIR/conc.mjs" "$GW" "$CONC" "${ROUNDS:-4}")
  dumps=1
  mix_dump=2
else
  sent=$(MIX=${MIX:-rest+mcp} node "$BENCH_DIR/mix.mjs" "$GW" "$N")
fi
phase_dump() {
  callgrind_control -d "$GW_PID" >/dev/null 2>&1
  dumps=$((dumps + 1))
  i=0
  until [ -s "$WORK/callgrind.out.$dumps" ]; do
    i=$((i + 1)); [ $i -lt 600 ] || { echo "no callgrind dump $dumps" >&2; exit 1; }; sleep 0.1
  done
  sleep 0.5 # written in one go, but let it finish
}
phase_total() { awk '/^(summary|totals):/ {print $2; exit}' "$WORK/callgrind.out.$1"; }
phase_dump
if [ "${MANAGED:-1}" != 0 ]; then
  mcp_sent=$(MIX=mcp node "$BENCH_DIR/mix.mjs" "$GW" "$N")
  phase_dump
  mcp_total=$(phase_total $dumps)
  # The same call, N times each: on an open session (session era), then stateless
  # (2026-07-28: no session, the request's _meta and headers checked instead).
  # Each era's calls start from the same Lua heap: a reload of the tools (a new
  # generation, its state fully collected once built), then ERA_WARM calls of that
  # era, not counted. The calls hand Lua the same values in both eras, so the
  # collector's steps fall on the same calls of both phases; without this a phase
  # gains or loses a minor collection by where the other left the heap (about
  # +-3 k instructions per call at N=100). A new state still has its own string
  # hash seed (Lua picks it at random), which moves the Lua share of a phase by up
  # to about +-1 k per call: so each era runs ERA_ROUNDS phases (default 16), in
  # the order session, stateless, stateless, session, ... (each era as often first
  # as last after a reload: what the order leaves, such as the allocator's state
  # after a reload or the capture policy's re-read every 30 s, falls on both), and
  # an era's figure is its phases together.
  mcp_session
  ADMIN=http://127.0.0.1:$(grep '"listener":"admin"' "$WORK/gateway.log" | sed 's/.*"port":\([0-9]*\).*/\1/')
  era_phase() { # mix: adds the phase to that era's sums
    curl -sf -o /dev/null -X POST "$ADMIN/admin/reload"
    MIX=$1 SID=$SID node "$BENCH_DIR/mix.mjs" "$GW" "${ERA_WARM:-2}" >/dev/null
    phase_dump # the reload and the warm-up: not counted
    n=$(MIX=$1 SID=$SID node "$BENCH_DIR/mix.mjs" "$GW" "$N")
    phase_dump
    t=$(phase_total $dumps)
    if [ "$1" = legacy ]; then
      legacy_sent=$((legacy_sent + n)) legacy_total=$((legacy_total + t))
      legacy_phases="${legacy_phases:+$legacy_phases, }$((t / n))" legacy_dumps="${legacy_dumps:+$legacy_dumps,}$dumps"
    else
      modern_sent=$((modern_sent + n)) modern_total=$((modern_total + t))
      modern_phases="${modern_phases:+$modern_phases, }$((t / n))" modern_dumps="${modern_dumps:+$modern_dumps,}$dumps"
    fi
  }
  legacy_sent=0 legacy_total=0 modern_sent=0 modern_total=0
  legacy_phases="" modern_phases="" legacy_dumps="" modern_dumps=""
  r=0
  while [ $r -lt "${ERA_ROUNDS:-16}" ]; do
    if [ $((r % 2)) = 0 ]; then era_phase legacy; else era_phase modern; fi
    if [ $((r % 2)) = 0 ]; then era_phase modern; else era_phase legacy; fi
    r=$((r + 1))
  done
  # Capture on; the gateway re-reads the policy within trace_core.capture_policy_ttl_s
  # (30 s): until then an ad hoc MCP call still runs (this phase is not counted).
  curl -sf -o /dev/null -X POST "$SIM/_sim/trace" -H 'content-type: application/json' -d '{"capture":"enabled"}'
  mcp_session
  i=0
  until curl -sf -X POST "$GW$PREFIX/mcp" -H "authorization: Bearer $TOKEN" -H 'content-type: application/json' \
    -H "accept: $MCP_ACCEPT" -H "mcp-session-id: $SID" -d "$(mcp_call_body "$REST_ARGS")" | grep -q bkn_start_interaction; do
    i=$((i + 1)); [ $i -lt 60 ] || { echo "capture enabled, but ad hoc MCP calls still run" >&2; exit 1; }; sleep 1
  done
  trace_seq() { curl -sf "$SIM/_sim/requests?service=trace_core" | sed 's/.*"last_seq":\([0-9]*\).*/\1/'; }
  trace_since() { curl -sf "$SIM/_sim/requests?service=trace_core&since=$1" | grep -o '"seq":' | wc -l; }
  phase_dump # the session and the capture check: not counted
  lc_n=${LC_N:-20}
  [ "$lc_n" -ge $(((N + 99) / 100)) ] || lc_n=$(((N + 99) / 100))
  seq_s=$(trace_seq)
  node "$BENCH_DIR/interactions.mjs" "$GW" "$SID" "$lc_n" >"$WORK/managed.lines"
  phase_dump # the interactions' starts
  start_total=$(phase_total $dumps)
  start_trace=$(trace_since "$seq_s")
  seq0=$(trace_seq)
  managed_sent=$(MIX=managed SID=$SID LINES=$WORK/managed.lines node "$BENCH_DIR/mix.mjs" "$GW" "$N")
  phase_dump
  managed_total=$(phase_total $dumps)
  trace_calls=$(trace_since "$seq0")
  seq_f=$(trace_seq)
  finish_sent=$(node "$BENCH_DIR/finish.mjs" "$GW" "$SID" "$WORK/managed.lines")
  phase_dump # the interactions' finishes
  finish_total=$(phase_total $dumps)
  finish_trace=$(trace_since "$seq_f")
fi
bench_stop "$GW_PID" # SIGTERM: the loop exits, callgrind writes its last file
mv "$WORK/callgrind.out.$mix_dump" "$WORK/callgrind.out"
total=$(awk '/^(summary|totals):/ {print $2; exit}' "$WORK/callgrind.out")
if [ -n "$CONC" ]; then
  echo "== callgrind: $sent requests from $CONC concurrent connections (${ROUNDS:-4} rounds of 1 REST + 1 MCP tools/call each, after a warm-up round)"
elif [ "$MIX" = rest ]; then
  echo "== callgrind: $sent requests ($N REST reads alone)"
else
  echo "== callgrind: $sent requests (1 initialize + 1 notification + $N REST + $N MCP tools/call)"
fi
awk -v t="$total" -v n="$sent" 'BEGIN { printf "instructions in the event loop: %d\ninstructions per request: %.0f\n\n", t, t / n }'
# Function lines only, paths shortened; the Debian liblua5.4 is stripped, so its
# functions show as addresses of liblua5.4.so.
fn_lines() { awk '/^ *[0-9,]+ \(/ && !/PROGRAM TOTALS/ && /\]$/' | sed -E 's#/[^ ]*/(src/)#\1#; s#\[/[^]]*/([^/]*)\]#[\1]#'; }
# A later dump lists the frames already open when it began (main, the loop) with the
# whole count as their own; those are not self instructions.
self_lines() { fn_lines | grep -v '(100\.0%)'; }
echo "== top $TOP functions by self instructions"
callgrind_annotate --threshold=100 "$WORK/callgrind.out" 2>/dev/null | self_lines | head -n "$TOP"
echo
echo "== where the project's code spends it (inclusive, src/ only)"
callgrind_annotate --inclusive=yes --threshold=100 "$WORK/callgrind.out" 2>/dev/null | fn_lines |
  grep ' src/' | grep -v -E 'main\.c:main|below main' | head -n 15
echo
echo "== self instructions by library"
callgrind_annotate --threshold=100 "$WORK/callgrind.out" 2>/dev/null | self_lines |
  awk '{ n = $1; gsub(",", "", n); lib = $NF; s[lib] += n; t += n }
       END { for (k in s) printf "%6.1f%%  %s\n", 100 * s[k] / t, k }' | sort -rn | head -6
if [ "${MANAGED:-1}" != 0 ]; then
  echo
  echo "== MCP tools/call by protocol era ($legacy_sent calls each, ad hoc, in ${ERA_ROUNDS:-16} phases of $N)"
  awk -v l="$legacy_total" -v ln="$legacy_sent" -v m="$modern_total" -v mn="$modern_sent" \
    -v lp="$legacy_phases" -v mp="$modern_phases" 'BEGIN {
    printf "instructions per session-era call (2025-11-25, on an open session): %.0f (phases %s)\n", l / ln, lp
    printf "instructions per stateless call (2026-07-28, no session): %.0f (phases %s)\n", m / mn, mp
    printf "stateless minus session: %+.0f per call\n", m / mn - l / ln }'
  # The same phases without the Lua VM's own functions (the static Lua's unnamed
  # ones): the steadier share, since a new state's random string-hash seed moves the
  # VM's count from one phase to the next.
  vm_side() { # comma-separated dump numbers: the VM's own instructions, summed
    for d in $(echo "$1" | tr , ' '); do
      callgrind_annotate --threshold=100 "$WORK/callgrind.out.$d" 2>/dev/null | self_lines
    done | awk '/\?\?\?:.*\[context-loader\]$/ { n = $1; gsub(",", "", n); t += n } END { print t + 0 }'
  }
  awk -v l="$((legacy_total - $(vm_side "$legacy_dumps")))" -v ln="$legacy_sent" \
    -v m="$((modern_total - $(vm_side "$modern_dumps")))" -v mn="$modern_sent" 'BEGIN {
    printf "outside the Lua VM: session-era %.0f, stateless %.0f, stateless minus session %+.0f per call\n", l / ln, m / mn, m / mn - l / ln }'
  echo
  echo "== managed MCP call ($managed_sent calls, capture enabled, each bound to a started interaction)"
  awk -v m="$managed_total" -v mn="$managed_sent" -v a="$mcp_total" -v an="$mcp_sent" -v t="$trace_calls" 'BEGIN {
    printf "instructions per ad hoc MCP call: %.0f (%d calls with the session set-up)\n", a / an, an
    printf "instructions per managed MCP call: %.0f\n", m / mn
    printf "added by the managed path: %.0f per call\n", m / mn - a / an
    printf "Trace Core round trips per managed call: %.2f\n", t / mn }'
  echo
  echo "== lifecycle calls (capture enabled; $lc_n of each)"
  awk -v s="$start_total" -v st="$start_trace" -v f="$finish_total" -v ft="$finish_trace" -v n="$lc_n" -v fn="$finish_sent" 'BEGIN {
    printf "instructions per bkn_start_interaction: %.0f (conversation_mode new), Trace Core round trips: %.2f\n", s / n, st / n
    printf "instructions per bkn_finish_interaction: %.0f (outcome completed, with an answer), Trace Core round trips: %.2f\n", f / fn, ft / fn }'
fi
if [ -n "${KEEP_WORK:-}" ]; then
  if [ "${MANAGED:-1}" != 0 ]; then
    echo "callgrind file: $WORK/callgrind.out (session-era calls: callgrind.out.{$legacy_dumps}, stateless: .{$modern_dumps}, starts: .$((dumps - 2)), managed calls: .$((dumps - 1)), finishes: .$dumps)"
  else
    echo "callgrind file: $WORK/callgrind.out (the mix; no managed phases with MANAGED=0)"
  fi
fi
