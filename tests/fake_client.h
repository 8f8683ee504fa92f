/* The test side of tests/fake_cuda.c (build/libfakecuda.so): the stand-in
   driver's record read back through dlsym on the handle the library
   opened, and the helpers the launcher, graphs, grid, table and autotune
   programs and the fuzz targets share.
   Include after triton_bundle.h's implementation, with TB_LIBCUDA_NAME
   pointing at the stand-in. */
#ifndef TB_FAKE_CLIENT_H
#define TB_FAKE_CLIENT_H
#include "fake_cuda.h"
#include <dlfcn.h>

static struct {
    void (*set_params)(const size_t *, int);
    int (*launches)(void);
    const void *(*param)(int);
    uintptr_t (*function)(void);
    void (*grid)(unsigned *, unsigned *, unsigned *, unsigned *);
    const fake_encode *(*encode)(void);
    int (*unloads)(void);
    int (*graphs_live)(void);
    void (*track)(const void *, size_t); /* host memory the runner may take as device memory */
    void (*fail_launches)(int, int);     /* the next n launches fail with a code */
    void (*set_current)(void *);         /* this thread's current context (NULL: none) */
    int (*ctx_depth)(void);              /* contexts pushed and not popped, and extra pops: 0 */
    int (*memsets)(void);                /* cuMemsetD*Async calls, done or captured */
    void (*on_alloc)(void (*)(void *), void *); /* the next cuMemAlloc calls fn(arg) first, once */
    /* device and pinned bytes outstanding, the most pinned at once and the
       cuMemAllocHost calls since the last call (which starts both again) */
    void (*memory)(uint64_t *, uint64_t *, uint64_t *, uint64_t *);
    void (*pin_limit)(uint64_t);         /* cuMemAllocHost refuses past this many bytes outstanding */
    /* module loads wait up to ms for a host-to-device copy (0: off); then
       the loads, those that saw a copy start, those on another thread,
       those with no context current */
    void (*module_waits)(int);
    void (*module_overlap)(int *, int *, int *, int *);
    void (*bare_threads)(int);           /* 1: threads but the first start with no context current */
    int (*ctx_net)(void);                /* contexts pushed minus popped, over every thread */
} fake;

static inline int fake_ready(void) {
    void *h;
    tb_error e;
    if (fake.set_params) return 1;
    if (tb_driver_load(&e) != tb_ok) {
        printf("    %s\n", e.message);
        return 0;
    }
    h = dlopen(TB_LIBCUDA_NAME, RTLD_NOW); /* the same instance the library opened */
    if (!h) return 0;
    *(void **)&fake.set_params = dlsym(h, "fake_set_params");
    *(void **)&fake.launches = dlsym(h, "fake_launches");
    *(void **)&fake.param = dlsym(h, "fake_param");
    *(void **)&fake.function = dlsym(h, "fake_function");
    *(void **)&fake.grid = dlsym(h, "fake_grid");
    *(void **)&fake.encode = dlsym(h, "fake_last_encode");
    *(void **)&fake.unloads = dlsym(h, "fake_unloads");
    *(void **)&fake.graphs_live = dlsym(h, "fake_graphs_live");
    *(void **)&fake.track = dlsym(h, "fake_track");
    *(void **)&fake.fail_launches = dlsym(h, "fake_fail_launches");
    *(void **)&fake.set_current = dlsym(h, "fake_set_current");
    *(void **)&fake.ctx_depth = dlsym(h, "fake_ctx_depth");
    *(void **)&fake.memsets = dlsym(h, "fake_memsets");
    *(void **)&fake.on_alloc = dlsym(h, "fake_on_alloc");
    *(void **)&fake.memory = dlsym(h, "fake_memory");
    *(void **)&fake.pin_limit = dlsym(h, "fake_pin_limit");
    *(void **)&fake.module_waits = dlsym(h, "fake_module_waits");
    *(void **)&fake.module_overlap = dlsym(h, "fake_module_overlap");
    *(void **)&fake.bare_threads = dlsym(h, "fake_bare_threads");
    *(void **)&fake.ctx_net = dlsym(h, "fake_ctx_net");
    return fake.set_params && fake.launches && fake.param && fake.function && fake.grid && fake.encode &&
           fake.unloads && fake.graphs_live && fake.track && fake.fail_launches && fake.set_current && fake.ctx_depth &&
           fake.memsets && fake.on_alloc && fake.memory && fake.pin_limit && fake.module_waits && fake.module_overlap &&
           fake.bare_threads && fake.ctx_net;
}

#define NEED_FAKE() \
    do { if (!fake_ready()) SKIP("build/libfakecuda.so did not load: make build/libfakecuda.so"); } while (0)

static inline tb_launch_config config(const char *types, const char *div) {
    tb_launch_config c;
    memset(&c, 0, sizeof c);
    c.kernel_hash = "H";
    c.function_name = "k";
    c.binary_name = "k.cubin";
    c.arg_types = types;
    c.arg_divisibility = div;
    c.num_warps = 4;
    c.num_ctas = 1;
    return c;
}

static inline tb_result load(const tb_launch_config *c, const size_t *sizes, int n, tb_loaded_kernel **k, tb_error *e) {
    static const char cubin[16] = "fake cubin";
    fake.set_params(sizes, n);
    return tb_load_cubin(cubin, sizeof cubin, c, NULL, NULL, k, e);
}

static inline tb_result launch(const tb_loaded_kernel *k, tb_arg *a, uint32_t n, unsigned flags, tb_error *e) {
    tb_launch_params p;
    memset(&p, 0, sizeof p);
    p.grid[0] = 3, p.grid[1] = 2, p.grid[2] = 1;
    p.args = a, p.arg_count = n, p.flags = flags;
    return tb_launch(k, &p, e);
}

static inline int64_t param_i64(int i) { int64_t v; memcpy(&v, fake.param(i), 8); return v; }
static inline int32_t param_i32(int i) { int32_t v; memcpy(&v, fake.param(i), 4); return v; }
static inline unsigned param_u8(int i) { return *(const unsigned char *)fake.param(i); }

#endif
