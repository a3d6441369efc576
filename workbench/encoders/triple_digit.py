"""Triple-digit (subword) tokenization: up to three digits per token, as GPT-4-style tokenizers."""
from . import register
from .digits import DigitEncoding


@register
class TripleDigit(DigitEncoding):
    name = "triple_digit"
    group = 3
    paper_label = "Subword"
