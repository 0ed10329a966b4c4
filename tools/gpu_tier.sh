#!/usr/bin/env bash
# The GPU tier: GPU tests, the conformance kit on CUDA, and the GPU benchmarks.
#
# On any CUDA machine with the project installed for CUDA:
#     python -m pip install -e '.[cuda,dev]' && tools/gpu_tier.sh [RESULTS_DIR]
# Without vLLM (the kernels and graph backend need none), vLLM's pure-Python
# files on PYTHONPATH are enough for the conformance kit's `import vllm.ir`
# (see README, "GPU tier").
set -euo pipefail
cd "$(dirname "$0")/.."
results="${1:-gpu-results}"
mkdir -p "$results"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
python -c "import torch; assert torch.cuda.is_available(), 'the GPU tier needs a CUDA GPU'"
python -m pytest -m gpu tests/gpu -q -p no:cacheprovider
python -m pytest tests/unit/test_conformance.py -k template_triton -q -p no:cacheprovider
python benchmarks/gpu_graphs.py --json "$results/gpu_graphs.json" | tee "$results/gpu_graphs.txt"
python benchmarks/gpu_kernels.py --json "$results/gpu_kernels.json" | tee "$results/gpu_kernels.txt"
