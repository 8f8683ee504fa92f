/* libFuzzer target: the mutation API on read bundles. The input is read as
   a bundle (checksum off, as a view or a copy), then a sequence of calls
   chosen by the input's hash adds files to its kernels (empty ones too),
   kernels, its own records, derived records, and writes it back. Every
   byte of every name and file is touched afterwards, so a dangling slice
   shows under AddressSanitizer. This is how the use-after-frees in
   tb_bundle_add_artifact and tb_bundle_add_launch_record were found. */
#define TRITON_BUNDLE_IMPLEMENTATION
#include "../triton_bundle.h"

static unsigned touch(const tb_bundle *b) {
    unsigned h = 0;
    uint32_t i, j;
    for (i = 0; i < tb_bundle_kernel_count(b); i++) {
        const tb_kernel *k = tb_bundle_kernel(b, i);
        h += (unsigned)strlen(k->hash);
        for (j = 0; j < k->artifact_count; j++) {
            const unsigned char *d = (const unsigned char *)k->artifacts[j].data;
            uint64_t q;
            h += (unsigned)strlen(k->artifacts[j].name);
            for (q = 0; q < k->artifacts[j].size; q++) h += d[q];
        }
    }
    for (i = 0; i < tb_bundle_launch_record_count(b); i++) {
        const tb_launch_record *r = tb_bundle_launch_record(b, i);
        h += (unsigned)(strlen(r->cache_key) + strlen(r->kernel_name));
        for (j = 0; j < r->config_count; j++)
            h += (unsigned)(strlen(r->configs[j].kernel_hash) + strlen(r->configs[j].arg_types));
    }
    return h;
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);
int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
    uint64_t ops = tb_xxh3_64(data, size);
    unsigned flags = TB_READ_NO_CHECKSUM | ((ops >> 63) ? TB_READ_COPY : 0);
    tb_bundle *b = NULL, *again = NULL;
    tb_error e;
    tb_names *nm = NULL;
    int step;
    size_t n = 0;
    void *buf;
    volatile unsigned sink;
    if (tb_bundle_read_memory(data, size, NULL, flags, &b, &e) != tb_ok) return 0;
    for (step = 0; step < 10; step++, ops >>= 6) {
        uint32_t kc = tb_bundle_kernel_count(b), rc = tb_bundle_launch_record_count(b), k;
        char name[32];
        snprintf(name, sizeof name, "f%d", step);
        switch (ops & 7) {
        case 0: /* a file for a kernel, an empty one included */
            if (kc) tb_bundle_add_artifact(b, (uint32_t)(ops >> 3) % kc, name, "abc", 3, TB_COPY, &e);
            break;
        case 1:
            snprintf(name, sizeof name, "K%d", step);
            if (tb_bundle_add_kernel(b, name, 0, &k, &e) == tb_ok)
                tb_bundle_add_artifact(b, k, "x.cubin", "x", 1, TB_COPY, &e);
            break;
        case 2: /* the bundle's own record, which the add may move */
            if (rc) tb_bundle_add_launch_record(b, tb_bundle_launch_record(b, (uint32_t)(ops >> 3) % rc), &e);
            break;
        case 3:
            tb_bundle_derive_launch_records(b, &e);
            break;
        case 4:
            if (tb_bundle_names(b, &nm, &e) == tb_ok) tb_names_free(nm);
            break;
        case 5: /* another file's bytes, referenced */
            if (kc && tb_bundle_kernel(b, 0)->artifact_count) {
                const tb_artifact *a = &tb_bundle_kernel(b, 0)->artifacts[0];
                tb_bundle_add_artifact(b, (uint32_t)(ops >> 3) % kc, name, a->data, a->size, TB_REFERENCE, &e);
            }
            break;
        case 6: /* a file named like one the kernel has: refused */
            if (kc && tb_bundle_kernel(b, kc - 1)->artifact_count)
                tb_bundle_add_artifact(b, kc - 1, tb_bundle_kernel(b, kc - 1)->artifacts[0].name, "z", 1, TB_COPY, &e);
            break;
        default:
            sink = touch(b);
            break;
        }
    }
    sink = touch(b);
    (void)sink;
    /* what a mutated bundle holds writes and reads back, unless it now has
       two records of one key, which the writer refuses */
    if (tb_bundle_write_memory(b, NULL, 0, &n, &e) == tb_ok && (buf = malloc(n)) != NULL) {
        if (tb_bundle_write_memory(b, buf, n, NULL, &e) != tb_ok ||
            tb_bundle_read_memory(buf, n, NULL, 0, &again, &e) != tb_ok ||
            tb_bundle_kernel_count(again) != tb_bundle_kernel_count(b))
            __builtin_trap();
        tb_bundle_free(again);
        free(buf);
    } else if (e.code != tb_err_malformed && e.code != tb_err_limit) {
        __builtin_trap();
    }
    tb_bundle_free(b);
    return 0;
}
