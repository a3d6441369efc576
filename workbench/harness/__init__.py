"""The nine numeracy tasks where researchers evaluate models: lm-evaluation-harness and inspect-ai.

    questions.py      the questions asked: the seeded generator's, or the authors' released sets
    scoring.py        a response scored by the workbench's frontier scorer, both readings
    lmeval_tasks.py   the lm-eval task pack (generate_until, group `numeracy`) and its !function hooks
    lmeval_model.py   a retrofitted NumberLM as the lm-eval model "numberlm"
    inspect_tasks.py  the same tasks for inspect-ai (entry point `inspect_ai`: workbench/numeracy_<task>)

    python -m workbench.harness lm-eval --out DIR              # write the lm-eval task pack
    python -m workbench.harness run-lm-eval --model numberlm --model_args pretrained=FOLDER \\
        --tasks numeracy --include_path DIR --limit 20          # lm_eval's command, numberlm registered

lm-eval and inspect-ai are the optional extra `[harness]` (pinned); without it the modules import
and the commands that need them say how to install it. docs/harness.md has the commands and the
metrics.
"""
