"""onewell: run LLMs on CPUs at the memory-bandwidth limit, and measure how close you are.

    model = onewell.load("qwen2.5-coder-0.5b-instruct")
    print(model.generate("def fibonacci(n):", temperature=0))

`load` and `Model` are imported on first use, so `import onewell` stays fast (no numpy, no native module).
"""
from __future__ import annotations

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (it costs more than the rest)
__version__ = "0.1.0"
__all__ = ["load", "Model", "__version__"]

if TYPE_CHECKING:
    from onewell.api import Model, load


def __getattr__(name: str) -> object:
    if name in ("load", "Model"):
        from onewell import api

        return getattr(api, name)
    raise AttributeError(f"module 'onewell' has no attribute {name!r}")
