"""Reads a tokenizer's vocabulary from GGUF metadata: tokens, their kinds, BPE merges and the special ids.

The rules for which tokens count as special or end-of-generation follow llama.cpp's vocab loader
(llama-vocab.cpp), so that a model stops and tokenizes exactly where llama.cpp does.
"""
from __future__ import annotations

import operator
from collections.abc import Sequence
from dataclasses import dataclass

from onewell.errors import GGUFError, UnsupportedError

# tokenizer.ggml.token_type values (GGUF spec / llama.cpp's llama_token_type)
TYPE_UNDEFINED, TYPE_NORMAL, TYPE_UNKNOWN, TYPE_CONTROL, TYPE_USER_DEFINED, TYPE_UNUSED, TYPE_BYTE = range(7)

# Token attributes as bit flags (llama.cpp's llama_token_attr), because auto-detection adds CONTROL / UNUSED on top
# of what the file says.
ATTR_UNDEFINED = 0
ATTR_UNKNOWN = 1 << 0
ATTR_UNUSED = 1 << 1
ATTR_NORMAL = 1 << 2
ATTR_CONTROL = 1 << 3
ATTR_USER_DEFINED = 1 << 4
ATTR_BYTE = 1 << 5

_ATTR_OF_TYPE = {
    TYPE_UNDEFINED: ATTR_UNDEFINED,
    TYPE_NORMAL: ATTR_NORMAL,
    TYPE_UNKNOWN: ATTR_UNKNOWN,
    TYPE_CONTROL: ATTR_CONTROL,
    TYPE_USER_DEFINED: ATTR_USER_DEFINED,
    TYPE_UNUSED: ATTR_UNUSED,
    TYPE_BYTE: ATTR_BYTE,
}

SUPPORTED_MODELS = ("gpt2",)

_PREFIX = "tokenizer.ggml."

# Names llama.cpp recognises when the file does not give the id (the lowest id wins here).
_EOT_NAMES = frozenset({
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>", "<EOT>", "_<EOT>",
    "[EOT]", "<｜end▁of▁sentence｜>", "<end_of_utterance>",
})
_EOM_NAMES = frozenset({"<|eom_id|>"})
_FIM_PAD_NAMES = frozenset({"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"})
_FIM_REP_NAMES = frozenset({"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"})
_FIM_SEP_NAMES = frozenset({"<|file_sep|>"})
# Every token with one of these names ends generation.
_EOG_NAMES = frozenset({
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>", "<end_of_turn>",
    "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]", "<|end_of_text|>",
    "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>", "<｜end▁of▁sentence｜>", "[e~[",
})
# gpt-oss markers that must always be rendered, so llama.cpp demotes them to user-defined.
_ALWAYS_RENDERED = frozenset({"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"})


@dataclass(frozen=True)
class Vocab:
    model: str
    pre: str
    tokens: list[str]
    token_to_id: dict[str, int]
    attrs: list[int]
    merge_ranks: dict[tuple[str, str], int]
    bos_id: int | None
    eos_id: int | None
    eot_id: int | None
    eom_id: int | None
    unk_id: int | None
    pad_id: int | None
    add_bos: bool
    add_eos: bool
    eog_ids: frozenset[int]
    special_ids_longest_first: tuple[int, ...]  # tokens matched as whole units in text, longest text first
    chat_template: str | None


def _key(metadata: dict, name: str, default=None):
    return metadata.get(_PREFIX + name, default)


def _string_list(metadata: dict, name: str, required: bool) -> list[str] | None:
    value = _key(metadata, name)
    if value is None:
        if required:
            raise GGUFError(f"metadata lacks {_PREFIX}{name}, which a tokenizer needs")
        return None
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence) or not set(map(type, value)) <= {str}:
        raise GGUFError(f"metadata {_PREFIX}{name} must be an array of strings")
    return list(value)


