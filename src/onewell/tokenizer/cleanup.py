"""The space clean-up llama.cpp's detokenize applies for some vocabularies (clean_up_tokenization_spaces).

Three passes over the bytes, in llama.cpp's order: drop a space before ? ! . or , ; turn " ' " into "'";
drop a space before 's 'm 're 've (but not before 't 'd 'll).
"""
from __future__ import annotations

import re

_BEFORE_PUNCTUATION = re.compile(rb" (?=[?!.,])")
_LONE_APOSTROPHE = re.compile(rb" ' ")
_CONTRACTION = re.compile(rb" (?='(?:s|m|re|ve))")


def clean_spaces(data: bytes) -> bytes:
    data = _BEFORE_PUNCTUATION.sub(b"", data)
    data = _LONE_APOSTROPHE.sub(b"'", data)
    return _CONTRACTION.sub(b"", data)
