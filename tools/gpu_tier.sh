#!/usr/bin/env bash
# The GPU tier, in stages that each fit one call of a lent GPU machine (< 6 min on an H100):
#
#     tools/gpu_tier.sh STAGE [RESULTS_DIR]
#
#   kernels   Triton kernel tests, CUDA graph backend tests, the conformance kit on CUDA
#   engine    vLLM engines on the GPU platform: parity with transformers in every mode,
#             warm start, perplexity, bf16, faults (tests/devices/gpu/speed_tier/test_gpu_engine.py)
#   serve     vllm-template serve under 64 concurrent requests, clean shutdown; the
#             plugin `vllm-template new` generates, its parity run on this device; a
#             5-minute soak with 256 streaming clients
#   bench     the GPU benchmarks (kernels, graphs)
#   bench-e2e vLLM end to end, the template beside stock vLLM CUDA and a second stock (the
#             null test) in ABBA/BAAB quad pairs, a verdict per metric (benchmarks/gpu_e2e.py;
#             needs stock's compiled files, staged as below); it prints everything by
#             GPU_E2E_DEADLINE (570) seconds after this script started, one device call
#   multi     tensor and pipeline parallel on two GPUs (skips with fewer); then faults
#             there: a TP=2 worker killed mid-request, client disconnects (TP=2, PP=2)
#   upstream  vLLM's own tests/kernels/ir and compile tests on the GPU platform
#             (tools/upstream_tests.py; needs vLLM's test plugins and its sdist, below)
#   all       every stage above but upstream, in that order
#
# Any stage works alone on a fresh machine. With vLLM installed for CUDA
# (`pip install -e '.[cuda,dev]'`) nothing is installed. On a machine without vLLM
# and without network, GPU_BUNDLE=DIR names a bundle made by tools/gpu_bundle.py:
# it is installed into $GPU_SITE (default /tmp/gpu-site) once (later stages on the same
# machine reuse it), this project beside it in $GPU_SITE-project at each stage. Triton's and
# Inductor's caches live under /tmp/gpu-tier, so later stages reuse the kernels
# earlier ones compiled; tests run in parallel (pytest-xdist) over the machine's
# cores, since compiling Triton kernels is CPU-bound. Each stage writes
# RESULTS_DIR/<stage>.txt (machine, versions, wall time, the test outcomes). pytest runs
# verbose: a call cut off at its time limit still names every test that ran.
set -euo pipefail
cd "$(dirname "$0")/.."
usage="usage: tools/gpu_tier.sh kernels|engine|serve|bench|bench-e2e|multi|upstream|all [RESULTS_DIR]"
stage="${1:?$usage}"
case "$stage" in
kernels | engine | serve | bench | bench-e2e | multi | upstream | all) ;;
*)
    echo "unknown stage: $stage; $usage" >&2
    exit 2
    ;;
esac
results="$(mkdir -p "${2:-gpu-results}" && cd "${2:-gpu-results}" && pwd)"
cache="${GPU_TIER_CACHE:-/tmp/gpu-tier}"
export TRITON_CACHE_DIR="${TRITON_CACHE_DIR:-$cache/triton}"
export TORCHINDUCTOR_CACHE_DIR="${TORCHINDUCTOR_CACHE_DIR:-$cache/inductor}"
export PYTHONUNBUFFERED=1
# Print each failure when it happens: a call cut off at its limit still says why.
export TEMPLATE_TEST_FAILURES_AT_ONCE=1
jobs="${GPU_TIER_JOBS:-$(nproc)}"

# Stock vLLM CUDA's compiled files (../shared/tools/stage_stock_vllm.sh writes two of them
# as cstable.xz and fa3.xz, 63 MiB together; its MoE extension, moe.xz (36 MiB), comes from
# the same wheel: `unzip WHEEL vllm/_moe_C_stable_libtorch.abi3.so` then `xz -6`). Each
# comes in a call of its own while the machine stays warm, unpacked into the bundle's vLLM
# as it arrives.
stock="${GPU_STOCK:-.gpu-carry/stock}"
install_stock() {  # install_stock SITE
    [ -f "$stock/cstable.xz" ] && xz -dc "$stock/cstable.xz" >"$1/vllm/_C_stable_libtorch.abi3.so"
    if [ -f "$stock/fa3.xz" ]; then
        mkdir -p "$1/vllm/vllm_flash_attn"
        xz -dc "$stock/fa3.xz" >"$1/vllm/vllm_flash_attn/_vllm_fa3_C.abi3.so"
    fi
    # the MoE extension (topk_softmax, moe_align_block_size, moe_sum): stock's fused MoE
    [ -f "$stock/moe.xz" ] && xz -dc "$stock/moe.xz" >"$1/vllm/_moe_C_stable_libtorch.abi3.so"
    return 0
}

