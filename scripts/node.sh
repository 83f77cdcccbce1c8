#!/usr/bin/env bash
# Prints the bin folder of a Node.js release line, installed once from the npm registry's `node`
# package into .node/<major> (the binary ships inside the registry package; nothing else is fetched).
#
#   PATH="$(bash scripts/node.sh 24):$PATH" npm test     the test command on Node 24
#
# .ci/run uses it to run the tests on each supported LTS line whatever Node the machine has.
set -euo pipefail
major=${1:-}
case "$major" in
  '' | *[!0-9]*) echo "usage: scripts/node.sh MAJOR   (e.g. 24)" >&2; exit 2 ;;
esac
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
dir=$ROOT/.node/$major
bin=$dir/node_modules/.bin
if ! "$bin/node" --version >/dev/null 2>&1; then
  echo "node.sh: installing node@$major into $dir" >&2
  mkdir -p "$dir"
  npm install --prefix "$dir" --no-save --no-package-lock --no-audit --no-fund --loglevel=error "node@$major" >&2
fi
version=$("$bin/node" --version)
case "$version" in
  "v$major".*) ;;
  *) echo "node.sh: $bin/node is $version, not Node $major" >&2; exit 1 ;;
esac
echo "$bin"
