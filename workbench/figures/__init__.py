"""The figures: how every figure is saved and the look they share (plots.py), and the figures of the
notebooks, one module per notebook or paper figure family: the desiderata (notebook 01), FoNE's
locality (02), one training run (03) and the paper's figures 2-8 (paper/, notebook 04). Nothing is
imported here."""
