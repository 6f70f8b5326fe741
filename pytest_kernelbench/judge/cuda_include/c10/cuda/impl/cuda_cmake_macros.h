#pragma once

// pytest-kernelbench, --device cpu-check: the header a CUDA build of torch generates at build time and a CPU wheel of
// torch does not ship (its c10/cuda headers include it). A Linux build of torch defines this one macro (it matters on
// Windows only); the TORCH_CUDA_VERSION_* macros of newer builds are left undefined (no header tests them). Searched
// only where torch's own include folder lacks the file (judge/cuda_headers.py).

#define C10_CUDA_BUILD_SHARED_LIBS
