/* A bundle past 4 GiB, on the CPU: a program whose constant of 4 GiB + 64
   bytes (zero pages of an anonymous mapping: no memory spent) puts the
   constant after it at a file offset past 2^32. Written (streaming, every
   byte checksummed in 1 MiB blocks), read back mapped with its checksum
   verified, that constant read through the checked path at its offset,
   the bundle rewritten from the mapping to the same checksum. Needs about
   8.6 GiB free in build/ and 6 GiB of memory (tb_bundle_set_program copies
   the constant; skipped otherwise): make big, which CI runs; not part of
   make test. */
#define TRITON_BUNDLE_IMPLEMENTATION
#include "../triton_bundle.h"
#include "harness.h"
#include "util.h"
#include <sys/mman.h>
#include <sys/statvfs.h>

/* MemAvailable of /proc/meminfo, in bytes (0 if unknown). */
static uint64_t mem_available(void) {
    char line[256];
    unsigned long long kb = 0;
    FILE *f = fopen("/proc/meminfo", "r");
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1) break;
    if (f) fclose(f);
    return (uint64_t)kb << 10;
}

/* A file's last 8 bytes (its checksum). */
static uint64_t trailer(const char *path) {
    uint64_t v = 0;
    struct stat st;
    int fd = open(path, O_RDONLY);
    if (fd >= 0 && fstat(fd, &st) == 0 && st.st_size >= 8 && pread(fd, &v, 8, st.st_size - 8) != 8) v = 0;
    if (fd >= 0) close(fd);
    return v;
}

TEST(test_bundle_past_4gib) {
    static const float head[2] = {1.5f, 2.5f};
    static const int32_t tail[2] = {7, 8};
    uint64_t big = ((uint64_t)1 << 32) + 64;
    tb_tensor_spec out;
    tb_program_constant k[3];
    tb_operand ops[2];
    tb_program_step st;
    tb_program p;
    tb_bundle *b = NULL, *r = NULL;
    tb_error e;
    struct statvfs fs;
    char path[256];
    void *zeros;
    int32_t got[2] = {0, 0};
    uint64_t c1 = 0, c2 = 0;
    if (sizeof(size_t) < 8) SKIP("a 32-bit host");
    if (statvfs("build", &fs) != 0 || (uint64_t)fs.f_bavail * fs.f_frsize < 2 * big + ((uint64_t)512 << 20))
        SKIP("less than 8.6 GiB free in build/");
    if (mem_available() < big + ((uint64_t)2 << 30))
        SKIP("less than 6 GiB of memory available (tb_bundle_set_program copies the constant)");
    zeros = mmap(NULL, (size_t)big, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    REQUIRE(zeros != MAP_FAILED);
    memset(&out, 0, sizeof out), memset(k, 0, sizeof k), memset(&st, 0, sizeof st), memset(&p, 0, sizeof p);
    memset(ops, 0, sizeof ops);
    out.name = "o", out.dtype = TB_DTYPE_INT32, out.rank = 1, out.align = 16, out.shape[0] = 2, out.strides[0] = 1;
    k[0].name = "head", k[0].dtype = TB_DTYPE_FLOAT32, k[0].size = 8, k[0].data = head;
    k[1].name = "big", k[1].dtype = TB_DTYPE_UINT8, k[1].size = big, k[1].data = zeros;
    k[2].name = "tail", k[2].dtype = TB_DTYPE_INT32, k[2].size = 8, k[2].data = tail;
    ops[0].space = TB_SPACE_OUTPUT, ops[1].space = TB_SPACE_CONSTANT, ops[1].index = 2;
    st.kind = TB_STEP_COPY, st.count = 8, st.operand_count = 2, st.operands = ops;
    p.output_count = 1, p.outputs = &out, p.constant_count = 3, p.constants = k, p.step_count = 1, p.steps = &st;
    snprintf(path, sizeof path, "build/test_big.%d.tbundle", (int)getpid());
    CHECK_OK(tb_bundle_create(NULL, &b, &e), &e);
    REQUIRE(b);
    CHECK_OK(tb_bundle_set_program(b, &p, &e), &e);
    CHECK_OK(tb_bundle_write_file(b, path, 0, &e), &e);
    tb_bundle_free(b);
    munmap(zeros, (size_t)big);
    CHECK_OK(tb_bundle_read_file(path, NULL, 0, &r, &e), &e); /* the checksum verified over every byte */
    REQUIRE(r && tb_bundle_program(r));
    CHECK(tb_bundle_program(r)->constants[1].size == big);
    CHECK((uintptr_t)tb_bundle_program(r)->constants[2].data - (uintptr_t)tb_bundle_program(r)->constants[0].data >
          big);
    CHECK_OK(tb_program_read_constant(r, 2, 0, got, 8, &e), &e);
    CHECK(got[0] == 7 && got[1] == 8);
    CHECK_OK(tb_program_read_constant(r, 1, big - 8, &c1, 8, &e), &e); /* the big one's last bytes */
    CHECK(c1 == 0);
    {
        tb_bundle *again = NULL;
        char p2[300];
        snprintf(p2, sizeof p2, "%s.2", path);
        CHECK_OK(tb_bundle_write_file(r, p2, 0, &e), &e); /* from the mapping, through the checked path */
        CHECK_OK(tb_bundle_read_file(p2, NULL, 0, &again, &e), &e);
        CHECK(again != NULL);
        c1 = trailer(path), c2 = trailer(p2); /* the checksums in the trailers */
        CHECK(c1 && c1 == c2);
        tb_bundle_free(again);
        unlink(p2);
    }
    tb_bundle_free(r);
    unlink(path);
}

int main(int argc, char **argv) { return th_main(argc, argv); }
