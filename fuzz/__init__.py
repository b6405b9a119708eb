"""Reliability tooling: GGUF fuzzing (reader + model loading + one native forward) and server load tests.

Not part of the installed package: run from the repository root (see docs/reliability.md).
"""
