"""Number encodings inside any pretrained Hugging Face causal LM (the retrofit).

The paper tested BitTokens only in models trained from scratch. This package joins any registered
single-token encoding (BitTokens, FoNE, xVal, ...) to a causal LM that `transformers` loads from a
local folder, and fine-tunes it with the workbench's tasks, curriculum, balancing and scoring:

    tokens.py    RetrofitTokenizer: the model's tokenizer + the workbench's tokens and number parser
    model.py     NumberLM: the model with the encoding's NumberHead (inputs_embeds in, last hidden
                 state out), generation with the model's KV cache, LoRA, save/load
    joining.py   the checks before a model and an encoding are joined; where <|num|>'s rows start
    saved.py     a saved folder read back: numeracy.json checked, the head's weights
    finetune.py  the fine-tuning run and its command line (python -m workbench.retrofit --help)
    pretrain.py  a small model pretrained on the text corpus: the stand-in for a downloaded one

    python -m workbench.retrofit --model PATH --encoding bittokens --tasks multiplication --tokens 2e5 --out DIR
    python -m workbench.retrofit --model PATH --encoding none ...   # the same budget with its own digit tokens
"""

__all__ = ["BASELINE", "NumberLM", "RetrofitTokenizer"]


def __getattr__(name):
    """The package's names, imported on first use: `python -m workbench.retrofit --help` and the
    notebook runner's check of a model name (`hub.KNOWN`) need neither torch nor transformers."""
    if name in ("BASELINE", "NumberLM"):
        from . import model

        return getattr(model, name)
    if name == "RetrofitTokenizer":
        from .tokens import RetrofitTokenizer

        return RetrofitTokenizer
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
