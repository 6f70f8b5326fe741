#!/usr/bin/env bash
# GPU runs behind docs/timing-fidelity.md (issue 3) and docs/baselines.md (issue 6).
#
#   bash benchmarks/gpu_baselines.sh OUTDIR KERNELBENCH_DATA_DIR
#   STEPS="fidelity l1 l2 l3 metr" picks the parts (default: all); BUDGET_FIDELITY, BUDGET_BASELINE_L1,
#   ... BUDGET_BASELINE_METR (seconds) cap each. BASELINE_MODE=eager times eager against itself only
#   (fast: no inductor compiles; gives the eager file alone).
#
# fidelity: --solutions baseline on level 1 twice (+ triton do_bench) via benchmarks/timing_fidelity.py
# l1 l2 l3 metr: --solutions baseline --mode compile on that level: the reference compiled with
#   torch.compile (inductor, default mode) against itself in eager, so one run gives both baselines;
#   `kbagent baseline-json` then writes them in KernelBench's shape.
# Each step runs under `timeout -s INT`: pytest keeps writing its --kb-report, so a capped step
# still gives every result judged before the cap.
set -uo pipefail
out=${1:?OUTDIR}
kb=$(realpath "${2:?KERNELBENCH_DATA_DIR}")
source "$(dirname "$0")/gpu_env.sh"
record_device nproc
steps=" ${STEPS:-fidelity l1 l2 l3 metr} "

step() {  # step NAME DEFAULT_BUDGET COMMAND...
  local name=$1 budget_var start
  budget_var="BUDGET_$(tr 'a-z-' 'A-Z_' <<< "$1")"   # baseline-l1 -> BUDGET_BASELINE_L1
  local budget=${!budget_var:-$2}
  shift 2
  start=$(date +%s)
  timeout -s INT -k 30 "$budget" "$@" > "$out/$name.log" 2>&1
  echo "$name: rc=$? wall $(( $(date +%s) - start )) s (cap $budget s)" | tee -a "$out/device.txt"
  tail -3 "$out/$name.log"
}

if [[ $steps == *" fidelity "* ]]; then
  step fidelity 540 python3 benchmarks/timing_fidelity.py --dataset "$kb/problems.jsonl" --level 1 --problems 1-100 \
    -n "${WORKERS:-4}" --trials 1 --workdir "$out/fidelity" --out "$out/timing-fidelity.md"
fi
for lv in l1 l2 l3 metr; do
  [[ $steps == *" $lv "* ]] || continue
  level=${lv#l}; [ "$lv" = metr ] && level=3-metr
  data="$kb/problems.jsonl"; [ "$lv" = metr ] && data="$kb/pike-levels.jsonl"
  step "baseline-$lv" 540 python3 -m pytest -p no:cacheprovider -q -n "${WORKERS:-8}" --level "$level" --dataset "$data" \
    --solutions baseline --mode "${BASELINE_MODE:-compile}" --device cuda --trials 1 \
    --kb-report "$out/baseline-$lv-${BASELINE_MODE:-compile}.json"
done
ls "$out"/baseline-*.json >/dev/null 2>&1 && python3 -m kbagent.cli baseline-json "$out"/baseline-*.json \
  --out-dir "$out" --label H100_ours
exit 0
