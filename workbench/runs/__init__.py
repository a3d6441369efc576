"""The run machinery: a run folder and what it keeps (folder.py: its files and whether a run may use
them; provenance.py, checkpoints.py, logs.py), atomic writes and one writer per folder, where a
command may write and how a run's files are read back, where a plan's runs train (executors.py,
dryrun.py), several processes for one training (distributed.py), the memory check, the allocator's
thresholds, TensorBoard's events and the host-sync counter of the GPU path's tests."""
