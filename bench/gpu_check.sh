#!/usr/bin/env bash
# One short GPU session (< 8 minutes on an H100/H200): install, GPU tests, benchmark.
#
# Prepare here (the GPU machine cannot see ../shared and carries at most 64 MiB):
#   echo /.carry/ >> .git/info/exclude
#   .venv/bin/python bench/make_subset.py .carry/cifar10 12000 2000
# then run `bash bench/gpu_check.sh` there with .carry carried. Logs go to $OUT (or bench/out).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-bench/out}
mkdir -p "$OUT"
export INITLIB_DATA_DIR=${INITLIB_DATA_DIR:-$PWD/.carry/cifar10}
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$OUT/gpu.txt"
# install: carried local wheels first (.whl/, see the device tool's notes), then the machine's
# own torch if it has one, else the pinned versions from pip
if [ -d .whl ] && ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
fi
if ! python3 -c "import torch, pandas, yaml, tqdm, submitit, pytest, scipy" 2>/dev/null; then
  python3 -m pip install -q torch==2.14.1 torchvision==0.29.1 pandas pyyaml tqdm submitit pytest matplotlib scipy
fi
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.get_device_name())" | tee -a "$OUT/gpu.txt"
timeout 150 python3 -m pytest -q tests/test_gpu.py tests/test_fused_train.py 2>&1 | tee "$OUT/gpu_tests.log"
# side by side, one run: plain PyTorch loop, one initlib run, 4 processes, fused G (the trainer's
# fused step loop), as images/s, ratio to the plain loop and MFU against the bf16 peak
timeout 200 python3 bench/throughput.py --device cuda --precision bf16 --widths 1.0 \
  --batch-sizes 128 --steps 100 --concurrent 4 --fused 8,32,64 2>&1 | tee "$OUT/bench_bf16.log"
# the same with torch.compile on every model, fused included (keep what the numbers favour)
timeout 120 python3 bench/throughput.py --device cuda --precision bf16 --widths 1.0 \
  --batch-sizes 128 --steps 100 --fused 32 --compile 2>&1 | tee "$OUT/bench_bf16_compile.log"
timeout 60 python3 -m initlib plan params/0*.yaml --profile paper --measure --device cuda 2>&1 | tee "$OUT/plan.log"
# if time remains: claim 1 in the paper's regime (width 1, SGD lr 1e-3, sigma_w 0.1 and 2.5),
# fused, on the carried subset, for as many epochs as fit; exported under a name that says so
timeout 120 python3 -m initlib sweep bench/gpu_pilot_claim1.yaml --profile paper --store /tmp/pilot \
  --fuse 2 2>&1 | tail -5 | tee "$OUT/pilot.log"
python3 -m initlib export bench/gpu_pilot_claim1.yaml --profile paper --store /tmp/pilot \
  --out "$OUT/results_gpu_pilot_claim1_subset" 2>&1 | tee -a "$OUT/pilot.log"
# a pilot cut short by the timeout: its per-epoch metrics so far (no checkpoints: too large)
for m in /tmp/pilot/*/metrics.csv; do
  [ -f "$m" ] && mkdir -p "$OUT/pilot_partial/$(basename "$(dirname "$m")")" && \
    cp "$m" "$(dirname "$m")/config.json" "$OUT/pilot_partial/$(basename "$(dirname "$m")")/"
done
