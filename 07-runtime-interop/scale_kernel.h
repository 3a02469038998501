// scale_kernel.h — the runtime-API half of lesson 07, as the programs see it.
//
// scale_kernel.cu is compiled by nvcc and launched with <<<>>>, the way runtime
// code in a real application is; the programs are plain C++ and call this wrapper.
#pragma once

#include <cuda_runtime_api.h>

// Multiplies data[0..count) by factor on the given stream. Returns cudaGetLastError()
// right after the launch: the last error of any runtime call on this thread, which is the
// launch's own if it failed to start. The kernel itself runs asynchronously.
cudaError_t launchScale(float* data, float factor, int count, cudaStream_t stream);
