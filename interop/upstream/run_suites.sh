#!/usr/bin/env bash
# BullMQ's own test suites (Node: vitest, tests/*.test.ts; Python: pytest, python/tests) run against
# respqueue in its default durable mode, or against redis-server for reference. Nothing of BullMQ is
# kept in this repository: its code is checked out from a git directory (e.g. the mirror that the
# `fetch` tool makes of github:taskforcesh/bullmq) into a work tree outside it.
#
# Usage: interop/upstream/run_suites.sh MIRROR_GIT_DIR [node|python|both] [respqueue|redis] [REF]
#   WORK=/work/ext/bullmq   where BullMQ is checked out (default); reused if already there
#   OUT=/tmp/upstream-logs  where the logs go (node-<target>.log, python-<target>.log)
#   VITEST_ARGS=...         extra vitest arguments (e.g. a file or -t 'a test name')
#   PYTEST_ARGS=...         extra pytest arguments (the run uses -o timeout_method=signal, see below)
#
# Each suite runs in a network namespace of its own (unshare -rn) with the server on 127.0.0.1:6379,
# the port both suites default to (the Python tests and a few Node tests ignore REDIS_PORT), so nothing
# else on the machine is touched and nothing else can answer. Needs node/npm, redis-server, python with
# pytest, pytest-timeout, redis, msgpack, semver and croniter.
set -euo pipefail

MIRROR=${1:?usage: run_suites.sh MIRROR_GIT_DIR [node|python|both] [respqueue|redis] [REF]}
SUITE=${2:-both}
TARGET=${3:-respqueue}
REF=${4:-}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
WORK=${WORK:-/work/ext/bullmq}
OUT=${OUT:-/tmp/upstream-logs}
mkdir -p "$OUT"

case "$WORK" in "$ROOT"|"$ROOT"/*) echo "WORK must be outside the repository" >&2; exit 2 ;; esac

# ---- checkout and build (once) -------------------------------------------------------------------
if [ ! -d "$WORK/.git" ]; then
  git clone -q "$MIRROR" "$WORK"
fi
if [ -n "$REF" ]; then
  git -C "$WORK" checkout -q "$REF"
fi
echo "bullmq at $(git -C "$WORK" describe --tags --always) ($(git -C "$WORK" rev-parse HEAD))"
if [ ! -f "$WORK/.respqueue-built" ] || [ "$(cat "$WORK/.respqueue-built")" != "$(git -C "$WORK" rev-parse HEAD)" ]; then
  (
    cd "$WORK"
    npm install --ignore-scripts --no-audit --no-fund
    npm run clean:scripts
    npm run generate:raw:scripts
    npm run transform:commands
    # dist/ is needed by the child-pool and sandbox tests (they fork dist/cjs/classes/main.js)
    npx tsc && npx tsc -p tsconfig-cjs.json
    npm run copy:lua && npm run copy:includes:lua && npm run copy:main:type
    # the Python package's Lua scripts come from the same generated rawScripts
    npm run copy:lua:python
    git rev-parse HEAD > .respqueue-built
  )
fi

# ---- one suite against one server, in a private network namespace --------------------------------
run_one() {  # suite target
  local suite=$1 target=$2 log="$OUT/$1-$2.log"
  local data
  data=$(mktemp -d /tmp/upstream-data.XXXXXX)
  local server
  if [ "$target" = respqueue ]; then
    server="cd '$ROOT' && exec python -m respqueue serve --host 127.0.0.1 --port 6379 --dir '$data/rq'"
  else
    server="exec redis-server --bind 127.0.0.1 --port 6379 --save '' --appendonly no --dir '$data'"
  fi
  local tests
  if [ "$suite" = node ]; then
    tests="cd '$WORK' && REDIS_HOST=127.0.0.1 REDIS_PORT=6379 timeout 3000 npx vitest run --no-file-parallelism ${VITEST_ARGS:-}"
  else
    # pytest.ini's timeout_method=thread ends the whole run at the first test over 30 s: pytest_resume.py
    # counts that test as failed and carries on with the ones after it (see there)
    tests="cd '$WORK/python' && PYTHONPATH='$WORK/python' timeout 3000 python '$ROOT/interop/upstream/pytest_resume.py' ${PYTEST_ARGS:-} tests"
  fi
  echo "running the $suite suite against $target -> $log"
  # shellcheck disable=SC2016
  unshare -rn bash -c '
    ip link set lo up
    ( '"$server"' ) > "'"$data"'/server.log" 2>&1 &
    spid=$!
    for _ in $(seq 1 100); do
      (exec 3<>/dev/tcp/127.0.0.1/6379) 2>/dev/null && break
      sleep 0.2
    done
    set +e
    ( '"$tests"' )
    rc=$?
    echo "exit status $rc"
    kill $spid; wait $spid 2>/dev/null
    exit $rc
  ' > "$log" 2>&1 || true
  # the summary lines
  if [ "$suite" = node ]; then
    sed 's/\x1b\[[0-9;]*m//g' "$log" | grep -E '^ +(Test Files|Tests|Errors) ' || tail -5 "$log"
  else
    grep -E '^FAILED tests/\S+$' "$log" || true
    grep -E '^passed [0-9]+  failed [0-9]+' "$log" | tail -1
  fi
  rm -rf "$data"
}

for s in node python; do
  if [ "$SUITE" = both ] || [ "$SUITE" = "$s" ]; then
    run_one "$s" "$TARGET"
  fi
done
