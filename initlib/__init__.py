"""initlib: the reproducible companion to "Do Deep Networks Forget Initialization?".

Modules are named after the paper's concepts: ``data`` (CIFAR-10 split), ``models``
(BatchNorm ResNets, sigma_w init), ``optim`` (SGD, momentum, Adam, AdamW, Muon, explicit
L2, schedules), ``train`` (one run), ``clocks`` (T_SGD, T_L2, T_adapt), ``metrics``
(test accuracy at best validation loss, tau_interp, repair gap, spread), ``store`` (the run
store), ``sweep`` (params files, workers, Slurm), ``analysis`` (tables and verdicts),
``plots``.
"""
__version__ = "0.1.0"
