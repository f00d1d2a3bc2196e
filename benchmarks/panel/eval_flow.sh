#!/bin/sh
# Held-out answers of every wheel a flow wrote: flow/{before,after}/PKG/out-STEP/*.whl -> res/PKG
#   sh eval_flow.sh PKG [STEP...]
here=$(cd "$(dirname "$0")" && pwd)
pkg=$1; shift
for t in before after; do
  for d in /tmp/p8/flow/$t/$pkg/out-*; do
    step=${d##*/out-}
    [ $# -gt 0 ] && ! echo " $* " | grep -q " $step " && continue
    for w in "$d"/*.whl; do [ -f "$w" ] && python3 "$here/heldout.py" "$pkg" "$t-$step" "$w"; done
  done
done
