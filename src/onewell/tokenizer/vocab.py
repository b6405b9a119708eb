"""Reads a tokenizer's vocabulary from GGUF metadata: tokens, their kinds, merges or scores and the special ids.

The rules for which tokens count as special or end-of-generation follow llama.cpp's vocab loader
(llama-vocab.cpp), so that a model stops and tokenizes exactly where llama.cpp does.
"""
from __future__ import annotations

import operator
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

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
ATTR_LSTRIP = 1 << 6  # whitespace before the token is dropped when it is cut out of text
ATTR_RSTRIP = 1 << 7  # whitespace after it is dropped

_ATTR_OF_TYPE = {
    TYPE_UNDEFINED: ATTR_UNDEFINED,
    TYPE_NORMAL: ATTR_NORMAL,
    TYPE_UNKNOWN: ATTR_UNKNOWN,
    TYPE_CONTROL: ATTR_CONTROL,
    TYPE_USER_DEFINED: ATTR_USER_DEFINED,
    TYPE_UNUSED: ATTR_UNUSED,
    TYPE_BYTE: ATTR_BYTE,
}

# tokenizer.ggml.model -> the tokenizer: byte-level BPE, SentencePiece (llama.cpp's SPM), WordPiece (BERT).
SUPPORTED_MODELS = ("gpt2", "llama", "bert")


@dataclass(frozen=True)
class _ModelDefaults:
    """What llama.cpp assumes for a tokenizer model when the file does not say (llama_vocab::impl::load)."""
    bos_id: int | None = None
    eos_id: int | None = None
    unk_id: int | None = None
    sep_id: int | None = None
    pad_id: int | None = None
    add_bos: bool = False
    add_sep: bool = False
    add_space_prefix: bool = False


_DEFAULTS = {
    "gpt2": _ModelDefaults(),
    "llama": _ModelDefaults(bos_id=1, eos_id=2, unk_id=0, add_bos=True, add_space_prefix=True),
    "bert": _ModelDefaults(bos_id=101, unk_id=100, sep_id=102, pad_id=0, add_bos=True, add_sep=True),
}

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
    merge_ranks: dict[tuple[str, str], int]  # gpt2 only
    scores: list[float]  # llama (SentencePiece): merge priority of each token; empty for the others
    bos_id: int | None  # for bert: [CLS]
    eos_id: int | None
    eot_id: int | None
    eom_id: int | None
    unk_id: int | None
    sep_id: int | None  # for bert: [SEP]
    pad_id: int | None
    add_bos: bool
    add_eos: bool
    add_sep: bool
    add_space_prefix: bool  # SentencePiece: a space before text that starts the input or follows a special token
    lowercase: bool  # WordPiece normalizer
    strip_accents: bool  # WordPiece normalizer
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


def _token_types(metadata: dict, n_tokens: int) -> np.ndarray:
    value = _key(metadata, "token_type")
    if value is None:
        return np.full(n_tokens, TYPE_NORMAL, dtype=np.int64)
    if isinstance(value, np.ndarray) and value.dtype.kind in "iu" and value.ndim == 1:
        types = value.astype(np.int64)  # what the GGUF reader gives: checked without a Python loop
    else:
        try:
            # operator.index, not int(): a float array (even of whole numbers, or inf) is not a type list
            types = np.array([operator.index(t) for t in (value.tolist() if hasattr(value, "tolist") else value)],
                             dtype=np.int64)
        except (TypeError, ValueError, OverflowError) as e:
            raise GGUFError(f"metadata {_PREFIX}token_type must be an array of integers ({e})") from None
    if len(types) < n_tokens:
        raise GGUFError(f"metadata {_PREFIX}token_type has {len(types)} entries for {n_tokens} tokens")
    return types[:n_tokens]


def _attrs_of_types(types: np.ndarray) -> np.ndarray:
    table = np.array([_ATTR_OF_TYPE[t] for t in range(len(_ATTR_OF_TYPE))], dtype=np.int64)
    known = (types >= 0) & (types < len(table))
    return np.where(known, table[np.where(known, types, 0)], ATTR_UNDEFINED)


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
    pairs: list[tuple[str, str] | None] = []
    for merge in merges:
        # Split at the first space after position 0: a pair's left half may itself be a lone space.
        rest, space, right = merge[1:].partition(" ")
        pairs.append((merge[0] + rest, right) if space else None)
    # Built from the end so that a pair listed twice keeps its first (lowest) rank, in one C-level dict().
    ranks = dict(zip(reversed(pairs), range(len(pairs) - 1, -1, -1)))
    ranks.pop(None, None)
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


