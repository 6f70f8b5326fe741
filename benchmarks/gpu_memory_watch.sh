#!/usr/bin/env bash
# Samples, every second, each process's GPU memory (nvidia-smi) with the judge stage it is in
# (the last line of the worker's status.log in its kb-eval-* folder) and its problem:
#   bash benchmarks/gpu_memory_watch.sh OUT.tsv &   ...   kill %1
# Rows: unix time, pid, MiB used, stage, problem file. Shows which workers hold device memory
# while another one holds the device lock.
out=${1:?OUT.tsv}
while true; do
  now=$(date +%s)
  nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits 2>/dev/null |
  while IFS=', ' read -r pid mib; do
    cwd=$(readlink "/proc/$pid/cwd" 2>/dev/null)
    stage=$(tail -n 1 "$cwd/status.log" 2>/dev/null | cut -d' ' -f1)
    prob=$(cd "$cwd" 2>/dev/null && ls problem_*.py 2>/dev/null | head -1)
    printf '%s\t%s\t%s\t%s\t%s\n' "$now" "$pid" "$mib" "${stage:--}" "${prob:--}"
  done >> "$out"
  sleep 1
done
