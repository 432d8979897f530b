#!/bin/sh
# Installs the build into a temporary prefix and checks the layout: the
# installed binary validates the installed tools with the installed config, starts
# from / with that config, and the systemd unit passes `systemd-analyze verify`
# (skipped when systemd-analyze is not installed). Usage: install-check.sh BUILD_DIR
set -eu
build=$1
prefix=$(mktemp -d /tmp/cl-install.XXXXXX)
pid=
cleanup() {
  if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; fi
  rm -rf "$prefix"
}
trap cleanup EXIT INT TERM
fail() { echo "install-check: FAIL: $*" >&2; exit 1; }

cmake --install "$build" --prefix "$prefix" >/dev/null
conf=$prefix/etc/context-loader/context-loader.conf
unit=$prefix/etc/context-loader/context-loader.service
for f in bin/context-loader share/context-loader/lua/host.lua share/context-loader/lua/contract.lua \
         share/context-loader/lua/page.lua share/context-loader/lua/page_assets.lua \
         share/context-loader/tools/list_knowledge_networks.lua share/context-loader/tools/_lib/util.lua \
         etc/context-loader/context-loader.conf etc/context-loader/context-loader.service; do
  [ -e "$prefix/$f" ] || fail "$f is not installed"
done
grep -qx "tools_dir = $prefix/share/context-loader/tools" "$conf" || fail "installed config: tools_dir"
grep -qx "lua_dir = $prefix/share/context-loader/lua" "$conf" || fail "installed config: lua_dir"
grep -q "^ExecStart=$prefix/bin/context-loader --config $conf\$" "$unit" || fail "unit: ExecStart"
# reload = the offline check first (a broken tool fails `systemctl reload`), then SIGHUP
reloads=$(grep '^ExecReload=' "$unit")
[ "$reloads" = "ExecReload=$prefix/bin/context-loader --config $conf --check-config
ExecReload=/bin/kill -HUP \$MAINPID" ] || fail "unit: ExecReload (check, then SIGHUP): $reloads"
grep -qx "ExecStartPre=$prefix/bin/context-loader --config $conf --check-config" "$unit" \
  || fail "unit: ExecStartPre checks the configured paths"
for k in Type=notify NotifyAccess=main ProtectSystem=strict ProtectHome=yes PrivateTmp=yes NoNewPrivileges=yes MemoryDenyWriteExecute=yes \
         SystemCallFilter=@system-service CapabilityBoundingSet= Restart=on-failure DynamicUser=yes; do
  grep -qx "$k" "$unit" || fail "unit: $k"
done

cd /
"$prefix/bin/context-loader" --config "$conf" --check-tools "$prefix/share/context-loader/tools" \
  || fail "--check-tools on the installed tools"
# A broken tool makes --check-tools fail (the check can fail).
printf 'return {\n' > "$prefix/share/context-loader/tools/broken.lua"
if "$prefix/bin/context-loader" --config "$conf" --check-tools "$prefix/share/context-loader/tools" 2>/dev/null; then
  fail "--check-tools accepted a broken tool"
fi
# --check-config (what the unit runs before a start or reload) and --check-tools without
# a directory read the configured tools_dir: both fail on the broken tool.
if "$prefix/bin/context-loader" --config "$conf" --check-config 2>/dev/null; then
  fail "--check-config accepted a broken tool"
fi
if "$prefix/bin/context-loader" --config "$conf" --check-tools 2>/dev/null; then
  fail "--check-tools (configured dir) accepted a broken tool"
fi
rm "$prefix/share/context-loader/tools/broken.lua"
"$prefix/bin/context-loader" --config "$conf" --check-config >/dev/null || fail "--check-config on the install"

# Start the installed binary with the installed config (ephemeral loopback ports).
log=$prefix/run.log
CL_LISTEN=127.0.0.1:0 CL_ADMIN_LISTEN=127.0.0.1:0 "$prefix/bin/context-loader" --config "$conf" 2>"$log" &
pid=$!
i=0
until grep -q '"listener":"admin"' "$log"; do
  i=$((i + 1))
  [ $i -lt 600 ] || { cat "$log" >&2; fail "the installed binary did not start"; } # 60 s at least: a liveness cap
  kill -0 "$pid" 2>/dev/null || { cat "$log" >&2; fail "the installed binary exited"; }
  sleep 0.1
done
grep -q "\"msg\":\"tools loaded\",\"report\":\"generation 1: +[1-9]" "$log" || { cat "$log" >&2; fail "tools not loaded"; }
# The catalogue page renders from the installed lua_dir: a browser without a token gets
# the shell (lua/page.lua), not an error.
port=$(grep '"msg":"listening"' "$log" | grep '"listener":"public"' | sed 's/.*"port":\([0-9]*\).*/\1/')
shell=$(curl -sS -H 'Accept: text/html' "http://127.0.0.1:$port/api/agent-retrieval/v1/mcp/info") \
  || fail "GET the catalogue shell"
case $shell in *'<form id="f">'*) ;; *) echo "$shell" >&2; fail "the installed page module did not render the shell" ;; esac
kill -TERM "$pid"
wait "$pid" || fail "exit status $? after SIGTERM"
pid=

if command -v systemd-analyze >/dev/null 2>&1; then
  cp "$unit" "$prefix/context-loader.service"
  out=$(systemd-analyze verify "$prefix/context-loader.service" 2>&1) || { echo "$out" >&2; fail "systemd-analyze verify"; }
  [ -z "$out" ] || { echo "$out" >&2; fail "systemd-analyze verify printed warnings"; }
  echo "install-check: systemd-analyze verify: ok"
else
  echo "install-check: systemd-analyze not installed: unit verification skipped"
fi
echo "install-check: ok ($prefix)"
