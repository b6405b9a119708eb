"""The tokenizer a GGUF file describes: text <-> token ids, matching llama.cpp id for id."""
from __future__ import annotations

import re
from collections.abc import Iterable

from onewell.errors import OnewellError
from onewell.tokenizer.bpe import BytePairEncoder, spell_bytes, unspell
from onewell.tokenizer.cleanup import clean_spaces
from onewell.tokenizer.pretokenize import PreTokenizer
from onewell.tokenizer.spm import SPACE, SentencePieceEncoder
from onewell.tokenizer.vocab import (
    ATTR_BYTE,
    ATTR_CONTROL,
    ATTR_LSTRIP,
    ATTR_NORMAL,
    ATTR_RSTRIP,
    ATTR_UNKNOWN,
    ATTR_USER_DEFINED,
    Vocab,
    read_vocab,
)
from onewell.tokenizer.wordpiece import WordPieceEncoder

_RENDERED_AS_TEXT = ATTR_CONTROL | ATTR_UNKNOWN | ATTR_USER_DEFINED
_SKIPPABLE = ATTR_CONTROL | ATTR_UNKNOWN  # what decode(skip_special=True) drops; user-defined tokens stay
_BYTE_TOKEN = re.compile(r"<0x[0-9A-Fa-f]{2}>")
_C_SPACE = " \t\n\v\f\r"  # C's isspace(), which llama.cpp strips around lstrip/rstrip special tokens


class TokenizerError(OnewellError, ValueError):
    """A token id outside the vocabulary, or text that cannot be tokenized."""


