# initmem: one rule per executed notebook (and its figures); training runs are cached in the
# run store, so rerunning a notebook only re-analyses.
#
#   make smoke        the notebooks on a small CIFAR-10 subset (minutes on 2 CPU cores)
#   make cpu          the CPU reproduction (about 23 h on 2 cores; shipped in results/cpu)
#   make all          the paper's full grid (GPUs, fused groups of FUSE runs; EXECUTOR=slurm for a cluster)
#   make figures      re-execute the notebooks of PROFILE from stored runs (imports results/PROFILE;
#                     never trains: a missing run is an error); for cpu, also the README table
#   make results      export the runs of PROFILE to results/PROFILE (metrics, no checkpoints; runs
#                     that no params file names any more are removed from it)
#   make replica      PROFILE's grids again on another data split and other seeds (REPLICA=N, default 1:
#                     profile PROFILE-replicaN, every run at split_seed + N and seed + 1000 N), its
#                     notebooks in reports/PROFILE-replicaN/, then both profiles' verdicts side by side
#   make site         a static HTML report of reports/PROFILE (build/site/PROFILE/index.html)
#   make test         unit tests + the notebooks themselves (smoke trained, results/cpu re-analysed)
#   make lab          JupyterLab on notebooks/ (the sources: an edit there is the edit)
#   make strip        clear outputs a JupyterLab session saved into notebooks/*.ipynb
#   make clean        remove build/
#
# The notebooks are found, not listed: a seventh finding is notebooks/07_x.ipynb plus
# params/07_x.yaml, and every rule below picks it up.

SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
export PATH := $(abspath $(VENV))/bin:$(PATH)

# CIFAR-10: the offline copy beside the checkout if it is there, else data/ (where
# `make ... DOWNLOAD=1` lets torchvision download it).
DATA_DIR ?= $(if $(wildcard ../shared/data/cifar10/cifar10.npz),../shared/data/cifar10,data)
export INITLIB_DATA_DIR ?= $(abspath $(DATA_DIR))
ifdef DOWNLOAD
export INITLIB_DOWNLOAD := 1
endif

