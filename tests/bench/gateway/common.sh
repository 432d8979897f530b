# Shared by tests/bench/{gateway,memory,callgrind}-bench scripts (sourced, POSIX sh):
# installs the bench tools, builds the server, starts and stops the simulator, the
# canned upstream (nginx), the nginx peers and context-loader, all on 127.0.0.1 with
# free ports, each stopped by its PID on exit.
BENCH_ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BENCH_DIR=$BENCH_ROOT/tests/bench/gateway
# scripts/lib.sh derives ROOT from $0; set it back for this layout after sourcing.
. "$BENCH_ROOT/scripts/lib.sh"
ROOT=$BENCH_ROOT

# Debian packages, installed with apt when missing (like scripts/lib.sh install_deps).
bench_install() { # packages...
  missing=""
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
  done
  if [ -n "$missing" ]; then
    echo "==> installing Debian packages:$missing" >&2
    as_root apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing >/dev/null
  fi
}

# Builds context-loader and cljson.so optimised with symbols (callgrind names them).
bench_build() { # build_dir
  cmake -S "$ROOT" -B "$1" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
  cmake --build "$1" --target context-loader cljson -j"$(nproc)" >/dev/null
}

BENCH_PIDS=""
bench_work() {
  WORK=$(mktemp -d /tmp/cl-gwbench.XXXXXX)
  mkdir -p "$WORK/tmp-body" "$WORK/tmp-proxy" "$WORK/tmp-fastcgi" "$WORK/tmp-uwsgi" "$WORK/tmp-scgi"
  # nginx workers run as nobody when started by root: they read canned.json here.
  chmod 755 "$WORK"; chmod 777 "$WORK"/tmp-*
  trap bench_cleanup EXIT
  trap 'exit 130' INT TERM
}
bench_cleanup() {
  for p in $BENCH_PIDS; do kill "$p" 2>/dev/null || true; done
  for p in $BENCH_PIDS; do wait "$p" 2>/dev/null || true; done
  [ -n "${KEEP_WORK:-}" ] || rm -rf "$WORK"
}
bench_stop() { # pid
  kill "$1" 2>/dev/null || true
  wait "$1" 2>/dev/null || true
  BENCH_PIDS=$(echo " $BENCH_PIDS " | sed "s/ $1 / /")
}

