/* Launch and load benchmark (needs a GPU). In one process, interleaved:
     - host time per launch of bare cuLaunchKernel with pre-built parameters,
       tb_launch and tb_launch_raw, on the same kernel and stream: batches of
       256 launches, a synchronize between batches, the median over batches;
     - heap allocations per launch, counted by interposing malloc;
     - time to load kernels from a bundle against bare cuModuleLoadData.
   usage: bench_launch [WIDE_CACHE_DIR]  (a Triton cache holding tb_wide, a
   kernel of 40+ arguments, made by bench/make_wide_kernel.py) */
#define TRITON_BUNDLE_IMPLEMENTATION
#include "../triton_bundle.h"
#include "../tests/util.h"
#include "bench_util.h"

/* ---- heap allocations, counted while `counting` is set ---- */
extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
extern void __libc_free(void *);
static volatile int counting;
static unsigned long long allocations;
static void count(void) {
    if (counting) __atomic_add_fetch(&allocations, 1, __ATOMIC_RELAXED);
}
void *malloc(size_t n) { count(); return __libc_malloc(n); }
void *calloc(size_t a, size_t b) { count(); return __libc_calloc(a, b); }
void *realloc(void *p, size_t n) { count(); return __libc_realloc(p, n); }
void *memalign(size_t a, size_t n) { count(); return __libc_memalign(a, n); }
void *aligned_alloc(size_t a, size_t n) { count(); return __libc_memalign(a, n); }
int posix_memalign(void **p, size_t a, size_t n) {
    count();
    *p = __libc_memalign(a, n);
    return *p ? 0 : 12;
}
void free(void *p) { __libc_free(p); }

typedef unsigned long long devptr;
static struct {
    int (*mem_alloc)(devptr *, size_t);
    int (*stream_create)(void **, unsigned);
    int (*stream_sync)(void *);
    int (*module_load)(void **, const void *);
    int (*module_unload)(void *);
    int (*get_function)(void **, void *, const char *);
    int (*launch)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void *, void **,
                  void **);
    int (*retain)(void **, int);
    int (*set_current)(void *);
    int (*event_create)(void **, unsigned);
    int (*event_record)(void *, void *);
    int (*event_elapsed)(float *, void *, void *);
} cu;

#define BATCH 256
#define BATCHES 400

/* One kernel: bare, tb_launch, tb_launch_raw and the launch by name
   (tb_kernel_table_launch choosing among the name's specializations from
   the arguments), interleaved batch by batch. */
