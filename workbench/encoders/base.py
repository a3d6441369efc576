"""What a number encoding is, and how a model reads and writes it: two separate things.

    text -> numbers.parse -> token ids + float64 values
         -> model: the head joins the encoding to the learned <|num|> embedding (`NumberHead.embed`)
         -> final hidden state -> `NumberHead.forward` -> `loss` (training) / `predict` (float64)

`NumberEncoding` is the fixed map between float64 values and vectors (no learned parameters) plus
the properties the rest of the workbench asks about instead of testing names:

    single_token     one <|num|> token per number (BitTokens, FoNE, xVal) or digit text tokens
    signed           the minus sign belongs to the number (False: a "-" text token, e.g. FoNE)
    difficulty_base  the base of the difficulty the curriculum samples by (A.3): 2 for binary
    label            the display name in every figure and table ("BitTokens", "Single digit");
                     `encoders.label(name)` reads it (the registry name where a class has none)
    paper_label      the method's name in the paper's tables (None: not in the paper)
    paper_verdicts   section 4's verdicts on D1-D9, where the paper gives them

`NumberHead` (an nn.Module) is built by `encoding.number_head(d_model)`: how the encoding joins the
[NUM] embedding, the output head, its per-number loss and the decoding of its output. Digit
encodings have no head (`number_head` returns None): their digits are ordinary tokens.

`TokenModule` (an nn.Module, optional) is built by `encoding.token_module(d_model, piece_ids)` for
encodings whose numbers are text tokens but which act on the model beyond their vocabulary: it
reads the token ids themselves and may add to the token embeddings (`embed`: e.g. Abacus, a
digit's place within its number) and add a per-token loss (`loss`: e.g. the Number Token Loss
over the digit tokens' logits). The encodings without one (None, the default) train as before.

A new encoding is one new file in this folder: subclass `NumberEncoding` (and `NumberHead`, or
`DigitEncoding` from digits.py) and decorate it with `@register`; the package imports every module.
"""

from __future__ import annotations

from numbers import Integral, Real
from typing import ClassVar

import numpy as np
import torch
from torch import Tensor, nn


class NumberEncoding:
    """float64 values <-> fixed vectors; options are given to the constructor (`encoders.get`)."""

    name: ClassVar[str]
    label: ClassVar[str]
    single_token: ClassVar[bool] = True
    signed: ClassVar[bool] = True
    difficulty_base: ClassVar[int] = 10
    paper_label: ClassVar[str | None] = None
    paper_verdicts: ClassVar[dict[str, str]] = {}

    @property
    def width(self) -> int:
        """Size of the last dimension of `encode`."""
        raise NotImplementedError

    def encode(self, x) -> Tensor:
        """float64 values [N] -> fixed encoding [N, width]; float32 where that is exact (BitTokens'
        ±1), float64 where precision matters (FoNE phases, xVal scale)."""
        raise NotImplementedError

    def decode(self, encoding: Tensor) -> Tensor:
        """Inverse of `encode`: [N, width] -> float64 [N]."""
        raise NotImplementedError

    def number_head(self, d_model: int) -> NumberHead | None:
        """The module through which a model of width d_model reads and writes these numbers;
        None when numbers are text tokens."""
        return None

    def token_module(self, d_model: int, piece_ids: dict[str, int] | None) -> TokenModule | None:
        """The module that acts on the token ids of a model of width d_model (`TokenModule`);
        piece_ids maps each number piece to its token id (`Tokenizer.piece_ids`). None: none."""
        return None

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"


