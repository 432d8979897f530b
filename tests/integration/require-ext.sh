#!/bin/sh
# require-ext.sh EXT_DIR command...: runs the command when the external checks are
# installed in EXT_DIR (scripts/test does that, see find_checks in scripts/lib.sh); otherwise
# exits 77, which CTest reports as skipped, with the reason.
ext=$1; shift
if [ ! -f "$ext/node_modules/@modelcontextprotocol/sdk/package.json" ]; then
  echo "SKIPPED: external checks not installed in $ext (run scripts/test, or set CL_CHECKS_DIR)" >&2
  exit 77
fi
exec "$@"
