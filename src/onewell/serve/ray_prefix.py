"""Prefix affinity for the Ray router, without Ray: which replica last saw a prompt that starts like this one.

A replica keeps each finished slot's KV cache and reuses its longest common prefix with the next prompt
(serve/scheduler.py), so a conversation's next turn, or another request with the same system prompt, is
cheapest on the replica that ran the previous one. The router cannot see tokens (the ingress does not
tokenize), so it keys on text: hashes of the prompt's first 64, 128, 192, ... characters, each one a
chain over the previous block so a key names the whole prefix, plus one for the full text.
"""
from __future__ import annotations

import hashlib
import json
from collections import OrderedDict
from typing import Any, Iterable

BLOCK_CHARS = 64
MAX_BLOCKS = 128  # prompts longer than 8192 characters share their first 8192 characters' key
TABLE_SIZE = 65536  # prefix keys remembered (least recently used dropped)


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # OpenAI content parts: the text ones
        return "".join(p.get("text", "") for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    return ""


def prompt_text(path: str, body: bytes) -> str | None:
    """The prompt of a chat or completion request as one string; None when there is none to key on
    (another endpoint, a body that is not the JSON expected: the replica answers those)."""
    if path not in ("/v1/chat/completions", "/v1/completions"):
        return None
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(data, dict):
        return None
    if path == "/v1/chat/completions":
        messages = data.get("messages")
        if not isinstance(messages, list):
            return None
        # role and text only: what the chat template renders, stable across a conversation's turns
        return "".join(f"{m.get('role')}\x1f{_content_text(m.get('content'))}\x1e"
                       for m in messages if isinstance(m, dict))
    prompt = data.get("prompt")
    if isinstance(prompt, list) and prompt and isinstance(prompt[0], str):
        prompt = prompt[0]
    if isinstance(prompt, list) and all(isinstance(t, int) for t in prompt):
        return " ".join(map(str, prompt)) + " "  # token ids: a prefix of ids is a prefix of this text
    return prompt if isinstance(prompt, str) else None


def prefix_keys(text: str, block: int = BLOCK_CHARS, max_blocks: int = MAX_BLOCKS) -> list[bytes]:
    """Keys of the text's prefixes, shortest first: one per whole block, then one for the full text."""
    keys: list[bytes] = []
    h = hashlib.blake2b(digest_size=16)
    n_full = min(len(text) // block, max_blocks)
    for i in range(n_full):
        h.update(text[i * block:(i + 1) * block].encode("utf-8", "surrogatepass"))
        keys.append(h.copy().digest())
    if len(text) > n_full * block and n_full < max_blocks:
        h.update(b"\x00end\x00" + text[n_full * block:].encode("utf-8", "surrogatepass"))
        keys.append(h.digest())
    return keys


class PrefixTable:
    """prefix key -> the replica that last received a prompt with that prefix (bounded, LRU)."""

    def __init__(self, size: int = TABLE_SIZE):
        self.size = size
        self._owner: OrderedDict[bytes, str] = OrderedDict()

    def __len__(self) -> int:
        return len(self._owner)

    def record(self, keys: Iterable[bytes], replica: str) -> None:
        for key in keys:
            self._owner[key] = replica
            self._owner.move_to_end(key)
        while len(self._owner) > self.size:
            self._owner.popitem(last=False)

    def lookup(self, keys: list[bytes], live: set[str]) -> tuple[str, int] | None:
        """The live replica holding the longest of these prefixes, and how many keys it matched."""
        for n in range(len(keys), 0, -1):
            owner = self._owner.get(keys[n - 1])
            if owner is not None and owner in live:
                return owner, n
        return None

    def owners(self) -> set[str]:
        return set(self._owner.values())

    def forget(self, replica: str) -> None:
        for key in [k for k, r in self._owner.items() if r == replica]:
            del self._owner[key]


def preferred_replica(table: PrefixTable, keys: list[bytes], loads: dict[str, int | None],
                      free_below: int) -> str | None:
    """The replica holding the prompt's longest known prefix if it is not overloaded, i.e. it runs fewer than
    `free_below` requests (it has a free slot; unknown load counts as free: Ray probes it before sending),
    else None (the caller falls back to the least-loaded replica)."""
    hit = table.lookup(keys, set(loads))
    if hit is None:
        return None
    owner, _ = hit
    load = loads[owner]
    return owner if load is None or load < free_below else None
