"""desiderata: measurements against independent facts (IEEE bits, exact decimals, the paper's
7/8/3 example) and the scorecard rules on hand-made measurements."""

import math
import struct

import numpy as np
import pandas as pd
import pytest
import torch

from workbench import encoders
from workbench.measures import desiderata as D
from workbench.measures import scorecard as S


def test_sample_values_range_digits_and_seed():
    x = D.sample_values(2_000, seed=3)
    assert np.array_equal(x, D.sample_values(2_000, seed=3))
    assert (np.abs(x) >= 1e-14).all() and (np.abs(x) <= 1e15).all()
    assert (x < 0).any() and (x > 0).any()
    assert max(len(f"{abs(v):.14e}".split("e")[0].replace(".", "").rstrip("0")) for v in x) <= 15
    with pytest.raises(ValueError, match="positive integer"):
        D.sample_values(0)


def test_d2_trivially_decodable_encoding_scores_exact_and_no_collisions():
    df = D.d2_uniqueness(names=["bittokens", "single_digit"], n=500).set_index("encoding")
    assert (df["exact"] == 1.0).all() and (df["collisions"] == 0).all()
    assert (df["neighbour_collisions"] == 0).all()


def test_d2_xval_float32_scale_collides_for_15_digit_neighbours():
    # independent check: float32 has 24 significand bits, s(x) = log10|x|/6 + 2.5 cannot
    # separate x from x(1 + 1e-14)
    df = D.d2_uniqueness(names=["xval"], n=500)
    assert df["neighbour_collisions"].iloc[0] > 0.1


def test_d6_bittokens_survive_fp8_because_bits_are_plus_minus_one():
    df = D.d6_precision(names=["bittokens"], n=300)
    assert (df["exact"] == 1.0).all()
    bits = encoders.get("bittokens").encode(torch.tensor([math.pi], dtype=torch.float64))[0, :64]
    raw = format(struct.unpack(">Q", struct.pack(">d", math.pi))[0], "064b")
    assert "".join("1" if b > 0 else "0" for b in bits.tolist()) == raw


def test_d7_paper_example_bce_prefers_3_over_8_for_7():
    ex = D.d7_example(names=["bittokens"]).set_index("prediction")["loss"]
    assert ex[8.0] > ex[3.0] > ex[7.0]
    # bits that differ from 7 in float64 (value part): 8 differs in 4, 3 in 2 -> mean BCE gap
    diff = lambda a, b: bin(
        struct.unpack(">Q", struct.pack(">d", a))[0] ^ struct.unpack(">Q", struct.pack(">d", b))[0]
    ).count("1")
    assert (diff(7.0, 8.0), diff(7.0, 3.0)) == (4, 2)
    c = 4.0
    per_bit = math.log1p(math.exp(c)) - math.log1p(math.exp(-c))
    assert ex[8.0] - ex[3.0] == pytest.approx((4 - 2) * per_bit / 64, rel=1e-4)


def test_d5_bittokens_zero_pad_survives_rmsnorm_and_xval_does_not():
    df = D.d5_normalization(names=["bittokens", "xval"], n=200).set_index(["encoding", "norm"])
    assert df.loc[("bittokens", "rmsnorm"), "exact"] == 1.0
    assert df.loc[("bittokens", "layernorm"), "exact"] == 1.0
    # RMSNorm(s · e) = sign(s) e / rms(e): every positive value lands on one vector
    assert df.loc[("xval", "rmsnorm"), "injective"] < 0.05


def test_d8_noise_free_head_decodes_exactly_and_heavy_noise_does_not():
    df = D.d8_noise(names=["bittokens", "fone"], n=200, sigmas=[0.0, 2.0]).set_index(["encoding", "sigma"])
    assert df.loc[("bittokens", 0.0), "exact"] == 1.0 and df.loc[("fone", 0.0), "exact"] == 1.0
    assert df.loc[("bittokens", 2.0), "exact"] < 0.05


def test_d3_xval_is_ordered():
    df = D.d3_structure(names=["xval"], n_pairs=500, scales=[1.0])
    assert df["nn_is_numeric_neighbour"].iloc[0] > 0.99
    assert df["linear_readout_spearman"].iloc[0] > 0.99


def test_ideal_head_predicts_its_value():
    x = np.array([7.0, 0.0123, 123456.789])
    for name in ("bittokens", "fone", "xval"):
        head = encoders.get(name).number_head(256)
        pred = head.predict(head.ideal_output(x)).numpy()
        if name == "xval":
            assert np.allclose(pred, x, rtol=1e-5)
        else:
            assert np.array_equal(pred, x)


def _fake(encoding, **values):
    """Measurements in the shape measure_all returns, for one encoding."""
    frames = {
        "D1_corpus": pd.DataFrame(dict(encoding=[encoding], tokens_per_number=[values.get("d1", 1.0)])),
        "D2": pd.DataFrame(
            dict(encoding=[encoding], exact=[values.get("d2", 1.0)], collisions=[0], neighbour_collisions=[0.0])
        ),
        "D3": pd.DataFrame(dict(encoding=[encoding], spearman=[0.9], linear_readout_spearman=[1.0])),
        "D4": pd.DataFrame(dict(encoding=[encoding] * 2, exact=[1.0, values.get("d4", 1.0)])),
        "D5": pd.DataFrame(
            dict(encoding=[encoding] * 2, norm=["rmsnorm", "layernorm"], exact=[1.0, 1.0], injective=[1.0, 1.0])
        ),
        "D6": pd.DataFrame(
            dict(
                encoding=[encoding] * 3,
                dtype=["bfloat16", "float8_e4m3fn", "float8_e5m2"],
                exact=[1.0, values.get("fp8", 1.0), 1.0],
            )
        ),
        "D7": pd.DataFrame(dict(encoding=[encoding], spearman=[values.get("d7", 1.0)])),
        "D8": pd.DataFrame(dict(encoding=[encoding] * 2, sigma=[0.1, 0.3], exact=[1.0, 1.0])),
        "D9": pd.DataFrame(dict(encoding=[encoding] * 2, op=["add", "mul"], exact=[0.9, values.get("mul", 0.9)])),
    }
    return frames


def test_scorecard_thresholds():
    card = S.scorecard(_fake("fone", d1=1.2, d4=0.98, fp8=0.5, d7=0.6, mul=0.0)).set_index(["encoding", "desideratum"])
    v = card.loc["fone", "verdict"]
    assert v["D1"] == "trade-off"  # 1.05 < 1.2 <= 1.5
    assert v["D2"] == "pass" and v["D3"] == "pass" and v["D5"] == "pass" and v["D8"] == "pass"
    assert v["D4"] == "trade-off"  # one of two decades below 99 % exact
    assert v["D6"] == "trade-off"  # bf16 fine, fp8 not
    assert v["D7"] == "trade-off"
    assert v["D9"] == "trade-off"  # addition learned, multiplication not
    assert card.loc[("fone", "D9"), "paper"] == "fail"
    assert (card.loc["xval", "verdict"] == "n/a").all()  # nothing measured for it here
    bad = S.scorecard(_fake("fone", d1=2.0, d2=0.5, d7=0.1)).set_index(["encoding", "desideratum"])
    assert bad.loc[("fone", "D1"), "verdict"] == "fail" and bad.loc[("fone", "D2"), "verdict"] == "fail"
    assert bad.loc[("fone", "D7"), "verdict"] == "fail"


def test_measure_all_refuses_bad_sizes():
    with pytest.raises(ValueError, match="n_values"):
        S.measure_all(n_values=5)
    with pytest.raises(ValueError, match="d9_steps"):
        S.measure_all(d9_steps=0)
