"""GGUF files: a validating zero-copy reader and an atomic writer."""
from onewell.gguf.constants import GGMLType, ValueType
from onewell.gguf.reader import GGUFReader, TensorInfo

__all__ = ["GGUFReader", "TensorInfo", "GGMLType", "ValueType"]
