"""GGUF files: a validating zero-copy reader and an atomic writer."""
from onewell.gguf.constants import GGMLType, ValueType
from onewell.gguf.reader import GGUFReader, TensorInfo
from onewell.gguf.writer import GGUFWriter

__all__ = ["GGUFReader", "GGUFWriter", "TensorInfo", "GGMLType", "ValueType"]
