"""workbench.retrofit: number encodings inside Hugging Face causal LMs (GPT-2, Llama, Qwen2), offline.

Tiny random models are built from config and saved to a temporary folder; their tokenizer is a
byte-level BPE trained here on the workbench's text corpus. Nothing is downloaded."""
import json
import os
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

from workbench.evaluate import answer, answer_cap  # noqa: E402
from workbench.retrofit import NumberLM  # noqa: E402
from workbench.retrofit import finetune, model as retrofit_model  # noqa: E402
from workbench.retrofit.finetune import rows  # noqa: E402
from workbench.retrofit.pretrain import build_model, corpus_texts, save, train_tokenizer  # noqa: E402

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
    return {a: save(build_model(a, hf_tokenizer, hidden=128, layers=2, heads=2, context=128), hf_tokenizer, root / a)
            for a in ARCHITECTURES}


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
@pytest.mark.parametrize("arch", ARCHITECTURES)
def test_loss_is_c1s_per_token_loss_with_bits_from_struct(folders, arch):
    """Catches: the head reading the hidden state at the <|num|> position itself (off by one), the
    encoding not joined at the input, the number loss missing its 10 or its mean over all targets."""
    torch.manual_seed(0)
    lm = NumberLM.from_pretrained(folders[arch], "bittokens")
    ids, values, mask = lm.tok.sample(*SAMPLE)
    assert list(values[ids == lm.tok.num_id]) == [3.5, 12.0, 42.0, -0.25]  # "-0.25" after "and " is signed
    assert lm.tok.decode(ids, values) == "<|bos|>3.5 * 12<|eoq|>42 and -0.25<|eos|>"
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
    ce = F.cross_entropy(out.logits[0, learned], b["targets"][0, learned])
    numbers = [t for t in learned.tolist() if b["targets"][0, t] == lm.tok.num_id]
    number = sum(F.binary_cross_entropy_with_logits(
        lm.head(out.hidden_states[-1][0, t]), torch.tensor(float_bits(float(b["target_values"][0, t])),
                                                            dtype=torch.float32)) for t in numbers)
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
    for (p_ids, p_values), (g_ids, g_values) in zip(prompts, generated):
        assert g_ids.count(lm.tok.num_id) >= 2  # the test needs numbers written through the head
        ids = torch.tensor(np.concatenate([p_ids, g_ids]))[None]
        values = torch.tensor(np.concatenate([p_values, g_values]))[None]
        with torch.no_grad():
            out = lm.run(ids, values, torch.ones_like(ids))
        before = slice(len(p_ids) - 1, ids.shape[1] - 1)  # the positions that predict each generated token
        assert out.logits[0, before].argmax(-1).tolist() == g_ids
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
    effective = lambda: (lm.hf.get_input_embeddings()(torch.arange(lm.tok.vocab_size)).detach().clone(),  # noqa: E731
                         lm.hf.get_output_embeddings()(torch.eye(128)).detach().clone().T)
    before_params = {n: p.detach().clone() for n, p in lm.named_parameters()}
    (emb0, out0) = effective()
    overfit(lm, [SAMPLE], steps=5)
    changed = {n for n, p in lm.named_parameters() if not torch.equal(p, before_params[n])}
    assert changed <= trainable and any("lora_" in n for n in changed) and any(n.startswith("head.") for n in changed)
    emb1, out1 = effective()
    assert torch.equal(emb0[old_ids], emb1[old_ids]) and torch.equal(out0[old_ids], out1[old_ids])
    assert not torch.equal(emb0[lm.tok.num_id], emb1[lm.tok.num_id])
    assert not torch.equal(out0[lm.tok.eos_id], out1[lm.tok.eos_id])

    lm.save_pretrained(tmp_path / "lora")
    assert (tmp_path / "lora" / "adapter_config.json").exists() and not (tmp_path / "lora" / "model.safetensors").exists()
    again = NumberLM.from_pretrained(tmp_path / "lora")
    b = batch(lm, SAMPLE)
    lm.eval(), again.eval()
    with torch.no_grad():
        assert torch.equal(lm.run(b["ids"], b["values"], b["attention_mask"]).logits,
                           again.run(b["ids"], b["values"], b["attention_mask"]).logits)


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
    for kind, expected in ((NoInputsEmbeds, r"its forward takes no \['inputs_embeds'\]"),
                           (RefusesInputsEmbeds, "does not run on inputs_embeds: this model reads token ids")):
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
    narrow = save(build_model("llama", hf_tokenizer, hidden=64, layers=1, heads=2, context=32), hf_tokenizer,
                  tmp_path / "narrow")
    for encoding, need in (("bittokens", "d_model must be >= 128"), ("fone", "d_model must be >= 98")):
        with pytest.raises(ValueError, match=f"narrow.*hidden size 64.*{encoding} number head.*{need}"):
            NumberLM.from_pretrained(narrow, encoding)
    NumberLM.from_pretrained(narrow, "xval")  # one dimension fits anywhere


def test_an_encoding_without_a_head_is_refused(folders):
    with pytest.raises(ValueError, match="'single_digit' has no number head.*--encoding none"):
        NumberLM.from_pretrained(folders["gpt2"], "single_digit")
    with pytest.raises(ValueError, match="cannot be joined to a model"):
        finetune.RetrofitConfig(model=str(folders["gpt2"]), encoding="triple_digit")


