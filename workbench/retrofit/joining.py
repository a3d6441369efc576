"""How a pretrained causal LM and a workbench encoding are joined: the checks made before
anything is changed (the encoding and its options, the head at the model's width, a model that
takes `inputs_embeds` and whose lm head reads its last hidden state) and where the number tokens'
rows start.

Where <|num|> starts (issue 68; numbers: SmolLM2-135M-Instruct at the first token of 50 addition
answers, benchmarks/retrofit_num_probability.py, docs/retrofit.md). A new token's rows are usually
the mean of the model's rows (`num_init="mean"`, before issue 68): that gives <|num|> 1e-7 to 1e-6
where an answer starts, and an AdamW step moves its logit by at most lr x the l1 norm of the hidden
state it reads (~460: 0.05 nats a step at lr 1e-4), so a few steps cannot close a gap of ~14 nats.
`num_init="digits"` (`start_number_rows`) starts its rows (input embedding, lm head, and the lm
head's bias if it has one) at the mean of the rows of the tokens it replaces
(`RetrofitTokenizer.number_starts`: SmolLM2's ten digits): a number then enters the body as a
digit-like vector and leaves in the digits' direction (P(<|num|>) 0.046 at the start). The mean of
the rows gives the mean of the digits' logits, which stays below their log-sum-exp (at most a
tenth of their mass, far less when one digit is likely), so the rows alone do not make <|num|> as
likely as a number is; model.py's `digit_mass="merge"` does.
"""

from __future__ import annotations

import inspect
import json

import torch
from torch import nn

from .. import encoders
from ..encoders.base import NumberEncoding, NumberHead
from .config import BASELINE
from .tokens import RetrofitTokenizer


def resolve(encoding: str | None, options: dict | None = None) -> tuple[str, dict]:
    """(name, every option with its value) of a requested encoding; BASELINE takes no option."""
    name = encoding or BASELINE
    if name == BASELINE:
        if options:
            raise ValueError(f"--encoding {BASELINE} (the model's own digit tokens) takes no options, got {options}")
        return name, {}
    encoders.get(name, **(options or {}))  # raises for an unknown name or option
    return name, json.loads(json.dumps({**encoders.options(name), **(options or {})}))


def number_head(encoding: NumberEncoding, width: int, name: str) -> NumberHead:
    """The encoding's head at the model's embedding width, or a ValueError naming the model."""
    try:
        head = encoding.number_head(width)
    except ValueError as error:
        raise ValueError(f"{name} (hidden size {width}) cannot hold the {encoding.name} number head: {error}") from None
    except (RuntimeError, MemoryError) as error:  # options asking for more memory than the machine has
        raise ValueError(
            f"{name} (hidden size {width}): the {encoding.name} number head its options ask for cannot be "
            f"allocated: {(str(error).splitlines() or [type(error).__name__])[0][:200]}"
        ) from None
    if head is None:
        raise ValueError(
            f"the encoding {encoding.name!r} has no number head (its numbers are digit tokens), so it "
            f"cannot be joined to {name}; use --encoding {BASELINE} for the model's own digit tokens"
        )
    return head


@torch.no_grad()
def check_model(model: nn.Module, name: str) -> int:
    """The model's embedding width, after checking that it takes `inputs_embeds` and
    `position_ids` and that its last hidden state is what its lm head reads."""
    params = inspect.signature(model.forward).parameters
    missing = [p for p in ("inputs_embeds", "position_ids", "attention_mask") if p not in params]
    embedding, lm_head = model.get_input_embeddings(), model.get_output_embeddings()
    if missing:
        raise ValueError(
            f"{name} ({type(model).__name__}): its forward takes no {missing}; numbers enter a model "
            "through inputs_embeds (at the positions and under the padding mask given)"
        )
    if embedding is None or lm_head is None:
        raise ValueError(
            f"{name} ({type(model).__name__}) has no input or output embeddings "
            "(get_input_embeddings / get_output_embeddings): it has no place for the number token"
        )
    was_training = model.training
    model.eval()
    try:
        x = embedding(torch.tensor([[0, 1]], device=embedding.weight.device))
        out = model(
            inputs_embeds=x,
            attention_mask=torch.ones(1, 2, dtype=torch.long, device=x.device),
            position_ids=torch.arange(2, device=x.device)[None],
            output_hidden_states=True,
        )
    except Exception as error:  # noqa: BLE001 - whatever the model raises, it cannot take inputs_embeds
        raise ValueError(f"{name} ({type(model).__name__}) does not run on inputs_embeds: {error}") from None
    finally:
        model.train(was_training)
    hidden = out.hidden_states[-1] if getattr(out, "hidden_states", None) else None
    if hidden is None or hidden.shape[-1] != embedding.embedding_dim:
        raise ValueError(
            f"{name} ({type(model).__name__}) returns no last hidden state of its embedding width "
            f"{embedding.embedding_dim}: the number head has nothing to read"
        )
    read = lm_head(hidden).float()
    if not (
        torch.allclose(read, out.logits.float(), rtol=1e-3, atol=1e-4)
        or torch.equal(read.argsort(-1), out.logits.float().argsort(-1))
    ):  # a monotone cap keeps the order
        raise ValueError(
            f"{name} ({type(model).__name__}): its last hidden state is not what its lm head reads, "
            "so a number head there would read another vector than the token head"
        )
    return embedding.embedding_dim


@torch.no_grad()
def head_reads_hidden(model: nn.Module) -> bool:
    """Whether the model's logits are exactly its lm head on its last hidden state (no cap or
    scale after it) and it can skip computing them (`logits_to_keep`): then the loss computes
    them at its targets only. check_model allows a monotone cap; such a model keeps its own."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    if "logits_to_keep" not in inspect.signature(base.forward).parameters:
        return False
    embedding = model.get_input_embeddings()
    was_training = model.training
    model.eval()
    try:
        x = embedding(torch.tensor([[0, 1, 2]], device=embedding.weight.device))
        out = model(
            inputs_embeds=x,
            attention_mask=torch.ones(1, 3, dtype=torch.long, device=x.device),
            position_ids=torch.arange(3, device=x.device)[None],
            output_hidden_states=True,
        )
    finally:
        model.train(was_training)
    return torch.equal(model.get_output_embeddings()(out.hidden_states[-1]), out.logits)


@torch.no_grad()
def start_number_rows(model: nn.Module, tok: RetrofitTokenizer) -> None:
    """Each number token's rows (input embedding; lm head if it is not tied to it; the lm head's
    bias if it has one) at the mean of the rows of the model's tokens that begin a number where it
    stands (`num_init="digits"`)."""
    embedding, lm_head = model.get_input_embeddings(), model.get_output_embeddings()
    tables = [embedding.weight]
    if lm_head.weight.data_ptr() != embedding.weight.data_ptr():  # tied: one table
        tables.append(lm_head.weight)
    bias = getattr(lm_head, "bias", None)
    if bias is not None:
        tables.append(bias)
    for n, starts in tok.number_starts.items():
        if not starts:  # nothing to start from: the mean of all rows stays
            continue
        rows = torch.tensor(starts, dtype=torch.long, device=embedding.weight.device)
        for table in tables:
            table[n] = table[rows].float().mean(0).to(table.dtype)
