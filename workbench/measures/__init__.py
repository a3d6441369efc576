"""What the workbench measures: the paper's scores (metrics.py: log-sMAPE, exact match, eq. 15), a
model answering the tasks and the perplexity of held-out text (evaluate.py, perplexity.py), and
the encodings measured without training: the nine desiderata of section 3 (desiderata.py) and
FoNE's locality of section 4 (locality.py). Nothing is imported here."""
