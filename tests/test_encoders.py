"""The five encodings against independent oracles: struct for IEEE 754, decimal for FoNE phases."""
import math
import random
import struct
from decimal import Decimal, getcontext

import pytest
import torch

from workbench import encoders
from workbench.encoders.bittokens import float64_bits

SPECIALS = [0.0, -0.0, math.inf, -math.inf, 5e-324, -5e-324, 2.2250738585072014e-308,
            2.225073858507201e-308, 1.7976931348623157e308, -1.7976931348623157e308, 1.0, -1.0, 0.1]


def struct_bits(x: float) -> list[float]:
    (n,) = struct.unpack(">Q", struct.pack(">d", x))
    return [1.0 if (n >> (63 - i)) & 1 else -1.0 for i in range(64)]


def random_floats(k, seed=0):
    rng = random.Random(seed)
    out = []
    while len(out) < k:
        (x,) = struct.unpack(">d", struct.pack(">Q", rng.getrandbits(64)))
        if not math.isnan(x):
            out.append(x)
    return out


def test_names_and_defaults():
    assert encoders.names()[:5] == ["bittokens", "fone", "xval", "single_digit", "triple_digit"]
    for name in encoders.names():
        assert encoders.get(name).name == name
    with pytest.raises(ValueError, match="unknown encoding"):
        encoders.get("nope")


def test_bittokens_bits_of_x_and_reciprocal_match_struct():
    xs = SPECIALS + random_floats(2000)
    enc = encoders.get("bittokens", d_model=256).encode(torch.tensor(xs, dtype=torch.float64))
    assert enc.shape == (len(xs), 128)
    for row, x in zip(enc.tolist(), xs):
        assert row[:64] == struct_bits(x)
        with torch.no_grad():
            recip = torch.tensor(x, dtype=torch.float64).reciprocal().item()
        assert row[64:] == struct_bits(recip)


def test_bittokens_decode_is_bit_exact_including_nan_payloads():
    xs = SPECIALS + random_floats(5000, seed=1)
    codec = encoders.get("bittokens", d_model=256)
    back = codec.decode(codec.encode(torch.tensor(xs, dtype=torch.float64)))
    assert [struct.pack(">d", v) for v in back.tolist()] == [struct.pack(">d", v) for v in xs]
    nan_bits = torch.tensor(struct_bits(math.nan), dtype=torch.float64)[None]
    assert math.isnan(codec.decode(torch.cat([nan_bits, nan_bits], 1)).item())


def test_bittokens_predict_thresholds_logits_at_zero():
    codec = encoders.get("bittokens", d_model=256)
    x = torch.tensor(random_floats(100, seed=2), dtype=torch.float64)
    logits = float64_bits(x).float() * torch.rand(100, 64).add(0.01)
    assert torch.equal(codec.predict(logits).view(torch.int64), x.view(torch.int64))


def test_bittokens_base10_round_trip():
    codec = encoders.get("bittokens", d_model=256, base=10)
    xs = [v for v in SPECIALS if v != 0] + [0.0, -0.0] + random_floats(300, seed=3) + [math.nan]
    back = codec.decode(codec.encode(torch.tensor(xs, dtype=torch.float64))).tolist()
    for a, b in zip(back, xs):
        assert (math.isnan(a) and math.isnan(b)) or struct.pack(">d", a) == struct.pack(">d", b)
    assert codec.width == 168


@pytest.mark.parametrize("combine", ["sum", "product", "concat", "zero_pad", "weighted", "weighted_sum"])
@pytest.mark.parametrize("head", ["linear", "none", "mlp"])
def test_bittokens_variants_run_forward_and_backward(combine, head):
    codec = encoders.get("bittokens", d_model=160, combine=combine, head=head)
    x = torch.tensor([1.5, -2.0, 1e-10, 3e14], dtype=torch.float64)
    num = torch.randn(4, 160, requires_grad=True)
    out = codec.embed(num, x)
    assert out.shape == (4, 160)
    hidden = torch.randn(4, 160, requires_grad=True)
    logits = codec.head(out + hidden)
    assert logits.shape == (4, 64)
    loss = codec.loss(logits, x)
    loss.backward()
    assert torch.isfinite(loss)


def test_bittokens_zero_pad_scaling_and_loss_of_perfect_logits():
    codec = encoders.get("bittokens", d_model=512)
    x = torch.tensor([3.0, -7.25], dtype=torch.float64)
    out = codec.embed(torch.randn(2, 512), x)
    assert torch.allclose(out[:, :128], codec.encode(x).float() * 2.0)  # sqrt(512/128)
    assert torch.all(out[:, 128:] == 0)
    perfect = 20 * float64_bits(x).float()
    assert codec.loss(perfect, x) < 1e-6
    assert torch.equal(codec.predict(perfect), x)


def test_bittokens_rejects_bad_options():
    with pytest.raises(ValueError, match="combine"):
        encoders.get("bittokens", combine="nope")
    with pytest.raises(ValueError, match="d_model"):
        encoders.get("bittokens", d_model=64)


