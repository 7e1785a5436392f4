#!/usr/bin/env bash
# The checks that need a quiet many-core host (the lent 16-core device machine), as one bounded
# script; the 2-core sandbox cannot give them because every process shares two cores:
#   A. issue 20: serving throughput with 1, 2 and 4 CPU servers (closed loop, plus the kill -9
#      fault run at 0.7x), and the overload run (1x and 3x) with the front on a core of its own;
#   B. issue 17: RLTune rollouts on 1, 2, 4 and 8 Ray actors (efficiency at 8), and the
#      simulator at production-trace scale on a core of its own, beside A.
# Each step has its own time limit and log; a step that fails does not stop the next.
# Run from the repository root: `OUT=runs/many-core benchmarks/many_core_round.sh` (ARCHIVE=F.tar.gz
# packs the results but the checkpoint into one file). PY: a Python whose site has our
# dependencies (PYTHONPATH=src is set here). DEV: where the serving model is trained (cuda|cpu).
# SCALE=0 runs tiny sizes (a dry run of the script itself on any machine); JOBS=0 and ROLLOUTS=0
# skip B's two steps. ARCHIVE must lie outside OUT.
set -u
OUT=${OUT:-runs/many-core}
PY=${PY:-.venv/bin/python}
DEV=${DEV:-cpu}
SCALE=${SCALE:-1}
mkdir -p "$OUT"
export PYTHONPATH="$PWD/src:$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 RAY_AUTH_MODE=disabled
HETSCHED=("$PY" -c 'import sys; from hetsched.cli import app; sys.argv[0] = "hetsched"; app()')

step() {  # step NAME LIMIT_S COMMAND...: runs with a time limit, logs to $OUT/NAME.log
  local name=$1 limit=$2
  shift 2
  echo "== $name start $(date -u +%T) load $(cut -d' ' -f1-3 /proc/loadavg)"
  timeout -k 5 "$limit" "$@" >"$OUT/$name.log" 2>&1
  echo "== $name rc=$? end $(date -u +%T) load $(cut -d' ' -f1-3 /proc/loadavg)"
  tail -n 12 "$OUT/$name.log"
}

{ date -u +%FT%TZ; uname -a; nproc; "$PY" --version; cat /proc/loadavg
  "$PY" -c 'import torch, ray; print("torch", torch.__version__, "ray", ray.__version__)'
} >"$OUT/machine.txt" 2>&1
cat "$OUT/machine.txt"

if [ "$SCALE" = 1 ]; then
  epochs=4 duration=10 concurrency=48 servers="1 2 4" workers=1,2,4,8 trajectories=64
  jobs_sizes=10000,100000,450000 jobs_windows=200000,440000
else
  epochs=1 duration=3 concurrency=8 servers="1" workers=1,2 trajectories=4
  jobs_sizes=2000,4000 jobs_windows=1000
fi
pin=()  # the jobs benchmark's own core, where taskset exists
command -v taskset >/dev/null && pin=(taskset -c "$(($(nproc) - 1))")

[ "${JOBS:-1}" = 1 ] && ( step jobs_scale 240 "${pin[@]}" "$PY" benchmarks/bench_jobs_scale.py \
  --sizes "$jobs_sizes" --windows-at "$jobs_windows" --repeats 1 --out "$OUT/jobs_scale" \
  ) >"$OUT/jobs_scale.step" 2>&1 &
jobs_pid=${!:-}

model=$OUT/model
step train 120 "${HETSCHED[@]}" slim train --data digits:8 --epochs "$epochs" --device "$DEV" \
  --out "$model"
for n in $servers; do
  step "stacks_s$n" 150 "$PY" benchmarks/bench_serving_stacks.py --checkpoint "$model/checkpoint.pt" \
    --stacks fastapi-actors --servers "$n" --rates "" --duration-s "$duration" \
    --concurrency "$concurrency" --port $((8800 + n)) --out "$OUT/stacks_s$n/stacks.json"
done
step overload 180 "$PY" benchmarks/bench_serving_overload.py --checkpoint "$model/checkpoint.pt" \
  --duration-s "$duration" --out "$OUT/overload"
[ "${ROLLOUTS:-1}" = 1 ] && step rollouts 180 "$PY" benchmarks/bench_jobs_rollouts.py --workers "$workers" \
  --trajectories "$trajectories" --out "$OUT/rollouts"

[ -n "$jobs_pid" ] && wait "$jobs_pid"
cat "$OUT/jobs_scale.step" 2>/dev/null
if [ -n "${ARCHIVE:-}" ]; then
  tar -czf "$ARCHIVE" --exclude='*.pt' -C "$OUT" . && ls -la "$ARCHIVE"
fi
