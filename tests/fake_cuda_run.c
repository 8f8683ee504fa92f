/* More of the stand-in driver (tests/fake_cuda.c), for `tbundle run`
   without a GPU: linked with fake_cuda.c into build/libfakecuda_run.so,
   which build/tbundle_fake opens (TB_LIBCUDA_NAME). The stand-in's device
   memory is host memory (cuMemAlloc_v2 is malloc), so a program of memset
   and copy steps runs for real and its outputs can be compared.
   Every definition here is weak: where fake_cuda.c defines the same entry
   point (as the runner's own tests may need it to), that one is used. */
#include <stdint.h>
#include <string.h>

#define WEAK __attribute__((weak))
#define UNUSED(x) (void)(x)

int cuCtxSynchronize(void) WEAK;
int cuCtxSynchronize(void) { return 0; }
int cuStreamCreate(void **s, unsigned flags) WEAK;
int cuStreamCreate(void **s, unsigned flags) {
    static uintptr_t next = 0x5000;
    UNUSED(flags);
    *s = (void *)next;
    next += 0x10;
    return 0;
}
int cuStreamDestroy_v2(void *s) WEAK;
int cuStreamDestroy_v2(void *s) { UNUSED(s); return 0; }
int cuMemcpyHtoD_v2(uint64_t d, const void *s, size_t n) WEAK;
int cuMemcpyHtoD_v2(uint64_t d, const void *s, size_t n) {
    memcpy((void *)(uintptr_t)d, s, n);
    return 0;
}
int cuMemcpyDtoH_v2(void *d, uint64_t s, size_t n) WEAK;
int cuMemcpyDtoH_v2(void *d, uint64_t s, size_t n) {
    memcpy(d, (const void *)(uintptr_t)s, n);
    return 0;
}
int cuMemcpyDtoD_v2(uint64_t d, uint64_t s, size_t n) WEAK;
int cuMemcpyDtoD_v2(uint64_t d, uint64_t s, size_t n) {
    memcpy((void *)(uintptr_t)d, (const void *)(uintptr_t)s, n);
    return 0;
}
/* what a runner may use to upload constants and run its steps */
int cuMemcpyHtoDAsync_v2(uint64_t d, const void *s, size_t n, void *st) WEAK;
int cuMemcpyHtoDAsync_v2(uint64_t d, const void *s, size_t n, void *st) {
    UNUSED(st);
    memcpy((void *)(uintptr_t)d, s, n);
    return 0;
}
int cuMemcpyDtoHAsync_v2(void *d, uint64_t s, size_t n, void *st) WEAK;
int cuMemcpyDtoHAsync_v2(void *d, uint64_t s, size_t n, void *st) {
    UNUSED(st);
    memcpy(d, (const void *)(uintptr_t)s, n);
    return 0;
}
int cuMemsetD16Async(uint64_t d, unsigned short v, size_t n, void *st) WEAK;
int cuMemsetD16Async(uint64_t d, unsigned short v, size_t n, void *st) {
    size_t i;
    UNUSED(st);
    for (i = 0; i < n; i++) ((uint16_t *)(uintptr_t)d)[i] = v;
    return 0;
}
int cuMemsetD8_v2(uint64_t d, unsigned char v, size_t n) WEAK;
int cuMemsetD8_v2(uint64_t d, unsigned char v, size_t n) {
    memset((void *)(uintptr_t)d, v, n);
    return 0;
}
