#!/usr/bin/env bash
# The two commands of the README's quick start, for a fresh Debian 12 as root with nothing but bash and apt:
#   bash tools/demo [ARGS]   install what is missing, build what the demo needs, run `xlatbench demo ARGS`
#   bash tools/test [VAR=X]  install what is missing, build everything, run every test (what .ci/run calls);
#                            its arguments go to make (e.g. HARDENING=0)
# Both come here: install-deps runs first when make or the venv is missing (a minimal Debian 12 has no make),
# then make takes over (and reruns install-deps itself when tools/install-deps or pyproject.toml change).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
target="${1:?usage: front-door.sh demo|test}"
shift

if ! command -v make >/dev/null || [[ ! -x "$here/.venv/bin/python" || ! -e "$here/.venv/.deps-stamp" ]]; then
    bash "$here/tools/install-deps"
    touch "$here/.venv/.deps-stamp"
fi
if [[ $target == demo ]]; then
    exec make -C "$here" demo DEMO_ARGS="$*"
fi
exec make -C "$here" "$target" "$@"
