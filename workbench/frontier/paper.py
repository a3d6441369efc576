"""The numbers the BitTokens paper reports, Tables 1-15, transcribed as data.

Tables 1-3 (appendix B): rows (Model, Reasoning), values in printed units (percent / tokens).
Tables 4, 6-8, 13, 14 (appendix D): rows Task, a Metric column, one column per method.
Table 5: columns (method, "input" | "output") mean tokens. Tables 9-12 hold the values; the deltas
the paper prints next to them are in `stated_deltas(n)`. Table 15: columns (method, r_max).
"""

import pandas as pd

from workbench import tasks

FRONTIER_ROWS = [
    ("GPT OSS 120B", "maximal"),
    ("Qwen3 235B 2507", "maximal"),
    ("Qwen3 235B 2507", "none"),
    ("DeepSeek v3.1", "maximal"),
    ("DeepSeek v3.1", "none"),
    ("Kimi K2 0905", "none"),
    ("Llama 4 Maverick", "none"),
    ("GPT 5", "maximal"),
    ("GPT 5", "minimal"),
    ("Gemini 2.5 Pro", "maximal"),
    ("Gemini 2.5 Pro", "minimal"),
    ("Gemini 2.5 Flash", "maximal"),
    ("Gemini 2.5 Flash", "none"),
]

_T1 = (
    ["Add", "Mult", "Div", "Mean", "Std", "MinMax", "Interval", "Sort", "Exp"],
    [
        [97.6, 95.8, 80.0, 95.6, 46.6, 99.2, 100.0, 99.0, 56.0],
        [98.7, 88.0, 77.8, 94.5, 48.8, 100.0, 100.0, 99.8, 56.9],
        [87.5, 39.0, 46.4, 59.4, 12.5, 95.8, 98.6, 98.8, 21.7],
        [97.0, 85.3, 84.2, 95.0, 40.9, 99.8, 99.8, 99.6, 48.6],
        [94.1, 38.5, 40.8, 66.2, 15.5, 99.8, 81.4, 99.6, 21.0],
        [89.6, 44.5, 46.8, 67.4, 13.6, 99.6, 96.8, 98.4, 19.9],
        [79.1, 33.3, 35.8, 60.0, 11.8, 99.4, 76.0, 95.6, 20.1],
        [100.0, 99.5, 96.7, 96.1, 74.4, 100.0, 100.0, 99.8, 78.6],
        [93.7, 30.9, 29.5, 58.2, 16.5, 98.8, 92.4, 98.4, 19.0],
        [97.4, 64.3, 74.8, 94.3, 29.9, 100.0, 100.0, 99.8, 45.0],
        [99.6, 43.4, 51.3, 81.9, 13.0, 100.0, 99.6, 100.0, 25.5],
        [96.4, 44.9, 56.3, 91.6, 27.5, 100.0, 100.0, 100.0, 28.9],
        [92.8, 32.8, 45.2, 67.6, 13.6, 100.0, 99.2, 99.8, 20.3],
    ],
)
_T2 = (
    ["Add", "Mult", "Div", "Mean", "Std", "Exp"],
    [
        [89.4, 87.2, 45.4, 71.2, 12.6, 13.4],
        [92.0, 64.2, 47.0, 71.0, 12.8, 10.4],
        [64.4, 18.2, 15.6, 37.2, 3.0, 3.4],
        [92.4, 63.6, 54.0, 71.2, 11.0, 10.6],
        [74.6, 20.2, 16.4, 42.6, 3.4, 3.2],
        [70.2, 23.2, 21.0, 44.0, 2.6, 2.8],
        [50.0, 15.6, 13.6, 34.6, 2.2, 2.8],
        [98.4, 97.8, 91.4, 73.8, 34.4, 46.8],
        [76.6, 14.2, 6.6, 33.2, 3.8, 2.4],
        [91.0, 42.2, 48.0, 67.6, 8.8, 8.2],
        [82.2, 20.6, 21.8, 55.8, 4.4, 3.4],
        [84.0, 27.8, 31.6, 63.4, 7.0, 5.6],
        [72.2, 13.6, 17.4, 40.8, 2.8, 2.2],
    ],
)
_T3 = (
    ["Add", "Mult", "Div", "Mean", "Std", "MinMax", "Interval", "Sorting", "Exp"],
    [
        [708, 1820, 3133, 446, 2056, 105, 218, 193, 2815],
        [3899, 5789, 8161, 3359, 8565, 965, 1379, 1248, 9889],
        [22, 22, 23, 20, 23, 21, 7, 63, 39],
        [5515, 6921, 9079, 4821, 11486, 976, 1490, 1214, 9459],
        [13, 12, 12, 12, 13, 12, 7, 34, 94],
        [13, 78, 13, 12, 45, 12, 7, 33, 78],
        [12, 11, 12, 12, 13, 12, 7, 34, 13],
        [3779, 8749, 16165, 3613, 19709, 585, 514, 669, 28086],
        [21, 21, 22, 20, 21, 20, 15, 39, 21],
        [4761, 11901, 11462, 4221, 9281, 574, 1013, 864, 8748],
        [108, 101, 100, 111, 165, 111, 173, 117, 95],
        [3084, 13698, 15390, 2494, 17751, 290, 541, 382, 20149],
        [22, 22, 22, 19, 22, 20, 6, 63, 22],
    ],
)

