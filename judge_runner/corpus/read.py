"""Decoding a corpus file's bytes into text without ever stopping the index."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Decoded:
    """Text of a file and how it was decoded: ``"utf-8"``, ``"utf-8-sig"`` or ``"utf-8-lossy"``."""

    text: str
    encoding: str


class BinaryContent(ValueError):
    """The bytes look like a binary file (NUL bytes) behind a text extension."""


def decode(data: bytes) -> Decoded:
    """Decode file bytes: UTF-8 with BOM, then UTF-8, then UTF-8 with replacement characters.

    Raises BinaryContent when the first 8 KiB contain a NUL byte (a binary file with a text extension).
    """
    if b"\x00" in data[:8192]:
        raise BinaryContent("binary content (NUL bytes)")
    if data.startswith(b"\xef\xbb\xbf"):
        return Decoded(data[3:].decode("utf-8", errors="replace"), "utf-8-sig")
    try:
        return Decoded(data.decode("utf-8"), "utf-8")
    except UnicodeDecodeError:
        return Decoded(data.decode("utf-8", errors="replace"), "utf-8-lossy")