static void bench_kernel(const char *label, const tb_bundle *b, const tb_launch_config *cfg, void *stream) {
    const tb_artifact *cubin = tb_kernel_find_artifact(tb_bundle_find_kernel(b, cfg->kernel_hash), cfg->binary_name);
    tb_loaded_kernel *k = NULL;
    tb_kernel_info info;
    tb_error e;
    void *module = NULL, *fn = NULL;
    uint32_t nargs = (uint32_t)strlen(cfg->arg_types), i;
    tb_arg *args = (tb_arg *)calloc(nargs + 1, sizeof *args), *slots = (tb_arg *)calloc(nargs + 2, sizeof *slots);
    void **params = (void **)calloc(nargs + 2, sizeof *params);
    tb_launch_params lp;
    tb_kernel_table *table = NULL;
    uint32_t specs = 0;
    double t[4][BATCHES];
    unsigned long long allocs[4] = {0, 0, 0, 0};
    devptr buf = 0;
    int v, bt, j;
    if (!cubin || tb_load_config(b, cfg, NULL, NULL, &k, &e) != tb_ok) {
        printf("  %s: cannot load: %s\n", label, e.message);
        return;
    }
    tb_loaded_kernel_info(k, &info);
    if (tb_kernel_table_create(b, NULL, NULL, TB_TABLE_LAZY, &table, &e) != tb_ok) {
        printf("  %s: no table: %s\n", label, e.message);
        return;
    }
    for (i = 0; i < tb_bundle_launch_record_count(b); i++)
        specs += strcmp(tb_bundle_launch_record(b, i)->kernel_name, cfg->function_name) == 0;
    cu.module_load(&module, cubin->data);
    cu.get_function(&fn, module, cfg->function_name);
    cu.mem_alloc(&buf, 1 << 20);
    /* arguments: pointers to one buffer, small odd integers, floats 1.5 */
    for (i = 0; i < nargs; i++) {
        char c = cfg->arg_types[i];
        if (c == 'O') args[i] = tb_arg_u(buf);
        else if (c == 'f' || c == 'd' || c == 'e' || c == 'y') args[i] = tb_arg_f(1.5);
        else args[i] = tb_arg_i(i == 3 ? 16 : 3 + 2 * (int)i); /* tb_add's n: 16 */
        tb_arg_convert(c, args[i], 0, &slots[i], &e);
        params[i] = &slots[i];
    }
    for (; i < info.param_count; i++) params[i] = &slots[nargs]; /* scratch: null */
    memset(&lp, 0, sizeof lp);
    lp.grid[0] = lp.grid[1] = lp.grid[2] = 1;
    lp.stream = stream;
    lp.args = args;
    lp.arg_count = nargs;
    for (bt = 0; bt < 20; bt++) { /* warm-up */
        for (j = 0; j < BATCH; j++)
            cu.launch(fn, 1, 1, 1, 32 * cfg->num_warps, 1, 1, cfg->shared_mem, stream, params, NULL);
        for (j = 0; j < BATCH; j++) tb_launch(k, &lp, NULL);
        for (j = 0; j < BATCH; j++)
            if (tb_kernel_table_launch(table, cfg->function_name, 0, &lp, &e) != tb_ok) {
                printf("  %s: by name: %s\n", label, e.message);
                return;
            }
        cu.stream_sync(stream);
    }
    for (bt = 0; bt < BATCHES; bt++)
        for (v = 0; v < 4; v++) {
            int which = (v + bt) % 4; /* rotate the order */
            double t0;
            int rc = 0;
            unsigned long long a0 = allocations;
            counting = 1;
            t0 = now();
            if (which == 0)
                for (j = 0; j < BATCH; j++)
                    rc |= cu.launch(fn, 1, 1, 1, 32 * cfg->num_warps, 1, 1, cfg->shared_mem, stream, params, NULL);
            else if (which == 1)
                for (j = 0; j < BATCH; j++) rc |= (int)tb_launch(k, &lp, NULL);
            else if (which == 2)
                for (j = 0; j < BATCH; j++) rc |= (int)tb_launch_raw(k, 1, 1, 1, stream, params, NULL);
            else
                for (j = 0; j < BATCH; j++) rc |= (int)tb_kernel_table_launch(table, cfg->function_name, 0, &lp, NULL);
            t[which][bt] = (now() - t0) / BATCH;
            counting = 0;
            allocs[which] += allocations - a0;
            cu.stream_sync(stream);
            if (rc) {
                printf("  %s: a launch failed\n", label);
                return;
            }
        }
    {
        double bare = median(t[0], BATCHES), ours = median(t[1], BATCHES), raw = median(t[2], BATCHES);
        double byname = median(t[3], BATCHES);
        double per = (double)BATCH * BATCHES;
        printf("  %-34s bare %6.2f us | tb_launch %6.2f us %.3fx | tb_launch_raw %6.2f us %.3fx | heap allocations "
               "per launch: bare %.3f, tb_launch %.3f, raw %.3f\n",
               label, bare * 1e6, ours * 1e6, ours / bare, raw * 1e6, raw / bare, allocs[0] / per, allocs[1] / per,
               allocs[2] / per);
        printf("  %-34s by name, choosing among %u specializations: %6.2f us %.3fx bare (goal <= 1.05), heap "
               "allocations per launch %.3f\n",
               "", specs, byname * 1e6, byname / bare, allocs[3] / per);
    }
    tb_kernel_table_free(table);
    tb_unload(k);
    cu.module_unload(module);
    free(args);
    free(slots);
    free(params);
}


/* Autotune and graphs on tb_add: a record of two configs (the one cubin
   twice, with a grid rule): the first call's tuning; a tuned launch
   (TB_CONFIG_AUTOTUNE, grid from the rule) against bare cuLaunchKernel;
   100 launches replayed as one graph against 100 tb_launch calls. */
