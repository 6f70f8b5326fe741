#!/usr/bin/env bash
# GPU proof run (issue 2): the bundled problems with their CUDA solutions, KernelBench level 1
# problems 1-10 with --solutions baseline, and the GPU-marked tests; writes reports and a Markdown table.
#
#   bash benchmarks/gpu_proof.sh OUTDIR [KERNELBENCH_DATA_DIR]
#   STEPS="mini l1 tests" (default: all three) picks the parts to run.
#
# Run from the repo root on a CUDA machine with torch, pytest, pytest-benchmark, pytest-xdist,
# filelock, rich and typer installed (the plugin itself needs no network and no litellm).
set -uo pipefail
out=${1:-gpu-out}
kb=$(realpath "${2:-../shared/kernelbench}")
source "$(dirname "$0")/gpu_env.sh"
export TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-9.0} KB_TEST_DATA="$kb"
record_device

steps=" ${STEPS:-mini l1 tests} "
if [[ $steps == *" mini "* ]]; then
# 1. bundled problems, CUDA solutions: xdist workers build in parallel, timing takes the GPU lock in turn.
start=$(date +%s)
python3 -m pytest -p no:cacheprovider --level mini --solutions solutions --device cuda -n 10 -v \
  --kb-report "$out/mini-cuda.json" 2>&1 | tail -40 | tee "$out/mini-cuda.log"
echo "mini-cuda wall: $(( $(date +%s) - start )) s" | tee -a "$out/device.txt"
fi

if [[ $steps == *" l1 "* ]]; then
# 2. level 1, problems 1-10, the reference judged against itself.
start=$(date +%s)
python3 -m pytest -p no:cacheprovider --level 1 --problems 1-10 --dataset "$kb/problems.jsonl" --solutions baseline \
  --device cuda -n 2 -v --kb-report "$out/l1-baseline.json" 2>&1 | tail -30 | tee "$out/l1-baseline.log"
echo "l1-baseline wall: $(( $(date +%s) - start )) s" | tee -a "$out/device.txt"
fi

if [[ $steps == *" tests "* ]]; then
# 3. the GPU-marked tests.
python3 -m pytest -p no:cacheprovider tests/test_gpu.py -v -rs > "$out/gpu-tests.log" 2>&1
grep -E "PASSED|FAILED|SKIPPED|ERROR|passed|failed" "$out/gpu-tests.log"
fi

reports=$(ls "$out"/mini-cuda.json "$out"/l1-baseline.json 2>/dev/null)
[ -n "$reports" ] && python3 -m kbagent.cli table $reports | tee "$out/tables.md"
exit 0