class NumberHead(nn.Module):
    """How a model reads and writes one encoding's numbers.

    Parameter groups (`workbench.training.optim`): a submodule named `output` belongs to the head group
    (lr of the lm head); every other matrix here joins the embedding group."""

    loss_weight: ClassVar[float | None] = None  # the weight of `loss` beside the CE; None: C.1's (the model's, 10)

    def __init__(self, encoding: NumberEncoding, d_model: int):
        super().__init__()
        if d_model < 1:
            raise ValueError(f"d_model must be positive, got {d_model}")
        self.encoding, self.d_model = encoding, d_model

    def embed(self, num_embedding: Tensor, x: Tensor) -> Tensor:
        """Join the learned [NUM] embedding rows [N, d_model] with the encoding of x [N]:
        `join(num_embedding, features(x))`, or a head's own."""
        features = self.features(x)
        if features is None:
            raise NotImplementedError
        return self.join(num_embedding, features.to(num_embedding.device))

    # A head whose input and loss are fixed functions of the values splits them in two: the
    # value-dependent part (features, loss_target: NumPy on the CPU) is computed where a training
    # batch is packed, ahead of the step, so the step never waits for the host (batches.py).
    def features(self, x) -> Tensor | None:
        """What `join` combines with [NUM] for the float64 values x [N]: [N, width], computed on
        the CPU; None: this head has no `join` and its `embed` reads the values itself."""
        return None

    def join(self, num_embedding: Tensor, features: Tensor) -> Tensor:
        """[NUM] rows [N, d_model] joined with `features(x)` [N, width] (on their device)."""
        raise NotImplementedError

    def forward(self, hidden: Tensor) -> Tensor:
        """Final hidden states [N, d_model] at positions that predict <|num|> -> head output."""
        raise NotImplementedError

    def loss(self, out: Tensor, target: Tensor) -> Tensor:
        """Number loss of each head output against its float64 target: [N] (no reduction):
        `loss_from(out, loss_target(target))`, or a head's own."""
        wanted = self.loss_target(target)
        if wanted is None:
            raise NotImplementedError
        return self.loss_from(out, wanted.to(out.device))

    def loss_target(self, x) -> Tensor | None:
        """What `loss_from` compares the head output with, for float64 targets x [N], computed on
        the CPU; None: this head has no `loss_from` and its `loss` reads the values itself."""
        return None

    def loss_from(self, out: Tensor, wanted: Tensor) -> Tensor:
        """Number loss [N] of head outputs against `loss_target(x)` (on their device)."""
        raise NotImplementedError

    def predict(self, out: Tensor) -> Tensor:
        """Head output -> float64 values [N] (what the model writes as its number)."""
        raise NotImplementedError

    # -- what a perfect head would produce (the desiderata's "ideal head") --------------------
    def target_vector(self, x) -> Tensor:
        """float64 [N, k]: the vector the head is trained to produce for the values x."""
        raise NotImplementedError

    def output_of(self, vector: Tensor) -> Tensor:
        """The head output (what `loss` and `predict` take) that stands for a target vector."""
        raise NotImplementedError

    def ideal_output(self, x, confidence: float = 4.0) -> Tensor:
        """The output of a perfect head for x; classification heads scaled by `confidence`."""
        return self.output_of(self.target_vector(x) * confidence)

    def embedding_map(self, num_embedding: Tensor) -> tuple[Tensor, Tensor]:
        """(A [d, width], c [d]) with embed(e, x) = A @ encode(x) + c, for the linear ways of
        joining the [NUM] embedding e; ValueError for the others."""
        raise ValueError(f"{type(self).__name__} joins the [NUM] embedding non-linearly")

    def extra_repr(self) -> str:
        return f"encoding={self.encoding.name!r}, d_model={self.d_model}"


class RegressionHead(NumberHead):
    """The head of an encoding with one number per [NUM] (xVal and its log-scaled variant): the
    learned [NUM] embedding times encode(x), and an MLP d_model -> `hidden` -> 1 (GELU) whose one
    output is regressed. What the output stands for (the scale, its z-score, x itself), its loss
    and its decoding are each subclass's."""

    def __init__(self, encoding: NumberEncoding, d_model: int, hidden: int):
        super().__init__(encoding, d_model)
        self.output = nn.Sequential(nn.Linear(d_model, hidden), nn.GELU(), nn.Linear(hidden, 1))

    def features(self, x) -> Tensor:
        return self.encoding.encode(x)

    def join(self, num_embedding: Tensor, features: Tensor) -> Tensor:
        return num_embedding * features.to(device=num_embedding.device, dtype=num_embedding.dtype)

    def forward(self, hidden: Tensor) -> Tensor:
        return self.output(hidden).squeeze(-1)

    def target_vector(self, x) -> Tensor:
        return self.encoding.encode(x).double()

    def ideal_output(self, x, confidence: float = 4.0) -> Tensor:
        """A regression head has no confidence to scale: the perfect output is the target's own."""
        return self.output_of(self.target_vector(x))

    def embedding_map(self, num_embedding: Tensor) -> tuple[Tensor, Tensor]:
        return num_embedding.double().reshape(self.d_model, 1), torch.zeros(self.d_model, dtype=torch.float64)


