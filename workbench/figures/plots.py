"""Saving plotly figures as interactive HTML and static PNG/SVG, and the look they share.

Static export goes through kaleido, which drives a Chromium. The browser is started once per
process (a fresh one per image costs seconds); without a browser we write HTML only and warn.

Where figures go: the tracked `figures/` (FIGURES) is written only by the default `make figures`
run, which passes it explicitly; every other caller (the lab, a parameterized run, a script)
gets `runs/figures/` (SCRATCH, ignored by git) unless it names a folder.

Importing this module makes "plotly_white+workbench" plotly's default template: white
background, 16 px text, and a colour cycle of ten well-separated colours (d3's).
"""

from __future__ import annotations

import base64
import json
import math
import os
import shutil
import warnings
import zlib
from pathlib import Path

import numpy as np
import plotly.graph_objects as go
import plotly.io as pio
from plotly.subplots import make_subplots

from ..runs.atomic import write_atomic

ROOT = Path(__file__).resolve().parents[2]
FIGURES = ROOT / "figures"
SCRATCH = ROOT / "runs" / "figures"

# Ten colours that stay apart (d3's category10); figures with more series add dashes and markers.
PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"]
DASHES = ["solid", "dot", "dash", "dashdot", "longdash"]
SYMBOLS = ["circle", "square", "diamond", "triangle-up", "x", "star", "cross", "triangle-down"]
# One colour per encoding in every figure (BitTokens green, as the paper's "ours"); every other
# registered encoding gets one of ZOO_COLORS from `encoding_color`.
ENCODING_COLORS = {
    "triple_digit": "#1f77b4",
    "single_digit": "#ff7f0e",
    "xval": "#7f7f7f",
    "fone": "#d62728",
    "bittokens": "#2ca02c",
    "numerologic": "#8c564b",
    "log_fone": "#9467bd",
}
ZOO_COLORS = [
    "#17becf",
    "#bcbd22",
    "#e377c2",
    "#393b79",
    "#ad494a",
    "#637939",
    "#e7ba52",
    "#7b4173",
    "#6b6ecf",
    "#843c39",
    "#8c6d31",
    "#3182bd",
    "#d6616b",
    "#9c9ede",
    "#74c476",
    "#fd8d3c",
]
VERDICT_COLORS = {"pass": "#2ca02c", "trade-off": "#ffbf00", "fail": "#d62728", "n/a": "#e5e5e5"}


def encoding_color(name: str) -> str:
    """The colour of an encoding in every figure: ENCODING_COLORS' for the paper's five and
    NumeroLogic; any other name gets a ZOO_COLORS entry chosen by a hash of its name (so it does not
    depend on which other encodings exist), moved on to the next free entry when a registered
    encoding before it already holds that one; past 16 such encodings, a hue from the hash."""
    if name in ENCODING_COLORS:
        return ENCODING_COLORS[name]
    from .. import encoders  # here, not at import time: plots is imported by modules encoders need

    taken = set(ENCODING_COLORS.values())
    for other in [n for n in encoders.names() if n not in ENCODING_COLORS]:
        if other == name:
            break
        taken.add(_free_zoo_color(other, taken))
    return _free_zoo_color(name, taken)


def _free_zoo_color(name: str, taken: set) -> str:
    start = zlib.crc32(name.encode())
    for k in range(len(ZOO_COLORS)):
        color = ZOO_COLORS[(start + k) % len(ZOO_COLORS)]
        if color not in taken:
            return color
    return f"hsl({start % 360}, 55%, 45%)"


def blend(color: str, toward: str, share: float) -> str:
    """`color` ("#rrggbb") moved `share` of the way to `toward`."""
    a, b = (_rgb(c) for c in (color, toward))
    return "#{:02x}{:02x}{:02x}".format(*(round(x + share * (y - x)) for x, y in zip(a, b)))


def _rgb(color: str) -> tuple[float, ...]:
    """ "#rrggbb" or plotly's "rgb(r, g, b)" as three 0-255 numbers."""
    if color.startswith("#"):
        return tuple(int(color[i : i + 2], 16) for i in (1, 3, 5))
    return tuple(float(c) for c in color[color.index("(") + 1 : color.index(")")].split(",")[:3])


