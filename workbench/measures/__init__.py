"""What the workbench measures: a model answering the tasks, scored (evaluate.py), the perplexity of
held-out text (perplexity.py), and the encodings measured without training: the nine desiderata of
section 3 (desiderata.py, graded in scorecard.py) and FoNE's locality of section 4 (locality.py).
The paper's scores themselves are metrics.py's, one floor down: the tasks score with them too.
Nothing is imported here."""
