#!/usr/bin/env bash
# Make (or check) directory $1 (default .guest-tools) holding the registries'
# toolchains that build plugins in other languages, at the versions the
# scaffolds (`benchkit plugin new --lang python|js`) are tested with:
#   $1/venv: PyPI's componentize-py 0.25.1 (Python components);
#   $1/node: npm's jco 1.35.0 with componentize-js 0.23.0 and
#            preview2-shim 0.25.0 (0.26 breaks jco's file access).
# Then `export BENCHKIT_GUEST_TOOLS=$1` lets the tests build with them.
set -euo pipefail
dir="${1:-.guest-tools}"
mkdir -p "$dir/node"
if [ ! -x "$dir/venv/bin/componentize-py" ]; then
    python3 -m venv "$dir/venv"
    "$dir/venv/bin/pip" install --quiet --no-cache-dir --disable-pip-version-check "componentize-py==0.25.1"
fi
cat > "$dir/node/package.json" <<'JSON'
{
  "name": "benchkit-guest-tools",
  "private": true,
  "devDependencies": {
    "@bytecodealliance/componentize-js": "0.23.0",
    "@bytecodealliance/jco": "1.35.0",
    "@bytecodealliance/preview2-shim": "0.25.0"
  },
  "overrides": {
    "@bytecodealliance/componentize-js": "0.23.0",
    "@bytecodealliance/preview2-shim": "0.25.0"
  }
}
JSON
if [ ! -x "$dir/node/node_modules/.bin/jco" ]; then
    (cd "$dir/node" && npm install --no-audit --no-fund --loglevel=error)
fi
"$dir/venv/bin/componentize-py" --version
"$dir/node/node_modules/.bin/jco" --version
