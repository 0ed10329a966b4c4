# The three device calls of issue 57 item 5 (2026-12-07, one warm H100), as run: each is
# 'bash .gpu-carry/callN.sh' in /work/main's tree copy, carrying .gpu-carry/wt.tar.xz (the code at
# 3b371e4, docs/ and trained weights left out) and the named stock file; results in $OUT.

# ---- call 1 ----
#!/usr/bin/env bash
# gpu57e call 1: install the bundle + stock's FA3 file; MoE tile sweep and template-only op bench
R=$PWD; W=/tmp/wt; rm -rf $W; mkdir -p $W /tmp/stock
tar -xJf .gpu-carry/wt.tar.xz -C $W; cp .gpu-carry/stock/fa3.xz /tmp/stock/
cat .gpu-carry/wt.commit
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee $OUT/machine.txt
python -c "import torch, triton; print(torch.__version__, triton.__version__)" | tee -a $OUT/machine.txt
nproc | tee -a $OUT/machine.txt
export PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/gpu-tier/triton TORCHINDUCTOR_CACHE_DIR=/tmp/gpu-tier/inductor
t0=$SECONDS
python $W/tools/gpu_bundle.py install $R/.bundle/0.32.0 --target /tmp/gpu-site 2>&1 | tail -2
echo "bundle installed in $((SECONDS - t0)) s"
cd $W
timeout 150 env PYTHONPATH=$W:$W/tests:/tmp/gpu-site python -m pytest -q -p no:cacheprovider -x \
  tests/devices/gpu/speed_tier/test_triton_kernels.py -k fused_moe 2>&1 | tail -4 | tee $OUT/moe_tests.txt
timeout 300 env PYTHONPATH=$W python benchmarks/gpu_quantized_moe.py --sweep-moe --moe-only \
  --json $OUT/moe_sweep.json 2>&1 | tee $OUT/moe_sweep.txt
echo "call 1 done at $SECONDS s"

# ---- call 2 ----
#!/usr/bin/env bash
# gpu57e call 2 (machine warm from call 1): stock's _C; 8b-w8a8 end to end
R=$PWD; W=/tmp/wt; rm -rf $W; mkdir -p $W /tmp/stock
tar -xJf .gpu-carry/wt.tar.xz -C $W; cp .gpu-carry/stock/cstable.xz /tmp/stock/
cat .gpu-carry/wt.commit; ls /tmp/stock; ls -d /tmp/gpu-site/vllm || exit 3
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
cd $W
PYTHONUNBUFFERED=1 GPU_BUNDLE=unused GPU_STOCK=/tmp/stock GPU_E2E_SHAPE=8b-w8a8 GPU_E2E_DEADLINE=545 \
  timeout 585 tools/gpu_tier.sh bench-e2e $OUT/e2e
echo "call 2 exit $? at $SECONDS s"

# ---- call 3 ----
#!/usr/bin/env bash
# gpu57e call 3 (machine warm): stock's _moe_C; op bench with stock; mixtral-8l end to end
R=$PWD; W=/tmp/wt; rm -rf $W; mkdir -p $W /tmp/stock
tar -xJf .gpu-carry/wt.tar.xz -C $W; cp .gpu-carry/stock/moe.xz /tmp/stock/
cat .gpu-carry/wt.commit; ls /tmp/stock; ls -d /tmp/gpu-site/vllm || exit 3
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
xz -dc /tmp/stock/moe.xz >/tmp/gpu-site/vllm/_moe_C_stable_libtorch.abi3.so
xz -dc /tmp/stock/cstable.xz >/tmp/gpu-site/vllm/_C_stable_libtorch.abi3.so
export PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/gpu-tier/triton TORCHINDUCTOR_CACHE_DIR=/tmp/gpu-tier/inductor
cd $W
timeout 120 env VLLM_PLUGINS=none PYTHONPATH=$W:/tmp/gpu-site python benchmarks/gpu_quantized_moe.py \
  --json $OUT/moe_ops.json 2>&1 | grep -v Warning | tee $OUT/moe_ops.txt
echo "op bench done at $SECONDS s"
GPU_BUNDLE=unused GPU_STOCK=/tmp/stock GPU_E2E_SHAPE=mixtral-8l GPU_E2E_ARGS="--kv-cache-mib 1024" \
  GPU_E2E_DEADLINE=$((570 - SECONDS)) timeout $((590 - SECONDS)) tools/gpu_tier.sh bench-e2e $OUT/e2e
echo "call 3 exit $? at $SECONDS s"
