#!/bin/sh
# toon-bench.sh: the TOON encoder benchmark (not part of scripts/test; see docs/toon.md).
# Builds the C driver in Release mode (build/bench/cmake), installs @toon-format/toon@2.3.1
# and gpt-tokenizer into build/bench with npm if missing, then runs toon-bench.mjs, which
# prints the table and writes build/bench/toon-results.txt.
# TOON_BENCH_SCALE=0.1 runs a tenth of the iterations.
set -eu
repo=$(cd "$(dirname "$0")/../.." && pwd)
bench=$repo/build/bench
mkdir -p "$bench"
cmake -S "$repo" -B "$bench/cmake" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$bench/cmake" --target toon-bench toon-encode -j2 >/dev/null
if [ ! -f "$bench/node_modules/@toon-format/toon/package.json" ] ||
   [ ! -f "$bench/node_modules/gpt-tokenizer/package.json" ]; then
  [ -f "$bench/package.json" ] || echo '{"name":"toon-bench","private":true}' >"$bench/package.json"
  (cd "$bench" && npm install --no-audit --no-fund --silent @toon-format/toon@2.3.1 gpt-tokenizer)
fi
exec node "$repo/tests/bench/toon-bench.mjs" "$bench" "$bench/cmake/toon-bench"