METHODS = ["Subword", "Single Digit", "xVal", "FoNE", "BitToken (Ours)"]
ACC, LOG, PPL = "Exact match acc", "log-sMAPE", "Perplexity"
_MULTITASK = [
    ("Min/Max", ACC),
    ("Interval", ACC),
    ("Sorting", ACC),
    ("Add", LOG),
    ("Mult", LOG),
    ("Div", LOG),
    ("Fineweb", PPL),
    ("Fineweb text only", PPL),
]

_T4 = (
    METHODS,
    _MULTITASK,
    [
        [0.991, 0.991, 0.001, 0.859, 0.999],
        [0.993, 0.992, 0.324, 0.997, 1.000],
        [0.927, 0.955, 0.000, 0.574, 0.998],
        [0.954, 0.974, 0.092, 0.809, 0.989],
        [0.450, 0.893, 0.094, 0.300, 0.991],
        [0.522, 0.681, 0.093, 0.275, 0.989],
        [74.83, 64.23, 102.57, 79.78, 48.78],
        [76.56, 71.85, 112.03, 87.01, 52.54],
    ],
)
# Table 5: (input, output) tokens per method
_T5 = {
    "Min/Max": [(34.1, 8.5), (60.5, 16.0), (11.1, 2.0), (11.1, 2.0), (11.1, 2.0)],
    "Interval": [(45.1, 2.0), (27.1, 2.0), (15.9, 2.0), (15.9, 2.0), (15.9, 2.0)],
    "Sorting": [(34.0, 23.1), (60.0, 58.0), (11.1, 9.5), (11.1, 9.5), (11.1, 9.5)],
    "Add": [(21.6, 9.6), (32.4, 16.6), (5.9, 2.4), (5.9, 2.4), (5.9, 2.0)],
    "Mult": [(21.2, 10.3), (32.0, 17.7), (5.9, 2.4), (5.9, 2.4), (5.9, 2.0)],
    "Div": [(22.8, 9.6), (37.9, 15.4), (5.9, 2.4), (6.1, 2.4), (6.1, 2.0)],
}
_T6 = (
    METHODS,
    [("Add", ACC), ("Mult", ACC), ("Div", ACC)],
    [[0.926, 0.962, 0.002, 0.767, 0.977], [0.290, 0.784, 0.030, 0.164, 0.978], [0.379, 0.514, 0.013, 0.136, 0.982]],
)
_T7 = (
    METHODS,
    _MULTITASK[:6] + [("Exp", LOG), ("Mean", LOG), ("Std", LOG)] + _MULTITASK[6:],
    [
        [0.997, 1.000, 0.002, 0.909, 0.999],
        [0.999, 1.000, 0.328, 1.000, 1.000],
        [0.999, 0.998, 0.000, 0.718, 0.999],
        [0.999, 1.000, 0.090, 0.851, 0.998],
        [0.564, 0.964, 0.096, 0.328, 0.985],
        [0.564, 0.773, 0.094, 0.236, 0.995],
        [0.403, 0.450, 0.047, 0.366, 0.391],
        [0.976, 0.965, 0.060, 0.444, 0.534],
        [0.365, 0.420, 0.057, 0.191, 0.354],
        [32.56, 30.39, 29.65, 28.67, 28.33],
        [33.13, 33.29, 31.62, 30.65, 30.19],
    ],
)
_T8 = (
    ["Sum", "Product", "Concat", "Zero Pad", "Weighted", "Weighted + Sum"],
    _MULTITASK,
    [
        [0.999, 0.996, 0.997, 1.000, 0.998, 0.999],
        [1.000, 1.000, 1.000, 1.000, 1.000, 1.000],
        [0.990, 0.967, 0.966, 0.992, 0.983, 0.989],
        [0.989, 0.980, 0.977, 0.990, 0.985, 0.984],
        [0.991, 0.828, 0.871, 0.992, 0.988, 0.986],
        [0.989, 0.849, 0.888, 0.981, 0.947, 0.923],
        [48.78, 56.26, 55.03, 48.29, 49.04, 50.99],
        [52.54, 60.68, 59.32, 51.91, 52.73, 54.89],
    ],
)
# Tables 9-12: (value, stated delta) pairs
_T9 = (
    ["Base 10", "Layer norm"],
    _MULTITASK,
    [
        [(0.992, -0.007), (0.997, -0.003)],
        [(0.997, -0.003), (1.000, +0.000)],
        [(0.930, -0.062), (0.976, -0.016)],
        [(0.937, -0.053), (0.981, -0.009)],
        [(0.526, -0.466), (0.988, -0.004)],
        [(0.437, -0.544), (0.987, +0.006)],
        [(76.54, +28.25), (50.10, +1.81)],
        [(82.99, +31.08), (53.94, +2.03)],
    ],
)
_T10 = (
    ["Subword", "Single Digit", "xVal", "FoNE", "BitToken"],
    _MULTITASK,
    [
        [(0.988, -0.003), (0.989, -0.002), (0.001, +0.000), (0.842, -0.017), (0.988, -0.012)],
        [(0.994, +0.001), (0.989, -0.003), (0.308, -0.016), (0.994, -0.003), (0.991, -0.009)],
        [(0.923, -0.004), (0.928, -0.027), (0.000, +0.000), (0.530, -0.044), (0.911, -0.081)],
        [(0.942, -0.012), (0.951, -0.023), (0.097, +0.007), (0.805, -0.004), (0.899, -0.091)],
        [(0.436, -0.014), (0.640, -0.253), (0.098, +0.004), (0.255, -0.045), (0.582, -0.410)],
        [(0.509, -0.013), (0.482, -0.199), (0.096, -0.003), (0.238, -0.037), (0.596, -0.385)],
        [(78.08, +3.25), (74.46, +0.37), (134.07, +31.50), (83.46, +3.68), (74.32, +26.03)],
        [(79.89, +5.06), (83.30, +6.74), (146.83, +31.50), (91.09, +4.08), (80.29, +34.80)],
    ],
)
_T11 = (["BitTokens w/o reciprocal"], [("Div", LOG)], [[(0.351, -0.644)]])
_T12 = (
    METHODS,
    _MULTITASK,
    [
        [(0.990, -0.001), (0.990, -0.001), (0.002, +0.001), (0.874, +0.015), (0.991, -0.008)],
        [(0.990, -0.003), (0.991, -0.001), (0.322, -0.002), (0.997, 0.000), (1.000, 0.000)],
        [(0.927, 0.000), (0.949, -0.006), (0.000, 0.000), (0.622, +0.048), (0.933, -0.065)],
        [(0.950, -0.004), (0.967, -0.007), (0.093, +0.001), (0.813, +0.004), (0.948, -0.041)],
        [(0.339, -0.111), (0.484, -0.409), (0.094, 0.000), (0.285, -0.015), (0.385, -0.606)],
        [(0.433, -0.089), (0.560, -0.121), (0.093, 0.000), (0.300, +0.025), (0.376, -0.613)],
        [(76.92, +2.09), (72.89, +8.66), (103.86, +1.29), (75.99, -3.79), (77.26, +28.48)],
        [(78.75, +2.19), (81.97, +10.12), (113.44, +1.41), (82.85, -4.16), (82.54, +30.00)],
    ],
)
_T13 = (
    ["None", "Linear", "MLP"],
    _MULTITASK,
    [
        [0.999, 1.000, 0.998],
        [1.000, 1.000, 1.000],
        [0.994, 0.992, 0.989],
        [0.985, 0.990, 0.989],
        [0.993, 0.992, 0.994],
        [0.993, 0.981, 0.995],
        [47.69, 48.29, 47.50],
        [51.08, 51.91, 51.06],
    ],
)
_T14 = (
    ["harmonic", "geometric", "arithmetic"],
    _MULTITASK,
    [
        [1.000, 1.000, 1.000],
        [1.000, 1.000, 1.000],
        [0.992, 0.995, 0.997],
        [0.991, 0.983, 0.710],
        [0.995, 0.990, 0.979],
        [0.981, 0.995, 0.978],
        [48.29, 53.13, 77.28],
        [51.91, 57.25, 83.85],
    ],
)
_T15_ROWS = _MULTITASK[:6] + [("Exp", LOG), ("Mean", LOG), ("Std", LOG)] + _MULTITASK[6:]
_T15 = [  # Single Digit r_max = 0.1, 0.2, 0.3, 1 | BitToken r_max = 0.1, 0.2, 0.3, 1
    [0.988, 0.985, 0.988, 0.988, 0.999, 0.996, 0.989, 0.990],
    [0.991, 0.989, 0.990, 0.991, 1.000, 1.000, 0.999, 1.000],
    [0.927, 0.897, 0.909, 0.911, 0.980, 0.963, 0.920, 0.922],
    [0.965, 0.954, 0.947, 0.957, 0.965, 0.944, 0.905, 0.922],
    [0.797, 0.654, 0.591, 0.625, 0.985, 0.971, 0.895, 0.932],
    [0.550, 0.453, 0.430, 0.439, 0.983, 0.966, 0.896, 0.931],
    [0.253, 0.292, 0.311, 0.313, 0.312, 0.355, 0.363, 0.374],
    [0.779, 0.789, 0.817, 0.819, 0.381, 0.485, 0.486, 0.489],
    [0.214, 0.237, 0.357, 0.358, 0.214, 0.306, 0.304, 0.324],
    [72.29, 80.50, 88.37, 90.37, 55.22, 69.22, 81.44, 82.26],
    [81.12, 90.80, 100.05, 101.9, 59.63, 75.12, 88.69, 89.55],
]
# Baseline (table, column) of each delta the paper prints in Tables 9-12. The captions only say
# "deltas to baseline"; these are the columns that reproduce the printed deltas best: the BitToken
# ablations of Tables 9 and 10 are measured against the "Zero Pad" run of Table 8 (not the Table 4
# "Sum" model), Table 11 against the solo-task BitToken of Table 7, all others against Table 4.
DELTA_BASELINE = {
    9: {"Base 10": (8, "Zero Pad"), "Layer norm": (8, "Zero Pad")},
    10: {
        "Subword": (4, "Subword"),
        "Single Digit": (4, "Single Digit"),
        "xVal": (4, "xVal"),
        "FoNE": (4, "FoNE"),
        "BitToken": (8, "Zero Pad"),
    },
    11: {"BitTokens w/o reciprocal": (7, "BitToken (Ours)")},
    12: {m: (4, m) for m in METHODS},
}