def luminance(color: str) -> float:
    """WCAG 2's relative luminance of `color`: 0 black, 1 white."""
    linear = [c / 255 / 12.92 if c / 255 <= 0.04045 else ((c / 255 + 0.055) / 1.055) ** 2.4 for c in _rgb(color)]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


def contrast(a: str, b: str) -> float:
    """WCAG 2's contrast ratio of two colours, 1 (none) to 21 (black on white); text needs 4.5."""
    high, low = sorted((luminance(a), luminance(b)), reverse=True)
    return (high + 0.05) / (low + 0.05)


DARK_TEXT = "#000000"  # black, not a near-black: on a fill midway, white or black is then always 4.58:1 or better


def text_color_on(fill: str) -> str:
    """White or near-black, whichever reads better on `fill` (plotly's own choice put its navy on
    mid-tone cells, at a contrast near 3)."""
    return "#ffffff" if contrast(fill, "#ffffff") > contrast(fill, DARK_TEXT) else DARK_TEXT


def variant_color(color: str) -> str:
    """The colour of a variant beside its encoding (the study's BitTokens without A.3's pools
    beside BitTokens): the same hue at half the lightness, so that the two read as one family
    and are still told apart by colour, not by dash alone."""
    return blend(color, "#000000", 0.5)


def encoding_colors(names=None) -> dict[str, str]:
    """{name: colour} for plotly's color_discrete_map: every registered encoding, or `names`."""
    from .. import encoders

    return {n: encoding_color(n) for n in (names if names is not None else encoders.names())}


# Text sizes chosen so a figure shown at the README's width (~880 px) stays readable.
pio.templates["workbench"] = go.layout.Template(
    layout=dict(font=dict(size=16), colorway=PALETTE, title=dict(font=dict(size=21), subtitle=dict(font=dict(size=15))))
)
pio.templates.default = "plotly_white+workbench"

_kaleido_ready: bool | None = None


def _start_kaleido() -> bool:
    global _kaleido_ready
    if _kaleido_ready is None:
        if not (shutil.which("chromium") or shutil.which("chromium-browser") or os.environ.get("BROWSER_PATH")):
            warnings.warn(
                "No Chromium on PATH: figures are saved as HTML only (apt-get install -y chromium for PNG/SVG).",
                stacklevel=3,
            )
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


def _plain(value):
    """plotly's JSON with its typed arrays ({"dtype": "f8", "bdata": base64, "shape": ...}) as lists."""
    if isinstance(value, dict) and "bdata" in value and "dtype" in value:
        array = np.frombuffer(base64.b64decode(value["bdata"]), dtype=value["dtype"])
        shape = value.get("shape")
        return (array.reshape([int(n) for n in str(shape).split(",")]) if shape else array).tolist()
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return [_plain(v) for v in value] if isinstance(value, list) else value


def save(
    fig: go.Figure, name: str, out_dir: str | os.PathLike | None = None, formats: tuple[str, ...] = ("html", "png")
) -> list[Path]:
    """Write `fig` as `<out_dir>/<name>.<fmt>` for each format (out_dir None: runs/figures/);
    returns the files written."""
    out = Path(out_dir) if out_dir is not None else SCRATCH
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for fmt in formats:
        path = out / f"{name}.{fmt}"
        if fmt == "html":
            write_atomic(
                path, lambda tmp: fig.write_html(tmp, include_plotlyjs="directory", full_html=True, div_id=name)
            )  # fixed id: same figure, same bytes
        elif fmt == "json":  # the figure's data and layout, arrays as plain lists: the values it draws
            write_atomic(path, lambda tmp: Path(tmp).write_text(json.dumps(_plain(json.loads(fig.to_json())))))
        elif _start_kaleido():
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", message="The kopts argument is ignored")
                write_atomic(path, lambda tmp: fig.write_image(tmp, format=fmt, scale=2))
        else:
            continue
        written.append(path)
    return written


# -- log axes ------------------------------------------------------------------------------------
_SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")


def series_style(i: int) -> dict:
    """Line dash, marker symbol and size of the i-th of several series that may lie on each other
    (as Scatter keyword arguments, colour left to the caller): each its own dash and symbol, and
    markers shrinking with i, so that a series drawn earlier shows around one drawn over it."""
    return dict(
        line=dict(dash=DASHES[i % len(DASHES)]), marker=dict(symbol=SYMBOLS[i % len(SYMBOLS)], size=max(14 - 2 * i, 6))
    )


