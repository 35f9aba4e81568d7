#!/usr/bin/env bash
# The headers' layers include only downwards: a header of include/kfuse/<layer>/ may include
# kfuse/<other>/ only for a lower layer (the folders are the layers, docs/design.md). Run by
# scripts/test.sh in its format check; prints each upward include and exits 1, else one line.
#   scripts/check_layers.sh
set -euo pipefail
cd "$(dirname "$0")/.."
layers=(error config arch types detail layout simd threading epilogue kernels graph tools top)
rank() {
  local i
  for i in "${!layers[@]}"; do [[ ${layers[$i]} == "$1" ]] && { echo "$i"; return; }; done
  echo "check_layers: no layer '$1' (add it to the list in $0)" >&2
  exit 2
}
layer_of() {  # include/kfuse/X/... -> X; the top-level headers: error, epilogue, or top
  local rest=${1#include/kfuse/}
  case $rest in
    */*) echo "${rest%%/*}" ;;
    error.hpp) echo error ;;
    epilogue.hpp) echo epilogue ;;
    *) echo top ;;
  esac
}
bad=0
n=0
while read -r f; do
  n=$((n + 1))
  from=$(layer_of "$f")
  r_from=$(rank "$from")
  while read -r to; do
    [[ -z $to ]] && continue
    to_layer=$(layer_of "include/kfuse/$to")
    if (($(rank "$to_layer") > r_from)); then
      echo "$f: includes kfuse/$to (layer $to_layer above $from)"
      bad=1
    fi
  done < <(sed -n 's|^#include "kfuse/\([^"]*\)".*|\1|p' "$f")
done < <(git ls-files 'include/kfuse/*.hpp')
if ((bad)); then
  echo "layers: the includes above go upwards; move the shared part down a layer" >&2
  exit 1
fi
echo "layers: $n headers include only downwards"
