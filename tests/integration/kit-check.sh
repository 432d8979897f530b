#!/bin/sh
# The installed kit for testing a tool outside the repository: installs the build into
# a temporary prefix, copies the kit's example tool and spec into a temporary
# directory outside the repository and runs busted there with the installed helper,
# with no search path of the caller's (the helper finds the installed runtime and C
# modules from its own location). A spec added to the copy checks that the modules
# come from the prefix; a tool naming an upstream the installed configuration does not
# have and a broken expectation must each fail the run.
# Usage: kit-check.sh BUILD_DIR LUA5.4 BUSTED
set -eu
build=$1
lua=$2
busted=$3
prefix=$(mktemp -d /tmp/cl-kit-prefix.XXXXXX)
work=$(mktemp -d /tmp/cl-kit-work.XXXXXX)
cleanup() { rm -rf "$prefix" "$work"; }
trap cleanup EXIT INT TERM
fail() { echo "kit-check: FAIL: $*" >&2; exit 1; }

cmake --install "$build" --prefix "$prefix" >/dev/null
kit=$prefix/share/context-loader/kit
for f in helper.lua cljson.so cltexts.so clsandbox.so writing-tools.md example/tools/kn_names.lua example/spec/kn_names_spec.lua; do
  [ -e "$kit/$f" ] || fail "kit/$f is not installed"
done
[ -e "$prefix/share/doc/context-loader/writing-tools.md" ] || fail "share/doc/context-loader/writing-tools.md is not installed"

cp -R "$kit/example/." "$work/"
cat > "$work/spec/installed_spec.lua" <<SPEC
local helper = require "helper"
describe("the installed kit", function()
    it("loads the runtime and the C modules from the prefix", function()
        assert.equal("$kit/../lua", helper.lua_dir)
        assert.equal("$kit/../lua/contract.lua", package.searchpath("contract", package.path))
        assert.equal("$kit/cljson.so", package.searchpath("cljson", package.cpath))
        assert.equal("tools", helper.tools_dir)
    end)
end)
SPEC
unset LUA_PATH LUA_CPATH LUA_PATH_5_4 LUA_CPATH_5_4 CL_TOOLS_DIR CL_LUA_DIR
cd "$work"
out=$("$lua" "$busted" --helper="$kit/helper.lua" spec/ 2>&1) || { echo "$out" >&2; fail "busted with the installed helper"; }
echo "$out" | grep -q '^4 successes / 0 failures / 0 errors' || { echo "$out" >&2; fail "expected 4 successes"; }
# a misspelt upstream (declared and in the request) is refused, naming the configured
# names of the installed configuration, as the service's load check does
mkdir "$work/misspelt"
cp -R "$kit/example/." "$work/misspelt/"
sed -i 's/"bkn_backend"/"bkn_backnd"/g' "$work/misspelt/tools/kn_names.lua"
grep -q '"bkn_backnd"' "$work/misspelt/tools/kn_names.lua" || fail "the example tool names no bkn_backend"
if out=$(cd "$work/misspelt" && "$lua" "$busted" --helper="$kit/helper.lua" spec/ 2>&1); then
  echo "$out" >&2; fail "busted passed a tool whose upstream is not configured"
fi
echo "$out" | grep -q "upstream: 'bkn_backnd' is not a configured upstream (did you mean bkn_backend?); configured: ontology_query, bkn_backend" ||
  { echo "$out" >&2; fail "the misspelt upstream is not named"; }
# the check can fail: a wrong expectation is reported
sed -i 's/"kn_medical", name = "医药"/"kn_medical", name = "wrong"/' spec/kn_names_spec.lua
if "$lua" "$busted" --helper="$kit/helper.lua" spec/ >/dev/null 2>&1; then
  fail "busted passed a wrong expectation"
fi
echo "kit-check: ok"