def _token_types(metadata: dict, n_tokens: int) -> list[int]:
    value = _key(metadata, "token_type")
    if value is None:
        return [TYPE_NORMAL] * n_tokens
    try:
        # operator.index, not int(): a float array (even of whole numbers, or inf) is not a type list
        types = [operator.index(t) for t in (value.tolist() if hasattr(value, "tolist") else value)]
    except (TypeError, ValueError) as e:
        raise GGUFError(f"metadata {_PREFIX}token_type must be an array of integers ({e})") from None
    if len(types) < n_tokens:
        raise GGUFError(f"metadata {_PREFIX}token_type has {len(types)} entries for {n_tokens} tokens")
    return types[:n_tokens]


def _optional_id(metadata: dict, name: str, n_tokens: int, default: int | None = None) -> int | None:
    value = _key(metadata, name)
    if value is None:
        return default
    try:
        token_id = operator.index(value)  # an integer; int() would truncate floats and fail on inf
    except (TypeError, ValueError):
        raise GGUFError(f"metadata {_PREFIX}{name} must be an integer, got {value!r}") from None
    # llama.cpp ignores an out-of-range id (with a warning) rather than failing the load.
    return token_id if 0 <= token_id < n_tokens else default


def _merge_ranks(merges: list[str]) -> dict[tuple[str, str], int]:
    ranks: dict[tuple[str, str], int] = {}
    for rank, merge in enumerate(merges):
        # Split at the first space after position 0: a pair's left half may itself be a lone space.
        rest, space, right = merge[1:].partition(" ")
        if space:
            ranks.setdefault((merge[0] + rest, right), rank)
    return ranks


def _find_by_name(token_to_id: dict[str, int], names: frozenset[str]) -> int | None:
    """The lowest id among tokens with one of the names."""
    found = [token_to_id[name] for name in names if name in token_to_id]
    return min(found) if found else None


def _detect(token_to_id: dict[str, int], names: frozenset[str], attrs: list[int]) -> int | None:
    token_id = _find_by_name(token_to_id, names)
    if token_id is not None:
        attrs[token_id] |= ATTR_CONTROL
    return token_id


def _end_of_generation_ids(tokens: list[str], token_to_id: dict[str, int], attrs: list[int],
                           known_ids: tuple[int | None, ...]) -> frozenset[int]:
    """llama.cpp's end-of-generation set: eos/eot/eom/FIM ids plus every token with a known closing name.
    Updates attrs the way llama.cpp does (named closers become control tokens)."""
    eog = {i for i in known_ids if i is not None}
    for name in _EOG_NAMES:
        token_id = token_to_id.get(name)
        if token_id is not None:
            eog.add(token_id)
            attrs[token_id] |= ATTR_CONTROL
    for name in _ALWAYS_RENDERED:
        if name in token_to_id:
            attrs[token_to_id[name]] = ATTR_USER_DEFINED
    eog_texts = {tokens[i]: i for i in eog}
    # o200k_harmony / solar-open: "<|end|>" closes a message there, not the generation.
    has_call = "<|call|>" in eog_texts or "<|calls|>" in eog_texts
    has_return_or_flush = "<|return|>" in eog_texts or "<|flush|>" in eog_texts
    if "<|end|>" in eog_texts and has_call and has_return_or_flush:
        eog.discard(eog_texts["<|end|>"])
        attrs[eog_texts["<|end|>"]] = ATTR_USER_DEFINED
    # gemma4 / paddleocr: "</s>" is not an end of generation when "<|tool_response>" exists.
    if "<|tool_response>" in eog_texts and "</s>" in eog_texts:
        eog.discard(eog_texts["</s>"])
        attrs[eog_texts["</s>"]] = ATTR_NORMAL
    return frozenset(eog)