if [ -n "${GPU_BUNDLE:-}" ]; then
    site="${GPU_SITE:-/tmp/gpu-site}"
    if [ ! -d "$site/vllm" ]; then
        python tools/gpu_bundle.py install "$GPU_BUNDLE" --target "$site"
    fi
    # The project in a folder of its own: pip's --target --upgrade replaces whole folders of
    # the target, the bundle's bin/ (ruff's binary) with the project's scripts among them.
    project_site="$site-project"
    rm -rf "$project_site"
    python -m pip install -q --no-index --no-deps --no-build-isolation --target "$project_site" \
        . >/dev/null
    install_stock "$site"
    export PYTHONPATH="$project_site:$site${PYTHONPATH:+:$PYTHONPATH}"
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
python -c "import sys, torch; torch.cuda.is_available() or sys.exit(
    'the GPU tier needs a CUDA GPU: torch ' + torch.__version__ + ' sees none here')"

header() {
    python - <<'EOF'
import datetime, importlib.metadata as md, subprocess, torch
def v(name):
    try:
        return md.version(name)
    except md.PackageNotFoundError:
        return "absent"
smi = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                     capture_output=True, text=True).stdout.strip().replace("\n", "; ")
print(f"date {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC; GPU {smi}")
print(f"torch {torch.__version__}, Triton {v('triton')}, vLLM {v('vllm')}, "
      f"transformers {v('transformers')}, project {v('vllm-platform-template')}")
EOF
}

tier_pytest() {  # the tier's pytest: verbose (a call cut off still names each test), timings
    python -m pytest -v -rA -p no:cacheprovider --durations 15 "$@"
}

pytest_stage() {  # pytest_stage NAME WORKERS ARGS...
    local name=$1 workers=$2
    shift 2
    local xdist=()
    # --dist load: test by test (loadfile would give all of test_triton_kernels.py to one worker)
    [ "$workers" -gt 1 ] && xdist=(-n "$workers" --dist load)
    tier_pytest --timeout 300 "${xdist[@]}" "$@"
}

