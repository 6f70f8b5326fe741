#!/usr/bin/env bash
# GPU run behind docs/solutions.md (issue 6): the committed solutions judged against PyTorch
# eager and against torch.compile, then the tables.
#
#   bash benchmarks/gpu_solutions.sh OUTDIR KERNELBENCH_DATA_DIR
#   LEVELS=1,2,3-metr (default) picks the levels, KEXPR a pytest -k expression; STEPS="eager compile" the runs;
#   BUDGET_EAGER / BUDGET_COMPILE cap each (seconds; the report keeps what finished).
set -uo pipefail
out=${1:?OUTDIR}
kb=$(realpath "${2:?KERNELBENCH_DATA_DIR}")
source "$(dirname "$0")/gpu_env.sh"
record_device
steps=" ${STEPS:-eager compile} "
common=(-p no:cacheprovider -q -rfE --level "${LEVELS:-1,2,3-metr}" --dataset "$kb/problems.jsonl"
        --dataset "$kb/pike-levels.jsonl" --solutions solutions --device cuda --trials "${TRIALS:-3}" ${KEXPR:+-k "$KEXPR"})
for mode in eager compile; do
  [[ $steps == *" $mode "* ]] || continue
  var="BUDGET_${mode^^}"; start=$(date +%s)
  timeout -s INT -k 30 "${!var:-400}" python3 -m pytest "${common[@]}" -n "${WORKERS:-4}" --mode "$mode" \
    --kb-report "$out/solutions-$mode${TAG:-}.json" > "$out/solutions-$mode.log" 2>&1
  echo "$mode: rc=$? wall $(( $(date +%s) - start )) s" | tee -a "$out/device.txt"
  tail -25 "$out/solutions-$mode.log"
done
args=(--eager "$out/solutions-eager${TAG:-}.json")
[ -f "$out/solutions-compile${TAG:-}.json" ] && args+=(--compile "$out/solutions-compile${TAG:-}.json")
[ -f "$out/solutions-eager${TAG:-}.json" ] && python3 -m kbagent.cli solutions-table "${args[@]}" | tee "$out/solutions${TAG:-}.md"
exit 0
