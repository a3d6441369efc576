"""locality: Lemma 4.2 against exact phases, conditional entropy against hand-computable cases."""

import math

import numpy as np
import pytest

from workbench.measures import locality as L


def test_lemma_4_2_holds_for_exact_phases_and_fails_for_products():
    df = L.homomorphism_error(n=300, seed=1)
    assert df["add_exact_phases"].max() < 1e-9
    assert df["add_float32_encoding"].max() < 1e-5
    assert df["mul_exact_phases"].max() > 0.5


def test_entropy_bits_against_hand_values():
    labels = np.array([0, 1, 0, 1])
    assert L.entropy_bits(labels, np.array([0, 0, 0, 0])) == pytest.approx(1.0)
    assert L.entropy_bits(labels, np.array([0, 1, 0, 1])) == pytest.approx(0.0)
    assert L.entropy_bits(np.array([0, 1, 2, 3]), np.zeros(4, int)) == pytest.approx(2.0)


def test_quantized_phase_is_the_digit_for_P_10():
    v = np.array([0, 7, 1234, 999])
    assert L.quantized_phase(v, 1, 10).tolist() == [0, 7, 4, 9]  # units digit
    assert L.quantized_phase(v, 2, 10).tolist() == [0, 0, 3, 9]  # tens digit


def test_digit_of_a_sum_given_all_inputs_has_zero_entropy():
    best = L.window_entropy(digits=2, P=10)
    full = best[best["width"] == 2]
    assert np.allclose(full["entropy"], 0.0)
    one = best[(best["width"] == 1) & (best["op"] == "add") & (best["output_period"] == 2)]["entropy"].iloc[0]
    # tens digit of x + y given only the tens digits: the unknown carry, P(carry) = 45/100
    p = 0.45
    assert one == pytest.approx(-(p * math.log2(p) + (1 - p) * math.log2(1 - p)), abs=0.02)


def test_width_needed_units_digit_is_local():
    need = L.width_needed(L.window_entropy(digits=2, P=10)).set_index(["op", "output_period"])
    assert need.loc[("add", 1), "width_needed"] == 1 and need.loc[("mul", 1), "width_needed"] == 1
    assert need.loc[("mul", 2), "width_needed"] == 2


def test_features_and_targets():
    f, pos = L.features("bittokens", np.array([1.0]))
    assert f.shape == (1, 64, 1) and pos.tolist() == list(range(64))
    assert L.target_component("fone", np.array([1234.0]), 3).tolist() == [2]  # period 10^3 reads hundreds
    with pytest.raises(ValueError, match="unknown probe encoding"):
        L.features("base64", np.array([1.0]))


@pytest.mark.slow
def test_probe_learns_a_local_sum_digit():
    df = L.probe_windows(encodings=("fone",), ops=("add",), widths=(1,), steps=200, n_train=2000, n_test=500)
    assert df["accuracy"].iloc[0] > df["majority_baseline"].iloc[0] + 0.3
