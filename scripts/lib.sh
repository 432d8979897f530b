# Shared by scripts/test and scripts/demo: dependencies and builds. Safe to run twice.
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
export ROOT

# Debian packages (docs/operations.md, "Minimum production configuration"): what the
# service's build needs, and what only the tests, the demo's tooling and the tool
# author's kit need. A production host runs the binary with the run-time libraries
# alone (libevent-2.1-7 libcurl4 libssl3 libhiredis0.14 ca-certificates).
APT_BUILD="build-essential cmake pkg-config liblua5.4-dev libevent-dev libcurl4-openssl-dev
  libssl-dev libhiredis-dev ca-certificates"
APT_TEST="clang libclang-rt-14-dev lua5.4 lua-busted lua-check redis-server nginx chromium
  fonts-wqy-zenhei python3 jq curl"
APT_PACKAGES="$APT_BUILD $APT_TEST"

as_root() {
  if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi
}

install_deps() { # [build]: only what building the service needs (and Node.js)
  want=$APT_PACKAGES
  [ "${1:-}" = build ] && want=$APT_BUILD
  missing=""
  for p in $want; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
  done
  # Node.js may come from elsewhere (e.g. NodeSource, which bundles npm and conflicts
  # with Debian's npm package): only ask apt for it when the commands are missing.
  command -v node >/dev/null 2>&1 || missing="$missing nodejs"
  command -v npm >/dev/null 2>&1 || missing="$missing npm"
  if [ -n "$missing" ]; then
    echo "==> installing Debian packages:$missing"
    as_root apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing >/dev/null
  fi
}

# The external checks (MCP SDK, conformance suite, TOON) are not part of the repository:
# CL_CHECKS_DIR, else shared/checks beside the checkout, else /work/shared/checks.
find_checks() {
  for d in "${CL_CHECKS_DIR:-}" "$(dirname "$ROOT")/shared/checks" /work/shared/checks; do
    if [ -n "$d" ] && [ -f "$d/setup.sh" ]; then (cd "$d" && pwd); return 0; fi
  done
  return 1
}

install_checks() {
  if CHECKS=$(find_checks); then
    export CL_CHECKS_DIR="$CHECKS"
    if [ ! -f "$ROOT/build/ext/node_modules/@modelcontextprotocol/sdk/package.json" ] ||
       [ ! -f "$ROOT/build/ext/node_modules/@modelcontextprotocol/conformance/package.json" ]; then
      echo "==> installing the external checks (npm)"
      sh "$CHECKS/setup.sh" "$ROOT/build/ext" >/dev/null
    else
      cp "$CHECKS"/*.mjs "$ROOT/build/ext/"
    fi
    # mcp-remote: the Claude Desktop entry of /mcp/info runs it (tests/integration/info.test.mjs).
    if [ ! -f "$ROOT/build/ext/node_modules/mcp-remote/package.json" ]; then
      echo "==> installing mcp-remote (npm)"
      (cd "$ROOT/build/ext" && npm install --no-audit --no-fund --loglevel=error mcp-remote@0.15.1 >/dev/null) ||
        echo "!! mcp-remote could not be installed; its test will be skipped" >&2
    fi
    # gpt-tokenizer: tests/integration/compact.test.mjs counts tools/list in tokens with it
    # (in bytes without it).
    if [ ! -f "$ROOT/build/ext/node_modules/gpt-tokenizer/package.json" ]; then
      echo "==> installing gpt-tokenizer (npm)"
      (cd "$ROOT/build/ext" && npm install --no-audit --no-fund --loglevel=error gpt-tokenizer@4 >/dev/null) ||
        echo "!! gpt-tokenizer could not be installed; compact.test.mjs counts bytes" >&2
    fi
  else
    echo "!! external checks not found (set CL_CHECKS_DIR); those tests will be skipped" >&2
  fi
}

build_one() { # dir, extra cmake args...
  dir=$1; shift
  cmake -S "$ROOT" -B "$ROOT/$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >/dev/null
  cmake --build "$ROOT/$dir" -j"$(nproc)"
}
