#!/usr/bin/env bash
# `make test`'s pytest: every test, in two pytest processes at once. The slow tests (each holds several processes:
# torchrun agents and workers, etcd, an S3 server) run in the foreground on two pytest-xdist workers, a test file at
# a time (a module's runs made once); much of their time is spent waiting (rendezvous, restarts, timeouts), which
# the other worker and the other tests fill. The other tests run beside them and their output follows.
#
#   scripts/test-both-tiers.sh PYTHON [pytest arguments...]
#
# Exits non-zero when either part fails. The background pytest is stopped, by its own id, if this script is.
set -uo pipefail

PYTHON="$1"
shift
PYTEST=("$PYTHON" -m pytest -q -p no:cacheprovider "$@")

others_log="$(mktemp)"
"${PYTEST[@]}" -m "not slow" --durations=10 >"$others_log" 2>&1 &
others=$!
trap 'kill "$others" 2>/dev/null; rm -f "$others_log"' EXIT

echo "== the slow tests (the other tests run beside them; their output follows)"
"${PYTEST[@]}" -m slow -n 2 --dist loadfile --durations=25
slow_status=$?

wait "$others"
others_status=$?
trap 'rm -f "$others_log"' EXIT
echo "== the other tests"
cat "$others_log"

echo "== slow tests: exit ${slow_status}; the other tests: exit ${others_status}"
[ "$slow_status" -eq 0 ] && [ "$others_status" -eq 0 ]
