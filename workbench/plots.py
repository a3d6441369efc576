"""Saving plotly figures as interactive HTML and static PNG/SVG.

Static export goes through kaleido, which drives a Chromium. The browser is started once per
process (a fresh one per image costs seconds); without a browser we write HTML only and warn.
"""
from __future__ import annotations

import os
import shutil
import warnings
from pathlib import Path

import plotly.graph_objects as go

from .atomic import write_atomic

FIGURES = Path(__file__).resolve().parent.parent / "figures"
_kaleido_ready: bool | None = None


def _start_kaleido() -> bool:
    global _kaleido_ready
    if _kaleido_ready is None:
        if not (shutil.which("chromium") or shutil.which("chromium-browser")
                or os.environ.get("BROWSER_PATH")):
            warnings.warn("No Chromium on PATH: figures are saved as HTML only "
                          "(apt-get install -y chromium for PNG/SVG).", stacklevel=3)
            _kaleido_ready = False
        else:
            try:
                import kaleido
                kaleido.start_sync_server(silence_warnings=True)
                _kaleido_ready = True
            except Exception as err:  # noqa: BLE001 - any browser failure means HTML only
                warnings.warn(f"Static export unavailable ({err}); saving HTML only.", stacklevel=3)
                _kaleido_ready = False
    return _kaleido_ready


def save(fig: go.Figure, name: str, out_dir: str | os.PathLike | None = None,
         formats: tuple[str, ...] = ("html", "png")) -> list[Path]:
    """Write `fig` as `<out_dir>/<name>.<fmt>` for each format; returns the files written."""
    out = Path(out_dir) if out_dir is not None else FIGURES
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for fmt in formats:
        path = out / f"{name}.{fmt}"
        if fmt == "html":
            write_atomic(path, lambda tmp: fig.write_html(tmp, include_plotlyjs="directory", full_html=True,
                                                         div_id=name))  # fixed id: same figure, same bytes
        elif _start_kaleido():
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", message="The kopts argument is ignored")
                write_atomic(path, lambda tmp: fig.write_image(tmp, format=fmt, scale=2))
        else:
            continue
        written.append(path)
    return written
