/* CUDA graphs without a GPU: capture, replay, update and free through the
   stand-in driver (tests/fake_cuda.c), whose capture turns a stream's
   launches into nodes, whose replay "launches" each node, and which fails
   any launch, replay or node update of a function whose module was
   unloaded. So the graph code, and the lifetime rule of tb_graph_* (a graph
   keeps the kernels it captured loaded), run under ASan in CI. The GPU
   suite checks the same against a real driver. Run from the repository
   root after `make build/libfakecuda.so`: build/test_graphs [name-filter] */
#define TB_LIBCUDA_NAME "build/libfakecuda.so"
#define TRITON_BUNDLE_IMPLEMENTATION
#include "../triton_bundle.h"
#include "harness.h"
#include "fake_client.h"

#define STREAM ((void *)(uintptr_t)0x5100)

static tb_launch_params params(tb_arg *a, uint32_t n, uint32_t gx) {
    tb_launch_params p;
    memset(&p, 0, sizeof p);
    p.grid[0] = gx, p.grid[1] = p.grid[2] = 1;
    p.args = a, p.arg_count = n, p.stream = STREAM;
    return p;
}

/* Two launches captured as two nodes, replayed in order, the second
   updated with new arguments and grid; the captured grid is kept when an
   update gives none. */
TEST(test_graph_capture_replay_update) {
    static const size_t sizes[] = {8, 4};
    tb_launch_config c = config("Oi", "");
    tb_loaded_kernel *k = NULL;
    tb_graph *g = NULL;
    tb_error e;
    tb_arg a[2];
    tb_launch_params p;
    unsigned gr[3], block, shared, attrs;
    int before;
    NEED_FAKE();
    CHECK_OK(load(&c, sizes, 2, &k, &e), &e);
    REQUIRE(k);
    CHECK(tb_graph_begin(NULL, NULL, &g, &e) == tb_err_invalid_argument && !g); /* the legacy stream */
    CHECK_OK(tb_graph_begin(STREAM, NULL, &g, &e), &e);
    REQUIRE(g);
    before = fake.launches();
    a[0] = tb_arg_u(0x1000), a[1] = tb_arg_i(11);
    p = params(a, 2, 4);
    CHECK_OK(tb_launch(k, &p, &e), &e);
    a[0] = tb_arg_u(0x2000), a[1] = tb_arg_i(22);
    p.grid[0] = 0; /* an empty launch launches nothing and takes no number */
    CHECK_OK(tb_launch(k, &p, &e), &e);
    p.grid[0] = 5;
    CHECK_OK(tb_launch(k, &p, &e), &e);
    CHECK(fake.launches() == before); /* captured, not run */
    CHECK(tb_graph_update(g, 0, &p, &e) == tb_err_invalid_argument); /* not instantiated yet */
    CHECK_OK(tb_graph_end(g, &e), &e);
    CHECK(tb_graph_launch_count(g) == 2);
    CHECK_OK(tb_graph_launch(g, STREAM, &e), &e);
    CHECK(fake.launches() == before + 2);
    fake.grid(gr, &block, &shared, &attrs);
    CHECK(param_i64(0) == 0x2000 && param_i32(1) == 22 && gr[0] == 5 && block == 128);
    /* update the second: new pointer, scalar and grid */
    a[0] = tb_arg_u(0x3000), a[1] = tb_arg_i(33);
    p.grid[0] = 7;
    CHECK_OK(tb_graph_update(g, 1, &p, &e), &e);
    CHECK_OK(tb_graph_launch(g, STREAM, &e), &e);
    fake.grid(gr, &block, &shared, &attrs);
    CHECK(param_i64(0) == 0x3000 && param_i32(1) == 33 && gr[0] == 7);
    /* a zero grid in an update keeps the captured one */
    p.grid[0] = p.grid[1] = p.grid[2] = 0;
    a[1] = tb_arg_i(44);
    CHECK_OK(tb_graph_update(g, 1, &p, &e), &e);
    CHECK_OK(tb_graph_launch(g, STREAM, &e), &e);
    fake.grid(gr, &block, &shared, &attrs);
    CHECK(param_i32(1) == 44 && gr[0] == 5);
    /* refusals: a launch that does not exist, a wrong argument count */
    CHECK(tb_graph_update(g, 2, &p, &e) == tb_err_invalid_argument && strstr(e.message, "launch 2 of 2"));
    p.arg_count = 1;
    CHECK(tb_graph_update(g, 0, &p, &e) == tb_err_arg_mismatch);
    tb_graph_free(g);
    tb_unload(k);
    CHECK(fake.graphs_live() == 0);
}

