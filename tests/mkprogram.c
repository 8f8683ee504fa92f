/* mkprogram FILE: writes a bundle whose program (format 2.4, section 5)
   needs no kernel, for tests/test_tbundle.sh (tbundle list and run):
   memset and copy steps only, so no launch record. With --weights
   WEIGHTS, fc.weight is external (format 2.5, section 6): tensor
   "fc.weight" of the safetensors file WEIGHTS, which it writes too, named
   in the property weights.file.

     inputs   0 x   float32 [4]
              1 y   bfloat16 [2, 3], strides [1, 2] (y transposed: not C order)
              2 b   float32 [2, 2], strides [0, 1] (one row, broadcast: its
                    elements share memory two by two)
     outputs  0 x2  float32 [4]                      a copy of x
              1 yt  bfloat16 [3, 2], strides [1, 3]   y's 12 bytes as they lie
              2 count<ESC>"  int32 [2]               7, 7 (a name to escape)
     constants  fc.weight float32 16 bytes (1, 2, 3, 4), bn.running_mean
                float32 8 bytes (state; each run copies fc.weight[2:4] in)
     workspace  64 bytes, one buffer of 8 (steps 0 to 1)
     steps    memset buffer 0 to 7 (2 x 4 bytes); copy it to count; copy x
              to x2; copy y's extent to yt's; copy fc.weight[2:4] to
              bn.running_mean

   Built by make as C99 (build/mkprogram). */
#define TRITON_BUNDLE_IMPLEMENTATION
#include "../triton_bundle.h"
#include <stdio.h>
#include <string.h>

static tb_tensor_spec spec(const char *name, uint32_t dtype, uint32_t rank, const int64_t *shape,
                           const int64_t *strides) {
    tb_tensor_spec t;
    memset(&t, 0, sizeof t);
    t.name = name;
    t.dtype = dtype;
    t.rank = rank;
    t.align = 16;
    memcpy(t.shape, shape, rank * sizeof *shape);
    memcpy(t.strides, strides, rank * sizeof *strides);
    return t;
}

static tb_operand operand(uint32_t space, uint32_t index, uint64_t value) {
    tb_operand o;
    o.space = space;
    o.index = index;
    o.value = value;
    return o;
}

static tb_program_step step(uint32_t kind, uint64_t count, uint32_t operand_count, const tb_operand *operands) {
    tb_program_step s;
    memset(&s, 0, sizeof s);
    s.kind = kind;
    s.count = count;
    s.operand_count = operand_count;
    s.operands = operands;
    return s;
}

/* mkprogram --generate [--logits-only] FILE: prefill_4 and decode as
   examples/generate.c takes them, of copies only, over a shared state kv:
     prefill_4  ids int64 [1, 4] -> logits float32 [1, 4, 8]: the constant
                table, whose row r is largest at r + 1 (so the first new
                token is the prompt's length); ids copied into kv[0:4]
     decode     ids int64 [1, 1], pos int64 [1] -> logits float32 [1, 1, 8]
                (table's row 0: largest at 1), next_token int64 [1, 1]: a
                copy of pos (so each decode step's token is its position);
                ids copied into kv[0]. --logits-only leaves next_token out:
                every decode token is then 1, the logits' argmax
     properties generate.max_seq 40 (more than two of generate.c's chunks
     of steps), generate.eos 6.
   --dynamic (2.6): the prefill is one program "prefill" whose length T is
   a symbol, 2..4: ids [1, T], logits [1, T, 8] (strides 8T, 8, 1), the
   copies T rows of the table and T ids */
/* --bad-ids (tbundle generate's refusals): prefill_4's ids with strides
   [0, 0], an extent of 8 bytes where generate copies 32 (its copy reads
   8); --short-logits: the dynamic prefill's logits hold T // 4 * 4
   positions (none under T = 4, where a 3-token prompt's last is read) */
