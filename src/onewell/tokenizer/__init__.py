"""Tokenizers read from GGUF metadata, streaming detokenization and chat templates."""
from onewell.tokenizer.chat_template import (
    ChatTemplateError,
    MissingChatTemplateError,
    render_chat,
    require_chat_template,
)
from onewell.tokenizer.incremental import IncrementalDecoder
from onewell.tokenizer.pretokenize import SUPPORTED_PRE_TOKENIZERS
from onewell.tokenizer.tokenizer import Tokenizer, TokenizerError
from onewell.tokenizer.vocab import SUPPORTED_MODELS

__all__ = [
    "ChatTemplateError",
    "IncrementalDecoder",
    "MissingChatTemplateError",
    "SUPPORTED_MODELS",
    "SUPPORTED_PRE_TOKENIZERS",
    "Tokenizer",
    "TokenizerError",
    "render_chat",
    "require_chat_template",
]
