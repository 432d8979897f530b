#!/bin/sh
# The README's quick start, run as written against scripts/demo: the first two ```sh
# blocks after "## Quick start" (the managed MCP turn, then the REST call). The only
# change is the port: the demo runs on a free port instead of 30779 (and the next one
# for its admin listener), so that a demo already running on the machine is not hit.
# Usage: readme-quickstart.sh BIN ROOT
set -eu
bin=$1; root=$2
for c in curl jq node; do
  command -v "$c" >/dev/null 2>&1 || { echo "SKIP: $c is not installed"; exit 77; }
done
d=$(mktemp -d)
pid=""
cleanup() {
  if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
  rm -rf "$d"
}
trap cleanup EXIT

# A free port whose successor is free too.
port=$(node -e '
const net = require("node:net");
const grab = (p) => new Promise((ok, no) => { const s = net.createServer(); s.once("error", no); s.listen(p, "127.0.0.1", () => ok(s)); });
(async () => { for (;;) { const a = await grab(0); const p = a.address().port;
  try { const b = await grab(p + 1); b.close(); a.close(); console.log(p); return; } catch { a.close(); } } })();')

# The two blocks, 30779 replaced by the port.
awk -v n=1 '/^## Quick start/{q=1} q&&/^```sh$/{f=1;next} f&&/^```$/{f=0;n++;if(n>2)exit;next} f{print > ("'"$d"'/block" n ".sh")}' "$root/README.md"
for b in 1 2; do
  test -s "$d/block$b.sh" || { echo "README: quick start block $b not found"; exit 1; }
  sed -i "s/30779/$port/g" "$d/block$b.sh"
done

CL_BIN=$bin PORT=$port CL_DEMO_LOG=$d/service.log node "$root/scripts/demo.mjs" >"$d/demo.out" 2>&1 &
pid=$!
i=0
until grep -qs '^MCP URL: ' "$d/demo.out"; do
  i=$((i + 1))
  if [ $i -gt 1200 ] || ! kill -0 "$pid" 2>/dev/null; then # 2 min at least: a liveness cap
    echo "the demo did not start:"; cat "$d/demo.out"; exit 1
  fi
  sleep 0.1
done

# The managed turn: the business call's result carries a receipt, the finish completes.
(cd "$d" && sh -eu block1.sh) >"$d/turn.out" 2>&1 || { cat "$d/turn.out"; exit 1; }
cat "$d/turn.out"
grep -q '"receipt": "rcpt_' "$d/turn.out" || { echo "FAIL: no receipt in the business call's answer"; exit 1; }
grep -q '"drugs": \[' "$d/turn.out" || { echo "FAIL: no rows in the business call's answer"; exit 1; }
grep -q '"execution_status":"completed"' "$d/turn.out" || { echo "FAIL: the turn did not finish"; exit 1; }

# The REST call: the names of two rows.
(cd "$d" && sh -eu block2.sh) >"$d/rest.out" 2>&1 || { cat "$d/rest.out"; exit 1; }
cat "$d/rest.out"
test "$(grep -c '^"' "$d/rest.out")" = 2 || { echo "FAIL: the REST call did not print two names"; exit 1; }
echo "quick start: ok"
