"""The CUDA path. These run only where a GPU is visible (bench/gpu_check.sh runs them)."""
import pytest
import torch

from conftest import tiny
from initlib import store
from initlib.config import run_hash
from initlib.executors import run_workers
from initlib.sweep import run_sweep
from initlib.train import train

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


def test_cuda_matches_cpu_closely():
    cpu, _ = train(tiny(device="cpu", epochs=2))
    gpu, _ = train(tiny(device="cuda", epochs=2))
    assert abs(gpu["train_loss"].iloc[1] - cpu["train_loss"].iloc[1]) < 0.05
    assert abs(gpu["weight_norm"].iloc[-1] - cpu["weight_norm"].iloc[-1]) < 0.01 * cpu["weight_norm"].iloc[-1]


def test_cuda_is_deterministic_and_bf16_is_its_own_run():
    a, _ = train(tiny(device="cuda", precision="bf16", augment=True))
    b, _ = train(tiny(device="cuda", precision="bf16", augment=True))
    assert (a.drop(columns="wall_s").values == b.drop(columns="wall_s").values).all()
    assert run_hash(tiny(precision="bf16")) != run_hash(tiny())


def test_compile_switch_trains():
    e, s = train(tiny(device="cuda", compile=True, epochs=1))
    assert s["status"] == "finished"


def test_runs_per_gpu_share_one_store(tmp_path):
    grid = [tiny(device="cuda", sigma_w=s) for s in (0.5, 1.0, 2.0)]
    assert run_workers(grid, tmp_path, None, ["0", "0"]) == [0, 0]
    for cfg in grid:
        assert len(store.read_attempts(store.run_dir(tmp_path, cfg))) == 1
    assert len(run_sweep(grid, tmp_path, progress=False)) == 3


def test_fused_group_on_cuda_tracks_its_runs_alone():
    """On the GPU in fp32: one epoch of a fused group against the same runs alone. Not equal
    to the last bit (grouped and plain convolutions differ; TF32 may be on), so compared as
    test_cuda_matches_cpu_closely compares devices."""
    from initlib.train import train_group
    cfgs = [tiny(device="cuda", epochs=1, sigma_w=s, seed=i) for i, s in enumerate((0.5, 2.0))]
    for (fe, fs), cfg in zip(train_group(cfgs), cfgs):
        ae, as_ = train(cfg)
        assert fs["status"] == as_["status"] == "finished"
        assert abs(fe["train_loss"].iloc[1] - ae["train_loss"].iloc[1]) < 0.05
        assert abs(fe["weight_norm"].iloc[-1] - ae["weight_norm"].iloc[-1]) < 0.01 * ae["weight_norm"].iloc[-1]


def test_the_cuda_sweep_fuses(tmp_path):
    grid = [tiny(device="cuda", sigma_w=s, seed=i) for i, s in enumerate((0.5, 1.0, 2.0))]
    summaries = run_sweep(grid, tmp_path, progress=False, fuse=3)
    assert (summaries["status"] == "finished").all()
    for cfg in grid:
        assert store.read_attempts(store.run_dir(tmp_path, cfg))[-1]["from_epoch"] == 0
