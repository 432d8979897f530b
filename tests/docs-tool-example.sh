#!/bin/sh
# The complete tool of docs/writing-tools.md ("A tool in one page", the ```lua block that
# starts with "-- tools/get_kn_name.lua") must pass the offline check next to the
# shipped tools.
set -eu
bin=$1; root=$2
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
cp -r "$root"/tools/. "$d"/
awk '/^```lua$/{f=1;n=0;next} /^```$/{f=0} f&&n==0&&!/^-- tools\/get_kn_name\.lua/{f=0} f{n++;print}' \
  "$root/docs/writing-tools.md" > "$d/get_kn_name.lua"
grep -q 'name = "get_kn_name"' "$d/get_kn_name.lua"
"$bin" --check-tools "$d"