free_port() {
  node -e "const s=require('net').createServer().listen(0,'127.0.0.1',()=>{console.log(s.address().port);s.close()})"
}
wait_port() { # port
  i=0
  until (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; do
    i=$((i + 1)); [ $i -lt 200 ] || { echo "nothing listens on $1" >&2; return 1; }; sleep 0.05
  done
}
# /dev/tcp is a bash feature: the scripts run under bash.

# The simulator (OAuth, Trace Core, the other upstreams). capture: enabled|disabled.
start_sim() { # capture
  SIM_TRACE_CAPTURE=$1 node "$ROOT/tests/platform/sim.mjs" --port 0 --host 127.0.0.1 --ttl 7200 \
    >"$WORK/sim.out" 2>"$WORK/sim.err" &
  SIM_PID=$!; BENCH_PIDS="$BENCH_PIDS $SIM_PID"
  i=0
  until grep -q '"base"' "$WORK/sim.out"; do
    i=$((i + 1)); [ $i -lt 200 ] || { cat "$WORK/sim.err" >&2; return 1; }; sleep 0.05
  done
  SIM=$(sed 's/.*"base":"\([^"]*\)".*/\1/' "$WORK/sim.out")
}

# The benchmark request: 10 rows of ot_drug, largest drug_id first, so the first
# row carries 9007199254740993, 12345678901234567890123, [] and {}.
REST_ARGS='{"kn_id":"kn_medical","ot_id":"ot_drug","limit":10,"sort":[{"field":"drug_id","direction":"desc"}]}'
OQ_PATH=/api/ontology-query/in/v1/knowledge-networks/kn_medical/object-types/ot_drug
# Captures the simulator's ontology-query response to that request (the body the
# tool sends upstream, as shape_request builds it) into $WORK/canned.json.
capture_canned() {
  curl -sf -X POST "$SIM$OQ_PATH?include_type_info=false&include_logic_params=false" \
    -H 'content-type: application/json' -H 'x-http-method-override: GET' \
    -H 'x-account-id: u_demo' -H 'x-account-type: user' \
    -d '{"limit":10,"sort":[{"field":"drug_id","direction":"desc"}],"need_total":true}' \
    >"$WORK/canned.json"
  grep -q '"drug_id":9007199254740993' "$WORK/canned.json"
}

render_conf() { # template out
  sed -e "s#@WORK@#$WORK#g" -e "s#@DIR@#$BENCH_DIR#g" -e "s#@UPSTREAM_PORT@#${UPSTREAM_PORT:-0}#g" \
    -e "s#@PROXY_PORT@#${PROXY_PORT:-0}#g" -e "s#@LUA_PORT@#${LUA_PORT:-0}#g" \
    -e "s#@TRACE_PORT@#${TRACE_PORT:-0}#g" "$1" >"$2"
}
start_upstream() {
  UPSTREAM_PORT=$(free_port)
  render_conf "$BENCH_DIR/upstream.conf" "$WORK/upstream.conf"
  nginx -p "$WORK" -c "$WORK/upstream.conf" -e "$WORK/upstream-error.log" &
  UPSTREAM_PID=$!; BENCH_PIDS="$BENCH_PIDS $UPSTREAM_PID"
  wait_port "$UPSTREAM_PORT"
  UPSTREAM=http://127.0.0.1:$UPSTREAM_PORT
}
# The canned Trace Core: the simulator's answers to one managed call, captured once
# into $WORK/tc (gateway/trace-capture.mjs), served whatever the ids in the path by
# gateway/trace-standin.c (one process, one thread, epoll; compiled here once per run,
# the three answers a managed call waits for held in memory, pipelined requests
# answered with one send per read) or, with TRACE_STANDIN=nginx, by nginx
# (gateway/trace-core.conf, the answers written into its configuration), to compare
# the two. TRACE_PID is the stand-in's process (nginx's master: its worker is counted
# as its child). The capture policy starts disabled (trace_core_capture enabled|disabled).
# The answers are captured at the first start of a run (the interaction's operation
# runs only once on the simulator); a later start serves the same ones.
start_trace_core() {
  if [ ! -s "$WORK/tc/managed.json" ]; then
    mkdir -p "$WORK/tc"
    node "$BENCH_DIR/trace-capture.mjs" "$SIM" "$WORK/tc"
  fi
  trace_core_capture disabled
  chmod 755 "$WORK/tc"; chmod 644 "$WORK"/tc/*.json
  TRACE_PORT=$(free_port)
  case "${TRACE_STANDIN:-c}" in
    c)
      cc -O2 -Wall -Wextra -Werror -o "$WORK/trace-standin" "$BENCH_DIR/trace-standin.c"
      "$WORK/trace-standin" "$TRACE_PORT" "$WORK/tc" 2>"$WORK/trace-core-error.log" &
      ;;
    nginx)
      start_trace_core_nginx
      ;;
    *) echo "TRACE_STANDIN=c (default) or TRACE_STANDIN=nginx" >&2; return 1 ;;
  esac
  TRACE_PID=$!; BENCH_PIDS="$BENCH_PIDS $TRACE_PID"
  wait_port "$TRACE_PORT"
  TRACE_CORE=http://127.0.0.1:$TRACE_PORT
}
# Starts nginx (in the background) on gateway/trace-core.conf rendered for $TRACE_PORT.
start_trace_core_nginx() {
  render_conf "$BENCH_DIR/trace-core.conf" "$WORK/trace-core.conf.in"
  # @BODY:name@ -> the captured $WORK/tc/name.json as an nginx single-quoted string
  # (backslash and quote escaped; a '$' would start a variable, so none may occur).
  node -e '
    const fs = require("fs"), [conf, dir] = process.argv.slice(1);
    process.stdout.write(fs.readFileSync(conf, "utf8").replace(/@BODY:(\w+)@/g, (_, n) => {
      const b = fs.readFileSync(`${dir}/${n}.json`, "utf8").trim();
      if (b.includes("$")) throw new Error(`${n}.json has a $`);
      return b.replace(/[\\\x27]/g, (c) => "\\" + c);
    }));' "$WORK/trace-core.conf.in" "$WORK/tc" >"$WORK/trace-core.conf"
  nginx -p "$WORK" -c "$WORK/trace-core.conf" -e "$WORK/trace-core-error.log" &
}
trace_core_capture() { # enabled|disabled
  cp "$WORK/tc/policy-$1.json" "$WORK/tc/policy.json.new" && mv "$WORK/tc/policy.json.new" "$WORK/tc/policy.json"
  chmod 644 "$WORK/tc/policy.json"
}
start_peers() {
  PROXY_PORT=$(free_port); LUA_PORT=$(free_port)
  render_conf "$BENCH_DIR/peers.conf" "$WORK/peers.conf"
  nginx -p "$WORK" -c "$WORK/peers.conf" -e "$WORK/peers-error.log" &
  PEERS_PID=$!; BENCH_PIDS="$BENCH_PIDS $PEERS_PID"
  wait_port "$PROXY_PORT"; wait_port "$LUA_PORT"
}

# WORKERS=N (N > 1): context-loader runs N worker processes (config key workers),
# which needs a shared state store: a redis-server on a free port is started here.
# STORE=redis does the same with one worker (to compare 1 and 2 workers on one store).
start_redis() {
  command -v redis-server >/dev/null || bench_install redis-server
  REDIS_PORT=$(free_port)
  redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save '' --appendonly no --dir "$WORK" \
    --daemonize no --logfile "$WORK/redis.log" &
  REDIS_PID=$!; BENCH_PIDS="$BENCH_PIDS $REDIS_PID"
  wait_port "$REDIS_PORT"
}

# context-loader wired to the simulator, with ontology-query at the canned upstream.
# Extra environment may be given as NAME=value arguments. Prefix a command (e.g.
# valgrind ...) with GW_WRAP. WORKERS (default 1) sets the worker processes. One
# token drives every connection, so the per-principal call limit is off.
start_gateway() { # [NAME=value...]
  GW_STORE=""
  if [ "${WORKERS:-1}" != 1 ] || [ "${STORE:-memory}" = redis ]; then
    [ -n "${REDIS_PORT:-}" ] || start_redis
    GW_STORE="CL_STATE_STORE=redis://127.0.0.1:$REDIS_PORT/0"
  fi
  # GLIBC_TUNABLES as etc/context-loader.service sets it (GLIBC_TUNABLES= runs without).
  env GLIBC_TUNABLES="${GLIBC_TUNABLES-glibc.malloc.tcache_count=256}" CL_WORKERS="${WORKERS:-1}" $GW_STORE CL_LISTEN=127.0.0.1:0 CL_ADMIN_LISTEN=127.0.0.1:0 CL_TOOLS_DIR="$ROOT/tools" CL_LUA_DIR="$ROOT/lua" \
    CL_UPSTREAM_ONTOLOGY_QUERY_URL="$UPSTREAM/api/ontology-query" \
    CL_UPSTREAM_BKN_BACKEND_URL="$SIM/api/bkn-backend" CL_UPSTREAM_VEGA_URL="$SIM/api/vega-backend" \
    CL_UPSTREAM_OPERATOR_INTEGRATION_URL="$SIM/api/agent-operator-integration" \
    CL_UPSTREAM_MF_MODEL_API_URL="$SIM/api/private/mf-model-api" CL_UPSTREAM_BKN_SAFE_URL="$SIM" \
    CL_OAUTH_INTROSPECT_URL="$SIM/admin/oauth2/introspect" \
    CL_BKN_SAFE_INTROSPECT_URL="$SIM/api/safe/v1/api-keys/introspect" \
    BKN_TRACE_CORE_URL="$SIM" CL_ACCESS_LOG=false CL_LIMITS_MAX_CALLS_PER_PRINCIPAL=0 "$@" \
    ${GW_WRAP:-} "$BUILD/context-loader" --config "$ROOT/etc/context-loader.conf" 2>"$WORK/gateway.log" &
  GW_PID=$!; BENCH_PIDS="$BENCH_PIDS $GW_PID"
  i=0
  until grep -qs '"listener":"public"' "$WORK/gateway.log"; do
    i=$((i + 1)); [ $i -lt 1200 ] || { cat "$WORK/gateway.log" >&2; return 1; }; sleep 0.05
  done
  GW_PORT=$(grep '"listener":"public"' "$WORK/gateway.log" | sed 's/.*"port":\([0-9]*\).*/\1/')
  GW=http://127.0.0.1:$GW_PORT
  PREFIX=/api/agent-retrieval/v1
}

TOKEN=demo-user-token
MCP_ACCEPT='application/json, text/event-stream'
# Opens an MCP session on the gateway; sets SID.
mcp_session() {
  SID=$(curl -sf -D - -o /dev/null -X POST "$GW$PREFIX/mcp" -H "authorization: Bearer $TOKEN" \
    -H 'content-type: application/json' -H "accept: $MCP_ACCEPT" \
    -d '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}' |
    tr -d '\r' | awk -F': ' 'tolower($1)=="mcp-session-id" {print $2}')
  [ -n "$SID" ] || { echo "no MCP session" >&2; return 1; }
  curl -sf -o /dev/null -X POST "$GW$PREFIX/mcp" -H "authorization: Bearer $TOKEN" \
    -H 'content-type: application/json' -H "accept: $MCP_ACCEPT" -H "mcp-session-id: $SID" \
    -d '{"jsonrpc":"2.0","method":"notifications/initialized"}'
}
mcp_call_body() { # arguments-json
  printf '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"query_object_instance","arguments":%s}}' \
    "$(printf '%s' "$1" | sed 's/^{/{"response_format":"json",/')"
}

rss_kb() { awk '/VmRSS/ {print $2}' "/proc/$1/status"; }
