/* tbundle_cli.h: what the translation units of tbundle share; the tool's
   own, never installed.

     tbundle.c      main, pack, list, unpack, verify, clean, and the helpers
                    below: the one file that defines
                    TRITON_BUNDLE_IMPLEMENTATION
     tbundle_run.c  run: .npy files in and out, a model's program run
                    through the header's tb_model_* calls
     generate.c     generate, built with GENERATE_NO_MAIN (alone, without
                    it, it is the example program build/generate)

   Every message starts with prog; names from bundles and the command line
   are printed through E. */
#ifndef TBUNDLE_CLI_H
#define TBUNDLE_CLI_H

/* pread, openat, clock_gettime: POSIX 2008, as the header asks for in its
   implementation file (tbundle.c includes the header first, which defines
   it there) */
#if !defined(_POSIX_C_SOURCE) && !defined(_GNU_SOURCE) && !defined(_DEFAULT_SOURCE) && !defined(_XOPEN_SOURCE)
#define _POSIX_C_SOURCE 200809L
#endif
#include "triton_bundle.h"

/* ---- tbundle.c ---- */
extern const char *prog; /* "tbundle" */
/* text on stdout (status 0) or stderr; returns status */
int usage(const char *text, int status);
/* s with control bytes and backslashes as \xNN, in one of four rotating
   buffers (several in one message) */
const char *E(const char *s);
/* a usage error: "tbundle: " and the message, then the command's usage
   line (the first of text); returns 2 */
int bad_usage(const char *text, const char *fmt, ...);
/* "tbundle: " and e's message; returns 1 */
int fail(const tb_error *e);
/* argv's a is an option (1), "--" (-1, consumed) or an operand (0) */
int is_option(const char *a, int *after_dashes);
/* option a at argv[i] has no value after it: 1, the usage error printed */
int missing_value(const char *a, int i, int argc, const char *text);
double now(void); /* seconds, CLOCK_MONOTONIC */
/* dir + "/" + name (malloc'd), without doubling a trailing slash of dir */
char *join(const char *dir, const char *name);
/* 0 and *b, or 1 with the cause printed (a directory named as such) */
int open_bundle(const char *path, unsigned flags, tb_bundle **b);
const char *dtype_text(uint32_t dtype); /* a dtype's name, else "dtype N" */
#define DIMS_TEXT 200 /* dims_text's buffer */
const char *dims_text(const int64_t *v, uint32_t n, char *buf); /* "[2, 3]" */
/* the strides are C order's for the sizes (size-1 dimensions aside) */
int spec_contiguous(const tb_tensor_spec *t);

/* ---- tbundle_run.c ---- */
extern const char *const usage_run;
int cmd_run(int argc, char **argv);

/* ---- generate.c ---- */
extern const char gen_usage_line[];
int generate_main(int argc, char **argv, const char *prog, double t_start);

#endif /* TBUNDLE_CLI_H */