def decimal_phase(x: float, i: int) -> float:
    getcontext().prec = 80
    d = abs(Decimal(repr(x)))
    period = Decimal(10) ** i
    return float((d % period) / period)


def test_fone_phases_match_decimal_oracle_and_ignore_binary_noise():
    xs = [0.1, 123456789012345.0, 3.25e-14, 0.30000000000000004, 98765.4321, 1e16, 7.0]
    codec = encoders.get("fone", d_model=128)
    enc = codec.encode(torch.tensor(xs, dtype=torch.float64)).reshape(len(xs), 49, 2)
    for row, x in zip(enc, xs):
        for j, i in enumerate(range(-31, 18)):
            angle = 2 * math.pi * decimal_phase(x, i)
            assert row[j, 0].item() == pytest.approx(math.cos(angle), abs=1e-12)
            assert row[j, 1].item() == pytest.approx(math.sin(angle), abs=1e-12)
    # 0.1 has no digits below 10^-1: every finer period sits at phase 0 (cos 1, sin 0)
    assert torch.allclose(enc[0, :30, 0], torch.ones(30, dtype=torch.float64))


def test_fone_round_trip_and_head():
    rng = random.Random(4)
    xs = [float(f"{rng.randint(1, 10**rng.randint(1, 15))}e{rng.randint(-14, 0)}") for _ in range(500)]
    xs = [x for x in xs if x < 1e15] + [0.0, 5.0, 1e-14, 999999999999999.0]
    codec = encoders.get("fone", d_model=128)
    x = torch.tensor(xs, dtype=torch.float64)
    assert codec.decode(codec.encode(x)).tolist() == xs
    assert codec.decode(codec.encode(-x)).tolist() == xs  # FoNE encodes |x|; the sign is text
    # a head that outputs the encoding itself scores each digit prototype highest
    logits = codec.encode(x).float().reshape(-1, 49, 2) @ torch.stack(
        [torch.cos(2 * math.pi * torch.arange(10) / 10), torch.sin(2 * math.pi * torch.arange(10) / 10)], 1).T
    assert logits.shape == (len(xs), 49, 10)
    with pytest.raises(ValueError, match="finite"):
        codec.encode(torch.tensor([math.inf], dtype=torch.float64))
    assert not codec.signed


def test_fone_decode_survives_small_noise():
    codec = encoders.get("fone", d_model=128)
    x = torch.tensor([0.0, 1234.5, 7.25, 999999999999999.0, 1e-14], dtype=torch.float64)
    noisy = codec.encode(x) + 1e-4 * torch.randn(5, 98, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    assert codec.decode(noisy).tolist() == x.tolist()


def test_fone_head_predicts_digits_and_loss_falls_to_zero():
    codec = encoders.get("fone", d_model=128)
    x = torch.tensor([1234.5, 0.007], dtype=torch.float64)
    hidden = torch.zeros(2, 128)
    out = codec.head(hidden)
    assert out.shape == (2, 49, 10)
    digits = torch.from_numpy(__import__("workbench.encoders.fone", fromlist=["digits_at"]).digits_at(x))
    perfect = torch.nn.functional.one_hot(digits, 10).float() * 30
    assert codec.loss(perfect, x) < 1e-6
    assert codec.predict(perfect).tolist() == [1234.5, 0.007]


def test_xval_scaling_formula_and_limits():
    codec = encoders.get("xval", d_model=32)
    x = torch.tensor([1.0, 1e15, 1e-14, -1e6, 0.0, 1e-15], dtype=torch.float64)
    s = codec.encode(x).squeeze(-1).tolist()
    assert s == pytest.approx([2.5, 15 / 6 + 2.5, -14 / 6 + 2.5, -(1 + 2.5), 0.0, 0.0])
    assert max(abs(v) for v in s) <= 5.0
    back = codec.decode(codec.encode(x))
    assert back[:4].tolist() == pytest.approx(x[:4].tolist(), rel=1e-12)
    assert back[5].item() == 0.0  # below 1e-14 the value is lost: the D4 limitation
    out = codec.head(torch.randn(3, 32))
    assert out.shape == (3,)
    assert codec.loss(codec.encode(x[:3]).squeeze(-1).float(), x[:3]) < 1e-10


@pytest.mark.parametrize("name,pieces", [("single_digit", ["-", "1", "2", "3", "4", ".", "5", "0", "6"]),
                                         ("triple_digit", ["-", "123", "4", ".", "506"])])
def test_digit_encodings(name, pieces):
    codec = encoders.get(name)
    assert codec.number_tokens("-1234.506") == pieces
    assert not codec.single_token
    xs = SPECIALS[:2] + [v for v in random_floats(300, seed=5) if math.isfinite(v)]
    back = codec.decode(codec.encode(torch.tensor(xs, dtype=torch.float64))).tolist()
    assert [struct.pack(">d", v) for v in back] == [struct.pack(">d", v) for v in xs]
    with pytest.raises(TypeError, match="no \\[NUM\\]"):
        codec.head(torch.zeros(1, 4))
    with pytest.raises(ValueError):
        codec.number_tokens("1e5")
