"""The grammar engine, llguidance, imported on first use: an optional extra (`pip install 'onewell[structured]'`)."""
from __future__ import annotations

from onewell.errors import OnewellError


class StructuredOutputUnavailable(OnewellError, RuntimeError):
    """Constrained decoding was asked for but the grammar engine is not installed."""


def llguidance():
    try:
        import llguidance as lib
    except ImportError:
        raise StructuredOutputUnavailable(
            "structured output (json_schema, grammar, tool_choice) needs the llguidance package: "
            "pip install 'onewell[structured]'") from None
    return lib
