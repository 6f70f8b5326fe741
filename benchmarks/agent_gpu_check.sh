#!/usr/bin/env bash
# GPU check of the agent side (no key, no network):
#  1. the worked examples the phase-0 prompt shows (CUDA load_inline, Triton) are judged correct;
#  2. `kbagent search` with the scripted model runs end to end on CUDA (language cuda by default);
#  3. `pytest --model scripted/reference` searches, judges and saves the best candidate on CUDA.
#
#   bash benchmarks/agent_gpu_check.sh OUTDIR        (run folders go to a temporary folder)
set -uo pipefail
out=${1:-agent-gpu-out}
mkdir -p "$out"
work=$(mktemp -d)
export PYTHONUNBUFFERED=1 TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-9.0}
if ! python3 -m pip show pytest-kernelbench >/dev/null 2>&1; then
  # Not installed: load both plugins from this checkout.
  export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTEST_PLUGINS=pytest_kernelbench.plugin,kbagent.pytest_plugin
fi
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/device.txt"

python3 - "$work" <<'EOF'
import pathlib, sys
from kbagent import prompts
folder = pathlib.Path(sys.argv[1])
(folder / "1_Add.py").write_text(prompts.EXAMPLE_REFERENCE["cuda"] + "\n")
for language in ("cuda", "triton"):
    (folder / f"{language}.py").write_text(prompts.EXAMPLE_SOLUTION[language] + "\n")
EOF
for language in cuda triton; do
  python3 -m kbagent.cli eval "$work/1_Add.py" "$work/$language.py" --device cuda --json > "$out/example-$language.json"
  echo "worked example $language: rc=$? $(python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); print(d["outcome"], d["speedup"], d["message"][-400:])' "$out/example-$language.json")"
done

python3 -m kbagent.cli search problems/mini/1_LeakyReluScale.py --model scripted/reference --device cuda \
  --num-samples 2 --num-phases 2 --out "$work/search" --json > "$out/search-summary.json"
echo "kbagent search: rc=$? $(python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); print(d["language"], d["best"], d["llm_calls"], d["outcomes"])' "$out/search-summary.json")"

python3 -m pytest -p no:cacheprovider --level mini --problems 3 --model scripted/reference --num-samples 1 --num-phases 1 \
  --device cuda --out "$work/pytest-runs" -v > "$out/pytest.log" 2>&1
echo "pytest --model: rc=$?"; tail -4 "$out/pytest.log"
ls "$work/pytest-runs/best/levelmini"
