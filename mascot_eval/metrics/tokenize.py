"""The word tokenizer shared by the lexical metrics (distinct-n, entropy, BLEU, openers).

Text is lower-cased and split into word tokens (runs of letters/digits/underscore, keeping inner
apostrophes such as ``don't``) and single punctuation characters; whitespace is dropped. Example:
``"I hear you. That's hard!" -> ['i', 'hear', 'you', '.', "that's", 'hard', '!']``.
ROUGE-L uses rouge-score's own tokenizer instead (see ``rouge.py``).
"""

from __future__ import annotations

import re

TOKEN_RE = re.compile(r"\w+(?:['\u2019]\w+)*|[^\w\s]")


def tokenize(text: str) -> list[str]:
    return TOKEN_RE.findall(text.lower())
