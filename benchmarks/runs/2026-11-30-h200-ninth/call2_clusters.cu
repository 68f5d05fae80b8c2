// Clusters of K blocks an H200 holds at once, for blocks like ln_bwd_piped's (512 or 1024
// threads, one an SM by shared memory).
#include <cstdio>
#include <cuda_runtime.h>
__global__ void k(float *p) {
  extern __shared__ float s[];
  if (p) p[threadIdx.x] = s[threadIdx.x];
}
int main() {
  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  const int smem = 200 * 1024;
  cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  for (int threads : {512, 1024})
    for (int kc : {1, 2, 4, 8}) {
      cudaLaunchAttribute a[1];
      a[0].id = cudaLaunchAttributeClusterDimension;
      a[0].val.clusterDim.x = kc; a[0].val.clusterDim.y = 1; a[0].val.clusterDim.z = 1;
      cudaLaunchConfig_t cfg = {};
      cfg.gridDim = dim3(sms / kc * kc); cfg.blockDim = dim3(threads);
      cfg.dynamicSmemBytes = smem; cfg.attrs = a; cfg.numAttrs = 1;
      int n = -1;
      cudaError_t e = cudaOccupancyMaxActiveClusters(&n, k, &cfg);
      printf("SMs %d threads %d cluster %d: max active clusters %d (%d blocks) %s\n", sms,
             threads, kc, n, n * kc, cudaGetErrorString(e));
    }
  return 0;
}