PROFILE ?= smoke
DEVICE ?= auto
# Worker processes. Default: 1 for smoke (one process using every core), one single-thread
# worker per core for cpu (measured on 2 cores: 1.25x the throughput of one 2-thread process; and 1-thread numbers do not
# depend on how many cores the machine has), 1 elsewhere (GPUs: use RUNS_PER_GPU).
WORKERS ?=
# Cores this process may use. nproc alone answers OMP_NUM_THREADS (1 under OMP_NUM_THREADS=1),
# which says how many threads each process uses, not how many processes the cores can hold.
NPROC := $(shell env -u OMP_NUM_THREADS nproc 2>/dev/null || echo 1)
workers_for = $(or $(WORKERS),$(if $(filter cpu cpu-replica%,$(1)),$(NPROC),1))
REPLICA ?= 1
EXECUTOR ?= local
RUNS_PER_GPU ?=
# runs per fused group (initlib.fused_train): auto = 16 on CUDA, 1 (off: the plain loop) on CPU
FUSE ?= auto
SWEEP_FLAGS ?=
NOTEBOOKS := $(sort $(basename $(notdir $(wildcard notebooks/[0-9][0-9]_*.ipynb))))
LIB := $(wildcard initlib/*.py)
INSTALLED := $(VENV)/.installed

.PHONY: smoke cpu all paper replica figures results test lab clean install plan status site strip
.DELETE_ON_ERROR:
.PRECIOUS: build/%/.trained

smoke: $(addprefix reports/smoke/,$(NOTEBOOKS:=.ipynb))
	@echo "executed notebooks: reports/smoke/   figures and verdicts: figures/smoke/"
cpu: $(addprefix reports/cpu/,$(NOTEBOOKS:=.ipynb))
	@echo "executed notebooks: reports/cpu/   figures and verdicts: figures/cpu/"
all paper: $(addprefix reports/paper/,$(NOTEBOOKS:=.ipynb))
	@echo "executed notebooks: reports/paper/   figures and verdicts: figures/paper/"
replica: $(addprefix reports/$(PROFILE)-replica$(REPLICA)/,$(NOTEBOOKS:=.ipynb))
	@echo "executed notebooks: reports/$(PROFILE)-replica$(REPLICA)/   figures and verdicts: figures/$(PROFILE)-replica$(REPLICA)/"
	$(PY) -m initlib verdicts figures/$(PROFILE) figures/$(PROFILE)-replica$(REPLICA)

install: $(INSTALLED)
$(INSTALLED): pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e .
	touch $@

# Train every run of a profile first (one sweep over all params files: parallel workers,
# GPUs or Slurm), so that the notebooks only analyse.
build/%/.trained: $(wildcard params/*.yaml) $(LIB) | $(INSTALLED)
	@mkdir -p $(@D)
	$(PY) -m initlib sweep $(addprefix params/,$(NOTEBOOKS:=.yaml)) --profile $* --device $(DEVICE) \
	  --workers $(call workers_for,$*) --executor $(EXECUTOR) --fuse $(FUSE) $(if $(RUNS_PER_GPU),--runs-per-gpu $(RUNS_PER_GPU)) $(SWEEP_FLAGS)
	touch $@

# One executed notebook, reports/<profile>/<name>.ipynb (with its figures and verdict in
# figures/<profile>/). It is executed in build/ and moved into reports/ only when every cell
# ran; a failed one is kept, with its error, as build/<profile>/<name>.failed.ipynb.
.SECONDEXPANSION:
reports/%.ipynb: notebooks/$$(notdir $$*).ipynb params/$$(notdir $$*).yaml build/$$(firstword $$(subst /, ,$$*))/.trained $(LIB)
	@mkdir -p $(@D) build/$(*D)
	$(PY) -m papermill $< build/$*.running.ipynb -k python3 --cwd notebooks --progress-bar \
	  -p profile $(firstword $(subst /, ,$*)) -p device $(DEVICE) \
	  || { mv build/$*.running.ipynb build/$*.failed.ipynb; exit 1; }
	rm -f build/$*.failed.ipynb
	mv build/$*.running.ipynb $@

figures: | $(INSTALLED)
	@if [ -d results/$(PROFILE) ]; then $(PY) -m initlib import results/$(PROFILE); fi
	rm -f $(addprefix reports/$(PROFILE)/,$(NOTEBOOKS:=.ipynb))
	INITLIB_NO_TRAIN=1 $(MAKE) $(addprefix reports/$(PROFILE)/,$(NOTEBOOKS:=.ipynb))
	@if [ "$(PROFILE)" = cpu ]; then $(PY) tools/readme_results.py; fi

site: | $(INSTALLED)
	$(PY) tools/site.py $(PROFILE)

strip: | $(INSTALLED)
	$(VENV)/bin/jupyter nbconvert --clear-output --inplace $(addprefix notebooks/,$(NOTEBOOKS:=.ipynb))

results: | $(INSTALLED)
	$(PY) -m initlib export $(addprefix params/,$(NOTEBOOKS:=.yaml)) --profile $(PROFILE) --out results/$(PROFILE) --prune

plan: | $(INSTALLED)
	$(PY) -m initlib plan $(addprefix params/,$(NOTEBOOKS:=.yaml)) --profile $(PROFILE)

status: | $(INSTALLED)
	$(PY) -m initlib status $(addprefix params/,$(NOTEBOOKS:=.yaml)) --profile $(PROFILE)

# One pytest-xdist worker per core (tests/conftest.py gives each an equal share of the threads
# and one shared run store); TEST_WORKERS=0 runs them in this process.
TEST_WORKERS ?= $(NPROC)
test: | $(INSTALLED)
	$(PY) -m pytest -q --durations=12 $(if $(filter 0,$(TEST_WORKERS)),-p no:xdist,-n $(TEST_WORKERS) --dist worksteal) tests

lab: | $(INSTALLED)
	$(VENV)/bin/jupyter lab notebooks/

clean:
	rm -rf build/
