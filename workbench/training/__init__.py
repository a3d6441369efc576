"""The training recipe: the loop (train.py) and what it runs on — the loss, the batches built ahead
(in a thread or a worker process), the data pools, the curricula (C.3) and the task balancing
(C.4), what each evaluation changes (adapt.py, shared with the retrofit through the Trainer
contract of trainer.py), the optimizers and their settings, and the ablations of Tables 8-15.
Nothing is imported here: a command's flags read optim_config.py without torch."""
