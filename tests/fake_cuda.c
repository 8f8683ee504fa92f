/* A stand-in for libcuda.so.1, so that the launcher's own logic (parameter
   checks, argument packing, tensor descriptors, launch by name, launch
   attributes) is tested on machines without a GPU: built as
   build/libfakecuda.so and opened by tests/test_launcher.c, test_graphs.c,
   test_grid.c, test_table.c and test_autotune.c, which are compiled with
   TB_LIBCUDA_NAME pointing at it. It runs nothing: it answers the calls
   the library makes with fixed values and records what a launch and a
   tensor map encoding were given, for the test to read back through the
   fake_* functions. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fake_cuda.h"

#define FAKE_MAX 1100

/* the record that models loading on several threads at once share
   (modules, events, allocations, pinned memory) */
static pthread_mutex_t fake_mu = PTHREAD_MUTEX_INITIALIZER;
static void module_wait(void); /* a load's overlap, below with the copies */

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
/* Each thread's stack of current contexts, as the driver keeps it: a
   thread starts with the one context (0x1000) current; a test may clear it
   (fake_set_current) to check that the library enters the model's context
   before a call that needs one. */
static __thread void *ctx_stack[16] = {(void *)0x1000};
static __thread int ctx_top, ctx_underflows, ctx_seen;
/* fake_bare_threads(1): threads other than the one that loaded the
   stand-in start with no current context (as the driver's do), from
   their first call on; pushes minus pops over every thread (fake_ctx_net)
   shows that a thread of the library's pops what it pushed */
static pthread_t main_thread;
static int bare_threads, ctx_net;
__attribute__((constructor)) static void fake_loaded(void) { main_thread = pthread_self(); }
static void ctx_first(void) {
    if (ctx_seen) return;
    ctx_seen = 1;
    if (bare_threads && !pthread_equal(pthread_self(), main_thread)) ctx_stack[0] = NULL;
}
void fake_bare_threads(int on);
void fake_bare_threads(int on) { bare_threads = on; }
int fake_ctx_net(void);
int fake_ctx_net(void) { return ctx_net; }
void fake_set_current(void *c);
void fake_set_current(void *c) { ctx_first(), ctx_stack[ctx_top] = c; }
/* this thread's contexts pushed and not popped, plus pops of an empty stack
   (0 between calls: the library pops what it pushed, no more) */
int fake_ctx_depth(void);
int fake_ctx_depth(void) { return ctx_top + ctx_underflows; }
int cuCtxGetCurrent(void **c);
int cuCtxGetCurrent(void **c) { ctx_first(), *c = ctx_stack[ctx_top]; return 0; }
int cuCtxGetDevice(int *d);
int cuCtxGetDevice(int *d) { /* no context: CUDA_ERROR_INVALID_CONTEXT */
    ctx_first(), *d = 0;
    return ctx_stack[ctx_top] ? 0 : 201;
}
int cuCtxPushCurrent_v2(void *c);
int cuCtxPushCurrent_v2(void *c) {
    ctx_first();
    if (ctx_top + 1 >= 16) return 1;
    ctx_stack[++ctx_top] = c;
    __sync_fetch_and_add(&ctx_net, 1);
    return 0;
}
int cuCtxPopCurrent_v2(void **c);
int cuCtxPopCurrent_v2(void **c) {
    ctx_first();
    if (c) *c = ctx_stack[ctx_top];
    if (ctx_top == 0) return ++ctx_underflows, 201;
    --ctx_top;
    __sync_fetch_and_sub(&ctx_net, 1);
    return 0;
}
int cuDevicePrimaryCtxRetain(void **c, int d);
int cuDevicePrimaryCtxRetain(void **c, int d) { UNUSED(d); *c = (void *)0x1000; return 0; }
int cuDevicePrimaryCtxRelease_v2(int d);
int cuDevicePrimaryCtxRelease_v2(int d) { UNUSED(d); return 0; }
int cuModuleLoadData(void **m, const void *image);
int cuModuleLoadData(void **m, const void *image) {
    const char *s = (const char *)image;
    int n;
    pthread_mutex_lock(&fake_mu);
    module_wait();
    n = ++modules;
    if (n < FAKE_MAX) module_ms[n] = strncmp(s, "fakeT", 5) == 0 ? s[5] - '0' : 1;
    pthread_mutex_unlock(&fake_mu);
    *m = (void *)((uintptr_t)0x10000 * (uintptr_t)n); /* no int wrap: module numbers stay unique */
    return 0;
}
/* modules unloaded, by number: a launch, replay or node update of a
   function whose module is gone fails, as the driver's would (or worse) */
