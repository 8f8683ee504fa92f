/* A stand-in for libcuda.so.1, so that the launcher's own logic (parameter
   checks, argument packing, tensor descriptors, launch by name, launch
   attributes) is tested on machines without a GPU: built as
   build/libfakecuda.so and opened by tests/test_launcher.c, which is
   compiled with TB_LIBCUDA_NAME pointing at it. It runs nothing: it
   answers the calls the library makes with fixed values and records what a
   launch and a tensor map encoding were given, for the test to read back
   through the fake_* functions. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fake_cuda.h"

#define FAKE_MAX 1100

static size_t param_sizes[FAKE_MAX];
static int param_count;
static int modules, launches;
static unsigned char last_params[FAKE_MAX][128];
static uintptr_t last_function;
static unsigned last_grid[3], last_block, last_shared, last_attrs;

static fake_encode last_encode;

/* autotune: a module's launches take the time its image names ("fakeT3":
   3 ms, default 1); events read a clock those launches advance */
static double module_ms[FAKE_MAX], fake_clock, event_at[1 << 16];
static int events;

/* the parameter sizes the next loaded function reports */
void fake_set_params(const size_t *sizes, int n);
void fake_set_params(const size_t *sizes, int n) {
    param_count = n;
    memcpy(param_sizes, sizes, (size_t)n * sizeof *sizes);
}
int fake_launches(void);
int fake_launches(void) { return launches; }
/* parameter i of the last launch: its bytes (the size reported) */
const void *fake_param(int i);
const void *fake_param(int i) { return last_params[i]; }
uintptr_t fake_function(void);
uintptr_t fake_function(void) { return last_function; }
void fake_grid(unsigned *g, unsigned *block, unsigned *shared, unsigned *attrs);
void fake_grid(unsigned *g, unsigned *block, unsigned *shared, unsigned *attrs) {
    memcpy(g, last_grid, sizeof last_grid);
    *block = last_block, *shared = last_shared, *attrs = last_attrs;
}
const fake_encode *fake_last_encode(void);
const fake_encode *fake_last_encode(void) { return &last_encode; }

#define UNUSED(x) (void)(x)
int cuInit(unsigned f);
int cuInit(unsigned f) { UNUSED(f); return 0; }
int cuDeviceGetCount(int *n);
int cuDeviceGetCount(int *n) { *n = 1; return 0; }
int cuDeviceGet(int *d, int o);
int cuDeviceGet(int *d, int o) { *d = o; return 0; }
int cuDeviceGetAttribute(int *v, int a, int d);
int cuDeviceGetAttribute(int *v, int a, int d) { UNUSED(a); UNUSED(d); *v = 232448; return 0; } /* shared opt-in */
int cuCtxGetCurrent(void **c);
int cuCtxGetCurrent(void **c) { *c = (void *)0x1000; return 0; }
int cuCtxGetDevice(int *d);
int cuCtxGetDevice(int *d) { *d = 0; return 0; }
int cuCtxPushCurrent_v2(void *c);
int cuCtxPushCurrent_v2(void *c) { UNUSED(c); return 0; }
int cuCtxPopCurrent_v2(void **c);
int cuCtxPopCurrent_v2(void **c) { if (c) *c = 0; return 0; }
int cuDevicePrimaryCtxRetain(void **c, int d);
int cuDevicePrimaryCtxRetain(void **c, int d) { UNUSED(d); *c = (void *)0x1000; return 0; }
int cuDevicePrimaryCtxRelease_v2(int d);
int cuDevicePrimaryCtxRelease_v2(int d) { UNUSED(d); return 0; }
int cuModuleLoadData(void **m, const void *image);
int cuModuleLoadData(void **m, const void *image) {
    const char *s = (const char *)image;
    ++modules;
    if (modules < FAKE_MAX) module_ms[modules] = strncmp(s, "fakeT", 5) == 0 ? s[5] - '0' : 1;
    *m = (void *)(uintptr_t)(0x10000 * modules);
    return 0;
}
int cuModuleUnload(void *m);
int cuModuleUnload(void *m) { UNUSED(m); return 0; }
/* a function handle names its module: the test tells which cubin ran */
int cuModuleGetFunction(void **f, void *m, const char *name);
int cuModuleGetFunction(void **f, void *m, const char *name) { UNUSED(name); *f = (void *)((uintptr_t)m + 1); return 0; }
int cuFuncGetAttribute(int *v, int a, void *f);
int cuFuncGetAttribute(int *v, int a, void *f) { UNUSED(f); *v = a == 0 ? 1024 : a == 4 ? 32 : 0; return 0; }
int cuFuncSetAttribute(void *f, int a, int v);
int cuFuncSetAttribute(void *f, int a, int v) { UNUSED(f); UNUSED(a); UNUSED(v); return 0; }
int cuFuncGetParamInfo(void *f, size_t i, size_t *off, size_t *size);
int cuFuncGetParamInfo(void *f, size_t i, size_t *off, size_t *size) {
    UNUSED(f);
    if ((int)i >= param_count) return 1; /* CUDA_ERROR_INVALID_VALUE: the list ends */
    *off = 0, *size = param_sizes[i];
    return 0;
}

