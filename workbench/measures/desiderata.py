"""The nine desiderata of section 3 (D1–D9), measured for every registered number encoding.
(One file over 500 lines: nine measurements of one concept, each short, sharing their samplers.)

Each `d*` function returns a tidy DataFrame; scorecard.py runs them at one size (`measure_all`)
and turns the measurements into pass / trade-off / fail (`scorecard`), next to the verdicts the
paper gives in section 4.

Two kinds of encoding are registered. Single-token encodings (BitTokens, FoNE, xVal) have a
fixed vector per number, so D3 and D5–D9 are properties of that vector and its head. Digit
encodings (single / triple digit) keep numbers as text tokens whose embeddings are learned: D1,
D2 and D4 apply to them, D3 and D5–D9 do not (reported as "n/a").

Heads are "ideal": the head output a perfect model would produce for a value p (`ideal_output`),
so D7 and D8 measure the encoding and its loss/decision rule, not a particular trained model.
"""

from __future__ import annotations

import math
from decimal import Decimal

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F
from torch import nn
from tqdm.auto import tqdm

from .. import encoders, metrics, numbers

DESIDERATA = {
    "D1": "Token efficiency",
    "D2": "Uniqueness",
    "D3": "Structured",
    "D4": "Scale invariance",
    "D5": "Normalization",
    "D6": "Numerical stability",
    "D7": "Continuity",
    "D8": "Robustness",
    "D9": "Arithmetic",
}


# -- shared helpers ---------------------------------------------------------------------------
def sample_values(
    n: int, seed: int = 0, lo: float = -14, hi: float = 15, max_digits: int = 15, signed: bool = True
) -> np.ndarray:
    """n values, magnitude log-uniform in [10^lo, 10^hi), 1..max_digits significant digits."""
    if not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"n must be a positive integer, got {n!r}")
    if not lo < hi or not 1 <= max_digits <= 17:
        raise ValueError(f"need lo < hi and 1 <= max_digits <= 17, got {lo}, {hi}, {max_digits}")
    rng = np.random.default_rng(seed)
    magnitude = 10.0 ** rng.uniform(lo, hi, n)
    digits = rng.integers(1, max_digits + 1, n)
    values = np.array([float(f"{m:.{d - 1}e}") for m, d in zip(magnitude.tolist(), digits.tolist())])
    return values * rng.choice([-1.0, 1.0], n) if signed else values


def single_token_names() -> list[str]:
    """Encodings with a number head (one <|num|> token per number)."""
    return [n for n in encoders.names() if encoders.get(n).single_token]


def _codec(name: str):
    return encoders.get(name)


def _head(name: str, d_model: int = 256):
    """The encoding's number head for a model of width d_model (the ideal-head measurements use
    its loss, decision rule and target vector, never trained weights)."""
    return encoders.get(name).number_head(d_model)


def _target(codec, x: np.ndarray) -> np.ndarray:
    """What a round trip must give back: |x| for encodings that leave the sign to a text token."""
    return np.abs(x) if not codec.signed else x


