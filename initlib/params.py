"""Params files: read, expand and validate once; after that, a run is one fixed config.

A params file (``params/<name>.yaml``)::

    name: optimizer_dependence        # free text keys: name, notebook, claim, description
    title: "1. Low-LR SGD remembers"  # the finding in a few words (README, site)
    paper: "SGD 26.5 pp, ..."         # the paper's numbers, quoted beside ours
    base: {arch: resnet9, ...}        # run keys shared by all profiles
    sources: [other.yaml, ...]        # optional: sweeps whose runs this one analyses
    profiles:
      smoke:
        base: {width: 0.125, ...}     # run keys for this profile (override the top base)
        grid: {sigma_w: [...], seed: [0, 1]}        # cartesian product
        variants: [{optimizer: sgd, lr: 0.02}, ...] # alternatives, crossed with the grid
        # a variant may cross its own grid instead: {lr: 0.15, grid: {sigma_w: [0.1, 2.5], seed: [0]}}
        # (its keys replace the profile grid's for that variant; the others stay)
        analysis: {...}               # read by the notebook, never by the trainer

Every expanded config is validated when the file is read; errors name the file, the profile
and the key. :func:`bind_data` then checks the configs against the data that will be used
(the class-balanced sizes its split allows) and writes the data's fingerprint into each, so
that the run hash names the data too. Both happen before anything is written.
"""
from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from .config import DATA_KEY, ConfigError, resolve, run_hash, validate_keys

TOP_KEYS = {"name", "notebook", "title", "paper", "claim", "description", "base", "profiles", "sources"}
PROFILE_KEYS = {"base", "grid", "variants", "analysis", "description"}
PROFILES = ("smoke", "cpu", "paper")
# A replica of a profile: its grid again on another split of the training images and other
# seeds, so that a verdict can be checked on data and initializations it was not decided on
# (issue 18: "the grids will be rerun on another data subset and other seeds").
# "<profile>-replica<N>" (N >= 1) is profile's grid with every run's split_seed + N and
# seed + N * REPLICA_SEED_STRIDE. The stride keeps a replica's seeds apart from any profile's
# own (every grid's seeds are < 1000) and from other replicas'; the test images (the
# official 10,000) are the same for every replica, as for every split.
REPLICA_MARK = "-replica"
REPLICA_SEED_STRIDE = 1000


def parse_profile(profile: str, where: str = "") -> tuple[str, int]:
    """'cpu' -> ('cpu', 0); 'cpu-replica2' -> ('cpu', 2). ConfigError for a malformed replica."""
    name, mark, n = profile.partition(REPLICA_MARK)
    if not mark:
        return profile, 0
    if not re.fullmatch(r"[1-9][0-9]*", n):
        raise ConfigError(f"{where}profile '{profile}': a replica is '<profile>{REPLICA_MARK}<N>' with "
                          f"N an integer >= 1, e.g. '{name}{REPLICA_MARK}1'")
    return name, int(n)


def replicate(cfg: dict, replica: int, where: str = "") -> dict:
    """The run ``cfg`` in replica ``replica``: the same config on split_seed + replica and seed +
    replica * REPLICA_SEED_STRIDE (replica 0: ``cfg`` itself)."""
    if not replica:
        return cfg
    if cfg["seed"] >= REPLICA_SEED_STRIDE:
        raise ConfigError(f"{where}: key 'seed': a replica moves seeds by {REPLICA_SEED_STRIDE} x N, so a "
                          f"profile it replicates needs seeds < {REPLICA_SEED_STRIDE}, got {cfg['seed']}")
    return resolve({**cfg, "split_seed": cfg["split_seed"] + replica,
                    "seed": cfg["seed"] + replica * REPLICA_SEED_STRIDE})


def unique_by_hash(configs) -> list[dict]:
    """Each run (by hash) once, in first-seen order: a run that two findings share trains,
    exports and counts once."""
    return list({run_hash(c): c for c in configs}.values())


@dataclass
class Sweep:
    path: Path
    profile: str
    configs: list[dict]
    analysis: dict = field(default_factory=dict)
    sources: list["Sweep"] = field(default_factory=list)
    spec: dict = field(default_factory=dict)  # the params file as read (name, claim, ...)

    @property
    def where(self) -> str:
        return f"{self.path}: profile '{self.profile}'"

    def all_configs(self) -> list[dict]:
        """This sweep's configs and those of its sources, without duplicates."""
        return unique_by_hash(self.configs + [c for s in self.sources for c in s.all_configs()])