class TokenModule(nn.Module):
    """Hooks of an encoding into the model beyond its vocabulary; each returns None to do nothing.

    Parameter groups (`workbench.training.optim`): a submodule named `embedding` joins the embedding group
    (Adam at the token embedding's lr); every other matrix here joins the head group."""

    def __init__(self, encoding: NumberEncoding, d_model: int, piece_ids: dict[str, int] | None):
        super().__init__()
        if not piece_ids:
            raise ValueError(
                f"encoding {encoding.name!r} reads the token ids of its pieces: build the model "
                "with piece_ids=Tokenizer(...).piece_ids"
            )
        self.encoding, self.d_model, self.piece_ids = encoding, d_model, dict(piece_ids)

    def embed(self, ids: Tensor, doc_ids: Tensor) -> Tensor | None:
        """Added to the token embeddings of ids [B, T] (doc_ids [B, T]: the sample of each token):
        [B, T, d_model]. Row t may depend on the tokens up to t of its own sample only: generation
        calls it on the tokens so far and keeps the last row. (The one exception by design: a
        value prefix's row reads the number written after it, as training's teacher forcing; where
        the model writes that number itself, the row is 0 and `fed` supplies its stand-in.)"""
        return None

    # A module whose loss reads whole numbers (runs of targets) sets this: `loss` then also gets
    # starts [N] bool (`run_starts`), the targets that do not directly follow the one before them in
    # their row, so that a number cut at a row's end never runs on into the next row's first target.
    reads_runs: ClassVar[bool] = False

    def loss(self, hidden: Tensor, lm_weight: Tensor, targets: Tensor) -> Tensor | None:
        """An extra loss of each target token [N] (0 where it does not apply), from the final hidden
        states [N, d_model] at the loss positions and the lm head's weight [V, d_model]; the model
        adds it to the cross-entropy with the target's task weight. The full logits are never
        formed: a hook multiplies by the rows of lm_weight it needs. (With `reads_runs`, also
        `starts=`, above.)"""
        return None

    def use_token_embedding(self, embedding: nn.Embedding) -> None:
        """Called once by the model with its token embedding, for a module whose `embed` reads it
        (e.g. an aggregate of digit embeddings); kept unregistered, so its parameters stay the
        model's. The default ignores it."""

    def fed(self, hidden: Tensor, token: Tensor) -> Tensor | None:
        """In generation: added to the embedding of the token [B] just chosen, from the final hidden
        state [B, d_model] that chose it ([B, d_model]; e.g. a value-aware prefix's proj(h), where
        training feeds a value the written tokens give). None (the default): nothing."""
        return None

    def averaged_over(self, targets: Tensor) -> Tensor | None:
        """Which target tokens [N] the mean of `loss` is taken over (a bool mask on targets' device):
        the model divides the loss's sum by their count in the whole step's batch. None (the
        default): over all targets, as the cross-entropy."""
        return None

    def extra_repr(self) -> str:
        return f"encoding={self.encoding.name!r}, d_model={self.d_model}"


def run_starts(loss_index: Tensor, width: int) -> Tensor:
    """[N] bool for the loss positions `loss_index` (flat in rows of `width`, increasing): True at
    the first loss position of each row and wherever the previous loss position is not the one
    just before it, so that a run of consecutive True-free targets is a run of adjacent tokens."""
    starts = torch.ones_like(loss_index, dtype=torch.bool)
    starts[1:] = loss_index[1:] != loss_index[:-1] + 1
    return starts | (loss_index % width == 0)


def as_float64(x) -> Tensor:
    """Accept a tensor, array, list or scalar of real values and return a 1-D float64 tensor.

    An integer that float64 cannot hold exactly (2**53 + 1, 10**400) is an error naming it, and
    so is complex or non-numeric input: converting would silently make it another number."""
    if isinstance(x, Tensor):
        if x.is_complex():
            raise ValueError(f"expected real numbers, got a complex tensor ({x.dtype})")
        if not x.is_floating_point():
            _check_integers(x.detach().cpu().reshape(-1).numpy())
        return x.to(torch.float64).reshape(-1)
    a = np.asarray(x, dtype=object) if isinstance(x, (list, tuple)) else np.asarray(x)
    if a.dtype == object:  # Python numbers, ints beyond int64 included: check each one
        for v in a.flat:
            if not isinstance(v, Real):
                raise ValueError(f"expected real numbers, got {v!r} ({type(v).__name__})")
        _check_integers(np.array([int(v) for v in a.flat if isinstance(v, Integral)], dtype=object))
        a = a.astype(np.float64)
    if a.dtype.kind not in "biuf":
        raise ValueError(f"expected real numbers, got an array of dtype {a.dtype}")
    if a.dtype.kind in "iu":
        _check_integers(a.reshape(-1))
    return torch.from_numpy(np.ascontiguousarray(a, dtype=np.float64)).reshape(-1)


def _check_integers(ints: np.ndarray) -> None:
    """Raise for the first integer float64 cannot hold exactly (all |n| <= 2**53 can)."""
    for n in ints[(ints > 2**53) | (ints < -(2**53))].tolist():
        try:
            exact = float(n) == n  # Python compares an int with a float exactly
        except OverflowError:
            exact = False
        if not exact:
            shown = n if n.bit_length() < 1000 else f"of {n.bit_length()} bits"
            raise ValueError(
                f"the integer {shown} has no exact float64 (it would be rounded); "
                "pass it as a float if rounding is meant"
            )
