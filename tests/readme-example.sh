#!/bin/sh
# The README's worked tool example must pass the offline check next to the shipped tools.
set -eu
bin=$1; root=$2
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
cp -r "$root"/tools/. "$d"/
awk '/^```lua$/{f=1;next} /^```$/{f=0} f' "$root/README.md" > "$d/get_kn_name.lua"
grep -q 'name = "get_kn_name"' "$d/get_kn_name.lua"
"$bin" --check-tools "$d"
