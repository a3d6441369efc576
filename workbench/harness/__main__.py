"""python -m workbench.harness: the lm-eval task pack, lm-eval with the numberlm model, results as CSV.

python -m workbench.harness lm-eval --out DIR [--tasks ...] [--n 500] [--seed 0] [--official FOLDER]
python -m workbench.harness run-lm-eval ARGS...     # `lm_eval ARGS...` with --model numberlm available
python -m workbench.harness csv OUTPUT --out results.csv   # lm-eval's results JSON(s) as one CSV
python -m workbench.harness model-folder smollm2-135m      # a packaged model's local folder, for --model hf
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from workbench.cli import Parser

INSTALL = "pip install -e '.[harness]'"


def parser() -> Parser:
    p = Parser(prog="python -m workbench.harness", description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="command", required=True, parser_class=Parser)
    w = sub.add_parser("lm-eval", help="write the lm-eval task pack (the nine tasks and the group numeracy)")
    w.add_argument("--out", required=True, help="folder to write (new, empty, or a pack written before)")
    w.add_argument("--tasks", nargs="+", default=None, help="tasks to include (default: all nine)")
    w.add_argument("--n", type=int, default=500, help="questions per task (default 500, the paper's)")
    w.add_argument("--seed", type=int, default=0, help="the generator's seed (default 0)")
    w.add_argument("--official", default=None, help="the authors' released sets' folder: ask those questions")
    w.add_argument("--decades", type=int, nargs=2, default=None, metavar=("LO", "HI"), help="narrow the numbers")
    w.add_argument("--max-digits", type=int, default=None, help="at most this many significant digits")
    sub.add_parser("run-lm-eval", help="lm_eval's command line with the numberlm model registered", add_help=False)
    c = sub.add_parser("csv", help="lm-eval's results (a results_*.json or the --output_path folder) as a CSV")
    c.add_argument("results", help="a results JSON or a folder searched for results_*.json")
    c.add_argument("--out", required=True, help="the CSV to write")
    m = sub.add_parser("model-folder", help="the local folder of a packaged model (converted once)")
    m.add_argument("name")
    return p


def run_lm_eval(argv: list[str]) -> None:
    """lm_eval's own command line, after registering numberlm."""
    try:
        from lm_eval.__main__ import cli_evaluate
    except ModuleNotFoundError:
        raise ValueError(f"lm-eval is not installed: {INSTALL}") from None
    from . import lmeval_model  # noqa: F401 (registers numberlm)

    sys.argv = ["lm_eval", *argv]
    cli_evaluate()


def results_rows(path) -> list[dict]:
    """One row per (results file, task or group, metric): value, stderr, n, and the run's model,
    --limit and whether a chat template was applied."""
    path = Path(path)
    files = sorted(path.rglob("results_*.json")) if path.is_dir() else [path]
    if not files or not files[0].is_file():
        raise ValueError(f"no lm-eval results at {path} (a results_*.json, or the folder of --output_path)")
    rows = []
    for file in files:
        try:
            data = json.loads(file.read_text())
            results, config = data["results"], data.get("config", {})
        except (ValueError, KeyError, TypeError):
            raise ValueError(f"{file} is not an lm-eval results file") from None
        samples = data.get("n-samples", {})
        for task, values in results.items():
            for key, value in values.items():
                metric, _, filt = key.partition(",")
                if not filt or metric.endswith("_stderr") or not isinstance(value, (int, float)):
                    continue
                stderr = values.get(f"{metric}_stderr,{filt}")
                rows.append(
                    {
                        "model": config.get("model"),
                        "model_args": json.dumps(config.get("model_args"), sort_keys=True, default=str),
                        "task": task,
                        "metric": metric,
                        "value": value,
                        "stderr": stderr if isinstance(stderr, (int, float)) else None,
                        "n": samples.get(task, {}).get("effective"),
                        "limit": config.get("limit"),
                        "chat_template": bool(data.get("chat_template")),
                        "file": str(file),
                    }
                )
    return rows


def write_csv(rows, out) -> Path:
    import pandas as pd

    from workbench.runs.atomic import write_atomic

    frame = pd.DataFrame(rows)
    frame["n"] = frame["n"].astype("Int64")  # a group's rows have none
    return write_atomic(Path(out), lambda tmp: frame.to_csv(tmp, index=False))


def main(argv=None) -> None:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["run-lm-eval"]:  # every further argument is lm_eval's
        try:
            return run_lm_eval(argv[1:])
        except ValueError as err:
            parser().fail(err)
    p = parser()
    args = p.parse_args(argv)
    try:
        if args.command == "lm-eval":
            from .lmeval_tasks import write

            out = write(args.out, args.tasks, args.n, args.seed, args.official, args.decades, args.max_digits)
            names = sorted(f.name for f in out.iterdir())
            print(f"wrote {len(names)} task configs into {out}: {', '.join(names)}")
            print(f"run: lm_eval --model hf --model_args pretrained=PATH --tasks numeracy --include_path {out}")
        elif args.command == "csv":
            rows = results_rows(args.results)
            print(f"{len(rows)} rows -> {write_csv(rows, args.out)}")
        elif args.command == "model-folder":
            from workbench.retrofit.hub import KNOWN, resolve_model

            if args.name not in KNOWN:
                from workbench.cli import unknown

                raise ValueError(unknown("packaged model", args.name, KNOWN))
            print(resolve_model(args.name))
    except (ValueError, FileNotFoundError) as err:
        p.fail(err)


if __name__ == "__main__":
    main()
