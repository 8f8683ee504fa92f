/* libFuzzer target: the autotune choices text reader, on a table of one
   record of two configs, through the memory doors (no temporary files).
   An input either loads or is refused with a message; what loads is
   written back and must load again. */
#define TRITON_BUNDLE_IMPLEMENTATION
#include "../triton_bundle.h"

static tb_bundle *b;
static tb_kernel_table *t;

static void setup(void) {
    static const char *const names[] = {"x", "n"};
    static const uint32_t key[] = {1};
    static tb_call_info ci;
    static tb_launch_config c[2];
    tb_launch_record r;
    tb_error e;
    ci.arg_count = 2, ci.arg_names = names, ci.key_count = 1, ci.key = key;
    c[0].kernel_hash = "H0", c[0].function_name = "k", c[0].binary_name = "k.cubin", c[0].arg_types = "Oi";
    c[0].num_warps = c[0].num_ctas = 1;
    c[1] = c[0], c[1].kernel_hash = "H1";
    memset(&r, 0, sizeof r);
    r.cache_key = "K", r.kernel_name = "k", r.config_count = 2, r.configs = c, r.call = &ci;
    if (tb_bundle_create(NULL, &b, &e) || tb_bundle_add_launch_record(b, &r, &e) ||
        tb_kernel_table_create(b, NULL, NULL, TB_TABLE_LAZY, &t, &e))
        __builtin_trap();
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);
int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
    char *out;
    size_t n = 0, got = 0;
    tb_error e;
    if (!t) setup();
    /* the memory door: no temporary file; the parser reads only [data, data + size) */
    if (tb_kernel_table_load_choices_memory(t, data, size, &e) == tb_ok) {
        if (tb_kernel_table_save_choices_memory(t, NULL, 0, &n, &e) != tb_ok || !(out = (char *)malloc(n)))
            __builtin_trap();
        if (tb_kernel_table_save_choices_memory(t, out, n, &got, &e) != tb_ok || got != n ||
            tb_kernel_table_load_choices_memory(t, out, n, &e) != tb_ok)
            __builtin_trap();
        free(out);
    } else if (!e.message[0]) {
        __builtin_trap();
    }
    return 0;
}