static unsigned char unloaded[FAKE_MAX];
static int unloads;
int cuModuleUnload(void *m);
int cuModuleUnload(void *m) {
    uintptr_t i = (uintptr_t)m / 0x10000;
    if (i < FAKE_MAX) unloaded[i] = 1;
    unloads++;
    return 0;
}
int fake_unloads(void);
int fake_unloads(void) { return unloads; }
static int gone(void *f) { uintptr_t i = (uintptr_t)f / 0x10000; return i < FAKE_MAX && unloaded[i]; }
/* a function handle names its module: the test tells which cubin ran */
int cuModuleGetFunction(void **f, void *m, const char *name);
int cuModuleGetFunction(void **f, void *m, const char *name) {
    UNUSED(name);
    *f = (void *)((uintptr_t)m + 1);
    return 0;
}
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

/* the next n launches fail with code (a test of how a failure is reported) */
static int fail_launches, fail_code;
void fake_fail_launches(int n, int code);
void fake_fail_launches(int n, int code) { fail_launches = n, fail_code = code; }
static int capture_node(void *st, void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned sh, void **p);
static int record(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned sh, void **p, unsigned attrs) {
    int i;
    if (gone(f)) return 400; /* CUDA_ERROR_INVALID_HANDLE */
    if (fail_launches > 0) {
        fail_launches--;
        return fail_code;
    }
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
    UNUSED(by); UNUSED(bz); UNUSED(ex);
    if (capture_node(st, f, gx, gy, gz, bx, sh, p)) return gone(f) ? 400 : 0;
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
    if (capture_node(c->stream, f, c->gx, c->gy, c->gz, c->bx, c->shared, p)) return gone(f) ? 400 : 0;
    return record(f, c->gx, c->gy, c->gz, c->bx, c->shared, p, c->num_attrs);
}
int cuTensorMapEncodeTiled(void *map, int dtype, uint32_t rank, void *base, const uint64_t *dims,
                           const uint64_t *strides, const uint32_t *box, const uint32_t *estr, int interleave,
                           int swizzle, int l2, int fill);
