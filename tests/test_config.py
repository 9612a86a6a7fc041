import subprocess
import sys
from pathlib import Path

import pytest

from initlib.config import ConfigError, resolve, run_hash
from initlib.params import load_params

ROOT = Path(__file__).resolve().parent.parent


def write(tmp_path, text, name="bad.yaml"):
    p = tmp_path / name
    p.write_text(text)
    return p


@pytest.mark.parametrize("cfg,pattern", [
    ({"lrr": 0.1}, r"key 'lrr': unknown key"),
    ({"optimizer": "lion"}, r"key 'optimizer': unknown optimizer 'lion'"),
    ({"arch": "vgg11"}, r"key 'arch': unknown architecture 'vgg11'"),
    ({"sigma_w": -1.0}, r"key 'sigma_w': must be a positive number"),
    ({"sigma_w": 0}, r"key 'sigma_w': must be a positive number"),
    ({"n_train": 55}, r"key 'n_train': must be a multiple of 10"),
    ({"batch_size": 0}, r"key 'batch_size': must be an integer >= 1"),
    ({"epochs": 2.5}, r"key 'epochs': must be an integer >= 1"),
    ({"augment": "yes"}, r"key 'augment': must be true or false"),
    ({"momentum": 1.0}, r"key 'momentum': must be in \[0, 1\)"),
    ({"precision": "fp16"}, r"key 'precision': unknown precision"),
    ({"last_batch": "pad"}, r"key 'last_batch': must be one of \('keep', 'drop'\)"),
    ({"weight_decay": 0.1, "optimizer": "sgd"}, r"key 'weight_decay': decoupled weight_decay applies to adamw and muon"),
])
def test_bad_values_are_named(cfg, pattern):
    with pytest.raises(ConfigError, match=pattern):
        resolve(cfg, "params/x.yaml")


def test_error_names_file_profile_and_key(tmp_path):
    p = write(tmp_path, "profiles:\n  smoke:\n    grid: {sigma_w: [0.5, -1.0]}\n")
    with pytest.raises(ConfigError, match=r"bad.yaml: profile 'smoke': key 'sigma_w'"):
        load_params(p, "smoke")
    p = write(tmp_path, "profiles:\n  smoke:\n    base: {optimiser: sgd}\n")
    with pytest.raises(ConfigError, match=r"bad.yaml: profile 'smoke': base: key 'optimiser': unknown key"):
        load_params(p, "smoke")
    p = write(tmp_path, "profiles:\n  smoke:\n    grids: {}\n")
    with pytest.raises(ConfigError, match=r"unknown key 'grids'"):
        load_params(p, "smoke")
    with pytest.raises(ConfigError, match=r"no profile 'cpu'"):
        load_params(write(tmp_path, "profiles: {smoke: {}}\n"), "cpu")