def read_vocab(metadata: dict) -> Vocab:
    """Builds the vocabulary from a GGUF metadata dict; raises UnsupportedError for tokenizers we do not implement."""
    model = _key(metadata, "model")
    if model is None:
        raise GGUFError(f"metadata lacks {_PREFIX}model: the file has no tokenizer")
    if model not in SUPPORTED_MODELS:
        raise UnsupportedError(
            f"tokenizer model {model!r} is not supported (supported: {', '.join(SUPPORTED_MODELS)})")
    from onewell.tokenizer.pretokenize import SUPPORTED_PRE_TOKENIZERS

    pre = _key(metadata, "pre")
    if pre not in SUPPORTED_PRE_TOKENIZERS:
        raise UnsupportedError(
            f"pre-tokenizer {pre!r} ({_PREFIX}pre) is not supported "
            f"(supported: {', '.join(sorted(SUPPORTED_PRE_TOKENIZERS))})")

    tokens = _string_list(metadata, "tokens", required=True)
    n_tokens = len(tokens)
    if n_tokens == 0:
        raise GGUFError(f"metadata {_PREFIX}tokens is empty")
    tokens = [text if text else f"[EMPTY_{i}]" for i, text in enumerate(tokens)]
    token_to_id: dict[str, int] = {}
    for i, text in enumerate(tokens):
        if token_to_id.setdefault(text, i) != i:
            raise GGUFError(f"duplicate token in vocabulary: {text!r} has ids {token_to_id[text]} and {i}")
    attrs = [_ATTR_OF_TYPE.get(t, ATTR_UNDEFINED) for t in _token_types(metadata, n_tokens)]
    merges = _string_list(metadata, "merges", required=True)

    def special(name: str) -> int | None:
        return _optional_id(metadata, name, n_tokens)

    bos_id, eos_id = special("bos_token_id"), special("eos_token_id")
    eot_id, eom_id = special("eot_token_id"), special("eom_token_id")
    unk_id, pad_id = special("unknown_token_id"), special("padding_token_id")
    fim_pad = special("fim_pad_token_id")
    fim_rep = special("fim_rep_token_id")
    fim_sep = special("fim_sep_token_id")

    # Ids the file does not give are guessed from token names, like llama.cpp; guessed tokens become control ones.
    eot_id, eom_id, fim_pad, fim_rep, fim_sep = (
        given if given is not None else _detect(token_to_id, names, attrs)
        for given, names in ((eot_id, _EOT_NAMES), (eom_id, _EOM_NAMES), (fim_pad, _FIM_PAD_NAMES),
                             (fim_rep, _FIM_REP_NAMES), (fim_sep, _FIM_SEP_NAMES)))
    for token_id, attr in enumerate(attrs):
        if attr & ATTR_CONTROL and "unused" in tokens[token_id]:
            attrs[token_id] |= ATTR_UNUSED
    eog = _end_of_generation_ids(tokens, token_to_id, attrs, (eos_id, eot_id, eom_id, fim_pad, fim_rep, fim_sep))

    special_kinds = ATTR_CONTROL | ATTR_USER_DEFINED | ATTR_UNKNOWN
    special_ids = sorted((i for i, a in enumerate(attrs) if a & special_kinds), key=lambda i: (-len(tokens[i]), i))

    add_bos = bool(_key(metadata, "add_bos_token", False))
    add_eos = bool(_key(metadata, "add_eos_token", False))
    if add_bos and bos_id is None:
        raise GGUFError(f"{_PREFIX}add_bos_token is true, but {_PREFIX}bos_token_id is not set")
    if add_eos and eos_id is None:
        raise GGUFError(f"{_PREFIX}add_eos_token is true, but {_PREFIX}eos_token_id is not set")

    template = metadata.get("tokenizer.chat_template")
    if template is not None and not isinstance(template, str):
        raise GGUFError("metadata tokenizer.chat_template must be a string")

    return Vocab(
        model=model, pre=pre, tokens=tokens, token_to_id=token_to_id, attrs=attrs,
        merge_ranks=_merge_ranks(merges), bos_id=bos_id, eos_id=eos_id, eot_id=eot_id, eom_id=eom_id,
        unk_id=unk_id, pad_id=pad_id, add_bos=add_bos, add_eos=add_eos, eog_ids=eog,
        special_ids_longest_first=tuple(special_ids), chat_template=template,
    )