int cuTensorMapEncodeTiled(void *map, int dtype, uint32_t rank, void *base, const uint64_t *dims,
                           const uint64_t *strides, const uint32_t *box, const uint32_t *estr, int interleave,
                           int swizzle, int l2, int fill) {
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
int cuEventCreate(void **e, unsigned flags) {
    UNUSED(flags);
    pthread_mutex_lock(&fake_mu);
    *e = (void *)(uintptr_t)(++events & 0xffff);
    pthread_mutex_unlock(&fake_mu);
    return 0;
}
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
/* device allocations, for cuMemGetAddressRange: cuMemAlloc's, and host
   memory a test hands the runner as device memory (fake_track) */
#define FAKE_ALLOCS 4096
static struct { uint64_t base; size_t size; } allocs[FAKE_ALLOCS];
static int alloc_count;
static void track(uint64_t p, size_t n) {
    int i;
    pthread_mutex_lock(&fake_mu);
    for (i = 0; i < alloc_count; i++)
        if (allocs[i].base == p) break;
    if (i == alloc_count && alloc_count < FAKE_ALLOCS) alloc_count++;
    if (i < alloc_count) allocs[i].base = p, allocs[i].size = n;
    pthread_mutex_unlock(&fake_mu);
}
void fake_track(const void *p, size_t n);
void fake_track(const void *p, size_t n) { track((uint64_t)(uintptr_t)p, n); }
static void untrack(uint64_t p) {
    int i;
    pthread_mutex_lock(&fake_mu);
    for (i = 0; i < alloc_count; i++)
        if (allocs[i].base == p) {
            allocs[i] = allocs[--alloc_count];
            break;
        }
    pthread_mutex_unlock(&fake_mu);
}
int cuMemGetAddressRange_v2(uint64_t *base, size_t *size, uint64_t p);
int cuMemGetAddressRange_v2(uint64_t *base, size_t *size, uint64_t p) {
    int i, r = 1; /* CUDA_ERROR_INVALID_VALUE: not device memory */
    if (!ctx_stack[ctx_top]) return 201; /* the driver answers only in a current context */
    pthread_mutex_lock(&fake_mu);
    for (i = 0; i < alloc_count; i++)
        if (p >= allocs[i].base && p - allocs[i].base < (allocs[i].size ? allocs[i].size : 1)) {
            *base = allocs[i].base, *size = allocs[i].size, r = 0;
            break;
        }
    pthread_mutex_unlock(&fake_mu);
    return r;
}
/* what cuMemAlloc gave and cuMemFree took back, and cuMemAllocHost's
   pinned memory: outstanding bytes, the most outstanding at once since
   the last reset, and calls (a test of what a load holds after its free) */
static uint64_t dev_now, pin_now, pin_peak, pin_calls;
void fake_memory(uint64_t *device_bytes, uint64_t *pinned_bytes, uint64_t *pinned_peak, uint64_t *pinned_calls);
void fake_memory(uint64_t *device_bytes, uint64_t *pinned_bytes, uint64_t *pinned_peak, uint64_t *pinned_calls) {
    pthread_mutex_lock(&fake_mu);
    *device_bytes = dev_now, *pinned_bytes = pin_now, *pinned_peak = pin_peak, *pinned_calls = pin_calls;
    pin_peak = pin_now, pin_calls = 0; /* read: counted again from here */
    pthread_mutex_unlock(&fake_mu);
}
/* a function the next cuMemAlloc calls first, once (a test's way in
   between a model load's checks and its upload) */
static void (*on_alloc)(void *);
static void *on_alloc_arg;
void fake_on_alloc(void (*fn)(void *), void *arg);
void fake_on_alloc(void (*fn)(void *), void *arg) { on_alloc = fn, on_alloc_arg = arg; }
int cuMemAlloc_v2(uint64_t *p, size_t n);
int cuMemAlloc_v2(uint64_t *p, size_t n) {
    if (on_alloc) {
        void (*fn)(void *) = on_alloc;
        on_alloc = NULL;
        fn(on_alloc_arg);
    }
    if (n > ((size_t)1 << 30)) return 2; /* CUDA_ERROR_OUT_OF_MEMORY: more than this "device" holds */
    *p = (uint64_t)(uintptr_t)malloc(n);
    if (!*p) return 2;
    track(*p, n);
    pthread_mutex_lock(&fake_mu);
    dev_now += n;
    pthread_mutex_unlock(&fake_mu);
    return 0;
}
int cuMemFree_v2(uint64_t p);
int cuMemFree_v2(uint64_t p) {
    int i;
    pthread_mutex_lock(&fake_mu);
    for (i = 0; i < alloc_count; i++)
        if (allocs[i].base == p) dev_now -= allocs[i].size;
    pthread_mutex_unlock(&fake_mu);
    untrack(p);
    free((void *)(uintptr_t)p);
    return 0;
}
/* (device copies and memsets: below, with the graphs, which capture them) */
/* A load's overlap (fake_module_waits): while on, each module load waits
   up to that many milliseconds for a host-to-device copy (one since it was
   turned on), and counts the loads, those that saw one before they ended,
   those on another thread than the one that turned it on, and those with
   no context current. */
static pthread_cond_t copy_cv = PTHREAD_COND_INITIALIZER;
static int wait_ms, htod_copies, copies_at_on, waited_loads, waited_saw, waited_other, waited_bare;
static pthread_t waits_from;
void fake_module_waits(int ms);
void fake_module_waits(int ms) {
    pthread_mutex_lock(&fake_mu);
    wait_ms = ms, waited_loads = waited_saw = waited_other = waited_bare = 0, waits_from = pthread_self();
    copies_at_on = htod_copies;
    pthread_mutex_unlock(&fake_mu);
}
void fake_module_overlap(int *loads, int *saw_copy, int *other_thread, int *no_context);
void fake_module_overlap(int *loads, int *saw_copy, int *other_thread, int *no_context) {
    pthread_mutex_lock(&fake_mu);
    *loads = waited_loads, *saw_copy = waited_saw, *other_thread = waited_other, *no_context = waited_bare;
    pthread_mutex_unlock(&fake_mu);
}
static void module_wait(void) { /* under fake_mu */
    struct timespec until;
    int before = copies_at_on;
    if (!wait_ms) return;
    waited_loads++;
    waited_other += !pthread_equal(pthread_self(), waits_from);
    waited_bare += ctx_stack[ctx_top] == NULL; /* a module loads into the current context */
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += wait_ms / 1000, until.tv_nsec += (long)(wait_ms % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) until.tv_sec++, until.tv_nsec -= 1000000000L;
    while (htod_copies == before && pthread_cond_timedwait(&copy_cv, &fake_mu, &until) == 0) {}
    waited_saw += htod_copies != before;
}
static void copy_started(void) {
    pthread_mutex_lock(&fake_mu);
    htod_copies++;
    pthread_cond_broadcast(&copy_cv);
    pthread_mutex_unlock(&fake_mu);
}
/* the runner's upload: pinned host memory is plain memory here */
int cuMemcpyHtoD_v2(uint64_t d, const void *s, size_t n);
int cuMemcpyHtoD_v2(uint64_t d, const void *s, size_t n) {
    copy_started();
    memcpy((void *)(uintptr_t)d, s, n);
    return 0;
}
int cuMemcpyHtoDAsync_v2(uint64_t d, const void *s, size_t n, void *st);
int cuMemcpyHtoDAsync_v2(uint64_t d, const void *s, size_t n, void *st) {
    UNUSED(st);
    copy_started();
    memcpy((void *)(uintptr_t)d, s, n);
    return 0;
}
/* pinned memory: its size in the 16 bytes before it; more than
   fake_pin_limit bytes outstanding is refused, as a host's locked-memory
   limit refuses it (CUDA_ERROR_OUT_OF_MEMORY) */
static uint64_t pin_limit = UINT64_MAX;
void fake_pin_limit(uint64_t bytes);
void fake_pin_limit(uint64_t bytes) { pin_limit = bytes; }
int cuMemAllocHost_v2(void **p, size_t n);
int cuMemAllocHost_v2(void **p, size_t n) {
    unsigned char *b;
    int refuse;
    pthread_mutex_lock(&fake_mu);
    refuse = n > pin_limit || pin_now > pin_limit - n;
    pthread_mutex_unlock(&fake_mu);
    if (refuse || !(b = (unsigned char *)malloc(n + 16))) return 2;
    memcpy(b, &n, sizeof n);
    *p = b + 16;
    pthread_mutex_lock(&fake_mu);
    pin_now += n, pin_calls++;
    if (pin_now > pin_peak) pin_peak = pin_now;
    pthread_mutex_unlock(&fake_mu);
    return 0;
}
int cuMemFreeHost(void *p);
int cuMemFreeHost(void *p) {
    size_t n;
    if (!p) return 1;
    memcpy(&n, (unsigned char *)p - 16, sizeof n);
    pthread_mutex_lock(&fake_mu);
    pin_now -= n;
    pthread_mutex_unlock(&fake_mu);
    free((unsigned char *)p - 16);
    return 0;
}
int cuStreamCreate(void **s, unsigned flags);
int cuStreamCreate(void **s, unsigned flags) { UNUSED(flags); *s = (void *)0x5150; return 0; }
int cuStreamDestroy_v2(void *s);
int cuStreamDestroy_v2(void *s) { UNUSED(s); return 0; }
/* tbundle run's own calls (its inputs in, its outputs out) */
int cuCtxSynchronize(void);
int cuCtxSynchronize(void) { return 0; }
int cuMemcpyDtoH_v2(void *d, uint64_t s, size_t n);
int cuMemcpyDtoH_v2(void *d, uint64_t s, size_t n) { memcpy(d, (const void *)(uintptr_t)s, n); return 0; }
int cuMemcpyDtoD_v2(uint64_t d, uint64_t s, size_t n);
int cuMemcpyDtoD_v2(uint64_t d, uint64_t s, size_t n) {
    memcpy((void *)(uintptr_t)d, (const void *)(uintptr_t)s, n);
    return 0;
}
int cuMemcpyDtoHAsync_v2(void *d, uint64_t s, size_t n, void *st);
int cuMemcpyDtoHAsync_v2(void *d, uint64_t s, size_t n, void *st) {
    UNUSED(st);
    memcpy(d, (const void *)(uintptr_t)s, n);
    return 0;
}
int cuMemsetD8_v2(uint64_t d, unsigned char v, size_t n);
int cuMemsetD8_v2(uint64_t d, unsigned char v, size_t n) { memset((void *)(uintptr_t)d, v, n); return 0; }
/* every non-NULL pointer is "on device 0", except 0xBAD000 (not device memory) */
int cuPointerGetAttribute(void *v, int attr, uint64_t p);
int cuPointerGetAttribute(void *v, int attr, uint64_t p) {
    if (attr != 9 || !p || p == 0xBAD000) return 1;
    *(int *)v = 0;
    return 0;
}
int cuStreamSynchronize(void *s);
int cuStreamSynchronize(void *s) { UNUSED(s); return 0; }
/* graphs: a capture collects a stream's launches as nodes (each with
   its own copy of the parameters, as the driver copies them), an exec is
   a copy of a graph, a replay "launches" every node in order (record()),
   and a node update replaces a node's grid and parameters in one exec */
typedef struct fake_node {
    int mem;                    /* 0 a kernel; 1 a copy, 2..4 a memset of 1, 2, 4 bytes */
    uint64_t dst, src;
    unsigned value;
    size_t bytes_n;
    void *f, *id;
    unsigned g[3], bx, sh;
    int n;                      /* parameters */
    size_t size[64];
    unsigned char bytes[64][128];
} fake_node;
typedef struct fake_graph {
    int count;
    fake_node nodes[64];
} fake_graph;
static void *capturing_stream;
static fake_graph *capture;
static uintptr_t next_node = 0x7000;
static int graphs_live;
/* n parameters of the given sizes */
static void set_node(fake_node *nd, void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned sh, void **p,
                     int n, const size_t *sizes) {
    int i;
    size_t sz[64];
    nd->f = f, nd->g[0] = gx, nd->g[1] = gy, nd->g[2] = gz, nd->bx = bx, nd->sh = sh;
    nd->n = n < 64 ? n : 64;
    for (i = 0; i < nd->n; i++) sz[i] = sizes[i] < 128 ? sizes[i] : 128;
    for (i = 0; i < nd->n; i++) {
        nd->size[i] = sz[i];
        memcpy(nd->bytes[i], p[i], nd->size[i]);
    }
}
static int capture_node(void *st, void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned sh, void **p) {
    fake_node *nd;
    if (!capture || st != capturing_stream) return 0;
    if (gone(f) || capture->count == 64) return 1;
    nd = &capture->nodes[capture->count++];
    set_node(nd, f, gx, gy, gz, bx, sh, p, param_count, param_sizes);
    nd->id = (void *)next_node++;
    return 1;
}
/* Device copies and memsets: done at once, or, on a stream being
   captured, recorded as a node that each replay does, in order with the
   kernels, as the driver's graphs do. */
static void mem_op(int kind, uint64_t d, uint64_t src, unsigned v, size_t n) {
    size_t i;
    if (kind == 1) memcpy((void *)(uintptr_t)d, (const void *)(uintptr_t)src, n);
    else if (kind == 2) memset((void *)(uintptr_t)d, (int)v, n);
    else if (kind == 3) for (i = 0; i < n; i++) ((uint16_t *)(uintptr_t)d)[i] = (uint16_t)v;
    else for (i = 0; i < n; i++) ((uint32_t *)(uintptr_t)d)[i] = v;
}
static int memsets; /* memset calls, done or captured */
int fake_memsets(void);
int fake_memsets(void) { return memsets; }
static int mem_node(void *st, int kind, uint64_t d, uint64_t src, unsigned v, size_t n) {
    fake_node *nd;
    if (kind >= 2) memsets++;
    if (!d) return 1; /* CUDA_ERROR_INVALID_VALUE: no device memory at address 0 */
    if (!capture || st != capturing_stream) {
        mem_op(kind, d, src, v, n);
        return 0;
    }
    if (capture->count == 64) return 2;
    nd = &capture->nodes[capture->count++];
    memset(nd, 0, sizeof *nd);
    nd->mem = kind, nd->dst = d, nd->src = src, nd->value = v, nd->bytes_n = n;
    nd->id = (void *)next_node++;
    return 0;
}
int cuMemcpyDtoDAsync_v2(uint64_t d, uint64_t s, size_t n, void *st);
int cuMemcpyDtoDAsync_v2(uint64_t d, uint64_t s, size_t n, void *st) { return mem_node(st, 1, d, s, 0, n); }
int cuMemsetD8Async(uint64_t d, unsigned char v, size_t n, void *st);
int cuMemsetD8Async(uint64_t d, unsigned char v, size_t n, void *st) { return mem_node(st, 2, d, 0, v, n); }
int cuMemsetD16Async(uint64_t d, unsigned short v, size_t n, void *st);
int cuMemsetD16Async(uint64_t d, unsigned short v, size_t n, void *st) { return mem_node(st, 3, d, 0, v, n); }
int cuMemsetD32Async(uint64_t d, unsigned v, size_t n, void *st);
int cuMemsetD32Async(uint64_t d, unsigned v, size_t n, void *st) { return mem_node(st, 4, d, 0, v, n); }
int cuStreamIsCapturing(void *s, int *status);
int cuStreamIsCapturing(void *s, int *status) { /* 0xCA97: a stream "captured" by someone else */
    *status = s == (void *)0xCA97 || (capture && s == capturing_stream) ? 1 : 0;
    return 0;
}
int cuStreamBeginCapture_v2(void *s, int mode);
int cuStreamBeginCapture_v2(void *s, int mode) {
    UNUSED(mode);
    if (capture || !s) return 900; /* CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED: one at a time here */
    if (!(capture = (fake_graph *)calloc(1, sizeof *capture))) return 2;
    capturing_stream = s;
    graphs_live++;
    return 0;
}
int cuStreamEndCapture(void *s, void **graph);
int cuStreamEndCapture(void *s, void **graph) {
    if (!capture || s != capturing_stream) return 901; /* CUDA_ERROR_STREAM_CAPTURE_INVALIDATED */
    *graph = capture;
    capture = NULL, capturing_stream = NULL;
    return 0;
}
int cuStreamGetCaptureInfo_v2(void *s, int *status, unsigned long long *id, void **graph, void *const **deps,
                              size_t *nd);
int cuStreamGetCaptureInfo_v2(void *s, int *status, unsigned long long *id, void **graph, void *const **deps,
                              size_t *nd) {
    static void *dep;
    if (!capture || s != capturing_stream) return 901;
    *status = 1, *id = 1, *graph = capture;
    if (!capture->count) {
        *deps = NULL, *nd = 0;
        return 0;
    }
    dep = capture->nodes[capture->count - 1].id; /* the last launch: the capture's one dependency */
    *deps = &dep, *nd = 1;
    return 0;
}
int cuGraphInstantiateWithFlags(void **exec, void *graph, unsigned long long flags);
int cuGraphInstantiateWithFlags(void **exec, void *graph, unsigned long long flags) {
    fake_graph *x;
    UNUSED(flags);
    if (!(x = (fake_graph *)malloc(sizeof *x))) return 2;
    memcpy(x, graph, sizeof *x);
    graphs_live++;
    *exec = x;
    return 0;
}
int cuGraphLaunch(void *exec, void *st);
int cuGraphLaunch(void *exec, void *st) {
    fake_graph *x = (fake_graph *)exec;
    int i, j, cr = 0;
    int saved_count = param_count;
    size_t saved[64];
    memcpy(saved, param_sizes, sizeof saved);
    UNUSED(st);
    for (i = 0; i < x->count; i++) { /* record() copies param_count parameters of param_sizes */
        fake_node *nd = &x->nodes[i];
        void *p[64];
        if (nd->mem) {
            mem_op(nd->mem, nd->dst, nd->src, nd->value, nd->bytes_n);
            continue;
        }
        for (j = 0; j < nd->n; j++) p[j] = nd->bytes[j], param_sizes[j] = nd->size[j];
        param_count = nd->n;
        if ((cr = record(nd->f, nd->g[0], nd->g[1], nd->g[2], nd->bx, nd->sh, p, 0)) != 0) break;
    }
    param_count = saved_count;
    memcpy(param_sizes, saved, sizeof saved);
    return i < x->count ? cr : 0;
}
typedef struct {
    void *func;
    unsigned gx, gy, gz, bx, by, bz, shared;
    void **params, **extra;
    void *kern, *ctx;
} fake_node_params;
int cuGraphExecKernelNodeSetParams_v2(void *exec, void *node, const fake_node_params *np);
int cuGraphExecKernelNodeSetParams_v2(void *exec, void *node, const fake_node_params *np) {
    fake_graph *x = (fake_graph *)exec;
    int i;
    for (i = 0; i < x->count; i++)
        if (x->nodes[i].id == node) {
            fake_node *nd = &x->nodes[i];
            if (gone(np->func) || np->func != nd->f) return 400; /* the same function, still loaded */
            set_node(nd, np->func, np->gx, np->gy, np->gz, np->bx, np->shared, np->params, nd->n, nd->size);
            return 0;
        }
    return 1; /* CUDA_ERROR_INVALID_VALUE: no such node */
}
int cuGraphExecDestroy(void *exec);
int cuGraphExecDestroy(void *exec) { free(exec); graphs_live--; return 0; }
int cuGraphDestroy(void *graph);
int cuGraphDestroy(void *graph) { free(graph); graphs_live--; return 0; }
/* graphs and execs not yet destroyed */
int fake_graphs_live(void);
int fake_graphs_live(void) { return graphs_live; }
