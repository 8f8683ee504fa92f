"""What export_model asks of Inductor: its options that make every GPU
operation of a forward a Triton kernel (TRITON_ONLY), a torch.compile
backend that runs 2-D convolutions as Triton matrix products
(conv_as_mm_backend), and one config for a decode step's one-row products
(NARROW_PRODUCT_CONFIG, given by narrow_product_configs)."""

# Inductor's options that make every GPU operation of a forward a Triton
# kernel: matrix products and convolutions as Triton templates, and no CUDA
# graphs (a graph replay launches kernels outside CachingAutotuner.run).
TRITON_ONLY = {"max_autotune": True, "max_autotune_gemm_backends": "TRITON",
               "max_autotune_conv_backends": "TRITON", "triton.cudagraphs": False}


def conv_as_mm_backend(torch, compile_options, split_k=True, sms=132, prologue_fusion=False):
    """A torch.compile backend: Inductor (compile_fx) with compile_options
    and one more decomposition, of aten.convolution (2-D, not transposed,
    one group) into a gather of the input's windows and a matrix product,
    which Inductor's Triton matrix-product templates run and tune. A
    convolution whose stride is its kernel (a ViT's patch embedding) is a
    reshape and a matrix product, bytes and all; any other gathers its
    windows (im2col) first. Inductor's own convolution template is slower
    than cuDNN at these sizes (FORMAT.md's performance notes); this is
    measured against it in bench/."""
    from torch._decomp import register_decomposition
    from torch._inductor.compile_fx import compile_fx
    from torch._inductor.decomposition import select_decomp_table
    aten = torch.ops.aten
    table = dict(select_decomp_table())

    @register_decomposition(aten.convolution.default, registry=table)
    def _conv(x, w, b, stride, padding, dilation, transposed, output_padding, groups):
        if transposed or groups != 1 or x.dim() != 4 or w.dim() != 4 or any(d != 1 for d in dilation):
            return NotImplemented
        n, c, h, wd = x.shape
        d, _, kh, kw = w.shape
        sh, sw = stride
        ph, pw = padding
        ho, wo = (h + 2 * ph - kh) // sh + 1, (wd + 2 * pw - kw) // sw + 1
        if (sh, sw) == (kh, kw) and (ph, pw) == (0, 0):
            cols = x[:, :, :ho * kh, :wo * kw].reshape(n, c, ho, kh, wo, kw).permute(0, 2, 4, 1, 3, 5)
        else:
            xp = torch.nn.functional.pad(x, (pw, pw, ph, ph)) if ph or pw else x
            # windows: [n, c, ho, wo, kh, kw] by strides, as unfold
            cols = xp.unfold(2, kh, sh).unfold(3, kw, sw).permute(0, 2, 3, 1, 4, 5)
        m_, k_ = n * ho * wo, c * kh * kw
        cols = cols.reshape(m_, k_)
        # split K where the product has too few 64x64 tiles to fill the GPU
        # (ResNet's late layers at small images: M = 4, K = 4608): S products
        # of K/S each, then their sum, every chunk at least 256 deep
        s_ = 1
        tiles = -(-m_ // 64) * -(-d // 64)
        while split_k and tiles * s_ * 2 <= sms and k_ % (s_ * 2) == 0 and k_ // (s_ * 2) >= 256:
            s_ *= 2
        if s_ > 1:
            out = torch.bmm(cols.reshape(m_, s_, k_ // s_).permute(1, 0, 2),
                            w.reshape(d, s_, k_ // s_).permute(1, 2, 0)).sum(0)
        else:
            out = torch.mm(cols, w.reshape(d, k_).t())
        if b is not None:
            out = out + b
        return out.reshape(n, ho, wo, d).permute(0, 3, 1, 2)

    patches = dict(compile_options)
    if not prologue_fusion and hasattr(torch._inductor.config, "prologue_fusion"):
        # a window gather fused into the matrix product's loads makes them
        # uncoalesced: measured 345 us for one of ResNet-18's products
        patches["prologue_fusion"] = False

    def backend(gm, example_inputs, **_):
        # AOTAutograd's cache keys on the graph before decomposition, not on
        # this table: a model compiled without it would come back
        with torch._functorch.config.patch(enable_autograd_cache=False):
            return compile_fx(gm, example_inputs, config_patches=patches, decompositions=table)
    return backend


# The config of every one-row product that Inductor's decomposition made a
# reduction (options["narrow_mm"]), in place of coordinate descent's walk
# from one config to its neighbours, whose choice for the same kernel varied
# by up to 2.5x from one compile to the next. Two outputs per program,
# 2,048-element steps, 8 warps: on an H200, a Llama-3.2-1B-shaped decode
# step took 1,153 and 1,234 us with it in two runs against coordinate
# descent's 1,396 us; one output per program 1,283 us, four 1,348 us, eight
# 1,247 us, and the fastest of those four measured per kernel 1,171 us
# (bench/gemv_probe.py). Alone, a plain product is within 2% of the best of
# 80 configs with one output per program; in the step, a product whose
# prologue (a norm, SiLU) every program recomputes wants wider programs.
NARROW_PRODUCT_CONFIG = {"XBLOCK": 2, "R0_BLOCK": 2048, "num_warps": 8, "num_stages": 1}


def _narrow_product(tuner, launcher):
    """Whether an Inductor kernel is a one-row product as a reduction: a
    looped reduction whose name has the mm it came from, over at least
    1,024 contiguous elements (the weight's rows), tiled by XBLOCK and
    R0_BLOCK only."""
    meta = getattr(tuner, "inductor_meta", None) or {}
    hints = dict(getattr(tuner, "size_hints", None) or {})
    kind = str(getattr(tuner, "heuristic_type", ""))
    return (kind.endswith("REDUCTION") and "PERSISTENT" not in kind
            and "mm" in str(meta.get("kernel_name", "")).split("_")
            and str(meta.get("reduction_hint", "")).endswith("INNER")
            and set(hints) == {"x", "r0_"} and hints["r0_"] >= 1024
            and set(launcher.config.kwargs) == {"XBLOCK", "R0_BLOCK"})


class narrow_product_configs:
    """A context manager: while it is active, Inductor's coordinate descent
    gives each one-row product (_narrow_product) one config
    (NARROW_PRODUCT_CONFIG, or the dict given: XBLOCK, R0_BLOCK, num_warps,
    num_stages) instead of tuning it; every other kernel is tuned as
    before. The config is compiled the way coordinate descent compiles its
    own (a compile result of the kernel's autotuner), so a capture records
    it as any other. .chosen maps each such kernel's name to its block
    sizes (clamped to the kernel's sizes)."""

    def __init__(self, config=None):
        self.config = dict(NARROW_PRODUCT_CONFIG if config is None else config)
        if set(self.config) != {"XBLOCK", "R0_BLOCK", "num_warps", "num_stages"}:
            raise ValueError("a narrow product's config names XBLOCK, R0_BLOCK, num_warps and num_stages, not %s"
                             % sorted(self.config))
        for k, v in sorted(self.config.items()):
            if not isinstance(v, int) or isinstance(v, bool) or v < 1 or (k != "num_stages" and v & (v - 1)):
                raise ValueError("%s is %r: a positive integer%s" % (k, v, "" if k == "num_stages" else
                                                                    ", a power of two"))
        self.chosen = {}
        self._orig = None

    def __enter__(self):
        import torch._inductor.runtime.triton_heuristics as th
        self._th = th
        self._orig = orig = th.CachingAutotuner.coordinate_descent_tuning
        ctx = self

        def tuning(tuner, launcher, *args, **kwargs):
            if not _narrow_product(tuner, launcher):
                return orig(tuner, launcher, *args, **kwargs)
            c = ctx.config
            cfg = th.Config({"XBLOCK": min(c["XBLOCK"], tuner.size_hints["x"]),
                             "R0_BLOCK": min(c["R0_BLOCK"], tuner.size_hints["r0_"])},
                            num_warps=c["num_warps"], num_stages=c["num_stages"])
            if getattr(tuner.fn, "fn", True) is None:  # compiled in a worker: load it here, as coordinate descent does
                tuner.fn = tuner._reload_kernel().fn
            with tuner.lock:
                chosen = tuner._precompile_config(cfg).make_launcher()
            cfg.found_by_coordesc = True
            ctx.chosen[tuner.inductor_meta.get("kernel_name")] = dict(cfg.kwargs)
            return chosen
        th.CachingAutotuner.coordinate_descent_tuning = tuning
        return self

    def __exit__(self, *exc):
        self._th.CachingAutotuner.coordinate_descent_tuning = self._orig
        return False