/* Hardening 2.0, defect 1: a graph outlives the table and the kernel it
   captured. Before, tb_graph_update after tb_kernel_table_free or
   tb_unload read freed memory (ASan: heap-use-after-free), and a replay
   launched functions of unloaded modules. Now the graph holds a reference
   on each kernel: updates and replays work, and the modules are unloaded
   by the last free. */
TEST(test_graph_outlives_table_and_kernel) {
    static const size_t sizes[] = {8, 4};
    tb_bundle *b = NULL;
    tb_kernel_table *t = NULL;
    tb_launch_config c;
    tb_launch_record r;
    tb_loaded_kernel *k = NULL;
    tb_graph *g = NULL;
    tb_error e;
    tb_arg a[2];
    tb_launch_params p;
    uint32_t kk;
    int unloads;
    NEED_FAKE();
    fake.set_params(sizes, 2);
    CHECK_OK(tb_bundle_create(NULL, &b, &e), &e);
    CHECK_OK(tb_bundle_add_kernel(b, "H", 0, &kk, &e), &e);
    CHECK_OK(tb_bundle_add_artifact(b, kk, "k.cubin", "cubin", 5, TB_COPY, &e), &e);
    c = config("Oi", "");
    memset(&r, 0, sizeof r);
    r.kernel_name = "k", r.cache_key = "K", r.config_count = 1, r.configs = &c;
    CHECK_OK(tb_bundle_add_launch_record(b, &r, &e), &e);
    CHECK_OK(tb_kernel_table_create(b, NULL, NULL, TB_TABLE_LAZY, &t, &e), &e);
    REQUIRE(t);
    CHECK_OK(load(&c, sizes, 2, &k, &e), &e); /* a kernel of the caller's own, beside the table's */
    REQUIRE(k);
    CHECK_OK(tb_graph_begin(STREAM, NULL, &g, &e), &e);
    a[0] = tb_arg_u(0x1000), a[1] = tb_arg_i(1);
    p = params(a, 2, 2);
    CHECK_OK(tb_kernel_table_launch(t, "k", 0, &p, &e), &e);
    CHECK_OK(tb_launch(k, &p, &e), &e);
    CHECK_OK(tb_graph_end(g, &e), &e);
    unloads = fake.unloads();
    tb_kernel_table_free(t); /* the table's kernel: kept by the graph */
    tb_unload(k);            /* the caller's: kept too */
    CHECK(fake.unloads() == unloads);
    a[0] = tb_arg_u(0x4000), a[1] = tb_arg_i(9);
    CHECK_OK(tb_graph_update(g, 0, &p, &e), &e);
    a[1] = tb_arg_i(10);
    CHECK_OK(tb_graph_update(g, 1, &p, &e), &e);
    CHECK_OK(tb_graph_launch(g, STREAM, &e), &e); /* the stand-in fails a replay of an unloaded module */
    CHECK(param_i64(0) == 0x4000 && param_i32(1) == 10);
    tb_graph_free(g);
    CHECK(fake.unloads() == unloads + 2); /* the last references went with the graph */
    CHECK(fake.graphs_live() == 0);
    tb_bundle_free(b);
}

/* A capture abandoned (freed before tb_graph_end) ends the capture and
   releases what it captured; a second capture of one stream is refused;
   launches after tb_graph_end run at once again. */