def test_a_folder_saved_with_another_encoding_is_refused(folders, tmp_path):
    lm = NumberLM.from_pretrained(folders["gpt2"], "bittokens")
    lm.save_pretrained(tmp_path / "bit")
    NumberLM.from_pretrained(folders["gpt2"]).save_pretrained(tmp_path / "digits")  # the baseline
    for folder, encoding, options in ((tmp_path / "bit", "fone", None), (tmp_path / "bit", "bittokens", {"reciprocal": False}),
                                      (tmp_path / "digits", "bittokens", None), (tmp_path / "bit", "none", None)):
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
    narrow = save(build_model("gpt2", hf_tokenizer, hidden=64, layers=1, heads=2, context=32), hf_tokenizer,
                  tmp_path / "narrow")
    with pytest.raises(SystemExit):
        finetune.main(["--model", str(narrow), "--encoding", "bittokens", "--out", str(tmp_path / "run")])
    assert "hidden size 64" in capsys.readouterr().err and not (tmp_path / "run").exists()
    with pytest.raises(SystemExit):
        finetune.main(["--encoding", "bittokens", "--out", str(tmp_path / "run")])
    assert "--model is required" in capsys.readouterr().err


# -- the command line, and the fine-tuned model in a fresh process -------------------------------
def test_a_fine_tuned_model_answers_the_same_numbers_after_reloading_in_a_fresh_process(folders, tmp_path):
    """The command line fine-tunes, saves and answers held-out questions in its own process; this
    process loads OUT/model and answers the same questions with the same numbers."""
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "workbench.retrofit", "--model", str(folders["gpt2"]), "--encoding", "bittokens",
           "--tasks", "addition", "--tokens", "3000", "--batch-tokens", "300", "--eval-every", "5", "--lr", "3e-3",
           "--pool-size", "200", "--val-samples", "4", "--test-samples", "6", "--text-samples", "2",
           "--decades", "0", "1", "--max-digits", "2", "--out", str(out), "--threads", "1"]
    env = dict(os.environ, HF_HUB_OFFLINE="1", OMP_NUM_THREADS="1")
    subprocess.run(cmd, check=True, cwd=ROOT, env=env, capture_output=True)
    answered = pd.read_csv(out / "test_samples.csv", dtype={"prediction": str, "answer": str}, keep_default_na=False)
    assert set(json.loads((out / "retrofit.json").read_text())["tasks"]) == {"addition"}
    assert set(pd.read_csv(out / "perplexity.csv")["when"]) == {"before", "after"}
    lm = NumberLM.from_pretrained(out / "model")
    assert lm.encoding_name == "bittokens"
    texts, _, _ = answer(lm, lm.tok, list(answered["prompt"]), answer_cap(lm.tok, answered["answer"]))
    assert texts == list(answered["prediction"])
    assert any(_is_number(t) for t in texts)  # the answers hold numbers the head wrote


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
    for encoding, seed, scores, (before, after) in (("none", 0, [1, 0, 1, 0], (10, 11)), ("none", 1, [1, 1, 1, 1], (10, 13)),
                                                   ("xval", 0, [0.5] * 4, (12, 12))):
        d = tmp_path / f"{encoding}{seed}"
        d.mkdir()
        pd.DataFrame({"task": "addition", "prompt": "1 + 1", "answer": "2", "prediction": "2", "score": scores,
                      "exact": [s == 1 for s in scores], "encoding": encoding, "seed": seed}).to_csv(d / "test_samples.csv")
        pd.DataFrame({"when": ["before", "after"], "ppl_text": [before, after], "encoding": encoding,
                      "seed": seed}).to_csv(d / "perplexity.csv")
        dirs.append(d)
    scores = test_scores(dirs, draws=500).set_index("encoding")
    assert scores.loc["none", "score"] == 0.75 and scores.loc["none", "seeds"] == 2 and scores.loc["none", "exact"] == 0.75
    assert scores.loc["none", "low"] < 0.75 < scores.loc["none", "high"] and scores.loc["xval", "low"] == 0.5
    ppl = perplexity_change(dirs).set_index("encoding")
    assert (ppl.loc["none", "before"], ppl.loc["none", "after"]) == (10, 12)
    assert ppl.loc["none", "change_percent"] == pytest.approx(20)
    rows = table(scores.reset_index(), ppl.reset_index(), order=["xval", "none"])
    assert list(rows.encoding) == ["xval", "none"] and rows.loc[1, "addition score [95 % CI]"].startswith("0.750 [")


def test_cpu_fine_tuning_keeps_freed_memory(folders, tmp_path, monkeypatch):
    """As workbench.train does on a CPU: freed memory stays for the next step (workbench/allocator.py)."""
    calls = []
    monkeypatch.setattr(finetune, "keep_freed_memory", lambda device: calls.append(str(device)))
    finetune.finetune(finetune.RetrofitConfig(
        model=str(folders["gpt2"]), encoding="bittokens", tasks=("addition",), tokens=600, batch_tokens=300,
        eval_every=5, pool_size=50, val_samples=2, test_samples=2, text_samples=0, decades=(0, 1), max_digits=2,
        out=str(tmp_path / "run"), threads=1))
    assert calls == ["cpu"]
