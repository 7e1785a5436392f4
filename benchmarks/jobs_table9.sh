#!/usr/bin/env bash
# RLTune's Table 9 with both learned baselines: on each trace, train RLTune's prioritiser,
# RLScheduler and SchedInspector (FIFO base, BSLD reward) for seeds 0-2, then print Table 9
# (10 batches of 256 held-out jobs per replicate, 3 replicates) beside the paper's numbers.
# Budget knobs: EPOCHS x EPISODES episodes of 256 jobs per model (defaults: 2 x 6, which is
# 27 models in ~15 min of training on a busy 2-core machine). Run from the repository root;
# the Alibaba GPU 2023 trace is read from ../shared/data.
set -euo pipefail
OUT=${OUT:-runs/jobs/table9}
EPOCHS=${EPOCHS:-2}
EPISODES=${EPISODES:-6}
ALIBABA=${ALIBABA:-../shared/data/traces/alibaba-gpu-2023/openb_pod_list_gpuspec33.csv}
declare -A DATA=(
  [philly]="--synthetic philly --jobs 4096 --cluster-fraction 0.03"
  [helios]="--synthetic helios --jobs 4096 --cluster helios --cluster-fraction 0.1"
  [alibaba]="--trace $ALIBABA --cluster-fraction 0.01 --arrival-compression 30 --estimate noisy"
)
for trace in philly helios alibaba; do
  checkpoints=()
  for agent in rltune rlscheduler schedinspector; do
    for seed in 0 1 2; do
      run="$OUT/$trace/$agent-seed$seed"
      # shellcheck disable=SC2086  # DATA holds several options
      hetsched jobs train ${DATA[$trace]} --agent "$agent" --metric bsld --base-policy fcfs \
        --epochs "$EPOCHS" --trajectories-per-epoch "$EPISODES" --trajectories-per-update 3 \
        --seed "$seed" --out "$run"
      checkpoints+=(--checkpoint "$run/agent.pt")
    done
  done
  # shellcheck disable=SC2086
  hetsched jobs evaluate "${checkpoints[@]}" ${DATA[$trace]} --bases fcfs,sjf,f1,wfp3,qssf \
    --table9 "$trace" --replicates 3 --out "$OUT/$trace/eval"
done
python - "$OUT" <<'PY'
import json, pathlib, sys
runs = sorted(pathlib.Path(sys.argv[1]).glob("*/*-seed*/run.json"))
total = sum(json.loads(p.read_text())["wall_s"] for p in runs)
print(f"{len(runs)} models trained in {total:.0f} s of training wall time")
PY
