#!/usr/bin/env bash
# The GPU tier: GPU tests, the conformance kit on CUDA, and the GPU benchmarks.
#
# On any CUDA machine with the project installed for CUDA:
#     python -m pip install -e '.[cuda,dev]' && tools/gpu_tier.sh [RESULTS_DIR]
# Without vLLM (the kernels and graph backend need none), vLLM's pure-Python
# files on PYTHONPATH are enough for the conformance kit's `import vllm.ir`
# (see README, "GPU tier").
# With no vLLM and no network there: GPU_BUNDLE=DIR names a bundle made by
# tools/gpu_bundle.py (vLLM's Python + the wheels the machine lacks); it is
# installed into $GPU_SITE (default /tmp/gpu-site) and the project beside it.
set -euo pipefail
cd "$(dirname "$0")/.."
results="${1:-gpu-results}"
mkdir -p "$results"
if [ -n "${GPU_BUNDLE:-}" ]; then
    site="${GPU_SITE:-/tmp/gpu-site}"
    [ -d "$site/vllm" ] || python tools/gpu_bundle.py install "$GPU_BUNDLE" --target "$site"
    python -m pip install -q --no-index --no-deps --no-build-isolation --target "$site" \
        --upgrade . >/dev/null
    export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
python -c "import torch; assert torch.cuda.is_available(), 'the GPU tier needs a CUDA GPU'"
python -m pytest -m gpu tests/gpu tests/e2e/test_gpu_engine.py -q -rA -p no:cacheprovider \
    | tee "$results/gpu_tier_tests.txt"
python -m pytest tests/unit/test_conformance.py -k template_triton -q -p no:cacheprovider
python benchmarks/gpu_graphs.py --json "$results/gpu_graphs.json" | tee "$results/gpu_graphs.txt"
python benchmarks/gpu_kernels.py --json "$results/gpu_kernels.json" | tee "$results/gpu_kernels.txt"
