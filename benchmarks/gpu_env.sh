# Sourced by benchmarks/gpu_*.sh once they have set $out: the output folder, unbuffered Python, the
# plugin from this checkout when it is not installed (a GPU machine without network), and
# record_device, which writes what ran where to $out/device.txt.
mkdir -p "$out"
export PYTHONUNBUFFERED=1
if ! python3 -m pip show pytest-kernelbench >/dev/null 2>&1; then
  export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTEST_PLUGINS=pytest_kernelbench.plugin
fi

record_device() {  # extra commands to record may follow, e.g. record_device nproc
  { nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
    python3 -c "import torch, triton; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__)"
    date -u +%Y-%m-%dT%H:%MZ
    lscpu 2>/dev/null | grep -E "^(Model name|Thread\(s\) per core|Core\(s\) per socket|Socket\(s\)|NUMA node\(s\)):" | tr -s " "
    echo "last core's SMT siblings: $(cat /sys/devices/system/cpu/cpu$(($(nproc) - 1))/topology/thread_siblings_list 2>/dev/null)"
    if (($#)); then "$@"; fi; } | tee "$out/device.txt"
}