def test_cli_rejects_bad_config_before_training(tmp_path):
    p = write(tmp_path, "profiles:\n  smoke:\n    grid: {sigma_w: [0.5], optimizer: [sgd, lion]}\n")
    store = tmp_path / "store"
    r = subprocess.run([sys.executable, "-m", "initlib", "sweep", str(p), "--profile", "smoke",
                        "--store", str(store)], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 2
    assert "bad.yaml: profile 'smoke': key 'optimizer': unknown optimizer 'lion'" in r.stderr
    assert not store.exists()  # nothing trained, not even the valid sigma_w=0.5 run


def test_cli_missing_data_says_how_to_get_it(tmp_path):
    p = write(tmp_path, "profiles:\n  smoke:\n    base: {n_train: 100, n_val: 50, n_test: 50, epochs: 1, batch_size: 32}\n"
                        "    grid: {sigma_w: [1.0]}\n")
    r = subprocess.run([sys.executable, "-m", "initlib", "sweep", str(p), "--store", str(tmp_path / "s"),
                        "--data-dir", str(tmp_path / "nodata")], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 2
    assert "CIFAR-10 not found" in r.stderr and "cifar10.npz" in r.stderr and "--download" in r.stderr


def test_hash_is_canonical():
    assert run_hash({"lr": 1, "sigma_w": 2}) == run_hash({"sigma_w": 2.0, "lr": 1.0})
    assert run_hash({}) == run_hash({"device": "cuda", "compile": True, "checkpoint_every": 5})
    assert run_hash({}) != run_hash({"precision": "bf16"})  # bf16 changes the numbers
    assert run_hash({}) != run_hash({"seed": 1})


def test_a_key_added_later_keeps_the_stored_runs_hashes_at_the_value_they_trained_with():
    """last_batch came after results/cpu: 'keep' (what those runs did) is left out of the
    identity, so their hashes stand; 'drop' changes the numbers and the hash."""
    import json
    from initlib.config import identity
    assert "last_batch" not in identity({"last_batch": "keep"})
    assert run_hash({"last_batch": "keep"}) == run_hash({})
    assert run_hash({"last_batch": "drop"}) != run_hash({})
    assert identity({"last_batch": "drop"})["last_batch"] == "drop"
    shipped = sorted((ROOT / "results" / "cpu").glob("*/config.json"))
    assert shipped
    for p in shipped:
        stored = json.loads(p.read_text())
        assert run_hash(stored["config"]) == stored["hash"] == p.parent.name


def test_every_shipped_params_file_is_valid():
    for p in sorted((ROOT / "params").glob("*.yaml")):
        for profile in ("smoke", "cpu", "paper"):
            sw = load_params(p, profile)
            assert sw.configs or sw.sources, (p, profile)


def test_a_variant_may_cross_its_own_grid(tmp_path):
    """03's control cell runs on fewer sigma_w and seeds than its main cells: a variant's own
    grid replaces the profile grid's keys for that variant only; errors name the variant."""
    p = write(tmp_path, "profiles:\n  smoke:\n    grid: {sigma_w: [0.1, 1.0, 2.5], seed: [0, 1]}\n"
                        "    variants:\n      - {lr: 0.01}\n"
                        "      - {lr: 0.1, grid: {sigma_w: [0.1, 2.5], seed: [0]}}\n")
    cfgs = load_params(p, "smoke").configs
    main, own = [c for c in cfgs if c["lr"] == 0.01], [c for c in cfgs if c["lr"] == 0.1]
    assert len(main) == 6 and len(own) == 2
    assert sorted((c["sigma_w"], c["seed"]) for c in own) == [(0.1, 0), (2.5, 0)]
    p = write(tmp_path, "profiles:\n  smoke:\n    variants:\n      - {lr: 0.1, grid: {sigma_w: []}}\n")
    with pytest.raises(ConfigError, match=r"variants\[0\]: grid: key 'sigma_w' must be a non-empty list"):
        load_params(p, "smoke")
    p = write(tmp_path, "profiles:\n  smoke:\n    variants:\n      - {lr: 0.1, grid: {sigmaw: [0.1]}}\n")
    with pytest.raises(ConfigError, match=r"variants\[0\]: grid: key 'sigmaw'"):
        load_params(p, "smoke")


# ---------------------------------------------------------------- replicas of a profile
@pytest.mark.parametrize("n", [1, 2])
def test_a_replica_is_its_profile_on_another_split_and_other_seeds(n):
    """'<profile>-replica<N>' is the profile's grid, sources included, with only split_seed + N
    and seed + 1000 N changed: the same runs otherwise, none of them one of the profile's own."""
    from initlib.params import REPLICA_SEED_STRIDE
    for p in sorted((ROOT / "params").glob("0*.yaml")):
        for profile in ("smoke", "cpu"):
            own = load_params(p, profile).all_configs()
            rep = load_params(p, f"{profile}-replica{n}").all_configs()
            assert len(rep) == len(own), (p.name, profile)
            for a, b in zip(own, rep):
                assert b["split_seed"] == a["split_seed"] + n
                assert b["seed"] == a["seed"] + n * REPLICA_SEED_STRIDE
                assert {k: v for k, v in b.items() if k not in ("split_seed", "seed")} == \
                       {k: v for k, v in a.items() if k not in ("split_seed", "seed")}
            assert max(c["seed"] for c in own) < REPLICA_SEED_STRIDE  # replicas never meet
            assert not {run_hash(c) for c in own} & {run_hash(c) for c in rep}, (p.name, profile)


@pytest.mark.parametrize("profile", ["cpu-replica0", "cpu-replica", "cpu-replica01", "cpu-replica-1",
                                     "cpu-replicaX", "cpu-replica\u00b2", "cpu-replica 1"])
def test_a_malformed_replica_is_named_with_its_file(profile):
    with pytest.raises(ConfigError, match=rf"01_optimizer_dependence.yaml: profile '{profile}': a replica is"):
        load_params(ROOT / "params" / "01_optimizer_dependence.yaml", profile)
    with pytest.raises(ConfigError, match=r"no profile 'gpu'"):
        load_params(ROOT / "params" / "01_optimizer_dependence.yaml", "gpu-replica1")


def test_a_replica_refuses_seeds_it_would_move_onto_another_replica(tmp_path):
    p = write(tmp_path, "profiles:\n  smoke:\n    grid: {sigma_w: [0.5], seed: [0, 1000]}\n")
    assert len(load_params(p, "smoke").configs) == 2
    with pytest.raises(ConfigError, match=r"bad.yaml: profile 'smoke-replica1': key 'seed': a replica moves"):
        load_params(p, "smoke-replica1")


def test_make_replica_trains_and_executes_the_replica_profile():
    """`make replica` names the replica profile to the sweep and to every notebook, writes its own
    reports folder, and ends with both profiles' verdicts side by side (a dry run: nothing runs)."""
    out = subprocess.run(["make", "-n", "replica", "PROFILE=smoke", "REPLICA=2"], cwd=ROOT,
                         capture_output=True, text=True, check=True).stdout
    assert "sweep params/01_optimizer_dependence.yaml" in out and "--profile smoke-replica2" in out
    for nb in sorted((ROOT / "notebooks").glob("0*.ipynb")):
        assert f"reports/smoke-replica2/{nb.name}" in out
    assert out.count("-p profile smoke-replica2") == len(list((ROOT / "notebooks").glob("0*.ipynb")))
    assert "-m initlib verdicts figures/smoke figures/smoke-replica2" in out
