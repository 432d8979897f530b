#!/bin/sh
# Writes N tools into DIR (plus the shipped _lib/): copies of the shipped
# list_knowledge_networks.lua and query_object_instance.lua with unique names and
# orders, so each generated tool is as large as a real one. Usage: gen-tools.sh DIR N
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
dir=$1
n=$2
mkdir -p "$dir"
cp -r "$root/tools/_lib" "$dir/"
i=1
while [ "$i" -le "$n" ]; do
  if [ $((i % 2)) -eq 0 ]; then src=list_knowledge_networks; else src=query_object_instance; fi
  name=gen_tool_$i
  sed -e "s/name = \"$src\"/name = \"$name\"/" -e "s/^    order = [0-9]*,/    order = $((1000 + i)),/" \
    "$root/tools/$src.lua" > "$dir/$name.lua"
  i=$((i + 1))
done
