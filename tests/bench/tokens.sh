#!/bin/sh
# tokens.sh: the token benchmark (not part of scripts/test; see tests/bench/README.md).
# Builds context-loader in build/ (RelWithDebInfo, as scripts/test does; NO_BUILD=1 uses
# it as it is, CL_BIN picks another binary), installs gpt-tokenizer and
# @toon-format/toon@2.3.1 into build/bench with npm if missing, then runs tokens.mjs: the
# simulator (on a generated copy of the demo data) and the server on 127.0.0.1, every
# business tool's typical call, tools/list on /mcp and /mcp-compact in zh-CN and en-US
# (with the /mcp-compact to /mcp ratio of each). Prints the table and
# writes build/bench/tokens-results.txt.
set -eu
repo=$(cd "$(dirname "$0")/../.." && pwd)
bench=$repo/build/bench
mkdir -p "$bench"
if [ "${NO_BUILD:-0}" != 1 ]; then
  cmake -S "$repo" -B "$repo/build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
  cmake --build "$repo/build" --target context-loader -j2 >/dev/null
fi
if [ ! -f "$bench/node_modules/@toon-format/toon/package.json" ] ||
   [ ! -f "$bench/node_modules/gpt-tokenizer/package.json" ]; then
  [ -f "$bench/package.json" ] || echo '{"name":"toon-bench","private":true}' >"$bench/package.json"
  (cd "$bench" && npm install --no-audit --no-fund --silent @toon-format/toon@2.3.1 gpt-tokenizer)
fi
exec node "$repo/tests/bench/tokens.mjs" "$bench"
