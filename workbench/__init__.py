"""Numeracy workbench: number encodings for language models (BitTokens, FoNE, xVal, digits)."""
__version__ = "0.1.0"
