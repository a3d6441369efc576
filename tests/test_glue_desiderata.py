"""D4 (per-decade round trip) and D7 (continuity of the loss) on hand-made encodings whose answers
are known in closed form, and D7 of BitTokens against the IEEE bits (struct)."""

import math
import statistics
import struct
from contextlib import ExitStack
from decimal import Decimal

import pytest
import torch

from workbench import encoders
from workbench.encoders.base import NumberEncoding, NumberHead, as_float64
from workbench.measures import desiderata as D


def error_of_decade(e: int) -> float:
    """The relative error the D4 encoding below makes for |x| in [10^e, 10^(e+1))."""
    return 0.0 if e < 0 else 1.0 if e < 5 else 0.5


class DecadeDependent(NumberEncoding):
    """Unsigned (like FoNE, it encodes |x|); decodes 10^e <= |x| < 10^(e+1) as |x| for e < 0,
    2|x| for 0 <= e < 5 and |x| / 2 for e >= 5: relative errors 0, 1 and 0.5, all exact."""

    name, signed = "decade_dependent", False
    width = 1

    def encode(self, x):
        return as_float64(x).abs()[:, None]

    def decode(self, encoding):
        v = encoding[:, 0].double()
        factor = [
            {0.0: 1.0, 1.0: 2.0, 0.5: 0.5}[error_of_decade(Decimal(repr(a)).adjusted())] if a else 1.0
            for a in v.tolist()
        ]
        return v * torch.tensor(factor, dtype=torch.float64)


class LeadingOne(NumberEncoding):
    """Signed; decodes x as 2x when its leading digit is 1 (relative error 1), exactly otherwise.
    A log-uniform decade has log10(2) = 30 % leading ones: median error 0, maximum 1."""

    name = "leading_one"
    width = 1

    def encode(self, x):
        return as_float64(x)[:, None]

    def decode(self, encoding):
        v = encoding[:, 0].double()
        return torch.tensor([2 * a if f"{abs(a):e}"[0] == "1" else a for a in v.tolist()], dtype=torch.float64)


class AbsoluteError(NumberEncoding):
    """Its head's output is the prediction p itself (also the ideal output for p) and its loss
    is |p - t| for each number."""

    name, sign = "absolute_error", 1.0
    width = 1

    def number_head(self, d_model):
        return AbsoluteErrorHead(self, d_model)


class AbsoluteErrorReversed(AbsoluteError):
    """The same with the loss -|p - t|."""

    name, sign = "absolute_error_reversed", -1.0


class AbsoluteErrorHead(NumberHead):
    def loss(self, out, target):
        return self.encoding.sign * (out.double() - target.double()).abs()

    def ideal_output(self, x, confidence=4.0):
        return as_float64(x)


@pytest.fixture
def handmade():
    """The hand-made encodings, registered for this test only."""
    with ExitStack() as stack:
        for cls in (DecadeDependent, LeadingOne, AbsoluteError, AbsoluteErrorReversed):
            stack.enter_context(encoders.registered(cls))
        yield


def test_d4_decades_of_a_decade_dependent_encoding(handmade):
    lo, hi = -4, 8
    df = D.d4_decades(names=["decade_dependent"], n_per_decade=80, lo=lo, hi=hi).set_index("decade")
    assert df.index.tolist() == list(range(lo, hi))
    for k in df.index:
        # a sample rounded up to 10^(k+1) belongs to the next decade: a small minority
        assert df.loc[k, "median_rel_error"] == error_of_decade(k), k
        assert df.loc[k, "max_rel_error"] in (error_of_decade(k), error_of_decade(k + 1)), k
        if error_of_decade(k) == error_of_decade(k + 1) == 0:
            assert df.loc[k, "exact"] == 1.0, k  # and |x| is the target: the sign is not lost
        elif error_of_decade(k) and error_of_decade(k + 1):
            assert df.loc[k, "exact"] == 0.0, k
    assert df.loc[-1, "exact"] > 0.9  # the last exact decade: only round-ups to 1 fail


