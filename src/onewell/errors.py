"""Exception types users can catch. Every bad input ends in one of these, with a message that names the cause."""


class OnewellError(Exception):
    """Base class of every error onewell raises on purpose."""


class GGUFError(OnewellError, ValueError):
    """A GGUF file is malformed, truncated, hostile or uses something we do not support.

    The message names the file, the field and the byte offset where reading stopped.
    """


class UnsupportedError(OnewellError):
    """A valid model that uses a feature onewell does not implement (architecture, tokenizer, tensor type)."""


class ModelNotFoundError(OnewellError):
    """A model name that is neither a known registry model nor an existing .gguf path."""


class ContextOverflowError(OnewellError, ValueError):
    """A prompt (plus the tokens asked for) does not fit the model's context."""


class WrongModelKindError(OnewellError, ValueError):
    """Embeddings asked of a generative model, or text of an embedding model."""
