"""Triple-digit (subword) tokenization ("Subword" in the paper's tables): up to three digits per
token, as GPT-4-style tokenizers; "-" and "." are their own pieces.

Option `zero_pieces` (the paper's text only says "triple digit (subword)"; Table 5's token
counts came from the authors' tokenizer):
  False (default, the authors', `create_tokenizers.py` "td"): the digit pieces are the numbers
      "0" … "999" and nothing else, so no piece has a leading zero ("007", "00" and "000" do
      not exist), and a run of digits is cut leftmost-longest, as a tokenizer matching its
      added tokens does: the longest piece that starts here, then on.
          "1007" -> 100 7      "007" -> 0 0 7      "1000000" -> 100 0 0 0 0
          "0.007" -> 0 . 0 0 7      "-12345.5" -> - 123 45 . 5
  True (this workbench's earlier cut): every string of 1-3 digits is a piece ("007", "000"),
      and the integer and the fraction part are each cut left to right into groups of three:
          "1000000" -> 100 000 0      "0.007" -> 0 . 007
Either way the pieces of a number's text join back to exactly that text.
"""

from __future__ import annotations

from functools import cached_property

from . import register
from .digits import DigitEncoding


@register
class TripleDigit(DigitEncoding):
    name = "triple_digit"
    group = 3
    label = "Triple digit"
    paper_label = "Subword"

    def __init__(self, zero_pieces: bool = False):
        if not isinstance(zero_pieces, bool):
            raise ValueError(f"zero_pieces must be True or False, got {zero_pieces!r}")
        self.zero_pieces = zero_pieces

    @cached_property
    def pieces(self) -> list[str]:
        if self.zero_pieces:
            return super().pieces
        return ["-", "."] + [str(n) for n in range(1000)]

    def cut(self, digits: str) -> list[str]:
        if self.zero_pieces:
            return super().cut(digits)
        out, i = [], 0
        while i < len(digits):  # a piece never starts with 0 unless it is "0"
            length = 1 if digits[i] == "0" else min(self.group, len(digits) - i)
            out.append(digits[i : i + length])
            i += length
        return out