TEST(test_graph_abandoned_and_twice) {
    static const size_t sizes[] = {8, 4};
    tb_launch_config c = config("Oi", "");
    tb_loaded_kernel *k = NULL;
    tb_graph *g = NULL, *g2 = NULL;
    tb_error e;
    tb_arg a[2];
    tb_launch_params p;
    int unloads, before;
    NEED_FAKE();
    CHECK_OK(load(&c, sizes, 2, &k, &e), &e);
    REQUIRE(k);
    CHECK_OK(tb_graph_begin(STREAM, NULL, &g, &e), &e);
    CHECK(tb_graph_begin(STREAM, NULL, &g2, &e) == tb_err_invalid_argument && !g2);
    a[0] = tb_arg_u(0x1000), a[1] = tb_arg_i(1);
    p = params(a, 2, 1);
    CHECK_OK(tb_launch(k, &p, &e), &e);
    unloads = fake.unloads();
    tb_unload(k);
    CHECK(fake.unloads() == unloads);
    tb_graph_free(g); /* abandoned mid-capture */
    CHECK(fake.unloads() == unloads + 1 && fake.graphs_live() == 0);
    /* the stream is free again: a launch runs at once */
    CHECK_OK(load(&c, sizes, 2, &k, &e), &e);
    before = fake.launches();
    CHECK_OK(tb_launch(k, &p, &e), &e);
    CHECK(fake.launches() == before + 1);
    tb_unload(k);
}

/* Hardening 2.0, defect 3, in a graph: an update converts a bool as the
   launch does (v != 0) and refuses, in checked mode, anything but 0 or 1. */
TEST(test_graph_update_bool) {
    static const size_t sizes[] = {8, 1};
    tb_launch_config c = config("O?", "");
    tb_loaded_kernel *k = NULL;
    tb_graph *g = NULL;
    tb_error e;
    tb_arg a[2];
    tb_launch_params p;
    NEED_FAKE();
    CHECK_OK(load(&c, sizes, 2, &k, &e), &e);
    REQUIRE(k);
    CHECK_OK(tb_graph_begin(STREAM, NULL, &g, &e), &e);
    a[0] = tb_arg_u(0x1000), a[1] = tb_arg_i(0);
    p = params(a, 2, 1);
    CHECK_OK(tb_launch(k, &p, &e), &e);
    CHECK_OK(tb_graph_end(g, &e), &e);
    a[1] = tb_arg_i(256);
    CHECK_OK(tb_graph_update(g, 0, &p, &e), &e);
    CHECK_OK(tb_graph_launch(g, STREAM, &e), &e);
    CHECK(param_u8(1) == 1); /* 256 is true, not its low byte 0 */
    p.flags = TB_LAUNCH_CHECKED;
    CHECK(tb_graph_update(g, 0, &p, &e) == tb_err_arg_range);
    tb_graph_free(g);
    tb_unload(k);
}

/* A kernel launched with launch attributes (here the programmatic
   dependent launch of a decode step's configs, TB_CONFIG_PDL) replays as
   captured, and an update is refused with a message that names why. */
TEST(test_graph_update_refused_with_attributes) {
    static const size_t sizes[] = {8, 4};
    tb_launch_config c = config("Oi", "");
    tb_loaded_kernel *k = NULL;
    tb_graph *g = NULL;
    tb_error e;
    tb_arg a[2];
    tb_launch_params p;
    unsigned gr[3], block, shared, attrs;
    int before;
    NEED_FAKE();
    c.flags = TB_CONFIG_PDL;
    CHECK_OK(load(&c, sizes, 2, &k, &e), &e);
    REQUIRE(k);
    CHECK_OK(tb_graph_begin(STREAM, NULL, &g, &e), &e);
    a[0] = tb_arg_u(0x1000), a[1] = tb_arg_i(11);
    p = params(a, 2, 4);
    CHECK_OK(tb_launch(k, &p, &e), &e);
    CHECK_OK(tb_graph_end(g, &e), &e);
    before = fake.launches();
    CHECK_OK(tb_graph_launch(g, STREAM, &e), &e);
    fake.grid(gr, &block, &shared, &attrs);
    CHECK(fake.launches() == before + 1 && param_i64(0) == 0x1000 && param_i32(1) == 11 && gr[0] == 4);
    a[1] = tb_arg_i(22);
    CHECK(tb_graph_update(g, 0, &p, &e) == tb_err_invalid_argument &&
          strstr(e.message, "programmatic dependent launch") && strstr(e.message, "cannot be updated"));
    CHECK_OK(tb_graph_launch(g, STREAM, &e), &e);
    CHECK(param_i32(1) == 11); /* as captured */
    tb_graph_free(g);
    tb_unload(k);
    CHECK(fake.graphs_live() == 0);
}

int main(int argc, char **argv) { return th_main(argc, argv); }
