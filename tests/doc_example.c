/* The README's example as a function, compiled (not run) by make
   check-compile as C99 and C++11 with -Wall -Wextra -Werror, so that the
   docs keep compiling. Keep it in step with README.md's "Use" section. */
#define TRITON_BUNDLE_IMPLEMENTATION
#include "../triton_bundle.h"

int readme_example(void *x, void *y, void *out, int n);
int readme_example(void *x, void *y, void *out, int n) {
    /* build time: pack a cache */
    tb_bundle *b; tb_error e;
    tb_kernel_table *t;
    tb_bundle_create(NULL, &b, &e);
    if (tb_collect_cache(b, "/home/me/.triton/cache", NULL, NULL, &e)) fprintf(stderr, "%s\n", e.message);
    tb_bundle_derive_launch_records(b, &e);          /* from NAME.json + NAME.source */
    tb_bundle_write_file(b, "kernels.tbundle", 0, &e);  /* temp file + rename */
    tb_bundle_free(b);

    /* run time: launch straight out of the mapped file, by name */
    tb_bundle_read_file("kernels.tbundle", NULL, 0, &b, &e);
    tb_kernel_table_create(b, NULL, NULL, TB_TABLE_LAZY, &t, &e);
    tb_arg a[4] = { tb_arg_p(x), tb_arg_p(y), tb_arg_p(out), tb_arg_i(n) };
    tb_launch_params p;
    memset(&p, 0, sizeof p);                         /* zero means default */
    p.grid[0] = (uint32_t)(n + 1023) / 1024; p.grid[1] = p.grid[2] = 1;
    p.args = a; p.arg_count = 4;
    if (tb_kernel_table_launch(t, "tb_add", 0, &p, &e)) fprintf(stderr, "%s\n", e.message);
    tb_kernel_table_free(t); tb_bundle_free(b);
    return 0;
}
