#!/usr/bin/env bash
# make bench: every benchmark, each a ratio against a baseline run in the same
# process or script. GPU parts run only where a driver is present.
set -euo pipefail
B=build
echo "== machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
echo "== 1. launch overhead and 5. load (GPU)"
wide=""
if python3 -c "import torch, triton; assert torch.cuda.is_available()" 2>/dev/null; then
  wide=$(mktemp -d "${TMPDIR:-/tmp}/tbwide-XXXXXX")
  python3 bench/make_wide_kernel.py "$wide" || wide=""
fi
$B/bench_launch $wide
echo "== 2. format"
$B/bench_format 200
echo "== 3. pack and unpack against tar and cp"
PYTORCH=1 bench/bench_fs.sh 2000 5
echo "== 4. growth"
for n in 100 1000 10000; do bench/bench_fs.sh $n 3 | sed -n '1p;4p'; done
echo "== 6. a whole model from C against PyTorch (GPU, torch)"
if python3 -c "import torch; assert torch.cuda.is_available()" 2>/dev/null; then
  TRITON_BUNDLE_LIB=$PWD/$B/libtriton_bundle.so python3 bench/bench_model.py --tbundle $B/tbundle --outdir "$(mktemp -d "${TMPDIR:-/tmp}/tbmodel-XXXXXX")" --iters 300
else
  echo "skipped: no torch with a GPU"
fi
echo "== 7. generation from C against PyTorch (GPU, torch): tbundle generate --graph, decode per token"
echo "   against the decode step's kernel time and reduce-overhead, the prefill at 8 and 16 tokens, time to first token"
if python3 -c "import torch; assert torch.cuda.is_available()" 2>/dev/null; then
  python3 tests/model/gpu_generate.py "$(mktemp -d "${TMPDIR:-/tmp}/tbgen-XXXXXX")" gptfast --bench |
    grep -E '^(ok|FAIL|skip)|passed|"bench"'
else
  echo "skipped: no torch with a GPU"
fi
echo "== 8. weights upload from a safetensors file in the page cache (GPU): the runner's pinned way (a first"
echo "   load, pinning included, and reused) and pageable way against one pinned and one pageable cuMemcpyHtoD,"
echo "   and safetensors.torch.load_file(device=cuda)"
python3 bench/bench_upload.py --exe $B/bench_upload 256 1024 4096
echo "== 9. real models (GPU, torch, transformers, torchvision): ViT and ResNet-18 (convolutions as matrix"
echo "   products), GPT-2 with SDPA attention and its weights in a safetensors file"
if python3 -c "import torch, transformers, torchvision; assert torch.cuda.is_available()" 2>/dev/null; then
  TRITON_BUNDLE_LIB=$PWD/$B/libtriton_bundle.so python3 bench/bench_model.py --tbundle $B/tbundle --outdir "$(mktemp -d "${TMPDIR:-/tmp}/tbreal-XXXXXX")" --iters 300 --models vit,resnet18,gpt2_sdpa
else
  echo "skipped: no torch with a GPU, or no transformers or torchvision"
fi
echo "== 10. full-size models (GPU, torch, transformers): GPT-2 (124M, float32) and a Llama-style 1B in bfloat16,"
echo "   weights in safetensors: export time, sizes, load, latency against PyTorch's modes, workspace, bit-identical"
if python3 -c "import torch, transformers; assert torch.cuda.is_available()" 2>/dev/null; then
  TRITON_BUNDLE_LIB=$PWD/$B/libtriton_bundle.so python3 bench/bench_model.py --tbundle $B/tbundle --outdir "$(mktemp -d "${TMPDIR:-/tmp}/tbfull-XXXXXX")" --iters 50 --warmup 5 --no-default --models gpt2_full,llama1b
else
  echo "skipped: no torch with a GPU, or no transformers"
fi
echo "== 11. shapes that vary (GPU, torch, transformers): one bundle of a BERT encoder (batch 2-16 x sequence 8-128)"
echo "   and of a GPT-2 prefill (8-128) at 8 sizes each: tbundle run --graph against the kernels' own time and"
echo "   reduce-overhead of the same dynamic model, bit-identical at each; the plan at the maximum against PyTorch's peak"
if python3 -c "import torch, transformers; assert torch.cuda.is_available()" 2>/dev/null; then
  python3 tests/model/gpu_dynamic.py "$(mktemp -d "${TMPDIR:-/tmp}/tbdyn-XXXXXX")" --bench |
    grep -E '^(ok|FAIL|skip)|passed|^  |on NVIDIA|on [A-Z]'
else
  echo "skipped: no torch with a GPU, or no transformers"
fi
echo "== 12. generation at real size (GPU, torch, transformers): the Llama-3.2-1B and Llama-3-8B shapes, bf16,"
echo "   weights in safetensors: tbundle generate --graph per token against the bytes-over-bandwidth floor, the"
echo "   kernels, the same bundle with its pdl flags cleared and reduce-overhead; export time, bundle and weights"
echo "   sizes, time to first token from the process's start with each load phase (kernels beside the upload and"
echo "   before it), PyTorch's load, 20 loads in one process"
if python3 -c "import torch, transformers; assert torch.cuda.is_available()" 2>/dev/null; then
  for size in 1b 8b; do
    python3 tests/model/gpu_realsize.py "$(mktemp -d "${TMPDIR:-/tmp}/tbreal$size-XXXXXX")" $size --budget 560 |
      grep -E '^(ok|FAIL|skip)|passed|^     (\||first token|phases|PyTorch|loads|two at once|serial vs)'
  done
else
  echo "skipped: no torch with a GPU, or no transformers"
fi
echo "== 13. the greedy token (GPU, torch): an argmax over a vocabulary's logits, Inductor's one program a row"
echo "   against the exporter's two stages (split_argmax), each in a CUDA graph"
if python3 -c "import torch; assert torch.cuda.is_available()" 2>/dev/null; then
  python3 bench/argmax_probe.py
else
  echo "skipped: no torch with a GPU"
fi

echo
echo "== 14. the decode attention (GPU, torch): the exporter's one kernel against eager attention's math,"
echo "   and its time at 256 and 512 positions by warps"
if python3 -c "import torch; assert torch.cuda.is_available()" 2>/dev/null; then
  python3 bench/attn_check.py
else
  echo "skipped: no torch with a GPU"
fi
