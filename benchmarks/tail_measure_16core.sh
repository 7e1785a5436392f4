#!/usr/bin/env bash
# The issue-16 measurement grid for a 16-core machine (Table I's largest node): the six zoo models,
# nodes of 1, 2, 4, 8 and 16 cores, background duty 0 / 0.5 / 1.0 and 3 repeats (540 points,
# about 40 min on an idle machine). Writes the CSV, and the load around the run, to runs/tail/.
# Run it on a machine nobody else uses, then `hetsched tail validate --data runs/tail/measured-16core.csv`.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-runs/tail/measured-16core.csv}
mkdir -p "$(dirname "$OUT")"
{ date -u +%FT%TZ; uptime; cat /proc/pressure/cpu 2>/dev/null || echo "no PSI"; } > "$OUT.before.txt"
.venv/bin/hetsched tail measure \
  --models "cnn-s:400,cnn-m:200,cnn-l:100,resnet18ish:100,resnet50:40,retinanet:16" \
  --nodes "0;0,1;0,1,2,3;0,1,2,3,4,5,6,7;0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15" \
  --duties "0,0.5,1.0" --repeats 3 --seed 16 --out "$OUT"
{ date -u +%FT%TZ; uptime; cat /proc/pressure/cpu 2>/dev/null || echo "no PSI"; } > "$OUT.after.txt"
