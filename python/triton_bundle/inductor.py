"""What export_model asks of Inductor: its options that make every GPU
operation of a forward a Triton kernel (TRITON_ONLY), and a torch.compile
backend that runs 2-D convolutions as Triton matrix products
(conv_as_mm_backend)."""

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
