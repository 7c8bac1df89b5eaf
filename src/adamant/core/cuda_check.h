#pragma once
// Only for files compiled with CUDA (*.cu, *_cuda.cpp).
#include <cuda_runtime.h>

#include "adamant/core/error.h"

#define ADAMANT_CUDA_CHECK(expr)                                                              \
  do {                                                                                        \
    const cudaError_t adamant_status_ = (expr);                                               \
    if (adamant_status_ != cudaSuccess) {                                                     \
      ::adamant::fail("CUDA error {} ({}) in {} at {}:{}", static_cast<int>(adamant_status_), \
                      cudaGetErrorString(adamant_status_), #expr, __FILE__, __LINE__);        \
    }                                                                                         \
  } while (false)