def _scores(metadata: dict, n_tokens: int) -> list[float]:
    value = _key(metadata, "scores")
    if value is None:
        return [0.0] * n_tokens  # llama.cpp: every token scores 0, so merges go leftmost first
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence | np.ndarray):
        raise GGUFError(f"metadata {_PREFIX}scores must be an array of numbers")
    try:
        scores = np.asarray(value, dtype=np.float32)
    except (TypeError, ValueError) as e:
        raise GGUFError(f"metadata {_PREFIX}scores must be an array of numbers ({e})") from None
    if scores.ndim != 1 or len(scores) < n_tokens:
        raise GGUFError(f"metadata {_PREFIX}scores has {scores.size} entries for {n_tokens} tokens")
    return scores[:n_tokens].tolist()


def _flag(metadata: dict, name: str, default: bool) -> bool:
    value = _key(metadata, name)
    if value is None:
        return default
    if not isinstance(value, (bool, np.bool_)):
        raise GGUFError(f"metadata {_PREFIX}{name} must be a bool, got {value!r}")
    return bool(value)


def _special_ids_longest_first(tokens: list[str], attrs: list[int]) -> list[int]:
    """Tokens cut out of text as whole units, longest first by UTF-8 length (llama.cpp compares byte strings)."""
    special_ids = np.flatnonzero(np.array(attrs) & (ATTR_CONTROL | ATTR_USER_DEFINED | ATTR_UNKNOWN)).tolist()
    special_ids.sort(key=lambda i: (-len(tokens[i].encode("utf-8", "surrogateescape")), i))
    return special_ids


def _mark_strip_sides(metadata: dict, token_to_id: dict[str, int], attrs: list[int], special_ids: list[int]) -> None:
    """llama.cpp's per-model whitespace rules around special tokens (the file does not store them)."""
    name = str(metadata.get("general.name", "")).lower()
    pre = str(_key(metadata, "pre", ""))
    arch = str(metadata.get("general.architecture", ""))
    if any(p in pre for p in ("jina-v2-de", "jina-v2-es", "jina-v2-code", "mmbert")) or \
            any(a in arch for a in ("nomic-bert-moe", "jina-bert-v3")):
        if "<mask>" in token_to_id:
            attrs[token_to_id["<mask>"]] |= ATTR_LSTRIP
    elif "phi-3" in name or "phi3" in name:
        for token_id in special_ids:
            attrs[token_id] |= ATTR_RSTRIP
        for text, on in (("</s>", True), ("<unk>", False), ("<s>", False), ("<|endoftext|>", False)):
            if text in token_to_id:
                token_id = token_to_id[text]
                attrs[token_id] = attrs[token_id] | ATTR_RSTRIP if on else attrs[token_id] & ~ATTR_RSTRIP
    elif "modern-bert" in name and "[MASK]" in token_to_id:
        attrs[token_to_id["[MASK]"]] |= ATTR_LSTRIP