def _frontier(spec):
    columns, rows = spec
    index = pd.MultiIndex.from_tuples(FRONTIER_ROWS, names=["Model", "Reasoning"])
    return pd.DataFrame(rows, index=index, columns=columns, dtype=float)


def _by_task(columns, tasks, rows):
    df = pd.DataFrame(rows, columns=columns, dtype=float)
    df.insert(0, "Metric", [m for _, m in tasks])
    df.index = pd.Index([t for t, _ in tasks], name="Task")
    return df


def _pairs(spec, which):
    columns, tasks, rows = spec
    return _by_task(columns, tasks, [[pair[which] for pair in row] for row in rows])


def table(n):
    """Table n of the paper (1-15) as a fresh DataFrame."""
    if n in (1, 2, 3):
        return _frontier({1: _T1, 2: _T2, 3: _T3}[n])
    if n in (4, 6, 7, 8, 13, 14):
        return _by_task(*{4: _T4, 6: _T6, 7: _T7, 8: _T8, 13: _T13, 14: _T14}[n])
    if n == 5:
        columns = pd.MultiIndex.from_product([METHODS, ["input", "output"]], names=["Method", "Tokens"])
        rows = [[x for pair in pairs for x in pair] for pairs in _T5.values()]
        return pd.DataFrame(rows, index=pd.Index(list(_T5), name="Task"), columns=columns, dtype=float)
    if n in (9, 10, 11, 12):
        return _pairs({9: _T9, 10: _T10, 11: _T11, 12: _T12}[n], 0)
    if n == 15:
        columns = pd.MultiIndex.from_product(
            [["Single Digit", "BitToken"], [0.1, 0.2, 0.3, 1.0]], names=["Method", "r_max"]
        )
        df = pd.DataFrame(_T15, index=pd.Index([t for t, _ in _T15_ROWS], name="Task"), columns=columns, dtype=float)
        df.insert(0, ("Metric", ""), [m for _, m in _T15_ROWS])
        return df
    raise ValueError(f"the paper has Tables 1-15, got {n!r}")


