#pragma once

// pytest-kernelbench, --device cpu-check: the header a CUDA build of torch generates at build time and a CPU wheel of
// torch does not ship (ATen/cuda/cub.h includes it), with the values of NVIDIA's torch wheels (cuDNN and MAGMA in,
// ROCm out). Searched only where torch's own include folder lacks the file (judge/cuda_headers.py).

#define AT_CUDNN_ENABLED() 1
#define AT_CUSPARSELT_ENABLED() 1
#define AT_HIPSPARSELT_ENABLED() 0
#define AT_ROCM_ENABLED() 0
#define AT_MAGMA_ENABLED() 1

#define NVCC_FLAGS_EXTRA ""