def _without_lone_surrogates(text: str) -> str:
    """Python strings may hold unpaired surrogates, which have no UTF-8 form; they become U+FFFD like bad bytes
    do in llama.cpp."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


class Tokenizer:
    """The tokenizer of a GGUF file (`Tokenizer.from_metadata(reader.metadata)`): byte-level BPE (`gpt2`),
    SentencePiece (`llama`) or WordPiece (`bert`), as `tokenizer.ggml.model` says."""

    def __init__(self, vocab: Vocab):
        self.vocab = vocab
        self._clean_spaces = vocab.model == "bert"  # llama.cpp cleans up WordPiece text; BPE: per pre-tokenizer
        if vocab.model == "gpt2":
            self._pre = PreTokenizer(vocab.pre)
            self._bpe = BytePairEncoder(vocab.token_to_id, vocab.merge_ranks, self._pre.kind.ignore_merges)
            self._clean_spaces = self._pre.kind.clean_spaces
        elif vocab.model == "llama":
            self._spm = SentencePieceEncoder(vocab.token_to_id, vocab.scores, vocab.unk_id)
        else:
            self._wpm = WordPieceEncoder(vocab.token_to_id, vocab.unk_id, vocab.lowercase, vocab.strip_accents)
        self._pieces: list[bytes | None] = [None] * len(vocab.tokens)
        self._all_specials = [(i, vocab.tokens[i]) for i in vocab.special_ids_longest_first]
        # Without parse_special only user-defined tokens are still matched as units (llama.cpp, HF tokenizers).
        self._plain_specials = [(i, t) for i, t in self._all_specials if not vocab.attrs[i] & _SKIPPABLE]

    @classmethod
    def from_metadata(cls, metadata: dict) -> Tokenizer:
        return cls(read_vocab(metadata))

    # --- facts -------------------------------------------------------------------------------------------------

    @property
    def n_vocab(self) -> int:
        return len(self.vocab.tokens)

    @property
    def bos_id(self) -> int | None:
        return self.vocab.bos_id

    @property
    def eos_id(self) -> int | None:
        return self.vocab.eos_id

    @property
    def eog_ids(self) -> frozenset[int]:
        """Ids that end generation: eos, eot, eom and the names llama.cpp recognises (<|im_end|>, <|endoftext|>...)."""
        return self.vocab.eog_ids

    @property
    def add_bos_token(self) -> bool:
        """Whether llama.cpp prepends BOS to a prompt for this model (tokenizer.ggml.add_bos_token)."""
        return self.vocab.add_bos

    @property
    def chat_template(self) -> str | None:
        return self.vocab.chat_template

    def is_special(self, token_id: int) -> bool:
        """True for control, user-defined and unknown tokens: the ones matched as whole units in text."""
        return bool(self.vocab.attrs[self._check(token_id)] & _RENDERED_AS_TEXT)

    def is_control(self, token_id: int) -> bool:
        """True for control and unknown tokens: the ones decode(skip_special=True) leaves out."""
        return bool(self.vocab.attrs[self._check(token_id)] & _SKIPPABLE)

    def token_text(self, token_id: int) -> str:
        """The token as the vocabulary spells it (e.g. 'Ġworld')."""
        return self.vocab.tokens[self._check(token_id)]

    # --- encoding ----------------------------------------------------------------------------------------------

    def encode(self, text: str, add_bos: bool = False, parse_special: bool = True) -> list[int]:
        """Token ids of the text. add_bos prepends BOS (WordPiece: [CLS] before and [SEP] after, as llama.cpp's
        add_special does); parse_special matches control tokens written in the text as single ids."""
        if not isinstance(text, str):
            raise TypeError(f"encode() takes a str, not {type(text).__name__}")
        text = _without_lone_surrogates(text)
        vocab = self.vocab
        ids: list[int] = []
        if add_bos and vocab.bos_id is not None:
            ids.append(vocab.bos_id)
        fragments = self._split_specials(text, parse_special)
        if vocab.model == "gpt2":
            self._encode_bpe(fragments, ids)
        elif vocab.model == "llama":
            self._encode_spm(fragments, ids)
        else:
            for fragment in fragments:
                ids.extend([fragment] if isinstance(fragment, int) else self._wpm.encode(fragment))
            if add_bos and vocab.sep_id is not None:
                ids.append(vocab.sep_id)
        return ids

    def _encode_bpe(self, fragments: list[str | int], ids: list[int]) -> None:
        for fragment in fragments:
            if isinstance(fragment, int):
                ids.append(fragment)
                continue
            for word in self._pre.split(fragment):
                ids.extend(self._bpe.encode_word(spell_bytes(word.encode("utf-8"))))

    def _encode_spm(self, fragments: list[str | int], ids: list[int]) -> None:
        # SentencePiece's leading-space rule: text at the start or right after a special token gets a space.
        after_special = True
        for fragment in fragments:
            if isinstance(fragment, int):
                ids.append(fragment)
                after_special = True
                continue
            if self.vocab.add_space_prefix and after_special:
                fragment = " " + fragment
            ids.extend(self._spm.encode(fragment.replace(" ", SPACE)))
            after_special = False

    def _split_specials(self, text: str, parse_special: bool) -> list[str | int]:
        """Cuts special tokens out of the text: longest token text first, each one splitting every text fragment
        left so far (the order llama.cpp's tokenizer_st_partition uses)."""
        fragments: list[str | int] = [text] if text else []
        for token_id, token_text in (self._all_specials if parse_special else self._plain_specials):
            if token_text not in text:
                continue
            attr = self.vocab.attrs[token_id]
            cut: list[str | int] = []
            for fragment in fragments:
                if isinstance(fragment, int) or token_text not in fragment:
                    cut.append(fragment)
                    continue
                parts = fragment.split(token_text)
                for k, part in enumerate(parts):
                    if k:
                        cut.append(token_id)
                        if attr & ATTR_RSTRIP:
                            part = part.lstrip(_C_SPACE)
                    if k < len(parts) - 1 and attr & ATTR_LSTRIP:
                        part = part.rstrip(_C_SPACE)
                    if part:
                        cut.append(part)
            fragments = cut
        return fragments

    # --- decoding ----------------------------------------------------------------------------------------------

    def token_bytes(self, token_id: int) -> bytes:
        """The raw bytes a token stands for (a special token's own text; possibly part of a UTF-8 character)."""
        token_id = self._check(token_id)
        piece = self._pieces[token_id]
        if piece is None:
            piece = self._pieces[token_id] = self._piece(token_id)
        return piece

    def _piece(self, token_id: int) -> bytes:
        attr = self.vocab.attrs[token_id]
        text = self.vocab.tokens[token_id]
        if attr & _RENDERED_AS_TEXT:
            return text.encode("utf-8", "surrogateescape")  # the reader keeps invalid UTF-8 bytes as surrogates
        if attr & ATTR_NORMAL:
            if self.vocab.model == "gpt2":
                return unspell(text)
            return text.replace(SPACE, " ").encode("utf-8", "surrogateescape")
        if attr & ATTR_BYTE and _BYTE_TOKEN.fullmatch(text):
            return bytes([int(text[3:5], 16)])
        return b""  # unused / undefined tokens (and a byte token not spelled <0xNN>) stand for nothing

    def decode_bytes(self, ids: Iterable[int], skip_special: bool = False) -> bytes:
        """The bytes of the ids as llama.cpp's detokenize gives them: with a SentencePiece vocabulary that adds a
        space prefix, the first token's leading space is dropped; some vocabularies clean up spaces before
        punctuation (clean_spaces). Streaming (IncrementalDecoder) does neither: it continues a text."""
        attrs = self.vocab.attrs
        pieces = []
        for k, token_id in enumerate(ids):
            if skip_special and attrs[self._check(token_id)] & _SKIPPABLE:
                continue
            piece = self.token_bytes(token_id)
            if k == 0 and self.vocab.add_space_prefix and piece.startswith(b" "):
                piece = piece[1:]
            pieces.append(piece)
        data = b"".join(pieces)
        return clean_spaces(data) if self._clean_spaces else data

    def decode(self, ids: Iterable[int], skip_special: bool = False) -> str:
        """Text of the ids; bytes that do not form valid UTF-8 become U+FFFD."""
        return self.decode_bytes(ids, skip_special).decode("utf-8", errors="replace")

    def _check(self, token_id: int) -> int:
        try:
            index = int(token_id)
        except (TypeError, ValueError):
            raise TokenizerError(f"token id must be an integer, got {token_id!r}") from None
        if not 0 <= index < len(self.vocab.tokens):
            raise TokenizerError(f"token id {index} is outside the vocabulary (0..{len(self.vocab.tokens) - 1})")
        return index
