"""The five encodings against independent oracles: struct for IEEE 754 bits, decimal for FoNE
phases and the base-10 layout, the paper's formulas for xVal, numbers.render for digit tokens."""

import math
import random
import re
import struct
from decimal import Decimal, localcontext
from fractions import Fraction

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from workbench import encoders
from workbench.encoders import fone
from workbench.encoders.bittokens import COMBINE, HEADS, float64_bits
from workbench.encoders.fone import EXPONENTS, digits_at
from workbench.numbers import render

MAX, MIN_NORMAL, MIN_SUBNORMAL = 1.7976931348623157e308, 2.2250738585072014e-308, 5e-324
SPECIALS = [
    0.0,
    -0.0,
    math.inf,
    -math.inf,
    math.nan,
    MIN_SUBNORMAL,
    -MIN_SUBNORMAL,
    MIN_NORMAL,
    2.225073858507201e-308,
    -MIN_NORMAL,
    MAX,
    -MAX,
    1.0,
    -1.0,
    0.1,
    3.0,
    2.0**-1074 * 12345,
]
PROTOTYPES = torch.tensor([[math.cos(2 * math.pi * j / 10), math.sin(2 * math.pi * j / 10)] for j in range(10)])


def pattern_of(x: float) -> int:
    (n,) = struct.unpack(">Q", struct.pack(">d", x))
    return n


def struct_bits(pattern: int) -> list[float]:
    """±1 bits of a 64-bit pattern, MSB first: the oracle BitTokens must reproduce."""
    return [1.0 if (pattern >> (63 - i)) & 1 else -1.0 for i in range(64)]


def random_patterns(k: int, seed: int) -> list[int]:
    """Uniform random 64-bit patterns (NaNs with payloads included) plus every special value."""
    rng = random.Random(seed)
    return [pattern_of(v) for v in SPECIALS] + [rng.getrandbits(64) for _ in range(k)]


def as_tensor(patterns: list[int]) -> torch.Tensor:
    """float64 tensor holding exactly these bit patterns (no float conversion on the way)."""
    return torch.from_numpy(np.array(patterns, dtype=np.uint64).view(np.float64).copy())


def reciprocal_oracle(x: float) -> float:
    if x == 0:
        return math.copysign(math.inf, x)
    return 1.0 / x  # IEEE 754 division: correctly rounded, 1/±inf = ±0


def is_nan_pattern(pattern: int) -> bool:
    return (pattern >> 52) & 0x7FF == 0x7FF and pattern & ((1 << 52) - 1) != 0


def test_names_and_defaults():
    assert encoders.names()[:5] == ["bittokens", "fone", "xval", "single_digit", "triple_digit"]
    for name in encoders.names():
        codec = encoders.get(name)
        head = codec.number_head(64 if name == "xval" else 256)
        assert codec.name == name and (head is None) == (not codec.single_token)
        assert head is None or (head.encoding is codec and head.d_model in (64, 256))
    assert encoders.get("bittokens").difficulty_base == 2
    assert {encoders.get(n).difficulty_base for n in ("fone", "xval", "single_digit", "triple_digit")} == {10}
    with pytest.raises(ValueError, match="unknown encoding"):
        encoders.get("nope")
    with pytest.raises(ValueError, match="no option"):
        encoders.get("fone", combine="sum")


# -- BitTokens -------------------------------------------------------------------------------
def test_bittokens_bits_of_x_and_reciprocal_match_struct():
    patterns = random_patterns(3000, seed=0)
    x = as_tensor(patterns)
    enc = encoders.get("bittokens").encode(x)
    assert enc.shape == (len(patterns), 128) and enc.dtype == torch.float32
    for row, pattern in zip(enc.tolist(), patterns):
        assert row[:64] == struct_bits(pattern)
        (value,) = struct.unpack(">d", struct.pack(">Q", pattern))
        if math.isnan(value):  # 1/NaN is a NaN (its payload is the hardware's business)
            recip = int("".join("1" if b > 0 else "0" for b in row[64:]), 2)
            assert is_nan_pattern(recip)
        else:
            assert row[64:] == struct_bits(pattern_of(reciprocal_oracle(value)))


def test_bittokens_decode_is_bit_exact_including_nan_payloads():
    patterns = random_patterns(20000, seed=1)
    assert sum(is_nan_pattern(p) for p in patterns) > 5  # payload NaNs are really in there
    for reciprocal in (True, False):
        codec = encoders.get("bittokens", reciprocal=reciprocal)
        back = codec.decode(codec.encode(as_tensor(patterns)))
        assert back.numpy().view(np.uint64).tolist() == patterns


def test_bittokens_without_reciprocal_is_the_first_half():
    x = as_tensor(random_patterns(200, seed=2))
    full, half = encoders.get("bittokens"), encoders.get("bittokens", reciprocal=False)
    assert half.width == 64 and full.width == 128
    assert torch.equal(half.encode(x), full.encode(x)[:, :64])


def test_bittokens_predict_thresholds_logits_at_zero():
    head = encoders.get("bittokens").number_head(256)
    patterns = random_patterns(300, seed=3)
    logits = float64_bits(as_tensor(patterns)) * torch.rand(len(patterns), 64).add(0.01)
    assert head.predict(logits).numpy().view(np.uint64).tolist() == patterns


def test_bittokens_loss_is_zero_for_the_right_logits_and_large_for_wrong_ones():
    codec = encoders.get("bittokens")
    head = codec.number_head(256)
    x = as_tensor(random_patterns(100, seed=4))
    right = 10 * codec.encode(x)[:, :64]
    assert head.loss(right, x).shape == (len(x),)  # one loss per number
    assert head.loss(right, x).max() < 1e-4
    assert head.loss(-right, x).min() > 9
    one_bit_wrong = right.clone()
    one_bit_wrong[:, 63] *= -1
    assert head.loss(one_bit_wrong, x).tolist() == pytest.approx([10 / 64] * len(x), abs=1e-3)  # BCE(10) / 64 bits


