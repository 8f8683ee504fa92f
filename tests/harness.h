/* Minimal test harness shared by the test programs: each TEST is run in
   order, counted as passed, failed or skipped, and the runner ends with the
   line "N passed, N failed, N skipped". */
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

static void th_run(const char *name, th_fn fn, const char *filter) {
    if (filter && !strstr(name, filter)) return;
    th_failed_now = 0;
    th_skipped_now = 0;
    th_skip_reason[0] = 0;
    fn();
    if (th_failed_now) {
        th_fail++;
        printf("FAIL %s\n", name);
    } else if (th_skipped_now) {
        th_skip++;
        printf("skip %s: %s\n", name, th_skip_reason);
    } else {
        th_pass++;
        printf("ok   %s\n", name);
    }
    fflush(stdout);
}

#define RUN(fn) th_run(#fn, fn, filter)

static int th_finish(void) {
    printf("%d passed, %d failed, %d skipped\n", th_pass, th_fail, th_skip);
    return th_fail ? 1 : 0;
}

#endif