static int generation(const char *path, int logits_only, int dynamic, int variant) {
    static const int64_t z2[] = { 0, 0 }, s14[] = { 1, 4 }, c14[] = { 4, 1 }, s148[] = { 1, 4, 8 },
                         c148[] = { 32, 8, 1 }, s11[] = { 1, 1 }, c11[] = { 1, 1 }, s1[] = { 1 }, c1[] = { 1 },
                         s118[] = { 1, 1, 8 }, c118[] = { 8, 8, 1 };
    static float table[32];
    static const int64_t kv[8] = {0};
    tb_tensor_spec pin[1], pout[1], din[2], dout[2];
    tb_program_constant k[2];
    tb_operand ops[8];
    tb_program_step ps[2], ds[3];
    tb_program p, d;
    tb_bundle *b = NULL;
    tb_error e;
    int r, c;
    for (r = 0; r < 4; r++)
        for (c = 0; c < 8; c++) table[r * 8 + c] = c == r + 1 ? 1.0f : -(float)c;
    pin[0] = spec("ids", TB_DTYPE_INT64, 2, s14, variant == 1 ? z2 : c14);
    pout[0] = spec("logits", TB_DTYPE_FLOAT32, 3, s148, c148);
    din[0] = spec("ids", TB_DTYPE_INT64, 2, s11, c11);
    din[1] = spec("pos", TB_DTYPE_INT64, 1, s1, c1);
    dout[0] = spec("logits", TB_DTYPE_FLOAT32, 3, s118, c118);
    dout[1] = spec("next_token", TB_DTYPE_INT64, 2, s11, c11);
    memset(k, 0, sizeof k);
    k[0].name = "table", k[0].dtype = TB_DTYPE_FLOAT32, k[0].size = sizeof table, k[0].data = table;
    k[1].name = "kv", k[1].dtype = TB_DTYPE_INT64, k[1].size = sizeof kv, k[1].data = kv;
    k[1].flags = TB_CONSTANT_STATE | TB_CONSTANT_SHARED;
    ops[0] = operand(TB_SPACE_OUTPUT, 0, 0), ops[1] = operand(TB_SPACE_CONSTANT, 0, 0);
    ops[2] = operand(TB_SPACE_CONSTANT, 1, 0), ops[3] = operand(TB_SPACE_INPUT, 0, 0);
    ops[4] = operand(TB_SPACE_OUTPUT, 1, 0), ops[5] = operand(TB_SPACE_INPUT, 1, 0);
    ops[6] = operand(TB_SPACE_OUTPUT, 0, 0), ops[7] = operand(TB_SPACE_CONSTANT, 0, 0);
    ps[0] = step(TB_STEP_COPY, 128, 2, &ops[0]);
    ps[1] = step(TB_STEP_COPY, variant == 1 ? 8 : 32, 2, &ops[2]);
    ds[0] = step(TB_STEP_COPY, 32, 2, &ops[6]);
    ds[1] = step(TB_STEP_COPY, 8, 2, &ops[2]);
    ds[2] = step(TB_STEP_COPY, 8, 2, &ops[4]);
    memset(&p, 0, sizeof p);
    memset(&d, 0, sizeof d);
    p.name = "prefill_4", p.input_count = 1, p.inputs = pin, p.output_count = 1, p.outputs = pout;
    p.constant_count = 2, p.constants = k, p.step_count = 2, p.steps = ps;
    if (dynamic) {
        static tb_program_symbol t = {"T", 2, 4, 1};
        static const tb_grid_op sym[1] = { { TB_GRID_SYM, 0, 0 } },
                                x8[3] = { { TB_GRID_SYM, 0, 0 }, { TB_GRID_CONST, 0, 8 }, { TB_GRID_MUL, 0, 0 } },
                                x32[3] = { { TB_GRID_SYM, 0, 0 }, { TB_GRID_CONST, 0, 32 }, { TB_GRID_MUL, 0, 0 } };
        static tb_program_expr x[6] = {{TB_FIELD_INPUT_SIZE, 0, 1, 1, sym},   {TB_FIELD_INPUT_STRIDE, 0, 0, 1, sym},
                                       {TB_FIELD_OUTPUT_SIZE, 0, 1, 1, sym},  {TB_FIELD_OUTPUT_STRIDE, 0, 0, 3, x8},
                                       {TB_FIELD_COUNT, 0, 0, 3, x32}, {TB_FIELD_COUNT, 1, 0, 3, x8}};
        static const tb_grid_op q4[5] = {{TB_GRID_SYM, 0, 0}, {TB_GRID_CONST, 0, 4}, {TB_GRID_FLOORDIV, 0, 0},
                                         {TB_GRID_CONST, 0, 4}, {TB_GRID_MUL, 0, 0}},
                                q32[7] = {{TB_GRID_SYM, 0, 0}, {TB_GRID_CONST, 0, 4}, {TB_GRID_FLOORDIV, 0, 0},
                                          {TB_GRID_CONST, 0, 4}, {TB_GRID_MUL, 0, 0}, {TB_GRID_CONST, 0, 32},
                                          {TB_GRID_MUL, 0, 0}};
        p.name = "prefill", p.symbol_count = 1, p.symbols = &t, p.expr_count = 6, p.exprs = x;
        if (variant == 2) x[2].op_count = 5, x[2].ops = q4, x[4].op_count = 7, x[4].ops = q32;
    }
    d.name = "decode", d.input_count = 2, d.inputs = din, d.output_count = logits_only ? 1 : 2, d.outputs = dout;
    d.constant_count = 2, d.constants = k, d.step_count = logits_only ? 2 : 3, d.steps = ds;
    if (tb_bundle_create(NULL, &b, &e) != tb_ok || tb_bundle_add_program(b, &p, &e) != tb_ok ||
        tb_bundle_add_program(b, &d, &e) != tb_ok || tb_bundle_set_property(b, "generate.max_seq", "40", &e) != tb_ok ||
        tb_bundle_set_property(b, "generate.eos", "6", &e) != tb_ok || tb_bundle_write_file(b, path, 0, &e) != tb_ok) {
        fprintf(stderr, "mkprogram: %s\n", e.message);
        tb_bundle_free(b);
        return 1;
    }
    tb_bundle_free(b);
    return 0;
}

