"""The GPT's shape (appendix C.1 and the alternatives of docs/fidelity.md): `GPTConfig` and the
named sizes, `PRESETS`. Apart from model.py, which builds the network, so that a command's flags
(`config.py`) can list them without importing torch.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

ACTIVATION_NAMES = ("gelu_tanh", "gelu", "relu2")  # model.ACTIVATIONS holds the functions
NORMS = ("rms", "layer")
INITS = ("gpt2", "modded")
LOSSES = ("per_token", "separate_means")
ATTENTIONS = ("auto", "flex", "dense")


@dataclass(frozen=True)
class GPTConfig:
    n_layer: int = 4
    n_head: int = 4
    d_model: int = 256
    block_size: int = 256  # context length of training rows
    mlp_ratio: int = 4
    activation: str = "gelu_tanh"  # GPT-2's (the authors' code); "gelu" exact; "relu2" modded nanoGPT
    bias: bool = True  # biases in the attention and MLP layers (GPT-2's)
    norm: str = "rms"  # RMSNorm (C.1) or "layer" (Table 9's LayerNorm ablation); QK-norm follows
    norm_weight: bool = True  # learnable gains in the block and final norms (the authors' nn.RMSNorm)
    init: str = "gpt2"  # GPT-2's N(0, 0.02) (the authors' code) or "modded" (zero output projections)
    loss: str = "per_token"  # C.1's per-token loss, or "separate_means": mean CE + 10 x mean number loss
    number_loss_weight: float = 10.0  # the 10 of C.1
    # packed-sample attention: "auto" is FlexAttention on CUDA, the dense mask with the CPU's block
    # plan on CPUs; "flex" (a document block mask, flex.py) or "dense" (a [B, 1, T, T] mask, plain SDPA)
    attention: str = "auto"

    def __post_init__(self):
        for name, value, allowed in (
            ("activation", self.activation, ACTIVATION_NAMES),
            ("norm", self.norm, NORMS),
            ("init", self.init, INITS),
            ("loss", self.loss, LOSSES),
            ("attention", self.attention, ATTENTIONS),
        ):
            if value not in allowed:
                raise ValueError(f"{name} must be one of {allowed}, got {value!r}")
        if self.d_model % self.n_head or (self.d_model // self.n_head) % 2:
            raise ValueError(f"d_model {self.d_model} must split into n_head {self.n_head} heads of even size")


PRESETS = {
    # ~0.4M parameters in the blocks (+0.5M in embedding and lm head with the 2060-token vocabulary)
    "cpu-tiny": GPTConfig(n_layer=2, n_head=2, d_model=128, block_size=128),
    # cpu-tiny at twice the width (heads of 64 as there): room beside BitTokens' 128 bits
    "cpu-tiny-wide": GPTConfig(n_layer=2, n_head=4, d_model=256, block_size=128),
    # ~3.1M in the blocks (+1.1M embedding and lm head)
    "cpu-small": GPTConfig(n_layer=4, n_head=4, d_model=256, block_size=256),
    # appendix C.1: 6 layers, 6 heads, 768 wide, context 1024 (117M with the GPT-2 vocabulary)
    "paper": GPTConfig(n_layer=6, n_head=6, d_model=768, block_size=1024),
}


def preset(name: str, **overrides) -> GPTConfig:
    if name not in PRESETS:
        from ..cli import unknown

        raise ValueError(unknown("preset", name, PRESETS))
    return replace(PRESETS[name], **overrides)