static void bench_tune_graph(const tb_bundle *fix, void *stream) {
    static const tb_grid_op gx[] = {{TB_GRID_ARG, 3, 0}, {TB_GRID_CONST, 0, 1024}, {TB_GRID_CEILDIV, 0, 0}};
    static const tb_grid_op one[] = {{TB_GRID_CONST, 0, 1}};
    static const uint32_t key[] = {3};
    enum { G = 100, ROUNDS = 200 };
    const tb_launch_record *src = NULL;
    const tb_kernel *kn = tb_bundle_find_kernel(fix, "AMSGNCXN7ROJH32VHMR7RF24DC4B6Y5SQRGJFMR3BKNRIK4WXZHQ");
    tb_grid_rule g;
    tb_call_info ci;
    tb_launch_config c[2];
    tb_launch_record r;
    tb_bundle *b = NULL;
    tb_kernel_table *t = NULL;
    const tb_loaded_kernel *k = NULL;
    tb_graph *graph = NULL;
    tb_error e;
    tb_launch_params p;
    tb_arg a[4], slots[6];
    void *params[6], *module = NULL, *fn = NULL, *ev[4];
    devptr buf = 0;
    double tt[3][ROUNDS], th[2][ROUNDS], t0, tune_s;
    const tb_loaded_kernel *sel = NULL;
    float gpu[2] = {0, 0}, ms;
    uint32_t i, kk, cfg = 0;
    int rd, j;
    double tune_ms = 0;
    for (i = 0; i < tb_bundle_launch_record_count(fix); i++)
        if (!strcmp(tb_bundle_launch_record(fix, i)->cache_key, "AMSGNCXN7ROJH32VHMR7RF24DC4B6Y5SQRGJFMR3BKNRIK4WXZHQ"))
            src = tb_bundle_launch_record(fix, i);
    if (!src || !kn || tb_bundle_create(NULL, &b, &e) || tb_bundle_add_kernel(b, kn->hash, 0, &kk, &e)) return;
    for (i = 0; i < kn->artifact_count; i++)
        tb_bundle_add_artifact(b, kk, kn->artifacts[i].name, kn->artifacts[i].data, kn->artifacts[i].size, TB_REFERENCE,
                               &e);
    g.op_count[0] = 3, g.op_count[1] = g.op_count[2] = 1, g.ops[0] = gx, g.ops[1] = g.ops[2] = one;
    memset(&ci, 0, sizeof ci);
    ci.key_count = 1, ci.key = key;
    c[0] = src->configs[0], c[0].grid = &g, c[1] = c[0];
    memset(&r, 0, sizeof r);
    r.cache_key = "tune_add", r.kernel_name = "tune_add", r.config_count = 2, r.configs = c, r.call = &ci;
    if (tb_bundle_add_launch_record(b, &r, &e) || tb_kernel_table_create(b, NULL, NULL, 0, &t, &e)) {
        printf("  autotune: %s\n", e.message);
        return;
    }
    cu.mem_alloc(&buf, 1 << 20);
    a[0] = a[1] = a[2] = tb_arg_u(buf), a[3] = tb_arg_i(16);
    memset(&p, 0, sizeof p);
    p.stream = stream, p.args = a, p.arg_count = 4, p.flags = TB_LAUNCH_GRID_AUTO;
    t0 = now();
    if (tb_kernel_table_launch(t, "tune_add", TB_CONFIG_AUTOTUNE, &p, &e) != tb_ok) {
        printf("  autotune: %s\n", e.message);
        return;
    }
    cu.stream_sync(stream);
    tune_s = now() - t0;
    tb_kernel_table_choice(t, "tune_add", a, 4, &cfg, &tune_ms, &e);
    printf("autotune: first call tunes 2 configs (do_bench defaults: 25 ms warm-up, 100 ms of reps, at most 1000, "
           "256 MiB L2 flush) in %.0f ms; the kernel's median %.4f ms\n", tune_s * 1e3, tune_ms);
    tb_kernel_table_get(t, "tune_add", cfg, &k, &e);
    cu.module_load(&module, tb_kernel_find_artifact(kn, c[0].binary_name)->data);
    cu.get_function(&fn, module, c[0].function_name);
    for (i = 0; i < 4; i++) tb_arg_convert(c[0].arg_types[i], a[i], 0, &slots[i], &e), params[i] = &slots[i];
    slots[4].u = 0, params[4] = params[5] = &slots[4];
    tb_kernel_table_select(t, "tune_add", TB_CONFIG_AUTOTUNE, a, 4, &sel, &e); /* the tuned kernel, once */
    for (rd = 0; rd < ROUNDS; rd++)
        for (j = 0; j < 3; j++) {
            int which = (rd + j) % 3, q;
            t0 = now();
            if (which == 0)
                for (q = 0; q < BATCH; q++)
                    cu.launch(fn, 1, 1, 1, 32 * c[0].num_warps, 1, 1, c[0].shared_mem, stream, params, NULL);
            else if (which == 1)
                for (q = 0; q < BATCH; q++) tb_launch(sel, &p, NULL);
            else
                for (q = 0; q < BATCH; q++) tb_kernel_table_launch(t, "tune_add", TB_CONFIG_AUTOTUNE, &p, NULL);
            tt[which][rd] = (now() - t0) / BATCH;
            cu.stream_sync(stream);
        }
    {
        double bare = median(tt[0], ROUNDS), sel_t = median(tt[1], ROUNDS), tuned = median(tt[2], ROUNDS);
        printf("  the tuned kernel (selected once, tb_launch, grid from the rule) %6.2f us, bare cuLaunchKernel %6.2f "
               "us: %.3fx (goal <= 1.05)\n", sel_t * 1e6, bare * 1e6, sel_t / bare);
        printf("  by name each time (tb_kernel_table_launch, TB_CONFIG_AUTOTUNE: lookup, size key, choice) %6.2f us: "
               "%.3fx (goal <= 1.03)\n", tuned * 1e6, tuned / bare);
    }
    /* graphs: G launches captured once */
    p.flags = 0, p.grid[0] = p.grid[1] = p.grid[2] = 1;
    if (tb_graph_begin(stream, NULL, &graph, &e) != tb_ok) {
        printf("  graphs: %s\n", e.message);
        return;
    }
    for (j = 0; j < G; j++) tb_launch(k, &p, NULL);
    if (tb_graph_end(graph, &e) != tb_ok) {
        printf("  graphs: %s\n", e.message);
        tb_graph_free(graph);
        return;
    }
    for (i = 0; i < 4; i++) cu.event_create(&ev[i], 0);
    for (rd = 0; rd < ROUNDS; rd++)
        for (j = 0; j < 2; j++) {
            int which = (rd + j) % 2, q;
            cu.event_record(ev[2 * which], stream);
            t0 = now();
            if (which == 0)
                for (q = 0; q < G; q++) tb_launch(k, &p, NULL);
            else
                tb_graph_launch(graph, stream, NULL);
            th[which][rd] = now() - t0;
            cu.event_record(ev[2 * which + 1], stream);
            cu.stream_sync(stream);
            cu.event_elapsed(&ms, ev[2 * which], ev[2 * which + 1]);
            gpu[which] += ms / ROUNDS;
        }
    {
        double plain = median(th[0], ROUNDS), rep = median(th[1], ROUNDS);
        printf("graphs: %d small kernels: host time, %d tb_launch %7.1f us, one tb_graph_launch %6.1f us: %.3fx "
               "(goal <= 0.25); GPU time %.1f us against %.1f us (%.2fx)\n",
               G, G, plain * 1e6, rep * 1e6, rep / plain, gpu[1] * 1e3, gpu[0] * 1e3, gpu[1] / gpu[0]);
    }
    tb_graph_free(graph);
    tb_kernel_table_free(t);
    tb_bundle_free(b);
    cu.module_unload(module);
}

