#!/usr/bin/env bash
# One lent-GPU session's checks, as one bounded script (the device machine is lent for minutes):
#   A. issue 20: the live executor against a plain batched loop on the GPU (NVML energy path),
#      10 rounds each at 32, 4 and 1 backend workers, then 6 longer rounds (1,024 images) at 4,
#      where instance churn showed (rounds of 256 images last well under a second);
#   B. issue 19, item 6: the live router comparison on a heterogeneous pair, one GPU server and
#      one CPU server: a digits:8 model trained here, both devices profiled here, capacities
#      measured here, scenarios written from them, every rule and the shipped learned router;
#   C. issue 17: the simulator at production-trace scale (10k / 100k / 450k jobs), on a quiet core.
# Each step has its own time limit and log; a step that fails does not stop the next.
# Run from the repository root: `OUT=runs/gpu-round benchmarks/gpu_round.sh` (ARCHIVE=F.tar.gz
# also packs the results but the checkpoint into one file); on a machine without
# our virtual environment set PY to a Python whose site has our dependencies (PYTHONPATH=src).
# DEV=cpu runs the same steps without a GPU (a dry run of the script itself).
set -u
OUT=${OUT:-runs/gpu-round}
PY=${PY:-.venv/bin/python}
DEV=${DEV:-cuda}
SCALE=${SCALE:-1}  # 0: tiny sizes (a dry run of the script)
mkdir -p "$OUT"
export PYTHONPATH="$PWD/src:$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
HETSCHED=("$PY" -c 'import sys; from hetsched.cli import app; sys.argv[0] = "hetsched"; app()')

step() {  # step NAME LIMIT_S COMMAND...: runs with a time limit, logs to $OUT/NAME.log
  local name=$1 limit=$2
  shift 2
  echo "== $name start $(date -u +%T) load $(cut -d' ' -f1-3 /proc/loadavg)"
  timeout "$limit" "$@" >"$OUT/$name.log" 2>&1
  echo "== $name rc=$? end $(date -u +%T) load $(cut -d' ' -f1-3 /proc/loadavg)"
  tail -n 25 "$OUT/$name.log"
}

{ date -u +%FT%TZ; uname -a; nproc; "$PY" --version; cat /proc/loadavg
  nvidia-smi -L 2>/dev/null || echo "no nvidia-smi"
  "$PY" -c 'import torch; print("torch", torch.__version__, "cuda", torch.cuda.is_available())'
} >"$OUT/machine.txt" 2>&1
cat "$OUT/machine.txt"

if [ "$SCALE" = 1 ]; then
  images=256 rounds=10 long_images=1024 long_rounds=6 burst=2000 live_images=2000 seeds=3
  jobs_sizes=10000,100000,450000 jobs_windows=200000,440000
else
  images=32 rounds=2 long_images=64 long_rounds=1 burst=100 live_images=150 seeds=1
  jobs_sizes=2000,8000 jobs_windows=4000
fi
pin=()  # the jobs benchmark's own core, where taskset exists
command -v taskset >/dev/null && pin=(taskset -c "$(($(nproc) - 1))")

# C runs beside A and B on a core of its own (it is one single-threaded process); JOBS=0 skips it.
[ "${JOBS:-1}" = 1 ] && ( step jobs_scale 200 "${pin[@]}" "$PY" benchmarks/bench_jobs_scale.py --sizes "$jobs_sizes" \
    --windows-at "$jobs_windows" --repeats 1 --out "$OUT/jobs_scale" ) >"$OUT/jobs_scale.step" 2>&1 &
jobs_pid=${!:-}

for workers in 32 4 1; do
  step "live_executor_w$workers" 90 "$PY" benchmarks/bench_live_executor.py --device "$DEV" \
    --threads 4 --images "$images" --rounds "$rounds" --workers "$workers" \
    --out "$OUT/live_executor_w$workers.json"
done
step live_executor_long_w4 120 "$PY" benchmarks/bench_live_executor.py --device "$DEV" \
  --threads 4 --images "$long_images" --rounds "$long_rounds" --workers 4 \
  --out "$OUT/live_executor_long_w4.json"

model=$OUT/model
step train 120 "${HETSCHED[@]}" slim train --data digits:8 --epochs 1 --random-tuples 0 \
  --device "$DEV" --out "$model"
step accuracy 90 "${HETSCHED[@]}" slim accuracy --checkpoint "$model/checkpoint.pt" \
  --device "$DEV" --out "$model"
step profile_gpu 90 "${HETSCHED[@]}" slim profile --device "$DEV" --image-size 8 \
  --checkpoint "$model/checkpoint.pt" --batch-sizes 1,4,16 --min-time 0.05 --passes 2 \
  --name dev-gpu-8px --out "$OUT/profiles"
step profile_cpu 90 "${HETSCHED[@]}" slim profile --device cpu --threads 1 --image-size 8 \
  --checkpoint "$model/checkpoint.pt" --batch-sizes 1,4,16 --min-time 0.05 --passes 2 \
  --name dev-cpu-1thread-8px --out "$OUT/profiles"
step capacity 120 "$PY" benchmarks/bench_slim_live_capacity.py --checkpoint "$model/checkpoint.pt" \
  --devices "$DEV;cpu;$DEV,cpu" --widths 1.0,0.25 --images "$burst" --out "$OUT/capacity.json"
step scenarios 30 "$PY" benchmarks/gpu_round_scenarios.py --capacity "$OUT/capacity.json" \
  --device "$DEV" --profiles "$OUT/profiles" --images "$live_images" --out "$OUT/scenarios"
# One step per scenario, so that a step stopped at its limit loses one table, not both.
for scenario in live-pair-1.5x live-pair-bursty; do
  step "compare_$scenario" 150 "${HETSCHED[@]}" slim experiment \
    --scenarios "$OUT/scenarios/$scenario.yaml" --live --checkpoint "$model/checkpoint.pt" \
    --live-devices "$DEV,cpu" --seeds "$seeds" \
    --routers constant-best,jsq-0.5,least-completion-0.5,backlog-width,slackfit,infaas,least-completion,learned \
    --out "$OUT/compare_$scenario"
done

[ -n "$jobs_pid" ] && wait "$jobs_pid"
cat "$OUT/jobs_scale.step" 2>/dev/null
# What comes back from a lent machine is a few files: everything small, in one archive.
if [ -n "${ARCHIVE:-}" ]; then
  tar -czf "$ARCHIVE" --exclude='*.pt' -C "$OUT" . && ls -la "$ARCHIVE"
fi