run_stage() {
    local name=$1 start=$SECONDS out="$results/$1.txt" rc=0
    { header; echo "stage $name"; } >"$out"
    case "$name" in
    kernels)
        pytest_stage kernels "$jobs" -m gpu tests/devices/gpu/speed_tier 2>&1 | tee -a "$out" || rc=1
        # vLLM resolves its platform when these import it: the template's GPU platform, since a
        # pure-Python vLLM's own CUDA platform cannot load (no compiled vLLM on the machine).
        VLLM_TEMPLATE_DEVICE=cuda pytest_stage platform 1 -m gpu tests/devices/gpu/test_gpu_platform.py \
            tests/devices/gpu/speed_tier/test_gpu_views.py 2>&1 | tee -a "$out" || rc=1
        VLLM_TEMPLATE_DEVICE=cuda pytest_stage communicator 1 \
            tests/devices/gpu/speed_tier/test_communicator_graph_capture.py 2>&1 | tee -a "$out" || rc=1
        pytest_stage conformance "$jobs" tests/full_plugin/conformance/test_conformance.py -k template_triton \
            2>&1 | tee -a "$out" || rc=1
        ;;
    engine)
        # One engine per test, each with a 1 GiB KV cache: several fit the GPU at once.
        tier_pytest --timeout 420 -n "${GPU_TIER_ENGINES:-8}" \
            --dist loadgroup -m gpu tests/devices/gpu/speed_tier/test_gpu_engine.py tests/devices/gpu/test_gpu_first_light.py \
            tests/devices/gpu/speed_tier/test_gpu_quantized_and_moe.py \
            2>&1 | tee -a "$out" || rc=1
        ;;
    serve)
        # The server under load, then the generated plugin's (vllm-template new) parity run
        # on this device: one after the other, as the shutdown test measures the whole
        # device's memory.
        tier_pytest --timeout 420 \
            tests/devices/gpu/speed_tier/test_gpu_serving.py 2>&1 | tee -a "$out" || rc=1
        tier_pytest --timeout 420 \
            -m gpu tests/project/test_scaffold.py 2>&1 | tee -a "$out" || rc=1
        # 256 streaming clients for 5 minutes (tests/full_plugin/test_soak.py): no error, answers
        # equal their references, memory flat, nothing left running
        SOAK_DEVICE=cuda SOAK_CLIENTS="${GPU_SOAK_CLIENTS:-256}" SOAK_MINUTES="${GPU_SOAK_MINUTES:-5}" \
            SOAK_REPORT="$results/soak" tier_pytest --timeout 600 -m e2e tests/full_plugin/test_soak.py \
            2>&1 | tee -a "$out" || rc=1
        ;;
    bench)
        python benchmarks/gpu_kernels.py --json "$results/gpu_kernels.json" 2>&1 | tee -a "$out" || rc=1
        python benchmarks/gpu_graphs.py --json "$results/gpu_graphs.json" 2>&1 | tee -a "$out" || rc=1
        ;;
    bench-e2e)
        # Stock, a second stock (the null test) and the template in ABBA/BAAB quads; exit 1
        # when the null test fails (benchmarks/gpu_e2e.py). Needs stock's compiled files.
        vllm_dir=$(python -c "import importlib.util as u; print(u.find_spec('vllm').submodule_search_locations[0])")
        if [ ! -f "$vllm_dir/_C_stable_libtorch.abi3.so" ] ||
            [ ! -f "$vllm_dir/vllm_flash_attn/_vllm_fa3_C.abi3.so" ]; then
            echo "stock vLLM CUDA not installed (no compiled files): no baseline, nothing to decide" | tee -a "$out"
            rc=1
        else
            # The deadline counts from the benchmark's start: what is left of this script's
            # GPU_E2E_DEADLINE once the bundle is installed (SECONDS: since the script began).
            seed=()
            [ -n "${GPU_E2E_SEED:-}" ] && seed=(--seed "$GPU_E2E_SEED")
            # GPU_E2E_ARGS: more options of gpu_e2e.py, the same for every engine (e.g.
            # --kv-cache-mib 1024: three Mixtral-8l engines fit an 80 GB H100 with it)
            read -ra extra <<<"${GPU_E2E_ARGS:-}"
            python benchmarks/gpu_e2e.py --shape "${GPU_E2E_SHAPE:-1.1b}" \
                --candidates "${GPU_E2E_CANDIDATES:-gpu-template}" --quads "${GPU_E2E_QUADS:-8}" \
                --deadline-s "$((${GPU_E2E_DEADLINE:-570} - SECONDS))" "${seed[@]}" "${extra[@]}" \
                --json "$results/gpu_e2e.json" --chart "$results/gpu_e2e.png" 2>&1 | tee -a "$out" || rc=1
        fi
        ;;
    upstream)
        # vLLM's own tests/kernels/ir and compile tests with the GPU platform active (the
        # groups of tests/project/upstream/selection.toml; docs/conformance.md, "On a GPU"). Needs
        # pip install tblib pytest-asyncio pytest-mock pytest-forked, and vLLM's sdist in
        # ~/.cache/vllm-platform-template/upstream (downloaded there when PyPI is reachable).
        python tools/upstream_tests.py --device cuda --mode template --group kernels-ir \
            --group compile-passes --group compile-unit --json "$results/upstream.json" \
            2>&1 | tee -a "$out" || rc=1
        ;;
    multi)
        tier_pytest --timeout 420 -n 4 --dist load tests/devices/gpu/speed_tier/test_gpu_parallel.py \
            2>&1 | tee -a "$out" || rc=1
        # The faults measure the devices' memory: one at a time, after the parallel tests.
        tier_pytest --timeout 420 tests/devices/gpu/speed_tier/test_gpu_faults.py 2>&1 | tee -a "$out" || rc=1
        ;;
    esac
    echo "stage $name: exit $rc, wall $((SECONDS - start)) s" | tee -a "$out"
    return $rc
}

if [ "$stage" = all ]; then
    failed=0
    for s in kernels engine serve bench multi; do run_stage "$s" || failed=1; done
    exit $failed
fi
run_stage "$stage"