def stated_deltas(n):
    """The deltas printed next to the values of ablation Tables 9-12 (same shape as table(n))."""
    if n not in (9, 10, 11, 12):
        raise ValueError(f"only Tables 9-12 print deltas, got {n!r}")
    return _pairs({9: _T9, 10: _T10, 11: _T11, 12: _T12}[n], 1)


def derived_deltas(n):
    """value - baseline for Tables 9-12 with the baselines of DELTA_BASELINE."""
    if n not in DELTA_BASELINE:
        raise ValueError(f"only Tables 9-12 print deltas, got {n!r}")
    values = table(n)
    out = values.copy()
    for column, (base_table, base_column) in DELTA_BASELINE[n].items():
        out[column] = values[column] - table(base_table).loc[values.index, base_column]
    return out


# The paper spells two task labels differently in some tables.
LABEL_ALIASES = {"Min/Max": "MinMax", "Sorting": "Sort"}


def task_of(label):
    """Our name of the task the paper labels `label` ("Add", "Min/Max", ...); None for other rows
    (the Fineweb perplexity rows)."""
    label = LABEL_ALIASES.get(label, label)
    return next((t for t in tasks.numeric() if tasks.get(t).label == label), None)


def table_columns(n):
    """{our task name: the column of Table n} for the frontier Tables 1-3."""
    if n not in (1, 2, 3):
        raise ValueError(f"only Tables 1-3 have one column per task, got {n!r}")
    return {task_of(column): column for column in table(n).columns}


def figure4_multitask():
    """Figure 4 multi-task bars (Table 4) in long form: task, metric, method, value."""
    return _long(table(4))


def figure4_solotask():
    """Figure 4 solo-task bars (Table 7) in long form: task, metric, method, value."""
    return _long(table(7))


def _long(df):
    return (
        df.reset_index()
        .melt(id_vars=["Task", "Metric"], var_name="Method", value_name="value")
        .rename(columns=str.lower)
    )