def padded_range(values, low: float = 0.0, cap: float | None = None, pad: float = 0.08) -> list[float]:
    """[low, top] of an axis that fits `values` (NaN ignored): top is the largest value plus `pad`
    of the span, at most `cap`; scores of 0.2 at most then fill their panel instead of a fifth of
    a 0-1 axis."""
    finite = np.asarray(values, dtype=float)
    finite = finite[~np.isnan(finite)]
    if not finite.size:
        return [low, cap if cap is not None else low + 1]
    high = float(finite.max())
    if high < low:
        raise ValueError(f"values lie below the axis' low end {low}: largest {high}")
    top = high + pad * (high - low) if high > low else low + 1
    return [low, min(top, cap) if cap is not None else top]


def power_of_ten(exponent: int, mantissa: int = 1) -> str:
    """ "10⁻¹⁵", "2·10⁻¹⁵", "1": one way of writing every tick of a log axis."""
    if exponent == 0:
        return str(mantissa)
    return ("" if mantissa == 1 else f"{mantissa}·") + "10" + str(exponent).translate(_SUPERSCRIPT)


def log_ticks(low: float, high: float, max_ticks: int = 8) -> dict:
    """tickvals and ticktext for a log axis showing low … high (both > 0), all written alike by
    `power_of_ten`: 1, 2 and 5 per decade over a short range, else the decades that are multiples
    of k (so 1 is among them when the range holds it)."""
    if not 0 < low <= high:
        raise ValueError(f"a log axis needs 0 < low <= high, got {low}, {high}")
    first, last = math.floor(math.log10(low)), math.ceil(math.log10(high))
    if last - first <= 2:
        ticks = [(e, m) for e in range(first, last + 1) for m in (1, 2, 5)]
    else:
        step = max(1, math.ceil((last - first + 1) / max_ticks))
        ticks = [(e, 1) for e in range(math.ceil(first / step) * step, last + 1, step)]  # 1 = 10⁰ among them
    ticks = [(e, m) for e, m in ticks if low / 1.001 <= m * 10.0**e <= high * 1.001] or [(first, 1)]
    return dict(tickvals=[m * 10.0**e for e, m in ticks], ticktext=[power_of_ten(e, m) for e, m in ticks])


def log_with_zeros(
    data, x: str, y: str, facet: str, facets: list[str], x_title: str, y_title: str, zero_label: str = "exactly 0"
) -> go.Figure:
    """One panel per facet: values > 0 on a log axis, exact zeros (which a log axis cannot show)
    as markers on a strip of their own underneath, labelled `zero_label`."""
    fig = make_subplots(
        rows=2,
        cols=len(facets),
        row_heights=[0.85, 0.15],
        shared_xaxes=True,
        shared_yaxes=True,
        vertical_spacing=0.03,
        horizontal_spacing=0.03,
        subplot_titles=facets,
    )
    positive = data[data[y] > 0]
    if (data[y] < 0).any():
        raise ValueError(f"{y} has negative values; a log axis shows values > 0 and this strip zeros")
    for col, name in enumerate(facets, start=1):
        part = data[data[facet] == name]
        above, zero = part[part[y] > 0], part[part[y] == 0]
        fig.add_trace(
            go.Scatter(
                x=above[x],
                y=above[y],
                mode="lines+markers",
                showlegend=False,
                line=dict(color=PALETTE[0]),
                hovertemplate="%{x}: %{y:.3g}<extra></extra>",
            ),
            row=1,
            col=col,
        )
        fig.add_trace(
            go.Scatter(
                x=zero[x],
                y=[0] * len(zero),
                mode="markers",
                showlegend=False,
                marker=dict(color=PALETTE[0], symbol="circle-open", size=7),
                hovertemplate="%{x}: exactly 0<extra></extra>",
            ),
            row=2,
            col=col,
        )
    if len(positive):
        fig.update_yaxes(type="log", **log_ticks(positive[y].min(), positive[y].max()), row=1)
    fig.update_yaxes(title_text=y_title, row=1, col=1)
    fig.update_yaxes(tickvals=[0], ticktext=[zero_label], range=[-1, 1], showgrid=False, row=2)
    fig.update_xaxes(title_text=x_title, row=2)
    return fig