def decimal_oracle_bits(x: float) -> list[float]:
    """The BCD base-10 layout written with decimal: flags, 3 exponent digits, 17 significand digits."""
    flags = [math.copysign(1, x) < 0, math.isinf(x), math.isnan(x)]
    exponent, digits = 0, "0" * 17
    if math.isfinite(x) and x != 0:
        d = abs(Decimal(x))  # the exact binary value ...
        with localcontext() as ctx:
            ctx.prec = 17
            shortest = Decimal(repr(abs(x)))  # ... and its shortest decimal, which must round to it
            assert float(shortest) == abs(x) and float(+d) == abs(x)
        exponent = shortest.adjusted()
        digits = "".join(map(str, shortest.as_tuple().digits)).ljust(17, "0")
    codes = [int(c) for c in f"{abs(exponent):03d}" + digits]
    bits = [b for c in codes for b in (c >> 3 & 1, c >> 2 & 1, c >> 1 & 1, c & 1)]
    return [1.0 if b else -1.0 for b in flags + bits + [exponent < 0]]


def base10_values(seed: int) -> list[float]:
    """Specials, decimal-looking numbers over float64's whole exponent range, random bit patterns."""
    rng = random.Random(seed)
    xs = SPECIALS + [float(f"{rng.randint(1, 10**15)}e{rng.randint(-330, 300)}") for _ in range(300)]
    xs += [1e22, 1e23, 9.999999999999999e22, 0.30000000000000004, 123456789012345680.0, 1e-323, 1e308]
    return xs + [struct.unpack(">d", struct.pack(">Q", p))[0] for p in random_patterns(300, seed=seed + 1)]


