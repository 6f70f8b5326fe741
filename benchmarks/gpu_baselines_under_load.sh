#!/usr/bin/env bash
# Level-1 references judged against themselves, alone and beside CPU hogs (one per core but one, each spinning for
# HOG_S seconds): the printed speedup, the event and wall-clock speedups, the calls read as off-stream, per run.
# Usage: bash benchmarks/gpu_baselines_under_load.sh OUT KB_DIR [PROBLEMS]   (KB_DIR holds problems.jsonl)
set -uo pipefail
out=$1; kb=$2; problems=${3:-1-3}; HOG_S=${HOG_S:-100}
mkdir -p "$out"; source "$(dirname "$0")/gpu_env.sh"; record_device nproc
show() { python3 - "$1" "$2" <<'PY'
import json, sys
for r in json.load(open(sys.argv[1]))["results"]:
    e, w = r["extra"], r["extra"].get("wall_check", {})
    print(f"| {sys.argv[2]} | {r['problem'][:30]} | {r['outcome']} | {r['speedup'] or 0:.3f} | {w.get('event_speedup')} | "
          f"{w.get('wall_speedup')} | {w.get('capped')} | {e.get('offstream_calls')} | {(e.get('timing_core') or {}).get('niced')} |")
PY
}
run() { timeout 120 python3 -m pytest --level 1 --problems "$problems" --dataset "$kb/problems.jsonl" --solutions baseline --device cuda \
          -n 4 -p no:cacheprovider -q --kb-report "$out/$1.json" > "$out/$1.log" 2>&1; show "$out/$1.json" "$1"; }
echo "| run | problem | outcome | printed | event | wall | capped | off-stream calls | niced threads |"
echo "| --- | --- | --- | ---: | ---: | ---: | --- | --- | ---: |"
run alone
hogs=()
for _ in $(seq $(( $(nproc) - 1 ))); do
  python3 -c "import time
end = time.monotonic() + $HOG_S
while time.monotonic() < end: pass" & hogs+=($!)
done
run hogs1
run hogs2
kill "${hogs[@]}" 2>/dev/null; wait 2>/dev/null
run after
