#!/bin/sh
# require-toon-ext.sh EXT_DIR command...: runs the command when the TOON packages
# (@toon-format/spec, @toon-format/toon and run-encode-fixtures.mjs) are installed
# in EXT_DIR (scripts/test does that); otherwise exits 77, which CTest reports as
# skipped, with the reason.
ext=$1; shift
if [ ! -f "$ext/node_modules/@toon-format/toon/package.json" ] ||
   [ ! -d "$ext/node_modules/@toon-format/spec/tests/fixtures/encode" ] ||
   [ ! -f "$ext/run-encode-fixtures.mjs" ]; then
  echo "SKIPPED: TOON checks not installed in $ext (run scripts/test, or set CL_CHECKS_DIR)" >&2
  exit 77
fi
exec "$@"
