"""NumberLM: a Hugging Face causal LM with a workbench number encoding.

    lm = NumberLM.from_pretrained("path/to/model", "bittokens")  # any local causal LM folder
    lm.add_lora(rank=16)                                          # optional: adapters + number path
    losses = lm(**batch)                                          # C.1's per-token loss
    lm.generate(prompts, 20, lm.tok.eos_id)                       # as GPT.generate, with the model's KV cache
    lm.save_pretrained("out")                                     # NumberLM.from_pretrained("out") reloads it

Numbers enter through `inputs_embeds`: the embedding of <|num|> is joined with the encoding of
its value by the encoding's `NumberHead` (built at the model's embedding width), as in the
workbench's own GPT. They leave through the head, which reads the model's last hidden state (the
vector its lm head reads) at every position whose next token is <|num|>. Generation feeds each
number the head wrote back with its <|num|> token. `encoding` None is the digit-token baseline:
the same model and tokens, numbers written by the model's own tokenizer.

A saved folder is the model's own (save_pretrained: config, safetensors weights in the body's
dtype, tokenizer with the added tokens) plus number_head.safetensors (always float32) and
numeracy.json (the encoding and its options; saved.py reads both back). A LoRA folder holds the
adapter (peft's files) instead of the weights and names its base model by name (a packaged model such as
"smollm2-135m") or by its path relative to the LoRA folder, never by an absolute path of the
machine it was made on, so the two folders can move together. Loading with another encoding than
the folder's is refused.

Where <|num|>'s rows start is joining.py's (`num_init`); `digit_mass="merge"` makes it as likely
as a number is (issue 68). Under an encoding the model's own tokens that begin a number and
<|num|> are one outcome, "a number starts here", whose probability is theirs together (the logit
of <|num|> is the log-sum-exp of its own and theirs; 0.89 at the start, where the digits have
0.84). The loss of a <|num|> target is that outcome's, and generation, which
masks the digit tokens, gives their mass to <|num|> instead of dropping it: where the pretrained
model would begin a number in digits it begins one through the encoding, and training raises the
outcome's probability instead of first spending its steps on one new row (an unmerged loss lowers
the digits' probability while it raises <|num|>'s). Right after a number a digit would continue
it, so there <|num|> takes none of the digits' mass. The tokens of every other kind keep their
probabilities, so the text's perplexity is unchanged. `digit_mass="drop"` is the masking of
before issue 68. Both, and the tokenizer's `frame`, are recorded in numeracy.json; a folder
without them was made before issue 68 and is read as mean, drop and markers.

Hugging Face conventions: `from_pretrained(path, dtype=..., device_map=...)`, `save_pretrained`,
`generate(prompts, max_new_tokens, do_sample=, temperature=, top_k=, top_p=, seed=)`. The body
may be float32, bfloat16 or float16; the number head and its loss always run in float32.

Every check runs before the model or tokenizer is changed, and a folder is written beside its
target and renamed into place, so a refusal or a failed save changes nothing.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.utils.checkpoint import checkpoint

from .. import encoders
from ..model.gpt import true_float32
from ..runs.atomic import write_folder
from .config import ADOPTION, BASELINE, DIGIT_MASSES, FRAMES, NUM_INITS
from .hub import HEAD_FILE, KNOWN, check_vocabulary, load_folder, quiet, resolve_model
from .joining import check_model, head_reads_hidden, number_head, resolve, start_number_rows
from .saved import FORMAT, META_FILE, load_head, read_meta
from .tokens import RetrofitTokenizer

NUMBER_LOSS_WEIGHT = 10.0  # C.1's 10
# Rows of target logits computed at once in the training loss: the loss holds ~4 tensors of
# [rows, vocabulary] (logits, log-softmax, their gradients), and a pretrained model's vocabulary
# is tens of thousands wide, so all of a step's targets at once would cost gigabytes.
LOSS_CHUNK_ROWS = 256


class NumberLM(nn.Module):
    """A causal LM (`model`, `tokenizer`: Hugging Face objects) with `encoding` (a registered
    single-token encoding, or None / BASELINE for the model's own digit tokens)."""

    def __init__(
        self,
        model,
        tokenizer,
        encoding: str | None = None,
        options: dict | None = None,
        name: str | None = None,
        source: str | None = None,
        *,
        num_init: str = ADOPTION["num_init"],
        digit_mass: str = ADOPTION["digit_mass"],
        frame: str = ADOPTION["frame"],
    ):
        super().__init__()
        name = name or getattr(model, "name_or_path", "") or type(model).__name__
        self.encoding_name, self.options = resolve(encoding, options)
        for key, value, choices in (
            ("num_init", num_init, NUM_INITS),
            ("digit_mass", digit_mass, DIGIT_MASSES),
            ("frame", frame, FRAMES),
        ):
            if value not in choices:
                raise ValueError(f"{key} must be one of {choices}, got {value!r}")
        codec = None if self.encoding_name == BASELINE else encoders.get(self.encoding_name, **self.options)
        check_vocabulary(tokenizer, model, name)
        width = check_model(model, name)
        head = number_head(codec, width, name) if codec is not None else None
        added_now = "<|num|>" not in tokenizer.get_vocab()  # a saved folder's tokenizer holds it, with its rows
        tok = RetrofitTokenizer(tokenizer, codec, name, frame)
        if model.get_input_embeddings().num_embeddings < tok.vocab_size:  # only now is anything changed
            # the new rows (and an untied lm head's) at the mean of the old ones, not random
            with quiet():
                model.resize_token_embeddings(tok.vocab_size, mean_resizing=True)
        if head is not None and num_init == "digits" and added_now:
            start_number_rows(model, tok)
        if head is not None:  # float32 on the device of the embedding, whatever the body's dtype
            head = head.to(device=model.get_input_embeddings().weight.device, dtype=torch.float32)
        self.hf, self.head, self.tok, self.name, self.source = model, head, tok, name, source
        self.num_init, self.digit_mass, self.frame = num_init, digit_mass, frame
        self.lora: dict | None = None
        self.reads_hidden = head_reads_hidden(model)  # logits computed at the targets only
        self.loss_logits = "targets"  # or "full": every position's logits, as before issue 65
        self._masked: Tensor | None = None
        self._merged: list[tuple[int, Tensor]] | None = None

    @property
    def max_positions(self) -> int | None:
        """The longest sequence the model's positions cover (None: it does not say)."""
        return getattr(self.hf.config, "max_position_embeddings", None)

    @property
    def device(self) -> torch.device:
        return self.hf.get_input_embeddings().weight.device

    def embed(self, ids: Tensor, values: Tensor) -> Tensor:
        """The model's token embeddings, the head's join of the encoding at <|num|>."""
        x = self.hf.get_input_embeddings()(ids)
        at = self.tok.is_number(ids)
        if self.head is not None and at.any():
            x = x.clone()
            with torch.autocast(x.device.type, enabled=False), true_float32():  # the join in float32
                x[at] = self.head.embed(x[at].float(), values[at]).to(x.dtype)
        return x

    def run(
        self,
        ids: Tensor,
        values: Tensor,
        attention_mask: Tensor,
        position_ids=None,
        past=None,
        cache=False,
        last_logits: bool = False,
    ):
        """The model's output (logits, hidden_states, with `cache` past_key_values) on ids with
        their values, continuing from the cache `past`. `last_logits`: logits of the last position
        only, where the model computes them from its last hidden state (`reads_hidden`): the
        caller reads what it needs through `logits_at` instead of [B, T, vocabulary]."""
        keep = {"logits_to_keep": 1} if last_logits and self.reads_hidden else {}
        return self.hf(
            inputs_embeds=self.embed(ids, values),
            attention_mask=attention_mask,
            position_ids=position_ids,
            past_key_values=past,
            use_cache=cache,
            output_hidden_states=True,
            **keep,
        )

    def logits_at(self, out, where: Tensor) -> Tensor:
        """The logits [N, V] at the positions `where` ([B, T] mask) of `run`'s output, whether or
        not it was run with `last_logits`."""
        if out.logits.shape[1] == where.shape[1]:
            return out.logits[where]
        return self.hf.get_output_embeddings()(out.hidden_states[-1][where])

    def target_losses(self, out, where: Tensor, targets: Tensor, inputs: Tensor) -> Tensor:
        """`token_losses` [N] of the targets at `where` of `run(..., last_logits=True)`'s output,
        their logits computed LOSS_CHUNK_ROWS at a time and, under autograd, recomputed in the
        backward pass instead of kept (the loss needs each target's log-probability, not the
        [N, V] logits it is computed from)."""
        if out.logits.shape[1] == where.shape[1]:  # the model's own logits (not `reads_hidden`)
            return self.token_losses(out.logits[where].float(), targets, inputs)
        head = self.hf.get_output_embeddings()

        def losses(hidden, targets, inputs):
            # a product of under 4 rows takes a matrix-vector kernel whose rounding differs from
            # the full logits' one: padded rows keep the losses bit for bit those of `out.logits`
            rows = len(hidden)
            padded = torch.cat([hidden, hidden.new_zeros(max(0, 8 - rows), hidden.shape[-1])])
            return self.token_losses(head(padded)[:rows].float(), targets, inputs)

        hidden = out.hidden_states[-1][where]
        if len(hidden) <= LOSS_CHUNK_ROWS or not torch.is_grad_enabled():
            return losses(hidden, targets, inputs)
        # near-equal chunks: none of one row, which a matrix-vector kernel would round otherwise
        parts = -(-len(hidden) // LOSS_CHUNK_ROWS)
        return torch.cat(
            [
                checkpoint(losses, h, t, i, use_reentrant=False)
                for h, t, i in zip(*(x.tensor_split(parts) for x in (hidden, targets, inputs)))
            ]
        )

    def forward(
        self, ids, values, attention_mask, targets, target_values, loss_mask, task_ids=None, task_weights=None
    ) -> dict[str, Tensor]:
        """C.1's per-token loss, as GPT.forward: cross-entropy, plus 10 x the number loss where the
        target is <|num|>, each target weighted by its task's weight, averaged over all targets.
        "ce" and "number" are unweighted means for the log; with `task_ids` also each task's summed
        per-token loss and target count (C.4's loss normalisation)."""
        out = self.run(ids, values, attention_mask, last_logits=self.loss_logits == "targets")
        m = loss_mask
        count = max(1, int(m.sum()))
        weights = (
            task_weights[task_ids[m]] if task_weights is not None else torch.ones_like(targets[m], dtype=torch.float32)
        )
        ce_each = self.target_losses(out, m, targets[m], ids[m])
        total = (weights * ce_each).sum() / count
        per_token = ce_each.detach().clone()
        losses = {"ce": ce_each.detach().sum() / count, "number": ce_each.new_zeros(())}
        if self.head is not None:
            at = self.tok.is_number(targets[m])
            if at.any():
                hidden = out.hidden_states[-1][m][at]
                with torch.autocast(hidden.device.type, enabled=False), true_float32():
                    number_each = self.head.loss(self.number_outputs(hidden), target_values[m][at])
                total = total + NUMBER_LOSS_WEIGHT * (weights[at] * number_each).sum() / count
                per_token[at] += NUMBER_LOSS_WEIGHT * number_each.detach()
                losses["number"] = number_each.detach().mean()
                losses["numbers"] = len(number_each)  # the mean's count, for a mean over a step's groups
        losses["loss"] = total
        if task_ids is not None:
            tasks, n = task_ids[m], len(task_weights) if task_weights is not None else int(task_ids.max()) + 1
            losses["task_loss"] = per_token.new_zeros(n).index_add_(0, tasks, per_token)
            losses["task_tokens"] = per_token.new_zeros(n).index_add_(0, tasks, torch.ones_like(per_token))
        return losses

    def merges(self) -> bool:
        """Whether the digits' probability is <|num|>'s (`digit_mass="merge"` with an encoding)."""
        return self.head is not None and self.digit_mass == "merge"

    def _merges(self, inputs: Tensor) -> list[tuple[int, Tensor, Tensor]]:
        """Per number token: its id, the ids merged into it (itself and the model's tokens that
        begin a number where it stands), and the positions [N] (after the input tokens) where
        they merge. Right after a number a digit would continue it, and an encoded number is
        already whole: there <|num|> takes no digit's mass (it would write a second number where
        the pretrained model writes the next digit). A space and a digit begin a new number after
        any token, so <|num_sp|> merges everywhere."""
        if self._merged is None:
            self._merged = [
                (n, torch.tensor([n, *starts], dtype=torch.long)) for n, starts in self.tok.number_starts.items()
            ]
        begins = ~self.tok.is_number(inputs)
        return [
            (n, ids.to(inputs.device), begins if n == self.tok.num_id else torch.ones_like(begins))
            for n, ids in self._merged
        ]

    def merged_logits(self, logits: Tensor, inputs: Tensor) -> Tensor:
        """The logits [N, V] of the token after inputs [N], with each number token's logit the
        log-sum-exp of its own and those of the tokens that begin a number where it stands, where
        a number can begin; every other logit as it is (the caller masks the digit tokens, so
        their mass is counted once)."""
        logits = logits.clone()
        for n, ids, rows in self._merges(inputs.to(logits.device)):
            if rows.any():
                logits[rows, n] = logits[rows][:, ids].logsumexp(-1)
        return logits

    def next_token_logits(self, logits: Tensor, inputs: Tensor, mask: bool = True) -> Tensor:
        """The logits [N, V] generation chooses from after inputs [N] (float32): with an encoding
        and `mask` the model's digit tokens masked, their mass merged into <|num|> first where
        `digit_mass="merge"`; as the model gives them otherwise."""
        logits = logits.float()
        if self.head is None or not mask:
            return logits
        if self.merges():
            logits = self.merged_logits(logits, inputs)
        else:
            logits = logits.clone()
        if self._masked is None:
            self._masked = torch.tensor(self.tok.digit_ids, dtype=torch.long)
        logits[:, self._masked.to(logits.device)] = -math.inf
        return logits

    def token_losses(self, logits: Tensor, targets: Tensor, inputs: Tensor) -> Tensor:
        """Cross-entropy [N] of targets [N] under logits [N, V] after inputs [N]; with
        `digit_mass="merge"` a number token's is that of the outcome "a number starts here" (it
        and the tokens that begin one), every other token's as it is: the normaliser is the same."""
        losses = F.cross_entropy(logits, targets, reduction="none")
        if not self.merges():
            return losses
        for n, ids, rows in self._merges(inputs):
            at = (targets == n) & rows
            if at.any():
                picked = logits[at]
                losses = losses.masked_scatter(at, picked.logsumexp(-1) - picked[:, ids].logsumexp(-1))
        return losses

    @torch.no_grad()
    def generate(
        self,
        prompts,
        max_new_tokens: int = 64,
        eos_id: int | None = None,
        pad_id: int | None = None,
        *,
        do_sample: bool = False,
        temperature: float = 1.0,
        top_k: int | None = None,
        top_p: float | None = None,
        seed: int | None = None,
        mask_digits: bool = True,
    ) -> list[tuple[list[int], list[float]]]:
        """Continue each prompt until <|eos|> (included) or `max_new_tokens`, with the model's KV
        cache: greedy, or with `do_sample` drawn after `temperature`, `top_k` and `top_p` (seeded
        by `seed`). A prompt is text (`tok.encode` reads it, numbers included) or (ids, values).
        A <|num|> carries the head's value, which is fed back with it. With an encoding the
        model's own digit tokens are masked (`mask_digits`): a number is written through the
        encoding or not at all, never credited to it from digit tokens; with `digit_mass="merge"`
        the probability of those that begin a number is <|num|>'s. Prompts are left-padded;
        padding is never attended to. Returns (ids, values) per prompt: `tok.decode(*out)`."""
        if (
            max_new_tokens < 1
            or temperature <= 0
            or (top_k is not None and top_k < 1)
            or (top_p is not None and not 0 < top_p <= 1)
        ):
            raise ValueError(
                f"generate: need max_new_tokens >= 1, temperature > 0, top_k >= 1, 0 < top_p <= 1; got "
                f"{max_new_tokens}, {temperature}, {top_k}, {top_p}"
            )
        eos_id = self.tok.eos_id if eos_id is None else eos_id
        pad_id = self.tok.pad_id if pad_id is None else pad_id
        prompts = [
            self.tok.encode(p) if isinstance(p, str) else p
            for p in ([prompts] if isinstance(prompts, str) else prompts)
        ]
        sampling = dict(
            do_sample=do_sample,
            temperature=temperature,
            top_k=top_k,
            top_p=top_p,
            mask=mask_digits,
            generator=torch.Generator().manual_seed(seed) if seed is not None else None,
        )
        self.eval()
        B, L = len(prompts), max(len(ids) for ids, _ in prompts)
        ids = torch.full((B, L), pad_id, dtype=torch.long)
        values = torch.zeros(B, L, dtype=torch.float64)
        mask = torch.zeros(B, L, dtype=torch.long)
        for b, (i, v) in enumerate(prompts):
            ids[b, L - len(i) :], values[b, L - len(i) :], mask[b, L - len(i) :] = (
                torch.as_tensor(i),
                torch.as_tensor(v, dtype=torch.float64),
                1,
            )
        positions = (mask.cumsum(1) - 1).clamp(min=0)
        device = self.device
        out = self.run(ids.to(device), values.to(device), mask.to(device), positions.to(device), cache=True)
        generated, done = [([], []) for _ in range(B)], torch.zeros(B, dtype=torch.bool)
        token = ids[:, -1]  # left-padded: every prompt's last token
        for _ in range(max_new_tokens):
            token, value = self._next_token(out.logits[:, -1], out.hidden_states[-1][:, -1], token, **sampling)
            for b in torch.nonzero(~done).flatten().tolist():
                generated[b][0].append(int(token[b]))
                generated[b][1].append(float(value[b]))
            done |= token == eos_id
            if done.all():
                break
            mask = torch.cat([mask, torch.ones(B, 1, dtype=torch.long)], 1)
            positions = positions[:, -1:] + 1
            out = self.run(
                token[:, None].to(device),
                value[:, None].to(device),
                mask.to(device),
                positions.to(device),
                past=out.past_key_values,
                cache=True,
            )
        return generated

    def _next_token(
        self,
        logits: Tensor,
        hidden: Tensor,
        inputs: Tensor | None = None,
        do_sample: bool = False,
        temperature: float = 1.0,
        top_k: int | None = None,
        top_p: float | None = None,
        mask: bool = True,
        generator: torch.Generator | None = None,
    ) -> tuple[Tensor, Tensor]:
        """The next token [B] after the inputs [B] (None: no number, so one may begin) and its
        value [B] (the head's, where the token carries a number)."""
        if inputs is None:
            inputs = torch.full((len(logits),), self.tok.pad_id, dtype=torch.long)
        logits = self.next_token_logits(logits.float().cpu(), inputs.cpu(), mask)
        if do_sample:
            logits = logits / temperature
            if top_k is not None:
                kth = logits.topk(min(top_k, logits.shape[-1]), -1).values[:, -1:]
                logits = logits.masked_fill(logits < kth, -math.inf)
            if top_p is not None:
                ordered, order = logits.sort(-1, descending=True)
                beyond = ordered.softmax(-1).cumsum(-1) - ordered.softmax(-1) >= top_p  # keeps the first always
                logits = logits.scatter(-1, order, ordered.masked_fill(beyond, -math.inf))
            token = torch.multinomial(logits.softmax(-1), 1, generator=generator).squeeze(1)
        else:
            token = logits.argmax(-1)
        value = torch.zeros(len(token), dtype=torch.float64)
        is_num = self.tok.is_number(token)
        if self.head is not None and is_num.any():
            value[is_num] = self.head.predict(self.number_outputs(hidden[is_num.to(hidden.device)])).cpu().double()
        return token, value

    def number_outputs(self, hidden: Tensor) -> Tensor:
        """The head on hidden states [N, width] in float32, whatever the body's dtype or autocast
        says (a bf16 head would round xVal's value to 8 significant bits; see GPT.number_outputs)."""
        device = next(self.head.parameters()).device
        with torch.autocast(device.type, enabled=False), true_float32():
            return self.head(hidden.to(device=device, dtype=torch.float32))

    # -- LoRA -------------------------------------------------------------------------------
    def add_lora(self, rank: int = 16, alpha: float = 32.0, dropout: float = 0.0) -> None:
        """Freeze the model; train LoRA adapters on all its linear layers, the rows of the added
        tokens (<|num|>, the markers) in its embedding and lm head, and the number head."""
        from peft import LoraConfig, get_peft_model

        if self.lora is not None:
            raise ValueError(f"{self.name} already has LoRA adapters")
        if self.source is None:
            raise ValueError(
                "a LoRA model is saved as adapters of its base model folder: load the model with "
                "NumberLM.from_pretrained(folder) to add LoRA"
            )
        names = {module: n for n, module in self.hf.named_modules()}
        rows = self.tok.added_ids
        layers = {names[self.hf.get_input_embeddings()]: rows, names[self.hf.get_output_embeddings()]: rows}
        config = LoraConfig(
            r=rank, lora_alpha=alpha, lora_dropout=dropout, target_modules="all-linear", trainable_token_indices=layers
        )
        with quiet():
            self.hf = get_peft_model(self.hf, config)
        self.lora = {"rank": rank, "alpha": alpha, "dropout": dropout}
        self.reads_hidden = head_reads_hidden(self.hf)

    # -- saving and loading -------------------------------------------------------------------
    def save_pretrained(self, folder, overwrite: bool = False) -> Path:
        """Write the model, its tokenizer, the head and numeracy.json into `folder` (beside it
        first, then renamed into place; an existing folder only with `overwrite`). A LoRA folder
        names its base model by name or by its path relative to `folder`."""
        from safetensors.torch import save_file

        folder = Path(folder)
        if folder.exists() and any(folder.iterdir()) and not overwrite:
            raise FileExistsError(f"{folder} is not empty; choose another folder or pass overwrite=True")
        base = self.base_reference(folder) if self.lora else None
        meta = {
            "format": FORMAT,
            "encoding": self.encoding_name,
            "encoding_options": self.options,
            "lora": self.lora,
            "base_model": base,
            "dtype": str(self.dtype).removeprefix("torch."),
            "num_init": self.num_init,
            "digit_mass": self.digit_mass,
            "frame": self.frame,
        }

        def fill(tmp: Path) -> None:
            with quiet():
                self.hf.save_pretrained(tmp)  # a peft model writes its adapter only
                self.tok.hf.save_pretrained(tmp)
            if self.lora:  # peft writes the base's absolute path: the machine's, not the folder's
                adapter = tmp / "adapter_config.json"
                config = json.loads(adapter.read_text())
                config["base_model_name_or_path"] = base
                adapter.write_text(json.dumps(config, indent=2))
            if self.head is not None:
                save_file(
                    {k: v.detach().float().cpu().contiguous() for k, v in self.head.state_dict().items()},
                    tmp / HEAD_FILE,
                )
            (tmp / META_FILE).write_text(json.dumps(meta, indent=1))

        return write_folder(folder, fill)

    @property
    def dtype(self) -> torch.dtype:
        """The body's dtype (that of its input embedding); the head is float32 whatever it is."""
        return self.hf.get_input_embeddings().weight.dtype

    def base_reference(self, folder: Path) -> str:
        """How a LoRA folder at `folder` names its base model: a packaged model's name, or the
        base folder's path relative to `folder`."""
        if self.source in KNOWN:
            return self.source
        return os.path.relpath(Path(self.source).resolve(), Path(folder).resolve())

    @classmethod
    def from_pretrained(
        cls,
        path,
        encoding: str | None = None,
        options: dict | None = None,
        *,
        dtype: str | torch.dtype = "auto",
        device_map=None,
        num_init: str | None = None,
        digit_mass: str | None = None,
        frame: str | None = None,
    ) -> NumberLM:
        """A local folder or packaged model name ("smollm2-135m"): a plain causal LM (retrofitted
        with `encoding`; None: the baseline) or a folder this class saved (`encoding` None: its
        own; another one is refused). `dtype` (auto: as stored, float32, bfloat16, float16) is the
        body's; `device_map` is passed to transformers. `num_init`, `digit_mass` and `frame`
        (None: issue 68's, `ADOPTION`) say how <|num|> is joined to a plain model; a saved folder
        keeps those it was fine-tuned with, and others are refused."""
        if isinstance(dtype, torch.dtype):
            dtype = str(dtype).removeprefix("torch.")
        source = str(path) if str(path) in KNOWN else None
        path = resolve_model(path)
        meta = read_meta(path)
        asked = {"num_init": num_init, "digit_mass": digit_mass, "frame": frame}
        adoption = {k: v if v is not None else ADOPTION[k] for k, v in asked.items()}
        if meta is not None:
            saved = (meta["encoding"], meta["encoding_options"])
            if encoding is not None and resolve(encoding, options) != saved:
                raise ValueError(
                    f"{path} was fine-tuned with the encoding {saved[0]!r} {saved[1] or ''}, not "
                    f"{encoding!r} {resolve(encoding, options)[1] or ''}: a number head belongs to "
                    "its encoding; load it without an encoding or with the saved one"
                )
            encoding, options = saved
            adoption = {k: meta[k] for k in asked}
            differ = {k: v for k, v in asked.items() if v is not None and v != meta[k]}
            if differ:
                raise ValueError(
                    f"{path} was fine-tuned with {', '.join(f'{k}={meta[k]!r}' for k in differ)}, not "
                    f"{', '.join(f'{k}={v!r}' for k, v in differ.items())}: a model answers as it was "
                    "trained to; load it without them or with the saved ones"
                )
        base = path
        if meta and meta["lora"]:
            named = meta["base_model"]
            if named in KNOWN:
                base, source = resolve_model(named), named
            else:
                base = Path(named) if Path(named).is_absolute() else (path / named)
                if not base.is_dir():
                    raise ValueError(
                        f"the LoRA folder {path} holds adapters of the base model {named} "
                        f"({base.resolve()}), which is not there: keep the base where it was "
                        "relative to the LoRA folder"
                    )
        model, tokenizer = load_folder(base, path, dtype, device_map)
        lm = cls(model, tokenizer, encoding, options, name=str(path), source=source or str(base.resolve()), **adoption)
        if meta and meta["lora"]:
            from peft import PeftModel

            try:
                with quiet():
                    lm.hf = PeftModel.from_pretrained(lm.hf, str(path), is_trainable=True)
                lm.reads_hidden = head_reads_hidden(lm.hf)
            except Exception as error:  # noqa: BLE001 - a missing or corrupt adapter
                raise ValueError(
                    f"cannot load the LoRA adapter of {path}: {str(error).splitlines()[0][:300]}"
                ) from None
            lm.lora = meta["lora"]
        if lm.head is not None and meta is not None:
            load_head(lm.head, path / HEAD_FILE)
        return lm