def _same(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Equal as float64 values (NaN equals NaN; -0 equals 0, the sign of zero is not a value)."""
    return (a == b) | (np.isnan(a) & np.isnan(b))


def _relative_error(decoded: np.ndarray, target: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        err = np.abs(decoded - target) / np.abs(target)
    err = np.where(target == 0, np.abs(decoded), err)
    return np.where(_same(decoded, target), 0.0, np.where(np.isfinite(err), err, np.inf))


def _spearman(a: np.ndarray, b: np.ndarray) -> float:
    ra = pd.Series(a).rank().to_numpy()
    rb = pd.Series(b).rank().to_numpy()
    if ra.std() == 0 or rb.std() == 0:
        return float("nan")
    return float(np.corrcoef(ra, rb)[0, 1])


def _exponent(v: float) -> int:
    return int(f"{v:.14e}".split("e")[1])


def _round_trip(codec, x: np.ndarray) -> np.ndarray:
    """decode(encode(x)); an unsigned encoding (the sign is a text token) gets |x|, as its tokenizer gives it."""
    return codec.decode(codec.encode(torch.from_numpy(_target(codec, x)))).numpy()


# -- ideal heads (D7, D8) --------------------------------------------------------------------
# A perfect head's output for a value p is `head.ideal_output(p)`: the vector its loss is trained
# towards (`head.target_vector`), classification heads scaled by a confidence. D7 and D8 measure
# the encoding and its loss / decision rule, not a particular trained model.


# -- D1 token efficiency ---------------------------------------------------------------------
def d1_corpus(names=None, vocab_size: int = 2048) -> pd.DataFrame:
    """Tokens per number in the shipped corpus: <|num|> tokens (+ a '-' token for encodings
    that leave the sign to text) or digit pieces, divided by the numbers `numbers.parse` finds."""
    from ..tokenizer import Tokenizer, corpus_text

    text = corpus_text()
    values = np.array(numbers.parse(text, signed=True)[1])
    rows = []
    for name in names or encoders.names():
        tok = Tokenizer(name, vocab_size=vocab_size)
        ids, _ = tok.encode(text)
        if tok.encoding.single_token:
            number_tokens = int((ids == tok.num_id).sum())
            if not tok.encoding.signed:
                number_tokens += int((values < 0).sum())
        else:
            number_tokens = int(((ids >= len(tok.special_tokens)) & (ids < tok.offset)).sum())
        rows.append(
            dict(
                encoding=name,
                numbers=len(values),
                number_tokens=number_tokens,
                tokens_per_number=number_tokens / len(values),
                corpus_tokens=len(ids),
            )
        )
    return pd.DataFrame(rows)


def d1_tasks(names=None, n: int = 30, seed: int = 0, tasks=None, vocab_size: int = 2048) -> pd.DataFrame:
    """Table 5 style: mean input (<|bos|>…<|eoq|>) and output (answer + <|eos|>) tokens per sample."""
    from ..tasks import generate, numeric
    from ..tokenizer import Tokenizer

    frames = {task: generate(task, n, seed=seed, split="test") for task in (tasks or numeric())}
    rows = []
    for name in names or encoders.names():
        tok = Tokenizer(name, vocab_size=vocab_size)
        for task, df in frames.items():
            lengths = [tok.sample(p, a)[2] for p, a in zip(df["prompt"], df["answer"])]
            rows.append(
                dict(
                    encoding=name,
                    task=task,
                    input_tokens=float(np.mean([(~m).sum() for m in lengths])),
                    output_tokens=float(np.mean([m.sum() for m in lengths])),
                )
            )
    return pd.DataFrame(rows)


# -- D2 uniqueness ---------------------------------------------------------------------------
def d2_uniqueness(names=None, n: int = 10_000, seed: int = 0) -> pd.DataFrame:
    """Round trip encode -> decode over the whole range, and collisions: distinct values that
    share one encoding (for unsigned encodings the value is |x|, the sign being a text token).
    `neighbour_collisions`: the fraction of 15-digit values whose encoding equals that of the
    value one unit higher in the 15th significant digit."""
    x = np.array([float(f"{v:.14e}") for v in sample_values(n, seed)])
    neighbours = np.array([float(Decimal(f"{v:.14e}") + Decimal(f"1e{_exponent(v) - 14}")) for v in x.tolist()])
    rows = []
    for name in names or encoders.names():
        codec = _codec(name)
        target = _target(codec, x)
        enc = codec.encode(torch.from_numpy(target))
        decoded = codec.decode(enc).numpy()
        distinct_values = len(np.unique(target))
        distinct_codes = len(np.unique(enc.numpy(), axis=0))
        neighbour = _encode_or_nan(codec, _target(codec, neighbours))
        same_as_neighbour = (neighbour == enc.numpy()).all(1) if neighbour.shape == enc.shape else np.zeros(n, bool)
        rows.append(
            dict(
                encoding=name,
                n=n,
                exact=float(_same(decoded, target).mean()),
                collisions=distinct_values - distinct_codes,
                neighbour_collisions=float(same_as_neighbour.mean()),
                median_rel_error=float(np.median(_relative_error(decoded, target))),
                encodes="|x|" if not codec.signed else "x",
            )
        )
    return pd.DataFrame(rows)


def _encode_or_nan(codec, x: np.ndarray) -> np.ndarray:
    """codec.encode(x), a row of NaN (equal to no encoding) for each value it refuses: the
    neighbour of -1e-14 one unit toward 0 lies below xVal's range, and shares no value's encoding."""
    try:
        return codec.encode(torch.from_numpy(x)).numpy()
    except ValueError:
        if not codec.width:  # a digit encoding's rows have no common width to fill
            raise
    rows = []
    for v in x.tolist():
        try:
            rows.append(codec.encode(torch.tensor([v], dtype=torch.float64)).numpy()[0])
        except ValueError:
            rows.append(np.full(codec.width, np.nan))
    return np.stack(rows)


# -- D3 structure ----------------------------------------------------------------------------
D3_SCALES = [1e-6, 1e-2, 1.0, 1e2, 1e6, 1e12]


def d3_structure(names=None, n_pairs: int = 5_000, seed: int = 0, scales=None) -> pd.DataFrame:
    """Does encoding distance follow numeric distance? Per scale s, pairs x, y uniform in [s, 10 s)
    with 6 significant digits; Spearman between |x - y| and ||enc x - enc y|| (raw geometry), the
    fraction of values whose nearest neighbour in encoding space is a numeric neighbour (sorted
    order), and Spearman between x and a least-squares linear readout of x from the encoding
    (fit on one half, scored on the other: is order linearly accessible?)."""
    rng = np.random.default_rng(seed)
    rows = []
    for name in names or single_token_names():
        codec = _codec(name)
        for s in scales or D3_SCALES:
            x = np.array([float(f"{v:.5e}") for v in rng.uniform(s, 10 * s, 2 * n_pairs)])
            ex = codec.encode(torch.from_numpy(x)).double()
            a, b = ex[:n_pairs], ex[n_pairs:]
            distance = (a - b).norm(dim=1).numpy()
            rho = _spearman(np.abs(x[:n_pairs] - x[n_pairs:]), distance)
            readout = _ridge_readout(ex[:n_pairs], x[:n_pairs], ex[n_pairs:])
            rows.append(
                dict(
                    encoding=name,
                    scale=s,
                    spearman=rho,
                    linear_readout_spearman=_spearman(readout, x[n_pairs:]),
                    nn_is_numeric_neighbour=_nearest_neighbour_order(ex[:1000], x[:1000]),
                )
            )
    return pd.DataFrame(rows)


def _ridge_readout(train: torch.Tensor, y: np.ndarray, test: torch.Tensor, lam: float = 1e-6) -> np.ndarray:
    """Ridge regression on standardized features (constant columns dropped), applied to test."""
    mean, std = train.mean(0), train.std(0)
    keep = std > 1e-9
    X = (train[:, keep] - mean[keep]) / std[keep]
    target = torch.from_numpy((y - y.mean()) / y.std())
    w = torch.linalg.solve(X.T @ X + lam * len(X) * torch.eye(X.shape[1], dtype=X.dtype), X.T @ target)
    return (((test[:, keep] - mean[keep]) / std[keep]) @ w).numpy()


def _nearest_neighbour_order(enc: torch.Tensor, x: np.ndarray) -> float:
    order = np.argsort(x, kind="stable")
    rank = np.empty_like(order)
    rank[order] = np.arange(len(x))
    d = torch.cdist(enc, enc)
    d.fill_diagonal_(float("inf"))
    nearest = d.argmin(1).numpy()
    return float((np.abs(rank[nearest] - rank) == 1).mean())


# -- D4 scale invariance ---------------------------------------------------------------------
SPECIALS = {
    "0": 0.0,
    "-0": -0.0,
    "inf": math.inf,
    "-inf": -math.inf,
    "nan": math.nan,
    "subnormal 5e-324": 5e-324,
    "smallest normal": 2.2250738585072014e-308,
    "1e300": 1e300,
    "-1e300": -1e300,
    "1.7976931348623157e308": 1.7976931348623157e308,
}


def _round_trip_or_lost(codec, x: np.ndarray) -> np.ndarray:
    """_round_trip, with 0 for each value the encoding refuses (beyond its range): nothing of it is
    kept, relative error 1, as when an encoding gave such a value back as 0."""
    try:
        return _round_trip(codec, x)
    except ValueError:
        pass
    out = np.zeros(len(x))
    for i, v in enumerate(x.tolist()):
        try:
            out[i] = _round_trip(codec, np.array([v]))[0]
        except ValueError:
            pass
    return out


def d4_decades(names=None, n_per_decade: int = 300, seed: int = 0, lo: int = -14, hi: int = 15) -> pd.DataFrame:
    """Round trip per decade [10^k, 10^(k+1)), k = lo..hi-1, 15 significant digits, both signs; a
    value an encoding refuses (xVal below 1e-14, FoNE from 1e17) counts as lost (relative error 1)."""
    rows = []
    for name in names or encoders.names():
        codec = _codec(name)
        for k in range(lo, hi):
            x = sample_values(n_per_decade, seed + k - lo, k, k + 1, max_digits=15)
            x = np.array([float(f"{v:.14e}") for v in x])
            target = _target(codec, x)
            err = _relative_error(_round_trip_or_lost(codec, x), target)
            rows.append(
                dict(
                    encoding=name,
                    decade=k,
                    exact=float((err == 0).mean()),
                    median_rel_error=float(np.median(err)),
                    max_rel_error=float(err.max()),
                )
            )
    return pd.DataFrame(rows)


def d4_specials(names=None) -> pd.DataFrame:
    """Decoded value (or the error raised) for zero, infinities, NaN, subnormals, huge values."""
    rows = []
    for name in names or encoders.names():
        codec = _codec(name)
        for label, v in SPECIALS.items():
            try:
                decoded = float(_round_trip(codec, np.array([v]))[0])
                ok = bool(_same(np.array([decoded]), _target(codec, np.array([v])))[0])
                result = repr(decoded)
            except (ValueError, OverflowError, TypeError) as err:
                ok, result = False, f"{type(err).__name__}: {str(err)[:60]}"
            rows.append(dict(encoding=name, value=label, decoded=result, exact=ok))
    return pd.DataFrame(rows)


# -- D5 normalization ------------------------------------------------------------------------
def _normalize(v: torch.Tensor, kind: str) -> torch.Tensor:
    if kind == "rmsnorm":
        return F.rms_norm(v, (v.shape[-1],))
    if kind == "layernorm":
        return F.layer_norm(v, (v.shape[-1],))
    if kind == "none":
        return v
    raise ValueError(f"unknown normalization {kind!r}")


D5_TOLERANCE = 1e-4


def d5_normalization(names=None, n: int = 2_000, seed: int = 0, d_model: int = 256) -> pd.DataFrame:
    """Is x still recoverable from norm(embed(e, x)) with a fixed random [NUM] embedding e?

    The norm keeps v up to an unknown scale 1/σ (RMSNorm) and shift μ (LayerNorm). The decoder
    knows e and how the encoding joins it (v = A enc + c) but not x, so it solves the linear
    least-squares problem  y = A (enc/σ) + c (1/σ) - 1 (μ/σ)  and divides by the recovered 1/σ;
    when c = 0 the scale is not identifiable and it takes σ = 1. Measured: `injective` = the
    fraction of distinct values whose normalized vectors stay apart on a grid of D5_TOLERANCE
    (float32 rounding noise is far below it), `encoding_error` = max |recovered - encoding|,
    `exact` = decoded exactly by the encoding's own decode, and the relative error.
    """
    x = sample_values(n, seed, signed=True)
    e = torch.randn(d_model, generator=torch.Generator().manual_seed(seed))
    rows = []
    for name in names or single_token_names():
        codec, head = _codec(name), _head(name, d_model)
        target = _target(codec, x)
        try:
            A, c = head.embedding_map(e)
        except ValueError:  # a non-linear join: the linear recovery below does not apply
            rows += [
                dict(
                    encoding=name,
                    norm=kind,
                    injective=np.nan,
                    encoding_error=np.nan,
                    exact=np.nan,
                    median_rel_error=np.nan,
                )
                for kind in ("none", "rmsnorm", "layernorm")
            ]
            continue
        enc = codec.encode(torch.from_numpy(target))
        v = head.embed(e.expand(n, -1), torch.from_numpy(target)).double()
        if not torch.allclose(v, enc.double() @ A.T + c, atol=1e-5):
            raise ValueError(f"{name}: embed() no longer matches the map assumed for D5")
        for kind in ("none", "rmsnorm", "layernorm"):
            y = _normalize(v.float(), kind).double()
            columns = [A] + ([c[:, None]] if c.abs().sum() > 0 else []) + [-torch.ones(d_model, 1, dtype=torch.float64)]
            z = torch.linalg.lstsq(torch.cat(columns, 1), y.T).solution.T
            inverse_sigma = z[:, codec.width] if c.abs().sum() > 0 else torch.ones(n, dtype=torch.float64)
            recovered = (z[:, : codec.width] / inverse_sigma[:, None]).float()
            decoded = codec.decode(recovered).numpy()
            err = _relative_error(decoded, target)
            grid = np.round(y.numpy() / D5_TOLERANCE).astype(np.int64)
            distinct = len(np.unique(grid, axis=0)) / len(np.unique(target))
            rows.append(
                dict(
                    encoding=name,
                    norm=kind,
                    injective=float(min(distinct, 1.0)),
                    encoding_error=float((recovered - enc).abs().max()),
                    exact=float((err == 0).mean()),
                    median_rel_error=float(np.median(err)),
                )
            )
    return pd.DataFrame(rows)


# -- D6 numerical stability ------------------------------------------------------------------
DTYPES = {
    "float32": torch.float32,
    "bfloat16": torch.bfloat16,
    "float16": torch.float16,
    "float8_e4m3fn": torch.float8_e4m3fn,
    "float8_e5m2": torch.float8_e5m2,
}


def d6_precision(names=None, n: int = 10_000, seed: int = 0) -> pd.DataFrame:
    """Round trip after casting the encoding to a low-precision dtype and back."""
    x = sample_values(n, seed)
    rows = []
    for name in names or single_token_names():
        codec = _codec(name)
        target = _target(codec, x)
        enc = codec.encode(torch.from_numpy(target))
        for label, dtype in DTYPES.items():
            decoded = codec.decode(enc.to(dtype).float()).numpy()
            err = _relative_error(decoded, target)
            rows.append(
                dict(
                    encoding=name,
                    dtype=label,
                    exact=float((err == 0).mean()),
                    median_rel_error=float(np.median(err)),
                    log_smape=float(metrics.log_smape(decoded, target).mean()),
                )
            )
    return pd.DataFrame(rows)


# -- D7 continuity ---------------------------------------------------------------------------
def d7_example(names=None, confidence: float = 4.0) -> pd.DataFrame:
    """Section 5's example: the loss of predicting 8 and 3 for the label 7 under each own loss."""
    rows = []
    for name in names or single_token_names():
        head = _head(name)
        target = torch.tensor([7.0], dtype=torch.float64)
        for p in (7.0, 8.0, 3.0):
            loss = head.loss(head.ideal_output([p], confidence), target).item()
            rows.append(dict(encoding=name, label=7.0, prediction=p, loss=loss))
    return pd.DataFrame(rows)


def d7_curves(
    names=None, targets=(7.0, 0.0123, 123456.0, 1e9), points: int = 401, confidence: float = 4.0
) -> pd.DataFrame:
    """Loss of an ideal head predicting p for target t, p on a grid t·(1 + δ), δ in [-1, 1]
    (and 0 … 2 for t = 7)."""
    rows = []
    for name in names or single_token_names():
        head = _head(name)
        for t in targets:
            grid = np.linspace(0.0, 2.0 * t, points)
            grid = np.array([float(f"{g:.12g}") for g in grid])
            losses = head.loss(head.ideal_output(grid, confidence), torch.full((points,), t, dtype=torch.float64))
            losses = losses.tolist()
            rows += [dict(encoding=name, target=t, prediction=p, loss=cost) for p, cost in zip(grid, losses)]
    return pd.DataFrame(rows)


def d7_continuity(curves: pd.DataFrame) -> pd.DataFrame:
    """Per encoding and target: Spearman(|p - t|, loss) (1 = loss grows with the error)."""
    rows = []
    for (name, t), g in curves.groupby(["encoding", "target"], sort=False):
        rows.append(dict(encoding=name, target=t, spearman=_spearman(np.abs(g["prediction"] - t), g["loss"])))
    return pd.DataFrame(rows)


# -- D8 robustness ---------------------------------------------------------------------------
D8_SIGMAS = [0.0, 0.05, 0.1, 0.2, 0.25, 0.3, 0.4, 0.5, 0.75, 1.0]


def d8_noise(names=None, n: int = 2_000, seed: int = 0, sigmas=None) -> pd.DataFrame:
    """Decode an ideal head output plus Gaussian noise of σ × (RMS of the head vector)."""
    x = sample_values(n, seed)
    gen = torch.Generator().manual_seed(seed)
    rows = []
    for name in names or single_token_names():
        head = _head(name)
        target = _target(head.encoding, x)
        vector = head.target_vector(x)
        rms = vector.pow(2).mean().sqrt()
        for sigma in sigmas or D8_SIGMAS:
            noisy = vector + sigma * rms * torch.randn(vector.shape, generator=gen, dtype=torch.float64)
            decoded = head.predict(head.output_of(noisy)).numpy()
            rows.append(
                dict(
                    encoding=name,
                    sigma=sigma,
                    exact=float(_same(decoded, target).mean()),
                    log_smape=float(metrics.log_smape(decoded, target).mean()),
                )
            )
    return pd.DataFrame(rows)


# -- D9 arithmetic ---------------------------------------------------------------------------
def _exact_result(x: np.ndarray, y: np.ndarray, op: str) -> np.ndarray:
    f = (lambda a, b: a + b) if op == "add" else (lambda a, b: a * b)
    return np.array([float(f(Decimal(repr(a)), Decimal(repr(b)))) for a, b in zip(x.tolist(), y.tolist())])


def d9_operator(
    names=None,
    ops=("add", "mul"),
    steps: int = 400,
    n_train: int = 20_000,
    n_test: int = 1_000,
    hidden: int = 256,
    batch: int = 128,
    lr: float = 3e-3,
    seed: int = 0,
    lo: float = 0,
    hi: float = 2,
    max_digits: int = 2,
    progress: bool = False,
) -> pd.DataFrame:
    """A small MLP learns enc(x), enc(y) -> the encoding's own head output for x op y, trained
    with the encoding's own loss; decoded with its own predict on held-out pairs.
    Operands: positive, magnitude 10^lo … 10^hi, `max_digits` significant digits."""
    if steps < 1 or n_train < batch:
        raise ValueError(f"need steps >= 1 and n_train >= batch, got {steps}, {n_train}")
    rows = []
    for name in names or single_token_names():
        for op in ops:
            x = sample_values(n_train + n_test, seed, lo, hi, max_digits, signed=False)
            y = sample_values(n_train + n_test, seed + 1, lo, hi, max_digits, signed=False)
            z = _exact_result(x, y, op)
            torch.manual_seed(seed)  # module initialisation; the data order uses its own generator
            codec, head = _codec(name), _head(name, hidden)
            inputs = torch.cat([codec.encode(torch.from_numpy(x)), codec.encode(torch.from_numpy(y))], 1).float()
            mlp = nn.Sequential(
                nn.Linear(inputs.shape[1], hidden),
                nn.GELU(),
                nn.Linear(hidden, hidden),
                nn.GELU(),
                nn.Linear(hidden, hidden),
            )
            params = list(mlp.parameters()) + list(head.parameters())
            opt = torch.optim.Adam(params, lr=lr)
            gen = torch.Generator().manual_seed(seed)
            target = torch.from_numpy(z)
            for _ in tqdm(range(steps), desc=f"D9 {name} {op}", leave=False, disable=not progress):
                idx = torch.randint(0, n_train, (batch,), generator=gen)
                loss = head.loss(head(mlp(inputs[idx])), target[idx]).mean()
                opt.zero_grad()
                loss.backward()
                opt.step()
            with torch.no_grad():
                pred = head.predict(head(mlp(inputs[n_train:]))).numpy()
            truth = z[n_train:]
            rows.append(
                dict(
                    encoding=name,
                    op=op,
                    steps=steps,
                    final_loss=loss.item(),
                    exact=float(metrics.exact_match(pred, truth).mean()),
                    log_smape=float(metrics.log_smape(pred, truth).mean()),
                )
            )
    return pd.DataFrame(rows)
