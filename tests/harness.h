/* Minimal test harness shared by the test programs. A test registers
   itself where it is defined:
       TEST(test_name) { CHECK(...); }
   and th_main runs every registered test in the order of the file (or those
   whose names hold argv[1]), counts each as passed, failed or skipped, and
   ends with the line "N passed, N failed, N skipped". Registration runs
   before main through a constructor (GCC and Clang, C and C++). */
#ifndef TB_TEST_HARNESS_H
#define TB_TEST_HARNESS_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int th_failed_now, th_skipped_now;
static char th_skip_reason[1024];
static int th_pass, th_fail, th_skip;

#define CHECK(cond)                                                              \
    do {                                                                         \
        if (!(cond)) {                                                           \
            printf("    FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond);           \
            th_failed_now = 1;                                                   \
        }                                                                        \
    } while (0)

/* CHECK_OK(expr): expr returns tb_result; print the error message on failure */
#define CHECK_OK(expr, errp)                                                     \
    do {                                                                         \
        tb_result r_ = (expr);                                                   \
        if (r_ != tb_ok) {                                                       \
            printf("    FAIL %s:%d: %s -> %s: %s\n", __FILE__, __LINE__, #expr,   \
                   tb_result_string(r_), (errp)->message);                       \
            th_failed_now = 1;                                                   \
        }                                                                        \
    } while (0)

#define REQUIRE(cond)                                                            \
    do {                                                                         \
        if (!(cond)) {                                                           \
            printf("    FAIL %s:%d: %s (stopping this test)\n", __FILE__,        \
                   __LINE__, #cond);                                             \
            th_failed_now = 1;                                                   \
            return;                                                              \
        }                                                                        \
    } while (0)

#define SKIP(...)                                                                \
    do {                                                                         \
        snprintf(th_skip_reason, sizeof th_skip_reason, __VA_ARGS__);            \
        th_skipped_now = 1;                                                      \
        return;                                                                  \
    } while (0)

typedef void (*th_fn)(void);

/* Skips with one reason, in a row, are one line: "skip N tests (FIRST ..
   LAST): REASON" (without a GPU, every test of test_gpu says the same). */
static char th_group_reason[1024], th_group_first[128], th_group_last[128];
static int th_group_count;
static void th_skip_flush(void) {
    if (!th_group_count) return;
    if (th_group_count == 1) printf("skip %s: %s\n", th_group_first, th_group_reason);
    else printf("skip %d tests (%s .. %s): %s\n", th_group_count, th_group_first, th_group_last, th_group_reason);
    th_group_count = 0;
    fflush(stdout);
}
static void th_skip_note(const char *name) {
    if (th_group_count && strcmp(th_group_reason, th_skip_reason)) th_skip_flush();
    if (!th_group_count) {
        snprintf(th_group_reason, sizeof th_group_reason, "%s", th_skip_reason);
        snprintf(th_group_first, sizeof th_group_first, "%s", name);
    }
    snprintf(th_group_last, sizeof th_group_last, "%s", name);
    th_group_count++;
}

static void th_run(const char *name, th_fn fn, const char *filter) {
    if (filter && !strstr(name, filter)) return;
    th_failed_now = 0;
    th_skipped_now = 0;
    th_skip_reason[0] = 0;
    fn();
    if (!th_skipped_now || th_failed_now) th_skip_flush();
    if (th_failed_now) {
        th_fail++;
        printf("FAIL %s\n", name);
    } else if (th_skipped_now) {
        th_skip++;
        th_skip_note(name);
    } else {
        th_pass++;
        printf("ok   %s\n", name);
    }
    fflush(stdout);
}

typedef struct th_test {
    const char *name;
    th_fn fn;
    int line;
} th_test;
static th_test th_tests[256];
static int th_count;
static const char *filter; /* argv[1]: run only the tests whose names hold it */

static void th_register(const char *name, th_fn fn, int line) {
    if (th_count == (int)(sizeof th_tests / sizeof th_tests[0])) {
        fprintf(stderr, "harness: too many tests\n");
        exit(2);
    }
    th_tests[th_count].name = name;
    th_tests[th_count].fn = fn;
    th_tests[th_count].line = line;
    th_count++;
}

#define TEST(fn)                                                                 \
    static void fn(void);                                                        \
    static void th_reg_##fn(void) __attribute__((constructor));                  \
    static void th_reg_##fn(void) { th_register(#fn, fn, __LINE__); }            \
    static void fn(void)

static int th_finish(void) {
    th_skip_flush();
    printf("%d passed, %d failed, %d skipped\n", th_pass, th_fail, th_skip);
    return th_fail ? 1 : 0;
}

/* Runs the registered tests in the order of their lines (constructors run
   in no promised order). */
static int th_run_all(int argc, char **argv) {
    int i, j;
    filter = argc > 1 ? argv[1] : NULL;
    for (i = 1; i < th_count; i++)
        for (j = i; j > 0 && th_tests[j - 1].line > th_tests[j].line; j--) {
            th_test t = th_tests[j];
            th_tests[j] = th_tests[j - 1];
            th_tests[j - 1] = t;
        }
    for (i = 0; i < th_count; i++) th_run(th_tests[i].name, th_tests[i].fn, filter);
    return th_count;
}

static __attribute__((unused)) int th_main(int argc, char **argv) {
    if (th_run_all(argc, argv) == 0) printf("no tests registered\n");
    return th_finish();
}

#endif
