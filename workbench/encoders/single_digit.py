"""Single-digit tokenization: every digit, "-" and "." is its own token (e.g. Llama 2, Gemini)."""

from . import register
from .digits import DigitEncoding


@register
class SingleDigit(DigitEncoding):
    name = "single_digit"
    group = 1
    label = "Single digit"
    paper_label = "Single Digit"