int main(int argc, char **argv) {
    static const int64_t s4[] = { 4 }, c1[] = { 1 }, s23[] = { 2, 3 }, y_strides[] = { 1, 2 }, s22[] = { 2, 2 },
                         b_strides[] = { 0, 1 }, s32[] = { 3, 2 }, yt_strides[] = { 1, 3 }, s2[] = { 2 };
    static const float weight[4] = {1, 2, 3, 4}, mean[2] = {0, 0};
    tb_tensor_spec inputs[3], outputs[3];
    tb_program_constant constants[2];
    tb_program_buffer buffer;
    tb_operand ops[9];
    tb_program_step steps[5];
    tb_program p;
    tb_bundle *b = NULL;
    tb_error e;
    const char *out = argv[argc - 1], *wfile = NULL;
    if (argc == 3 && !strcmp(argv[1], "--generate")) return generation(argv[2], 0, 0, 0);
    if (argc == 4 && !strcmp(argv[1], "--generate") && !strcmp(argv[2], "--logits-only"))
        return generation(argv[3], 1, 0, 0);
    if (argc == 4 && !strcmp(argv[1], "--generate") && !strcmp(argv[2], "--dynamic"))
        return generation(argv[3], 0, 1, 0);
    if (argc == 4 && !strcmp(argv[1], "--generate") && !strcmp(argv[2], "--bad-ids"))
        return generation(argv[3], 0, 0, 1);
    if (argc == 4 && !strcmp(argv[1], "--generate") && !strcmp(argv[2], "--short-logits"))
        return generation(argv[3], 0, 1, 2);
    if (argc == 4 && !strcmp(argv[1], "--weights")) wfile = argv[2];
    else if (argc != 2) {
        fprintf(
            stderr,
            "usage: mkprogram [--weights WEIGHTS] FILE | mkprogram --generate [--logits-only | --dynamic | --bad-ids | "
            "--short-logits] FILE\n");
        return 2;
    }
    inputs[0] = spec("x", TB_DTYPE_FLOAT32, 1, s4, c1);
    inputs[1] = spec("y", TB_DTYPE_BFLOAT16, 2, s23, y_strides);
    inputs[2] = spec("b", TB_DTYPE_FLOAT32, 2, s22, b_strides);
    outputs[0] = spec("x2", TB_DTYPE_FLOAT32, 1, s4, c1);
    outputs[1] = spec("yt", TB_DTYPE_BFLOAT16, 2, s32, yt_strides);
    outputs[2] = spec("count\x1b\"", TB_DTYPE_INT32, 1, s2, c1);
    memset(constants, 0, sizeof constants);
    constants[0].name = "fc.weight";
    constants[0].dtype = TB_DTYPE_FLOAT32;
    constants[0].size = sizeof weight;
    constants[0].data = weight;
    constants[1].name = "bn.running_mean";
    constants[1].dtype = TB_DTYPE_FLOAT32;
    constants[1].flags = TB_CONSTANT_STATE;
    constants[1].size = sizeof mean;
    constants[1].data = mean;
    buffer.offset = 0;
    buffer.size = 8;
    buffer.first_step = 0;
    buffer.last_step = 1;
    ops[0] = operand(TB_SPACE_BUFFER, 0, 0);
    ops[1] = operand(TB_SPACE_OUTPUT, 2, 0);
    ops[2] = operand(TB_SPACE_BUFFER, 0, 0);
    ops[3] = operand(TB_SPACE_OUTPUT, 0, 0);
    ops[4] = operand(TB_SPACE_INPUT, 0, 0);
    ops[5] = operand(TB_SPACE_OUTPUT, 1, 0);
    ops[6] = operand(TB_SPACE_INPUT, 1, 0);
    ops[7] = operand(TB_SPACE_CONSTANT, 1, 0);
    ops[8] = operand(TB_SPACE_CONSTANT, 0, 8);
    steps[0] = step(TB_STEP_MEMSET, 2, 1, &ops[0]);
    steps[0].width = 4;
    steps[0].value = 7;
    steps[1] = step(TB_STEP_COPY, 8, 2, &ops[1]);
    steps[2] = step(TB_STEP_COPY, 16, 2, &ops[3]);
    steps[3] = step(TB_STEP_COPY, 12, 2, &ops[5]);
    steps[4] = step(TB_STEP_COPY, 8, 2, &ops[7]);
    memset(&p, 0, sizeof p);
    p.input_count = 3;
    p.inputs = inputs;
    p.output_count = 3;
    p.outputs = outputs;
    p.constant_count = 2;
    p.constants = constants;
    p.buffer_count = 1;
    p.buffers = &buffer;
    p.workspace_size = 64;
    p.step_count = 5;
    p.steps = steps;
    if (wfile) { /* fc.weight as tensor "fc.weight" of a safetensors file (2.5) */
        static const char json[] = "{\"fc.weight\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}    ";
        unsigned char len[8] = {sizeof json - 1, 0, 0, 0, 0, 0, 0, 0};
        FILE *f = fopen(wfile, "wb");
        const char *slash = strrchr(wfile, '/');
        if (!f || fwrite(len, 1, 8, f) != 8 || fwrite(json, 1, sizeof json - 1, f) != sizeof json - 1 ||
            fwrite(weight, 1, sizeof weight, f) != sizeof weight || fclose(f) != 0) {
            fprintf(stderr, "mkprogram: cannot write %s\n", wfile);
            return 1;
        }
        constants[0].flags = TB_CONSTANT_EXTERNAL, constants[0].data = NULL, constants[0].tensor = "fc.weight";
        constants[0].rank = 1, constants[0].shape[0] = 4, constants[0].crc32 = tb_crc32(0, weight, sizeof weight);
        if (tb_bundle_create(NULL, &b, &e) != tb_ok ||
            tb_bundle_set_property(b, "weights.file", slash ? slash + 1 : wfile, &e) != tb_ok) {
            fprintf(stderr, "mkprogram: %s\n", e.message);
            return 1;
        }
    }
    if ((!b && tb_bundle_create(NULL, &b, &e) != tb_ok) || tb_bundle_set_program(b, &p, &e) != tb_ok ||
        tb_bundle_write_file(b, out, 0, &e) != tb_ok) {
        fprintf(stderr, "mkprogram: %s\n", e.message);
        tb_bundle_free(b);
        return 1;
    }
    tb_bundle_free(b);
    return 0;
}
