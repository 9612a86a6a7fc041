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
timeout 150 python3 -m pytest -q tests/test_gpu.py 2>&1 | tee "$OUT/gpu_tests.log"
timeout 240 python3 bench/throughput.py --device cuda --precision bf16 --widths 1.0 \
  --batch-sizes 128,512 --steps 150 --concurrent 4 --fused 8,32 2>&1 | tee "$OUT/bench_bf16.log"
timeout 60 python3 -m initlib plan params/0*.yaml --profile paper --measure --device cuda 2>&1 | tee "$OUT/plan.log"