/* Loading N kernels: a kernel table's loads (tb_kernel_table_create,
   which loads every config) and tb_load_config, against bare
   cuModuleLoadData, interleaved round by round. */
static void bench_load(const tb_bundle *b) {
    enum { ROUNDS = 40 };
    uint32_t r, i, n = tb_bundle_launch_record_count(b);
    double t_bare[ROUNDS], t_ours[ROUNDS], t_table[ROUNDS];
    tb_error e;
    tb_loaded_kernel **ks = (tb_loaded_kernel **)calloc(n, sizeof *ks);
    void **mods = (void **)calloc(n, sizeof *mods);
    for (r = 0; r < ROUNDS; r++) {
        tb_kernel_table *t = NULL;
        double t0 = now();
        for (i = 0; i < n; i++) {
            const tb_launch_config *c = &tb_bundle_launch_record(b, i)->configs[0];
            cu.module_load(&mods[i],
                           tb_kernel_find_artifact(tb_bundle_find_kernel(b, c->kernel_hash), c->binary_name)->data);
        }
        t_bare[r] = now() - t0;
        t0 = now();
        for (i = 0; i < n; i++)
            if (tb_load_config(b, &tb_bundle_launch_record(b, i)->configs[0], NULL, NULL, &ks[i], &e) != tb_ok) {
                printf("  load: %s\n", e.message);
                return;
            }
        t_ours[r] = now() - t0;
        t0 = now();
        if (tb_kernel_table_create(b, NULL, NULL, 0, &t, &e) != tb_ok) { /* 0: every config loaded now */
            printf("  load: %s\n", e.message);
            return;
        }
        t_table[r] = now() - t0;
        tb_kernel_table_free(t);
        for (i = 0; i < n; i++) {
            cu.module_unload(mods[i]);
            tb_unload(ks[i]);
        }
    }
    {
        double bare = median(t_bare, ROUNDS), ours = median(t_ours, ROUNDS), table = median(t_table, ROUNDS);
        tb_kernel_table *t;
        double t0 = now(), lazy;
        tb_kernel_table_create(b, NULL, NULL, TB_TABLE_LAZY, &t, &e);
        lazy = now() - t0;
        tb_kernel_table_free(t);
        printf("  load %u kernels: bare cuModuleLoadData %.1f us each | kernel table (all loaded) %.1f us each, %.3fx "
               "(goal <= 1.05) | tb_load_config %.1f us each, %.3fx | lazy table create %.2f us for all\n",
               n, bare / n * 1e6, table / n * 1e6, table / bare, ours / n * 1e6, ours / bare, lazy * 1e6);
    }
    free(ks);
    free(mods);
}

