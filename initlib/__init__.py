"""initlib: the reproducible companion to "Do Deep Networks Forget Initialization?".

Modules are named after the paper's concepts: ``data`` (CIFAR-10 split), ``models``
(BatchNorm ResNets, sigma_w init), ``optim`` (SGD, momentum, Adam, AdamW, Muon for G runs
with per-run hyperparameters, explicit L2, schedules), ``train`` (the one training loop: G runs,
a single run is a group of one), ``bn_stats`` (BatchNorm statistics for the weights evaluated), ``clocks`` (T_SGD, T_L2, T_adapt), ``metrics``
(test accuracy at best validation loss, tau_interp, repair gap, spread), ``stats`` (the
spread's interval and noise floor), ``store`` (the run store), ``params`` (params files),
``sweep`` (train what is missing), ``executors`` (workers, GPUs, Slurm, signals), ``plan``
(cost), ``analysis`` (tables and verdicts), ``plots``, ``notebook`` (what the notebooks
share), ``fused`` (G runs as one model: construction, slicing, which runs fuse).
"""
__version__ = "0.1.0"