def yaml_error_line(e: "yaml.YAMLError") -> str:
    """PyYAML's several-line error as one line: where (line, column, 1-based) and what."""
    mark = getattr(e, "problem_mark", None) or getattr(e, "context_mark", None)
    what = getattr(e, "problem", None) or str(e).splitlines()[0]
    where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
    return f"{where}{what}"


def load_params(path, profile: str, overrides: dict | None = None) -> Sweep:
    """Read, expand and validate a params file. Raises ConfigError before any training."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{path}: no such params file")
    try:
        spec = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as e:
        raise ConfigError(f"{path}: not valid YAML: {yaml_error_line(e)}") from None
    src = str(path)
    if not isinstance(spec, dict):
        raise ConfigError(f"{src}: top level must be a mapping")
    for k in spec:
        if k not in TOP_KEYS:
            raise ConfigError(f"{src}: unknown top-level key '{k}' (known: {sorted(TOP_KEYS)})")
    for k in ("title", "paper"):
        if k in spec and not isinstance(spec[k], str):
            raise ConfigError(f"{src}: key '{k}' must be text, got {spec[k]!r}")
    profiles = spec.get("profiles") or {}
    own, replica = parse_profile(profile, f"{src}: ")
    if own not in profiles:
        raise ConfigError(f"{src}: no profile '{own}' (has: {', '.join(profiles) or 'none'})")
    prof = profiles[own] or {}
    where = f"{src}: profile '{profile}'"
    for k in prof:
        if k not in PROFILE_KEYS:
            raise ConfigError(f"{where}: unknown key '{k}' (known: {sorted(PROFILE_KEYS)})")
    base = {**(spec.get("base") or {}), **(prof.get("base") or {})}
    grid = prof.get("grid") or {}
    variants = prof.get("variants") or [{}]
    if not isinstance(variants, list):
        raise ConfigError(f"{where}: variants must be a list of mappings, got {variants!r}")
    own_grids = {i: v.get("grid") for i, v in enumerate(variants) if isinstance(v, dict) and "grid" in v}
    variants = [{k: x for k, x in v.items() if k != "grid"} if isinstance(v, dict) else v for v in variants]
    parts = [("base", base), ("grid", grid), *((f"variants[{i}]", v) for i, v in enumerate(variants)),
             *((f"variants[{i}]: grid", g) for i, g in own_grids.items())]
    for part, keys in parts:
        if not isinstance(keys, dict):
            raise ConfigError(f"{where}: {part} must be a mapping, got {keys!r}")
        validate_keys(keys, f"{where}: {part}")
        if DATA_KEY in keys:
            raise ConfigError(f"{where}: {part}: key '{DATA_KEY}' is set by initlib from the data "
                              f"files (--data-dir / INITLIB_DATA_DIR), not in a params file")
    for part, g in (("grid", grid), *((f"variants[{i}]: grid", g) for i, g in own_grids.items())):
        for k, v in g.items():
            if not isinstance(v, list) or not v:
                raise ConfigError(f"{where}: {part}: key '{k}' must be a non-empty list, got {v!r}")
    base = {**base, **(overrides or {})}
    configs = []
    if prof.get("grid") or prof.get("variants"):
        for i, variant in enumerate(variants):
            vgrid = {**grid, **(own_grids.get(i) or {})}
            keys = list(vgrid)
            for values in itertools.product(*(vgrid[k] for k in keys)):
                configs.append(replicate(resolve({**base, **variant, **dict(zip(keys, values))}, where),
                                         replica, where))
    sources = [load_params(path.parent / s, profile, overrides) for s in spec.get("sources") or []]
    return Sweep(path, profile, unique_by_hash(configs), dict(prof.get("analysis") or {}), sources, spec)


def _all_sweeps(sweeps):
    for sw in sweeps:
        yield sw
        yield from _all_sweeps(sw.sources)


def bind_data(sweeps: list[Sweep], data_fingerprint: str, split_capacity=None) -> None:
    """Write the data's fingerprint into every config (so the run hash names the data), after
    checking, if ``split_capacity(split_seed) -> (max n_train, max n_val)`` is given, that each
    config's class-balanced sizes exist in that data. ConfigError names file, profile, key."""
    for sw in _all_sweeps(sweeps):
        for cfg in sw.configs:
            if split_capacity is not None:
                most = dict(zip(("n_train", "n_val"), split_capacity(cfg["split_seed"])))
                for k, m in most.items():
                    if cfg[k] > m:
                        raise ConfigError(
                            f"{sw.where}: key '{k}': {cfg[k]} needs {cfg[k] // 10} images of each "
                            f"class on that side of the split (split_seed {cfg['split_seed']}), "
                            f"which has only enough for {k} <= {m}")
            cfg[DATA_KEY] = data_fingerprint