def read_vocab(metadata: dict) -> Vocab:
    """Builds the vocabulary from a GGUF metadata dict; raises UnsupportedError for tokenizers we do not implement."""
    model = _key(metadata, "model")
    if model is None:
        raise GGUFError(f"metadata lacks {_PREFIX}model: the file has no tokenizer")
    if model not in SUPPORTED_MODELS:
        raise UnsupportedError(
            f"tokenizer model {model!r} ({_PREFIX}model) is not supported (supported: {', '.join(SUPPORTED_MODELS)})")
    from onewell.tokenizer.pretokenize import SUPPORTED_PRE_TOKENIZERS, pre_tokenizer_kind

    pre = _key(metadata, "pre")
    if model == "gpt2" and pre not in SUPPORTED_PRE_TOKENIZERS:  # only BPE has pre-tokenizers (as in llama.cpp)
        raise UnsupportedError(
            f"pre-tokenizer {pre!r} ({_PREFIX}pre) is not supported "
            f"(supported: {', '.join(sorted(SUPPORTED_PRE_TOKENIZERS))})")
    defaults = _DEFAULTS[model]
    default_add_bos = pre_tokenizer_kind(pre).add_bos if model == "gpt2" else defaults.add_bos

    tokens = _string_list(metadata, "tokens", required=True)
    n_tokens = len(tokens)
    if n_tokens == 0:
        raise GGUFError(f"metadata {_PREFIX}tokens is empty")
    if "" in tokens:
        tokens = [text if text else f"[EMPTY_{i}]" for i, text in enumerate(tokens)]
    token_to_id = dict(zip(tokens, range(n_tokens)))
    if len(token_to_id) != n_tokens:
        seen: dict[str, int] = {}
        for i, text in enumerate(tokens):
            if seen.setdefault(text, i) != i:
                raise GGUFError(f"duplicate token in vocabulary: {text!r} has ids {seen[text]} and {i}")
    attrs: list[int] = _attrs_of_types(_token_types(metadata, n_tokens)).tolist()
    merges = _string_list(metadata, "merges", required=True) if model == "gpt2" else []
    scores = _scores(metadata, n_tokens) if model == "llama" else []

    def special(name: str, default: int | None = None) -> int | None:
        in_range = default if default is not None and 0 <= default < n_tokens else None
        return _optional_id(metadata, name, n_tokens, in_range)

    bos_id, eos_id = special("bos_token_id", defaults.bos_id), special("eos_token_id", defaults.eos_id)
    eot_id, eom_id = special("eot_token_id"), special("eom_token_id")
    unk_id, pad_id = special("unknown_token_id", defaults.unk_id), special("padding_token_id", defaults.pad_id)
    sep_id = special("seperator_token_id", defaults.sep_id)  # sic: llama.cpp's key name
    fim_pad = special("fim_pad_token_id")
    fim_rep = special("fim_rep_token_id")
    fim_sep = special("fim_sep_token_id")

    # Ids the file does not give are guessed from token names, like llama.cpp; guessed tokens become control ones.
    eot_id, eom_id, fim_pad, fim_rep, fim_sep = (
        given if given is not None else _detect(token_to_id, names, attrs)
        for given, names in ((eot_id, _EOT_NAMES), (eom_id, _EOM_NAMES), (fim_pad, _FIM_PAD_NAMES),
                             (fim_rep, _FIM_REP_NAMES), (fim_sep, _FIM_SEP_NAMES)))
    for token_id in np.flatnonzero(np.array(attrs) & ATTR_CONTROL).tolist():
        if "unused" in tokens[token_id]:
            attrs[token_id] |= ATTR_UNUSED
    eog = _end_of_generation_ids(tokens, token_to_id, attrs, (eos_id, eot_id, eom_id, fim_pad, fim_rep, fim_sep))

    special_ids = _special_ids_longest_first(tokens, attrs)
    _mark_strip_sides(metadata, token_to_id, attrs, special_ids)

    add_bos = _flag(metadata, "add_bos_token", default_add_bos)
    add_eos = _flag(metadata, "add_eos_token", False)
    add_sep = _flag(metadata, "add_sep_token", defaults.add_sep)
    if add_bos and bos_id is None:
        if _key(metadata, "add_bos_token") is not None:
            raise GGUFError(f"{_PREFIX}add_bos_token is true, but {_PREFIX}bos_token_id is not set")
        add_bos = False
    if add_eos and eos_id is None:
        raise GGUFError(f"{_PREFIX}add_eos_token is true, but {_PREFIX}eos_token_id is not set")
    if model == "bert" and sep_id is None:
        add_sep = False
    lowercase = _flag(metadata, "normalizer.lowercase", True)
    strip_accents = _flag(metadata, "normalizer.strip_accents", lowercase)

    template = metadata.get("tokenizer.chat_template")
    if template is not None and not isinstance(template, str):
        raise GGUFError("metadata tokenizer.chat_template must be a string")

    return Vocab(
        model=model, pre=pre, tokens=tokens, token_to_id=token_to_id, attrs=attrs,
        merge_ranks=_merge_ranks(merges), scores=scores, bos_id=bos_id, eos_id=eos_id, eot_id=eot_id,
        eom_id=eom_id, unk_id=unk_id, sep_id=sep_id, pad_id=pad_id, add_bos=add_bos, add_eos=add_eos,
        add_sep=add_sep, add_space_prefix=_flag(metadata, "add_space_prefix", defaults.add_space_prefix),
        lowercase=lowercase, strip_accents=strip_accents, eog_ids=eog,
        special_ids_longest_first=tuple(special_ids), chat_template=template,
    )
