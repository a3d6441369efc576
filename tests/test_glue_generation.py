"""Greedy generation with the KV cache equals greedy decoding by full recomputation (no cache),
token by token and value by value: one prompt, a left-padded batch of prompts of different
lengths, and across <|num|> tokens, whose value the head writes and the next step reads back."""

import pytest
import torch

from workbench.measures.evaluate import answer
from workbench.model.gpt import GPT, packed_mask, preset
from workbench.tokenizer import Tokenizer

PROMPTS = ["1.5 + 2", "<|min|>4, 2, 9, 10.25, 3", "12 * 3", "What is 7 - 0.5 * 2?"]
MARGIN = 1e-4  # the reference's greedy choices must be clear, or float noise could flip them
# Seeds whose random models write numbers early (and, with <|eos|> likely, stop at different steps)
SEED = {"bittokens": 1, "fone": 7, "single_digit": 0}
EOS_SEED = {"bittokens": 1, "fone": 2}


def random_model(tok, seed: int, with_eos: bool) -> GPT:
    """A tiny GPT with larger random weights in the blocks than GPT-2's initialisation (whose small
    residual projections would make attention, and so positions and the cache, nearly invisible).
    Only <|num|> (where the encoding has it), a few text tokens and optionally <|eos|> get large
    logits, so numbers are written often and the generation runs long."""
    torch.manual_seed(seed)
    model = GPT(preset("cpu-tiny"), tok.encoding, tok.vocab_size, tok.num_id)
    favoured = [tok.num_id] * tok.encoding.single_token + [int(i) for i in tok.encode(" and x = (")[0]]
    favoured += [tok.eos_id] * with_eos
    with torch.no_grad():
        for p in model.blocks.parameters():
            p.add_(0.05 * torch.randn_like(p))
        scale = torch.full((tok.vocab_size, 1), 0.1)
        scale[favoured] = 3.0
        model.lm_head.weight.mul_(scale)
    return model.eval()


def decided(head_out) -> float:
    """How clearly a head output decides its value: the smallest |bit logit| (BitTokens) or the
    smallest gap between the two best digits of a place (FoNE)."""
    if head_out.dim() == 3:  # digit logits [N, places, 10]
        top = head_out.topk(2, -1).values
        return (top[..., 0] - top[..., 1]).min().item()
    return head_out.abs().min().item()


@torch.no_grad()
def greedy_without_cache(model, tok, prompt: str, max_new_tokens: int, margin: float = MARGIN, stop: bool = True):
    """The reference: every step reruns the whole sequence; a <|num|> takes the head's value.
    Stops after <|eos|> unless `stop` is False."""
    ids, values = (list(a) for a in tok.encode(f"<|bos|>{prompt}<|eoq|>"))
    out_ids, out_values = [], []
    for _ in range(max_new_tokens):
        T = len(ids)
        hidden = model.trunk(
            torch.tensor([ids]),
            torch.tensor([values], dtype=torch.float64),
            torch.arange(T)[None],
            packed_mask(torch.zeros(1, T, dtype=torch.long)),
        )[0, -1]
        logits = model.lm_head(hidden)
        top = logits.topk(2).values
        assert top[0] - top[1] > margin, "near-tie in the reference: pick another seed"
        token = int(logits.argmax())
        value = 0.0
        if token == tok.num_id:
            head_out = model.number_head(hidden[None])
            assert decided(head_out) > margin, "the number head is undecided: pick another seed"
            value = float(model.number_head.predict(head_out)[0])
        out_ids.append(token)
        out_values.append(value)
        if token == tok.eos_id and stop:
            break
        ids.append(token)
        values.append(value)
    return out_ids, out_values


def expected_text(tok, out_ids, out_values):
    if out_ids and out_ids[-1] == tok.eos_id:
        out_ids, out_values = out_ids[:-1], out_values[:-1]
    return tok.decode(out_ids, out_values)


@pytest.mark.parametrize("name", SEED)
def test_cached_generation_equals_full_recomputation_in_a_padded_batch(name):
    tok = Tokenizer(name)
    model = random_model(tok, SEED[name], with_eos=False)
    steps = 20
    texts, _, n_out = answer(model, tok, PROMPTS, max_new_tokens=steps)
    for prompt, text, n in zip(PROMPTS, texts, n_out):
        ref_ids, ref_values = greedy_without_cache(model, tok, prompt, steps)
        assert text == expected_text(tok, ref_ids, ref_values), prompt
        assert n == len(ref_ids) == steps
    if tok.encoding.single_token:  # the test must reach the <|num|> path, and read its value back
        ref_ids, ref_values = greedy_without_cache(model, tok, PROMPTS[0], steps)
        assert tok.num_id in ref_ids[:-3], "no number written early enough to matter"


@pytest.mark.parametrize("name", ["bittokens", "fone"])
def test_the_value_fed_back_after_num_matters(name):
    """Guard for the test above: decoding with 0 fed back at every <|num|> gives another
    continuation, so a generate that forgot the value would fail it."""
    tok = Tokenizer(name)
    model = random_model(tok, SEED[name], with_eos=False)
    ref_ids, ref_values = greedy_without_cache(model, tok, PROMPTS[0], 20)
    original = model.number_head.predict
    model.number_head.predict = lambda head_out: torch.zeros_like(original(head_out))
    forgot_ids, _ = greedy_without_cache(model, tok, PROMPTS[0], 20, margin=-1)  # ties do not matter here
    assert forgot_ids != ref_ids


@pytest.mark.parametrize("name", EOS_SEED)
def test_rows_stop_at_their_own_eos(name):
    """With <|eos|> among the likely tokens rows finish at different steps; a finished row takes no
    more tokens (though its model would write more than <|eos|>) and the others go on as if alone."""
    tok = Tokenizer(name)
    model = random_model(tok, EOS_SEED[name], with_eos=True)
    texts, _, n_out = answer(model, tok, PROMPTS, max_new_tokens=20)
    lengths = []
    for prompt, text, n in zip(PROMPTS, texts, n_out):
        ref_ids, ref_values = greedy_without_cache(model, tok, prompt, 20)
        assert text == expected_text(tok, ref_ids, ref_values) and n == len(ref_ids), prompt
        lengths.append(n)
    assert len(set(lengths)) > 1 and min(lengths) < 20, "rows should stop, at different steps"
    # guard: a row that finished early would go on with another token than <|eos|>
    on = [greedy_without_cache(model, tok, p, max(lengths) + 1, stop=False)[0] for p, n in zip(PROMPTS, lengths)]
    assert any(n < max(lengths) and ids[n] != tok.eos_id for ids, n in zip(on, lengths))