#define SYM(field, name)                                          \
    do {                                                          \
        void *s_ = tb_driver_symbol(name);                        \
        if (!s_) {                                                \
            printf("bench_launch: the driver has no %s\n", name); \
            return 1;                                             \
        }                                                         \
        memcpy(&cu.field, &s_, sizeof s_);                        \
    } while (0)

int main(int argc, char **argv) {
    tb_error e;
    tb_bundle *b;
    void *ctx, *stream;
    uint32_t i;
    if (tb_driver_load(&e) != tb_ok) {
        printf("bench_launch: skipped, no GPU: %s\n", e.message);
        return 0;
    }
    SYM(mem_alloc, "cuMemAlloc_v2");
    SYM(stream_create, "cuStreamCreate");
    SYM(stream_sync, "cuStreamSynchronize");
    SYM(module_load, "cuModuleLoadData");
    SYM(module_unload, "cuModuleUnload");
    SYM(get_function, "cuModuleGetFunction");
    SYM(launch, "cuLaunchKernel");
    SYM(retain, "cuDevicePrimaryCtxRetain");
    SYM(set_current, "cuCtxSetCurrent");
    SYM(event_create, "cuEventCreate");
    SYM(event_record, "cuEventRecord");
    SYM(event_elapsed, "cuEventElapsedTime");
    cu.retain(&ctx, 0);
    cu.set_current(ctx);
    cu.stream_create(&stream, 1 /* non-blocking */);
    b = u_fixture_bundle(1);
    if (!b) return 1;
    printf("launch overhead: host time per launch, median of %d batches of %d\n", BATCHES, BATCH);
    for (i = 0; i < tb_bundle_launch_record_count(b); i++)
        if (!strcmp(tb_bundle_launch_record(b, i)->cache_key, "AMSGNCXN7ROJH32VHMR7RF24DC4B6Y5SQRGJFMR3BKNRIK4WXZHQ"))
            bench_kernel("tb_add (4 args + 2 scratch)", b, &tb_bundle_launch_record(b, i)->configs[0], stream);
    if (argc > 1) {
        tb_bundle *w;
        tb_collect_options o;
        memset(&o, 0, sizeof o);
        tb_bundle_create(NULL, &w, &e);
        if (tb_collect_cache(w, argv[1], &o, NULL, &e) == tb_ok && tb_bundle_derive_launch_records(w, &e) == tb_ok) {
            for (i = 0; i < tb_bundle_launch_record_count(w); i++)
                if (!strcmp(tb_bundle_launch_record(w, i)->kernel_name, "tb_wide")) {
                    char label[64];
                    const tb_launch_config *c = &tb_bundle_launch_record(w, i)->configs[0];
                    snprintf(label, sizeof label, "tb_wide (%u args + 2 scratch)", (unsigned)strlen(c->arg_types));
                    bench_kernel(label, w, c, stream);
                }
        } else {
            printf("  tb_wide: %s\n", e.message);
        }
        tb_bundle_free(w);
    } else {
        printf("  tb_wide: no cache given (bench/make_wide_kernel.py makes one with Triton)\n");
    }
    bench_load(b);
    bench_tune_graph(b, stream);
    tb_bundle_free(b);
    return 0;
}
