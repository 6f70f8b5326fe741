#!/usr/bin/env bash
# Multi-GPU host check (issue 5): pytest -n spreads items over every visible GPU, one timed run per
# GPU at a time (the device lock is per GPU UUID). Writes the report and a per-GPU count.
#
#   bash benchmarks/gpu_multi.sh OUTDIR KERNELBENCH_DATA_DIR      # e.g. on the device tool's nvidia-h200-x2
#   WORKERS (default: 2 per GPU), PROBLEMS (default 1-40), BUDGET (seconds, default 400)
set -uo pipefail
out=${1:?OUTDIR}
kb=$(realpath "${2:?KERNELBENCH_DATA_DIR}")
source "$(dirname "$0")/gpu_env.sh"
gpus=$(nvidia-smi --query-gpu=uuid --format=csv,noheader | wc -l)
{ nvidia-smi --query-gpu=index,name,uuid --format=csv,noheader; date -u +%Y-%m-%dT%H:%MZ; } | tee "$out/device.txt"
nvidia-smi --query-gpu=index,utilization.gpu --format=csv,noheader,nounits -l 1 > "$out/util.csv" 2>/dev/null &
watch=$!
start=$(date +%s)
timeout -s INT -k 30 "${BUDGET:-400}" python3 -m pytest -p no:cacheprovider -q -n "${WORKERS:-$((2 * gpus))}" \
  --level 1 --problems "${PROBLEMS:-1-40}" --dataset "$kb/problems.jsonl" --solutions baseline --device cuda --trials 1 \
  --kb-report "$out/multi.json" > "$out/multi.log" 2>&1
echo "rc=$? wall $(( $(date +%s) - start )) s, $gpus GPUs" | tee -a "$out/device.txt"
kill "$watch"
python3 - "$out" <<'PY' | tee -a "$out/device.txt"
import collections, csv, json, sys
out = sys.argv[1]
results = json.load(open(f"{out}/multi.json"))["results"]
per = collections.Counter(r["device"] for r in results)
ok = sum(r["outcome"] == "correct" for r in results)
print(f"judged {len(results)}, correct {ok}; per device: {dict(sorted(per.items()))}")
busy = collections.defaultdict(list)
for row in csv.reader(open(f"{out}/util.csv")):
    if len(row) == 2:
        busy[row[0].strip()].append(float(row[1]) > 0)
print("GPU busy share:", {k: round(sum(v) / len(v), 2) for k, v in sorted(busy.items()) if v})
PY
exit 0