def test_d4_decades_report_the_median_and_the_maximum(handmade):
    df = D.d4_decades(names=["leading_one"], n_per_decade=80, lo=-2, hi=3)
    assert (df["median_rel_error"] == 0.0).all() and (df["max_rel_error"] == 1.0).all()
    assert df["exact"].between(0.55, 0.85).all()  # 1 - log10(2) = 0.70 expected


def test_d4_decades_of_bittokens_are_exact_and_xval_loses_the_smallest():
    df = D.d4_decades(names=["bittokens", "xval"], n_per_decade=40, lo=-16, hi=-12).set_index(["encoding", "decade"])
    assert (df.loc["bittokens", "exact"] == 1.0).all() and (df.loc["bittokens", "max_rel_error"] == 0).all()
    # xVal maps |x| < 1e-14 to 0: relative error exactly 1 in decades -16 and -15
    assert df.loc[("xval", -16), "median_rel_error"] == 1.0 and df.loc[("xval", -15), "median_rel_error"] == 1.0
    assert df.loc[("xval", -16), "exact"] == 0.0


def test_d7_curves_and_continuity_of_an_absolute_error_loss(handmade):
    targets, points = (7.0, 0.0123), 41
    curves = D.d7_curves(names=["absolute_error", "absolute_error_reversed"], targets=targets, points=points)
    for (name, t), g in curves.groupby(["encoding", "target"]):
        assert len(g) == points and g["prediction"].min() == 0.0 and g["prediction"].max() == pytest.approx(2 * t)
        sign = -1.0 if name.endswith("reversed") else 1.0
        assert g["loss"].tolist() == pytest.approx((sign * (g["prediction"] - t).abs()).tolist(), abs=1e-15)
    continuity = D.d7_continuity(curves).set_index(["encoding", "target"])["spearman"]
    for t in targets:
        assert continuity[("absolute_error", t)] == pytest.approx(1.0, abs=1e-12)
        assert continuity[("absolute_error_reversed", t)] == pytest.approx(-1.0, abs=1e-12)


def _ranks(values):
    """Average ranks (1-based, ties share their mean rank), in plain Python."""
    order = sorted(range(len(values)), key=values.__getitem__)
    ranks = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return ranks


def _hamming(a: float, b: float) -> int:
    as_int = lambda x: struct.unpack(">Q", struct.pack(">d", x))[0]
    return bin(as_int(a) ^ as_int(b)).count("1")


def test_d7_of_bittokens_is_the_bce_of_the_differing_bits():
    """An ideal head with confidence c predicting p for target t: the mean BCE over the 64 value
    bits is (h softplus(c) + (64 - h) softplus(-c)) / 64, h the number of IEEE bits p and t differ
    in; D7's Spearman is that of |p - t| against it."""
    c, t = 4.0, 7.0
    curves = D.d7_curves(names=["bittokens"], targets=(t,), points=61, confidence=c)
    softplus = lambda x: math.log1p(math.exp(x))
    want = [(_hamming(p, t) * softplus(c) + (64 - _hamming(p, t)) * softplus(-c)) / 64 for p in curves["prediction"]]
    assert curves["loss"].tolist() == pytest.approx(want, rel=1e-5)
    # continuity of the exact losses (float32 would split their ties at random)
    distance = [abs(p - t) for p in curves["prediction"]]
    spearman = statistics.correlation(_ranks(distance), _ranks(want))
    assert D.d7_continuity(curves.assign(loss=want))["spearman"].iloc[0] == pytest.approx(spearman, abs=1e-12)
    assert D.d7_continuity(curves)["spearman"].iloc[0] == pytest.approx(spearman, abs=0.01)
    assert spearman < 0.9  # BCE over bits is not continuous in the value (section 5)