def same_float(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or struct.pack(">d", a) == struct.pack(">d", b)


def test_bittokens_base10_bcd_layout_and_round_trip():
    """The earlier base-10 layout, now one option away (base10_layout="bcd")."""
    codec = encoders.get("bittokens", base=10, base10_layout="bcd")
    assert codec.bits == 84 and codec.width == 168
    xs = base10_values(5)
    enc = codec.encode(torch.tensor(xs, dtype=torch.float64))
    for row, x in zip(enc[:, :84].tolist(), xs):
        assert row == decimal_oracle_bits(x), x
    assert enc[0, 84:].tolist() == decimal_oracle_bits(math.inf)  # 1/0
    back = codec.decode(enc).tolist()
    assert all(same_float(a, b) for a, b in zip(back, xs))
    target = torch.tensor(xs[:50], dtype=torch.float64)
    right = 10 * codec.encode(target)[:, :84]
    head = codec.number_head(256)
    assert head.loss(right, target).max() < 1e-4
    assert head.predict(right).tolist()[:4] == [0.0, -0.0, math.inf, -math.inf]
    assert math.copysign(1, head.predict(right)[1].item()) < 0


def onehot_oracle_digits(x: float) -> list[int]:
    """The authors' 21 digits written with decimal: sign (1 = non-negative), E + 500, 17 digits of
    the shortest decimal; our reserved exponent 999 for inf (digits 0) and NaN (digits 1 0…0)."""
    sign = 0 if math.copysign(1, x) < 0 else 1
    if math.isinf(x) or math.isnan(x):
        return [sign, 9, 9, 9] + [int(math.isnan(x))] + [0] * 16
    if x == 0:
        return [sign, 5, 0, 0] + [0] * 17
    shortest = Decimal(repr(abs(x)))
    digits = "".join(map(str, shortest.as_tuple().digits)).rstrip("0").ljust(17, "0")
    return [sign] + [int(c) for c in f"{shortest.adjusted() + 500:03d}" + digits]


def onehot_rows(digits: list[int]) -> list[float]:
    return [1.0 if c == d else -1.0 for d in digits for c in range(10)]


def test_bittokens_base10_default_is_the_authors_onehot_layout():
    codec = encoders.get("bittokens", base=10)
    assert codec.layout == "onehot" and codec.bits == 210 and codec.width == 420
    assert codec.difficulty_base == 10 and encoders.get("bittokens").difficulty_base == 2
    xs = base10_values(11)
    enc = codec.encode(torch.tensor(xs, dtype=torch.float64))
    assert enc.shape == (len(xs), 420) and enc.dtype == torch.float32
    for row, x in zip(enc.tolist(), xs):
        assert row[:210] == onehot_rows(onehot_oracle_digits(x)), x
        if not math.isnan(x):
            assert row[210:] == onehot_rows(onehot_oracle_digits(reciprocal_oracle(x))), x
    # hand-written rows: 1.5, -0.0, 5e-324 (the smallest subnormal), inf
    assert onehot_oracle_digits(1.5) == [1, 5, 0, 0, 1, 5] + [0] * 15
    assert onehot_oracle_digits(-0.0) == [0, 5, 0, 0] + [0] * 17
    assert onehot_oracle_digits(5e-324) == [1, 1, 7, 6, 5] + [0] * 16
    assert onehot_oracle_digits(-250.0) == [0, 5, 0, 2, 2, 5] + [0] * 15
    assert enc[0, 210:].tolist() == onehot_rows([1, 9, 9, 9] + [0] * 17)  # 1/0 = inf


def test_bittokens_base10_zero_pad_scale_is_the_authors_by_default():
    """zero_pad at base 10: the authors scale by sqrt(d / 210) even with the reciprocal (420 dims
    of +-1), so the token's RMS is sqrt(2); base10_pad_scale="width" gives unit RMS, like base 2
    (where the authors also divide by the whole width). Hand case d = 840: scale 2 against sqrt(2)."""
    x = torch.tensor([1.5, -250.0], dtype=torch.float64)
    num = torch.randn(2, 840)
    cases = {  # options: (expected scale, expected RMS of the token)
        (("base", 10),): (2.0, 2**0.5),
        (("base", 10), ("base10_pad_scale", "width")): (2**0.5, 1.0),
        (("base", 10), ("reciprocal", False)): (2.0, 1.0),
        (("base", 2),): ((840 / 128) ** 0.5, 1.0),
        (("base", 2), ("base10_pad_scale", "value")): ((840 / 128) ** 0.5, 1.0),
    }
    for opts, (scale, rms) in cases.items():
        codec = encoders.get("bittokens", combine="zero_pad", **dict(opts))
        token = codec.number_head(840).embed(num, x)
        assert torch.equal(token[:, codec.width :], torch.zeros(2, 840 - codec.width)), opts
        assert torch.allclose(token[:, : codec.width], scale * codec.encode(x)), opts
        assert token.pow(2).mean(1).sqrt().tolist() == pytest.approx([rms] * 2), opts
    with pytest.raises(ValueError, match="base10_pad_scale"):
        encoders.get("bittokens", base10_pad_scale="rms")


def test_bittokens_onehot_round_trips_every_finite_float64_exactly():
    codec = encoders.get("bittokens", base=10)
    rng = random.Random(12)
    patterns = [rng.getrandbits(64) for _ in range(20000)]
    xs = [v for v in as_tensor(patterns).tolist() if math.isfinite(v)] + base10_values(13)
    back = codec.decode(codec.encode(torch.tensor(xs, dtype=torch.float64))).tolist()
    assert all(same_float(a, b) for a, b in zip(back, xs))  # bit for bit; NaN is NaN
    assert len(xs) > 19000


def test_bittokens_onehot_head_sums_digit_cross_entropies_and_decodes_by_argmax():
    codec = encoders.get("bittokens", base=10)
    head = codec.number_head(512)
    assert head.output.in_features == 512 and head.output.out_features == 210
    x = torch.tensor([1.5, -250.0, 0.0, math.inf], dtype=torch.float64)
    right = 3 * codec.encode(x)[:, :210]  # +3 on each right digit, -3 on the nine others
    per_digit = -math.log(math.exp(3) / (math.exp(3) + 9 * math.exp(-3)))  # hand-computed CE
    assert head.loss(right.double(), x).tolist() == pytest.approx([21 * per_digit] * 4, rel=1e-12)  # summed
    uniform = torch.zeros(4, 210)
    assert head.loss(uniform, x).tolist() == pytest.approx([21 * math.log(10)] * 4, rel=1e-6)
    assert head.predict(right).tolist() == [1.5, -250.0, 0.0, math.inf]
    assert head.predict(uniform).tolist() == [-0.0] * 4  # argmax 0 everywhere: sign 0, digits 0
    # a digit wrong in the last place: the summed loss grows, the prediction is another number
    wrong = right.clone()
    wrong[0, 200:210] = torch.tensor([-3.0] * 9 + [3.0])  # d17 = 9
    assert head.predict(wrong)[0].item() == 1.5000000000000009


@pytest.mark.parametrize("combine", COMBINE)
@pytest.mark.parametrize("head", HEADS)
def test_bittokens_variants_run_forward_and_backward(combine, head):
    d = 160
    module = encoders.get("bittokens", combine=combine, head=head).number_head(d)
    x = torch.tensor([1.5, -2.0, 1e-10, 3e14, 0.0], dtype=torch.float64)
    num = torch.randn(5, d, requires_grad=True)
    embedded = module.embed(num, x)
    assert embedded.shape == (5, d)
    hidden = torch.tanh(embedded @ torch.randn(d, d) / d**0.5)
    logits = module(hidden)
    assert logits.shape == (5, 64)
    loss = module.loss(logits, x).mean()
    assert torch.isfinite(loss)
    if combine == "zero_pad" and head == "none":  # nothing to learn in the encoding itself
        assert not list(module.parameters()) and not loss.requires_grad
        return
    loss.backward()
    for name, p in module.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all(), name
    uses_num = combine not in ("zero_pad", "weighted")
    assert (num.grad is not None and num.grad.abs().sum() > 0) == uses_num


def test_bittokens_combinations_follow_their_definitions():
    d, x = 256, torch.tensor([3.0, -7.25], dtype=torch.float64)
    num = torch.randn(2, d)
    enc = encoders.get("bittokens").encode(x)
    padded = F.pad(enc, (0, d - 128))

    def embed(combine, **options):
        return encoders.get("bittokens", combine=combine, **options).number_head(d).embed(num, x)

    assert torch.equal(embed("sum"), num + padded)
    assert torch.equal(embed("product"), num * F.pad(enc, (0, d - 128), value=1.0))
    concat = embed("concat", concat_rescale=False)  # the earlier concat: e's other dims as they are
    assert torch.equal(concat[:, :128], enc) and torch.equal(concat[:, 128:], num[:, 128:])
    zero_pad = embed("zero_pad")
    assert torch.equal(zero_pad, padded * math.sqrt(2))  # sqrt(256 / 128)
    assert zero_pad.pow(2).mean().item() == pytest.approx(1.0)  # unit RMS, as a text embedding
    weighted = encoders.get("bittokens", combine="weighted").number_head(d)
    assert torch.allclose(weighted.embed(num, x), enc @ weighted.combine.weight.T)
    none = encoders.get("bittokens", head="none").number_head(d)
    assert torch.equal(none(num), num[:, :64]) and not list(none.parameters())


def test_bittokens_concat_rescales_the_kept_embedding_to_unit_rms_by_default():
    """The authors' concat: [bits, e[128:] / RMS(e[128:])]; hand-made e with a known RMS."""
    d, x = 192, torch.tensor([3.0, -7.25], dtype=torch.float64)
    num = torch.zeros(2, d)
    num[0, 128:] = 2.0  # RMS 2
    num[1, 128:160], num[1, 160:] = 3.0, -4.0  # RMS sqrt((9 + 16) / 2) = sqrt(12.5)
    num[:, :128] = 99.0  # replaced by the bits either way
    codec = encoders.get("bittokens", combine="concat")
    assert codec.concat_rescale is True and encoders.options("bittokens")["concat_rescale"] is True
    out = codec.number_head(d).embed(num, x)
    assert torch.equal(out[:, :128], codec.encode(x))
    assert out[0, 128:].tolist() == [1.0] * 64
    assert out[1, 128:].tolist() == pytest.approx([3 / 12.5**0.5] * 32 + [-4 / 12.5**0.5] * 32, rel=1e-6)
    assert out.pow(2).mean(1).tolist() == pytest.approx([1.0, 1.0], rel=1e-6)  # the whole token
    num[1, 128:] = 0.0  # a zero part stays zero (no 0 / 0)
    assert torch.equal(codec.number_head(d).embed(num, x)[1, 128:], torch.zeros(64))


def test_bittokens_mlp_head_is_the_authors_d_to_half_d_by_default():
    """Table 13's MLP: Linear(d -> d/2) -> ReLU -> Linear(d/2 -> 64); mlp_hidden=1.0 is d -> d."""
    assert encoders.options("bittokens")["mlp_hidden"] == 0.5
    for d, options, hidden in [
        (256, {}, 128),
        (257, {}, 128),
        (256, {"mlp_hidden": 1.0}, 256),
        (256, {"mlp_hidden": 1}, 256),
        (200, {"mlp_hidden": 0.25}, 50),
    ]:
        mlp = encoders.get("bittokens", head="mlp", **options).number_head(d).output
        assert [type(m) for m in mlp] == [torch.nn.Linear, torch.nn.ReLU, torch.nn.Linear]
        assert (mlp[0].in_features, mlp[0].out_features, mlp[2].in_features, mlp[2].out_features) == (
            d,
            hidden,
            hidden,
            64,
        )
    onehot = encoders.get("bittokens", head="mlp", base=10).number_head(512).output
    assert (onehot[0].out_features, onehot[2].out_features) == (256, 210)
    for bad in (0, -0.5, True, "0.5", math.inf, math.nan, 16.5, 1e9):  # 1e9: a crafted saved folder's
        with pytest.raises(ValueError, match="mlp_hidden"):
            encoders.get("bittokens", mlp_hidden=bad)
    assert encoders.get("bittokens", mlp_hidden=16).mlp_hidden == 16
    with pytest.raises(ValueError, match="hidden unit"):
        encoders.get("bittokens", head="mlp", mlp_hidden=0.001).number_head(256)


def test_bittokens_default_combine_is_sum_and_zero_pad_is_one_option_away():
    d, x = 256, torch.tensor([0.1, -3e300], dtype=torch.float64)
    num = torch.randn(2, d)
    default = encoders.get("bittokens")
    assert default.combine == "sum" and encoders.options("bittokens")["combine"] == "sum"
    bits = torch.tensor([struct_bits(pattern_of(v)) + struct_bits(pattern_of(1 / v)) for v in x.tolist()])
    assert torch.equal(default.number_head(d).embed(num, x), num + F.pad(bits, (0, d - 128)))
    zero_pad = encoders.get("bittokens", combine="zero_pad").number_head(d).embed(num, x)
    assert torch.equal(zero_pad, F.pad(bits, (0, d - 128)) * math.sqrt(2))  # no [NUM] in it


@pytest.mark.parametrize("combine", COMBINE)
@pytest.mark.parametrize(
    "options",
    [{}, {"concat_rescale": False}, {"reciprocal": False}, {"base": 10}],
    ids=["default", "no-rescale", "no-reciprocal", "base10"],
)
def test_bittokens_embedding_map_reproduces_embed(combine, options):
    """D5's map: embed(e, x) = A @ encode(x) + c for every combination (all are affine in enc)."""
    d = 512
    codec = encoders.get("bittokens", combine=combine, **options)
    head = codec.number_head(d)
    e = torch.randn(d, generator=torch.Generator().manual_seed(1))
    x = torch.tensor([1.5, -2.0, 1e-10, 3e14, 0.0, -0.0, math.inf, 5e-324], dtype=torch.float64)
    A, c = head.embedding_map(e)
    assert A.shape == (d, codec.width) and c.shape == (d,) and A.dtype == c.dtype == torch.float64
    embedded = head.embed(e.expand(len(x), -1), x).double()
    assert torch.allclose(embedded, codec.encode(x).double() @ A.T + c, atol=1e-5)
    if combine == "concat" and options.get("concat_rescale", True):  # hand-computed constant part
        w = codec.width
        assert torch.allclose(c[w:], e[w:].double() / e[w:].double().pow(2).mean().sqrt()) and not c[:w].any()


def test_bittokens_rejects_bad_options_and_input():
    with pytest.raises(ValueError, match="combine"):
        encoders.get("bittokens", combine="nope")
    with pytest.raises(ValueError, match="head"):
        encoders.get("bittokens", head="nope")
    with pytest.raises(ValueError, match="base"):
        encoders.get("bittokens", base=16)
    with pytest.raises(ValueError, match="d_model"):
        encoders.get("bittokens").number_head(64)
    codec = encoders.get("bittokens")
    with pytest.raises(ValueError, match="shape"):
        codec.decode(torch.ones(3, 100))


# -- FoNE ------------------------------------------------------------------------------------
def decimal_phase(x: float, i: int) -> Decimal:
    """frac(|x| / 10^i) of the shortest decimal of x, in exact decimal arithmetic."""
    with localcontext() as ctx:
        ctx.prec = 400
        period = Decimal(10) ** i
        return (abs(Decimal(repr(x))) % period) / period


def test_fone_phases_match_decimal_oracle():
    rng = random.Random(7)
    xs = [0.1, 123456789012345.0, 3.25e-14, 0.30000000000000004, 98765.4321, 1e16, 7.0, 0.0]
    xs += [float(f"{rng.randint(1, 10 ** rng.randint(1, 15))}e{rng.randint(-20, 5)}") for _ in range(60)]
    # beyond what encode takes, the module's phases still wrap: |x| mod 10^17, digits below 10^-32 lost
    beyond = [1e-40, 1.5e17, 1.2345678901234567e20, MIN_SUBNORMAL, MAX, -2.5]
    for x in beyond:
        for j, i in enumerate(EXPONENTS.tolist()):
            assert fone.phases(torch.tensor([x], dtype=torch.float64))[0, j] == pytest.approx(
                float(decimal_phase(x, i)), abs=1e-15
            ), (x, i)
    codec = encoders.get("fone")
    enc = codec.encode(torch.tensor(xs, dtype=torch.float64))
    assert enc.shape == (len(xs), 98) and enc.dtype == torch.float64
    enc = enc.reshape(len(xs), 49, 2)
    for row, x in zip(enc, xs):
        if x == 0:  # the authors' 0: no features (test_fone_zero_gets_no_features_by_default)
            assert not row.any()
            continue
        for j, i in enumerate(EXPONENTS.tolist()):
            angle = 2 * math.pi * float(decimal_phase(x, i))
            assert row[j, 0].item() == pytest.approx(math.cos(angle), abs=1e-12), (x, i)
            assert row[j, 1].item() == pytest.approx(math.sin(angle), abs=1e-12), (x, i)
    # float64 x / T would give noise; the exact phases of 0.1 below its only digit are all 0
    assert torch.equal(enc[0, :30, 0], torch.ones(30, dtype=torch.float64))
    assert (0.1 / 1e-16) % 1 == 0.125  # (what the naive float64 x / T gets at T = 1e-16)


def test_fone_round_trip_up_to_1e15_with_15_digits():
    rng = random.Random(8)
    xs = [float(f"{rng.randint(1, 10 ** rng.randint(1, 15))}e{rng.randint(-14, 0)}") for _ in range(3000)]
    xs = [x for x in xs if x < 1e15] + [0.0, 5.0, 1e-14, 999999999999999.0, 0.123456789012345]
    x = torch.tensor(xs, dtype=torch.float64)
    codec = encoders.get("fone")
    assert codec.decode(codec.encode(x)).tolist() == xs
    assert not codec.signed  # FoNE encodes |x|; the sign is text, and a negative x is refused
    with pytest.raises(ValueError, match=r"fone cannot encode -[0-9.e-]+: it encodes \|x\|"):
        codec.encode(-x)


def test_fone_refuses_what_its_periods_cannot_hold():
    """Bug: 1e20 encoded as 0, 1.5e17 as 5e16 (wrapped at 1e17), 1e-33 as 0, -2.5 as 2.5, all
    without an error, and inf or NaN raised naming neither the encoding nor the value."""
    codec = encoders.get("fone")
    for bad, why in [
        (1.5e17, "wrap around"),
        (1e17, "wrap around"),
        (1e20, "wrap around"),
        (MAX, "wrap around"),
        (1e-33, "digits below"),
        (1e-40, "digits below"),
        (1.5e-32, "digits below"),
        (1.2345678901234567e-20, "digits below"),
        (MIN_SUBNORMAL, "digits below"),
        (-2.5, "encodes |x|"),
        (-1e-40, "encodes |x|"),
        (math.inf, "finite"),
        (math.nan, "finite"),
    ]:
        with pytest.raises(ValueError, match=rf"^fone cannot encode {re.escape(repr(bad))}: .*{re.escape(why)}"):
            codec.encode(torch.tensor([1.0, bad], dtype=torch.float64))
        if why != "encodes |x|":  # the heads' targets: |x|, in the same range
            with pytest.raises(ValueError, match=re.escape(repr(abs(bad)))):
                codec.number_head(128).loss_target([abs(bad)])
    edge = [fone.LARGEST, 1e16, 1e-32, 1.2345e-28, 1.2345678901234567e-16, 0.0, -0.0]
    assert codec.decode(codec.encode(torch.tensor(edge, dtype=torch.float64))).tolist() == edge
    with pytest.raises(ValueError, match="shape"):
        codec.decode(torch.zeros(2, 97))


def test_fone_decode_rounds_to_the_finest_place_against_decimal_oracle():
    """decode of any phases: |x| mod 10^17 to the nearest 10^-32, half to even (the finest phase
    holds what is below), and never beyond the largest float64 the periods hold."""
    rng = random.Random(4)
    x = [struct.unpack("<d", struct.pack("<Q", rng.getrandbits(64)))[0] for _ in range(3000)]
    x = [v for v in x if math.isfinite(v)] + [10 ** rng.uniform(-34, -26) for _ in range(1000)]
    x += [99999999999999999.5e0, 1e17 - 8, 1e17 - 16]
    codec = encoders.get("fone")
    angle = torch.from_numpy(2 * math.pi * fone.phases(torch.tensor(x, dtype=torch.float64)))
    enc = torch.stack([torch.cos(angle), torch.sin(angle)], -1).reshape(len(x), -1)  # what encode gave before
    back = codec.decode(enc).tolist()
    with localcontext() as ctx:
        ctx.prec = 400
        want = [
            min(
                fone.LARGEST,
                float((abs(Decimal(repr(v))) % Decimal(10) ** 17).quantize(Decimal(10) ** -32, "ROUND_HALF_EVEN")),
            )
            for v in x
        ]
    assert back == want
    codec.encode(
        torch.tensor(back, dtype=torch.float64)
    )  # whatever decode gives, encode takes (a generated number fed back)


def test_fone_decode_survives_small_noise():
    """With zero_features=True 0 is phase 0 and as robust as any number; the authors' all-zero 0
    has no phase at all, so noise alone decides its digits."""
    x = torch.tensor([0.0, 1234.5, 7.25, 999999999999999.0, 1e-14], dtype=torch.float64)
    noise = 1e-4 * torch.randn(5, 98, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    phase_zero = encoders.get("fone", zero_features=True)
    assert phase_zero.decode(phase_zero.encode(x) + noise).tolist() == x.tolist()
    default = encoders.get("fone")
    assert default.decode(default.encode(x) + noise).tolist()[1:] == x.tolist()[1:]
    assert default.decode(default.encode(x)).tolist() == x.tolist()


def test_fone_zero_gets_no_features_by_default():
    x = torch.tensor([0.0, -0.0, 3.0, 1e-32], dtype=torch.float64)
    assert encoders.options("fone")["zero_features"] is False
    default, phase_zero = encoders.get("fone"), encoders.get("fone", zero_features=True)
    enc = default.encode(x)
    assert not enc[:2].any()  # 0 and -0: all-zero, the token is the [NUM] embedding alone
    assert enc[3].any() and enc[3, 0] == pytest.approx(math.cos(0.2 * math.pi))  # 1e-32 is not 0: it has a phase
    assert phase_zero.encode(x)[:2].tolist() == [[1.0, 0.0] * 49] * 2  # the earlier 0: phase 0
    assert torch.equal(phase_zero.encode(x)[2:], enc[2:])
    assert torch.atan2(torch.tensor(0.0), torch.tensor(0.0)).item() == 0.0  # what decode reads
    for codec in (default, phase_zero):
        assert codec.decode(codec.encode(x)).tolist() == [0.0, 0.0, 3.0, 1e-32]
    num = torch.randn(2, 128)
    head = default.number_head(128)
    assert torch.equal(head.embed(num, x[:2]), num)
    # the head's target for 0 is digit 0 at every place under both choices
    for codec in (default, phase_zero):
        assert codec.number_head(128).target_vector([0.0]).tolist() == [[1.0, 0.0] * 49]
    with pytest.raises(ValueError, match="zero_features"):
        encoders.get("fone", zero_features=1)


def test_fone_head_loss_and_predict_for_the_right_digit_prototypes():
    head = encoders.get("fone", head="linear").number_head(128)  # the earlier head, by option
    x = torch.tensor([1234.5, -0.007, 98765432109876.5], dtype=torch.float64)
    digits = torch.from_numpy(digits_at(x))
    assert digits[0, 31:36].tolist() == [5, 4, 3, 2, 1]  # places 10^-1 … 10^3 of 1234.5
    for k, x_k in enumerate(x.tolist()):
        with torch.no_grad():  # a head whose 2-D slices are 60 x the prototypes of the digits
            head.output.weight.zero_()
            head.output.bias.copy_(60 * PROTOTYPES[digits[k]].reshape(-1))
        out = head(torch.randn(4, 128))
        assert out.shape == (4, 49, 10)
        target = torch.full((4,), x_k, dtype=torch.float64)
        assert head.loss(out, target).max() < 1e-3
        assert head.predict(out).tolist() == [abs(x_k)] * 4
    wrong = head(torch.zeros(1, 128))
    assert head.loss(wrong, torch.tensor([1.0])).item() > 5


def test_fone_default_head_is_a_layernorm_read_directly():
    """Section 4 / the authors: no linear map, LayerNorm(h)[:98] are the (cos, sin) pairs."""
    assert encoders.options("fone")["head"] == "layernorm"
    head = encoders.get("fone").number_head(128)
    assert isinstance(head.norm, torch.nn.LayerNorm) and head.norm.eps == 1e-5
    assert not hasattr(head, "output") and all(p.ndim == 1 for p in head.parameters())
    hidden = torch.randn(3, 128, generator=torch.Generator().manual_seed(2))
    normed = (hidden - hidden.mean(1, keepdim=True)) / (hidden.var(1, unbiased=False, keepdim=True) + 1e-5).sqrt()
    pairs = normed[:, :98].reshape(3, 49, 2)
    want = pairs[..., :1] * PROTOTYPES[:, 0] + pairs[..., 1:] * PROTOTYPES[:, 1]  # dot products
    assert torch.allclose(head(hidden), want, atol=1e-5)
    x = torch.tensor([1234.5, 0.0, 98765432109876.5], dtype=torch.float64)
    digits = torch.from_numpy(digits_at(x))
    for k, x_k in enumerate(x.tolist()):
        with torch.no_grad():  # weight 0, bias = 60 x the digit prototypes: output independent of h
            head.norm.weight.zero_()
            head.norm.bias.copy_(F.pad(60 * PROTOTYPES[digits[k]].reshape(-1), (0, 30)))
        out = head(torch.randn(4, 128))
        target = torch.full((4,), x_k, dtype=torch.float64)
        assert head.loss(out, target).max() < 1e-3 and head.predict(out).tolist() == [x_k] * 4
    with pytest.raises(ValueError, match="head"):
        encoders.get("fone", head="mlp")


def test_fone_float64_digit_labels_hand_case_and_their_loss_floor():
    """digit_labels="float64" (the authors'): round(|x| * 1e32) // 10^k % 10 in float64. Hand case
    1: place 10^0 reads 1, but place 10^-7 reads 9, because float64's 1e25 is
    10000000000000000905969664 and 1e32 // 1e25 = 9999999 (exact fractions of the two floats).
    The exact labels (default) are the digits: a head that outputs them confidently has a loss
    near 0 under the exact labels but not under the float64 ones, whose wrong places it cannot fit."""
    from workbench.encoders.fone import float64_digits

    assert Fraction(int(1e32)) // Fraction(int(1e25)) == 9_999_999 and int(1e25) == 10000000000000000905969664
    x = torch.tensor([1.0, 0.0, 0.5], dtype=torch.float64)
    labels = float64_digits(x)
    place = {p: 32 + p for p in range(-32, 17)}  # column of place 10^p
    assert labels[0, place[0]] == 1 and labels[0, place[-7]] == 9 and labels[0, place[1] :].sum() == 0
    assert labels[1].tolist() == [0] * 49 and labels[2, place[-1]] == 5
    assert (labels[[0, 2]] != digits_at(x)[[0, 2]]).any(1).all()
    exact, authors = encoders.get("fone"), encoders.get("fone", digit_labels="float64")
    assert encoders.options("fone")["digit_labels"] == "exact" and exact.digit_labels == "exact"
    head = exact.number_head(128)
    logits = head.output_of(400 * head.target_vector(x))  # confident exact digits
    assert head.loss(logits, x).max() < 1e-6
    floor = authors.number_head(128).loss(logits, x)
    assert (floor[[0, 2]] > 1).all() and floor[1] < 1e-6
    with pytest.raises(ValueError, match="digit_labels"):
        encoders.get("fone", digit_labels="float32")
    with pytest.raises(ValueError, match="finite"):
        float64_digits(torch.tensor([math.inf]))


# -- xVal ------------------------------------------------------------------------------------
def test_xval_scaling_formula_at_hand_computed_points():
    """The earlier formula without an offset, one option away (offset=0)."""
    codec = encoders.get("xval", offset=0)
    points = {
        1.0: 2.5,
        1e15: 5.0,
        1e-14: 1 / 6,
        -1e6: -3.5,
        1e3: 3.0,
        1e-2: 2.5 - 1 / 3,
        -1e-8: -(2.5 - 8 / 6),
        0.0: 0.0,
        1e21: 6.0,
    }
    s = codec.encode(torch.tensor(list(points), dtype=torch.float64))
    assert s.shape == (len(points), 1) and s.dtype == torch.float64
    assert s.squeeze(1).tolist() == pytest.approx(list(points.values()), abs=1e-15)
    # without the 1e-14 cut the formula would give 1e-20 and -1e-10 the same scale (-5/6)
    assert -20 / 6 + 2.5 == pytest.approx(-(-10 / 6 + 2.5))
    for tiny in (9.9e-15, -1e-20):  # below the cut: an error (the authors' code maps them to 0)
        with pytest.raises(ValueError, match=rf"xval cannot encode {tiny!r}: its scale holds magnitudes from 1e-14"):
            codec.encode([1.0, tiny])


def authors_scale(x: float) -> float:
    """sign(x) (log10(|x| + 1e-14) / 6 + 2.5) for |x| >= 1e-14, else 0, in 50-digit decimal."""
    if abs(x) < 1e-14:
        return 0.0
    with localcontext() as ctx:
        ctx.prec = 50
        s = (abs(Decimal(x)) + Decimal(1e-14)).log10() / 6 + Decimal("2.5")
    return math.copysign(float(s), x)


def test_xval_default_is_the_authors_offset_and_decode_threshold():
    codec = encoders.get("xval")
    assert encoders.options("xval") == {"offset": 1e-14, "head_width": 3072} and codec.offset == 1e-14
    xs = [1.0, 1e15, 1e-14, 3e-14, -1e6, 1e3, 1e-2, -1e-8, 0.0, 1e21, -2.5e-13]
    s = codec.encode(torch.tensor(xs, dtype=torch.float64)).squeeze(1).tolist()
    assert s == pytest.approx([authors_scale(x) for x in xs], abs=1e-15)
    smallest = (math.log10(2) - 14) / 6 + 2.5  # s(1e-14) by hand: 0.2168...
    assert s[2] == pytest.approx(smallest, abs=1e-15) and 0.2168 < smallest < 0.2169
    assert s[0] != 2.5 and s[0] == pytest.approx(2.5 + 1e-14 / math.log(10) / 6, abs=1e-15)
    # decode: below s(1e-14) is 0 (both signs); above, sign * (10^(6 (|s| - 2.5)) - 1e-14)
    decoded = codec.decode(torch.tensor([[0.2], [-0.2], [0.1], [smallest], [2.5], [-3.5], [0.0]], dtype=torch.float64))
    assert decoded[:3].tolist() == [0.0, 0.0, 0.0] and decoded[-1].item() == 0.0
    assert decoded[3].item() == pytest.approx(1e-14, rel=1e-12)
    assert decoded[4].item() == pytest.approx(1 - 1e-14, abs=1e-15) and decoded[4].item() < 1.0
    assert decoded[5].item() == pytest.approx(-(1e6 - 1e-14), rel=1e-14)
    old = encoders.get("xval", offset=0)  # the earlier formula: its own s(1e-14) = 1/6 is the threshold
    assert old.decode(torch.tensor([[0.2]], dtype=torch.float64)).item() == pytest.approx(10 ** (6 * (0.2 - 2.5)))
    assert old.decode(torch.tensor([[0.1], [-0.1]], dtype=torch.float64)).tolist() == [0.0, 0.0]
    for bad in (-1e-14, math.nan, math.inf, True, "1e-14"):
        with pytest.raises(ValueError, match="offset"):
            encoders.get("xval", offset=bad)


@pytest.mark.parametrize("offset", [1e-14, 0.0])
def test_xval_decode_inverts_where_invertible(offset):
    codec = encoders.get("xval", offset=offset)
    rng = np.random.default_rng(9)
    x = torch.from_numpy(10.0 ** rng.uniform(-14, 15, 5000) * rng.choice([-1.0, 1.0], 5000))
    back = codec.decode(codec.encode(x))
    assert torch.allclose(back, x, rtol=1e-13, atol=0)
    assert codec.decode(codec.encode(torch.tensor([0.0, -0.0]))).tolist() == [0.0, 0.0]
    for bad in (1e-15, -3e-20, 5e-324, math.inf, math.nan):  # each named, never read as 0
        with pytest.raises(ValueError, match=rf"^xval cannot encode {bad!r}: .*(finite|1e-14)"):
            codec.encode(torch.tensor([1.0, bad], dtype=torch.float64))
    # whatever decode gives (a head's output, fed back during generation), encode takes
    s = torch.linspace(-8, 8, 20001, dtype=torch.float64)[:, None]
    codec.encode(codec.decode(s))


@pytest.mark.parametrize("offset", [1e-14, 0.0])
def test_xval_decodes_up_to_the_largest_float(offset):
    codec = encoders.get("xval", offset=offset)
    rng = np.random.default_rng(3)
    x = torch.from_numpy(np.concatenate([[MAX, -MAX, np.nextafter(MAX, 0)], 10.0 ** rng.uniform(300, 308.25, 2000)]))
    back = codec.decode(codec.encode(x))
    assert torch.isfinite(back).all() and torch.allclose(back, x, rtol=1e-12, atol=0)
    # a head output beyond s(MAX) is out of float64's range: ±inf, which the metrics score as wrong
    assert codec.decode(torch.tensor([[60.0], [-60.0]], dtype=torch.float64)).tolist() == [math.inf, -math.inf]


@pytest.mark.parametrize("name,options", [("bittokens", {}), ("bittokens", {"base": 10}), ("fone", {}), ("xval", {})])
def test_nan_in_an_encoding_decodes_to_nan_never_a_number(name, options):
    codec = encoders.get(name, **options)
    enc = codec.encode(torch.tensor([1.5, 2.5, 3.25 if name == "fone" else -3.25], dtype=torch.float64))
    enc[0, :] = math.nan
    enc[1, 0] = math.nan  # one NaN among the dims it reads is enough
    back = codec.decode(enc)
    assert math.isnan(back[0]) and math.isnan(back[1])
    assert float(back[2]) == pytest.approx(3.25 if name == "fone" else -3.25, rel=1e-13)


@pytest.mark.parametrize(
    "value",
    [2**53 + 1, -(2**53 + 1), 2**63 - 1, 10**30, 10**400],
    ids=["2**53+1", "-(2**53+1)", "2**63-1", "10**30", "10**400"],
)
def test_integers_float64_cannot_hold_are_an_error_naming_them(value):
    inputs = [[value], [1.5, value], torch.tensor([value])] if abs(value) < 2**63 else [[value], value]
    if abs(value) < 2**63:
        inputs.append(np.array([value], dtype=np.int64))
    for x in inputs:
        with pytest.raises(ValueError, match=str(value)[:20] if value < 10**300 else "bits"):
            encoders.base.as_float64(x)
    for name in ["bittokens", "xval", "fone", "single_digit"]:
        with pytest.raises(ValueError, match="no exact float64"):
            encoders.get(name).encode([value])


def test_as_float64_keeps_what_float64_holds_and_refuses_what_is_not_real():
    as_float64 = encoders.base.as_float64
    exact = [2**53, -(2**53), 2**60, -(2**63), 3, 0]
    assert as_float64(exact).tolist() == [float(v) for v in exact]
    assert as_float64(torch.tensor(exact)).tolist() == [float(v) for v in exact]
    assert as_float64(np.array([2**63], dtype=np.uint64)).tolist() == [2.0**63]
    assert as_float64([0.1, True, np.float32(0.5)]).tolist() == [0.1, 1.0, 0.5]
    for bad in ([1 + 2j], torch.tensor([1 + 2j]), "abc", [None], [[1.0], "x"]):
        with pytest.raises(ValueError, match="real numbers"):
            as_float64(bad)


def test_xval_head_width_beyond_any_model_is_refused_before_anything_is_allocated():
    assert encoders.get("xval", head_width=65_536).head_width == 65_536
    for bad in (65_537, 10**9, -1, 3072.0, True):
        with pytest.raises(ValueError, match=r"head_width must be an integer from 0 to 65,536"):
            encoders.get("xval", head_width=bad)


def test_xval_head_embed_loss_predict():
    codec = encoders.get("xval", head_width=0)
    head = codec.number_head(32)
    assert head.output[0].out_features == 128 and isinstance(head.output[1], torch.nn.GELU)  # d -> 4d -> 1
    x = torch.tensor([2.0, -1e-3, 1e12], dtype=torch.float64)
    num = torch.randn(3, 32)
    assert torch.allclose(head.embed(num, x), num * codec.encode(x).float())
    out = head(torch.randn(3, 32))
    assert out.shape == (3,)
    head.loss(out, x).mean().backward()
    right = codec.encode(x).squeeze(1)
    assert head.loss(right.float(), x).max() < 1e-10
    assert torch.allclose(head.predict(right), x, rtol=1e-13)


def test_xval_ideal_head_is_float32_as_its_docstring_says():
    """Bug: xval.py promised ~1e-14 where the ideal head (float32, as a model's output) gives ~1e-6:
    the encoding inverts to ~1e-14, the ideal head's prediction to float32's precision of s."""
    codec = encoders.get("xval")
    x = torch.from_numpy(10.0 ** np.random.default_rng(2).uniform(-14, 15, 2000))
    encoding_error = ((codec.decode(codec.encode(x)) - x).abs() / x).max().item()
    head = codec.number_head(16)
    head_error = ((head.predict(head.ideal_output(x)) - x).abs() / x).max().item()
    assert encoding_error < 1e-13 and 1e-8 < head_error < 1e-5


def test_xval_head_width_is_the_authors_3072_by_default():
    """The authors' head is d -> 3072 -> 1 whatever d; head_width=0 is 4d. Equal at the paper's
    d = 768, 3072 against 512 at cpu-tiny's d = 128."""
    widths = [
        encoders.get("xval", **opt).number_head(d).output[0].out_features
        for opt in ({}, {"head_width": 0}, {"head_width": 64})
        for d in (128, 768)
    ]
    assert widths == [3072, 3072, 512, 3072, 64, 64]
    head = encoders.get("xval").number_head(128)
    assert (head.output[0].in_features, head.output[2].in_features, head.output[2].out_features) == (128, 3072, 1)
    for bad in (-1, 1.5, True, "3072"):
        with pytest.raises(ValueError, match="head_width"):
            encoders.get("xval", head_width=bad)


# -- digit tokenizers ------------------------------------------------------------------------
@pytest.mark.parametrize(
    "name,options,pieces,vocab",
    [
        ("single_digit", {}, ["-", "1", "2", "3", "4", ".", "5", "0", "6"], 12),
        ("triple_digit", {}, ["-", "123", "4", ".", "506"], 1002),
        ("triple_digit", {"zero_pieces": True}, ["-", "123", "4", ".", "506"], 1112),
    ],
)
def test_digit_encodings(name, options, pieces, vocab):
    codec = encoders.get(name, **options)
    assert not codec.single_token
    assert codec.number_tokens("-1234.506") == pieces
    assert len(codec.vocabulary()) == len(set(codec.vocabulary())) == vocab
    ids = codec.encode(torch.tensor([-1234.506, 7.0], dtype=torch.float64))
    assert ids.shape == (2, len(pieces))
    assert ids[0].tolist() == [codec.vocabulary().index(p) for p in pieces]
    assert ids[1].tolist() == [codec.vocabulary().index("7")] + [-1] * (len(pieces) - 1)
    patterns = random_patterns(400, seed=10)
    xs = [v for v in as_tensor(patterns).tolist() if math.isfinite(v)]
    enc = codec.encode(torch.tensor(xs, dtype=torch.float64))
    for row, x in zip(enc.tolist(), xs[:50]):
        text = "".join(codec.vocabulary()[int(i)] for i in row if i >= 0)
        assert text == render(x, 17) and "".join(codec.number_tokens(text)) == text
    back = codec.decode(enc).tolist()
    assert [struct.pack(">d", v) for v in back] == [struct.pack(">d", v) for v in xs]
    for bad in ("1e5", "1.", "", "-", "²", "1.2.3", "+1"):
        with pytest.raises(ValueError):
            codec.number_tokens(bad)
    with pytest.raises(ValueError):
        codec.encode(torch.tensor([math.inf]))
    with pytest.raises(ValueError, match="piece ids"):
        codec.decode(torch.tensor([[vocab + 5.0]]))
    assert codec.number_head(256) is None  # digits are text tokens: no [NUM] embedding, no head
    assert codec.number_text(codec.number_tokens("-1234.506")) == "-1234.506"


def test_heads_predict_nan_for_a_nan_output():
    """A broken model's NaN output is never read as a number."""
    for name in ("bittokens", "fone", "xval"):
        head = encoders.get(name).number_head(256)
        out = head(torch.randn(3, 256))
        out = out.detach().clone()
        out[1] = math.nan
        pred = head.predict(out)
        assert math.isnan(pred[1]) and not math.isnan(pred[0]) and not math.isnan(pred[2]), name


def test_a_digit_encoding_names_itself_and_the_value_it_cannot_encode():
    for name in ("single_digit", "triple_digit", "numerologic"):
        with pytest.raises(ValueError, match=f"{name} cannot encode nan.*finite"):
            encoders.get(name).encode(torch.tensor([1.0, float("nan")], dtype=torch.float64))


def test_every_encoding_has_its_own_display_name():
    labels = {name: encoders.label(name) for name in encoders.names()}
    assert labels["bittokens"] == "BitTokens" and labels["single_digit"] == "Single digit"
    assert labels["triple_digit"] == "Triple digit" and labels["xval"] == "xVal"
    assert len(set(labels.values())) == len(labels)  # one name per encoding, none shared

    class Unlabelled(encoders.NumberEncoding):
        name = "unlabelled_in_test"

    with encoders.registered(Unlabelled):
        assert encoders.label("unlabelled_in_test") == "unlabelled_in_test"  # a plugin without one: its name
    with pytest.raises(ValueError, match="unknown encoding"):
        encoders.label("no_such_encoding")