static int record(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned sh, void **p, unsigned attrs) {
    int i;
    launches++;
    last_function = (uintptr_t)f;
    if ((uintptr_t)f / 0x10000 < FAKE_MAX) fake_clock += module_ms[(uintptr_t)f / 0x10000];
    last_grid[0] = gx, last_grid[1] = gy, last_grid[2] = gz;
    last_block = bx, last_shared = sh, last_attrs = attrs;
    for (i = 0; i < param_count && i < FAKE_MAX; i++)
        memcpy(last_params[i], p[i], param_sizes[i] < 128 ? param_sizes[i] : 128);
    return 0;
}
int cuLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, unsigned sh,
                   void *st, void **p, void **ex);
int cuLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, unsigned sh,
                   void *st, void **p, void **ex) {
    UNUSED(by); UNUSED(bz); UNUSED(st); UNUSED(ex);
    return record(f, gx, gy, gz, bx, sh, p, 0);
}
typedef struct {
    unsigned gx, gy, gz, bx, by, bz, shared;
    void *stream, *attrs;
    unsigned num_attrs;
} fake_config;
int cuLaunchKernelEx(const fake_config *c, void *f, void **p, void **e);
int cuLaunchKernelEx(const fake_config *c, void *f, void **p, void **e) {
    UNUSED(e);
    return record(f, c->gx, c->gy, c->gz, c->bx, c->shared, p, c->num_attrs);
}
int cuTensorMapEncodeTiled(void *map, int dtype, uint32_t rank, void *base, const uint64_t *dims, const uint64_t *strides,
                           const uint32_t *box, const uint32_t *estr, int interleave, int swizzle, int l2, int fill);
int cuTensorMapEncodeTiled(void *map, int dtype, uint32_t rank, void *base, const uint64_t *dims, const uint64_t *strides,
                           const uint32_t *box, const uint32_t *estr, int interleave, int swizzle, int l2, int fill) {
    uint32_t i;
    memset(&last_encode, 0, sizeof last_encode);
    last_encode.dtype = dtype, last_encode.rank = rank, last_encode.base = (uintptr_t)base;
    last_encode.interleave = interleave, last_encode.swizzle = swizzle, last_encode.l2 = l2, last_encode.fill = fill;
    last_encode.aligned = ((uintptr_t)map & 63) == 0;
    for (i = 0; i < rank && i < 5; i++) {
        last_encode.dims[i] = dims[i], last_encode.box[i] = box[i], last_encode.estr[i] = estr[i];
        if (i + 1 < rank) last_encode.strides[i] = strides[i];
    }
    if ((uintptr_t)base & 15) return 1; /* TMA wants 16-byte aligned bases */
    memset(map, 0xA5, 128);
    memcpy(map, &rank, 4); /* a map the test can recognize among the parameters */
    return 0;
}
int cuGetErrorName(int e, const char **s);
int cuGetErrorName(int e, const char **s) { UNUSED(e); *s = "CUDA_ERROR_FAKE"; return 0; }
int cuGetErrorString(int e, const char **s);
int cuGetErrorString(int e, const char **s) { UNUSED(e); *s = "an error of the fake driver"; return 0; }

/* events, memory and streams, for autotuning: host memory stands for
   device memory */
int cuEventCreate(void **e, unsigned flags);
int cuEventCreate(void **e, unsigned flags) { UNUSED(flags); *e = (void *)(uintptr_t)(++events & 0xffff); return 0; }
int cuEventRecord(void *e, void *s);
int cuEventRecord(void *e, void *s) { UNUSED(s); event_at[(uintptr_t)e & 0xffff] = fake_clock; return 0; }
int cuEventSynchronize(void *e);
int cuEventSynchronize(void *e) { UNUSED(e); return 0; }
int cuEventElapsedTime(float *ms, void *a, void *b);
int cuEventElapsedTime(float *ms, void *a, void *b) {
    *ms = (float)(event_at[(uintptr_t)b & 0xffff] - event_at[(uintptr_t)a & 0xffff]);
    return 0;
}
int cuEventDestroy_v2(void *e);
int cuEventDestroy_v2(void *e) { UNUSED(e); return 0; }
int cuMemAlloc_v2(uint64_t *p, size_t n);
int cuMemAlloc_v2(uint64_t *p, size_t n) { *p = (uint64_t)(uintptr_t)malloc(n); return *p ? 0 : 2; }
int cuMemFree_v2(uint64_t p);
int cuMemFree_v2(uint64_t p) { free((void *)(uintptr_t)p); return 0; }
int cuMemcpyDtoDAsync_v2(uint64_t d, uint64_t s, size_t n, void *st);
int cuMemcpyDtoDAsync_v2(uint64_t d, uint64_t s, size_t n, void *st) {
    UNUSED(st);
    memcpy((void *)(uintptr_t)d, (const void *)(uintptr_t)s, n);
    return 0;
}
int cuMemsetD8Async(uint64_t d, unsigned char v, size_t n, void *st);
int cuMemsetD8Async(uint64_t d, unsigned char v, size_t n, void *st) { UNUSED(st); memset((void *)(uintptr_t)d, v, n); return 0; }
int cuMemsetD32Async(uint64_t d, unsigned v, size_t n, void *st);
int cuMemsetD32Async(uint64_t d, unsigned v, size_t n, void *st) {
    size_t i;
    UNUSED(st);
    for (i = 0; i < n; i++) ((uint32_t *)(uintptr_t)d)[i] = v;
    return 0;
}
int cuStreamSynchronize(void *s);
int cuStreamSynchronize(void *s) { UNUSED(s); return 0; }
int cuStreamIsCapturing(void *s, int *status);
int cuStreamIsCapturing(void *s, int *status) { *status = s == (void *)0xCA97 ? 1 : 0; return 0; } /* a "capturing" stream */
