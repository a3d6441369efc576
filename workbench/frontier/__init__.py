"""Frontier-LLM benchmark of section 2 / appendix B: prompts, answer parsing, scoring, an
OpenAI-compatible client, the authors' released files, and the paper's Tables 1-15 as data."""
