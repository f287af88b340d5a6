"""Decoding a corpus file's bytes into text without ever stopping the index. The first that applies wins:
a byte-order mark; NULs in the first 8 KiB (UTF-16 without a BOM, else :class:`BinaryContent`); strict
UTF-8; UTF-8 with encoded surrogates; mostly valid UTF-8 (``"utf-8-lossy"``); charset-normalizer's guess,
windows-1252 first on a tie (the WHATWG Encoding Standard's legacy default); else ``"utf-8-lossy"``. The
text has no lone surrogates and LF line endings.
"""

from __future__ import annotations

import codecs
import re
from dataclasses import dataclass

from judge_runner.core.textproc import clean_text, scrub_unencodable  # noqa: F401 - re-exported: text enters here

_NUL_SAMPLE = 8192
_NEWLINE = re.compile(r"\r\n?")
# BOMs, longest first (the UTF-32 LE BOM begins with the UTF-16 LE one)
_BOMS = (
    (b"\xff\xfe\x00\x00", "utf-32-le"),
    (b"\x00\x00\xfe\xff", "utf-32-be"),
    (b"\xef\xbb\xbf", "utf-8-sig"),
    (b"\xff\xfe", "utf-16-le"),
    (b"\xfe\xff", "utf-16-be"),
)
# tie-break among charset-normalizer's (nearly) equally good candidates: windows-1252 first (the WHATWG
# Encoding Standard's legacy default), then the other Windows code pages, before Mac and DOS ones
PREFERRED_LEGACY = ("cp1252", "latin_1", "cp1250", "cp1251", "cp1253", "cp1254", "cp1255", "cp1256", "cp1257", "cp1258")
TIE_CHAOS, TIE_COHERENCE = 0.01, 0.05  # how close (charset-normalizer's 0-1 scales) counts as a tie


@dataclass(frozen=True)
class Decoded:
    """Text of a file and its ``encoding`` (a codec name, or ``"utf-8-lossy"``); ``replaced``: how many
    characters became U+FFFD."""

    text: str
    encoding: str
    replaced: int = 0

    @property
    def note(self) -> str | None:
        """A note for the index report when the file was not plain UTF-8, else None."""
        if self.encoding == "utf-8-lossy":
            return "undecodable bytes replaced"
        if self.encoding not in ("utf-8", "utf-8-sig"):
            return f"decoded as {self.encoding}"
        if self.replaced:
            return "unencodable characters replaced by U+FFFD"
        return None


class BinaryContent(ValueError):
    """NUL bytes behind a text extension."""


def normalize_newlines(text: str) -> str:
    """CRLF and bare CR line endings as LF."""
    return _NEWLINE.sub("\n", text) if "\r" in text else text


def _finish(text: str, encoding: str, replaced: int = 0) -> Decoded:
    text, scrubbed = scrub_unencodable(text)
    return Decoded(normalize_newlines(text), encoding, replaced + scrubbed)


def _decode_lenient(data: bytes, codec: str, name: str) -> Decoded:
    try:
        return _finish(data.decode(codec), name)
    except UnicodeDecodeError:
        text = data.decode(codec, errors="replace")
        return _finish(text, name, text.count("\ufffd"))


def _utf16_without_bom(data: bytes) -> str | None:
    """The UTF-16 byte order when NULs fall on every other byte and the file decodes to printable text."""
    sample = data[:_NUL_SAMPLE]
    pairs = len(sample) // 2
    if pairs == 0:
        return None
    even, odd = sample[0 : 2 * pairs : 2].count(0), sample[1 : 2 * pairs : 2].count(0)
    for codec, zeros, other in (("utf-16-le", odd, even), ("utf-16-be", even, odd)):
        if zeros >= 0.3 * pairs and other <= 0.02 * pairs and len(data) % 2 == 0:
            try:
                text = data.decode(codec)
            except UnicodeDecodeError:
                return None
            printable = sum(1 for c in text[:4096] if c.isprintable() or c in "\t\n\r\f")
            if "\x00" not in text and printable >= 0.95 * min(len(text), 4096):
                return codec
    return None


def _mostly_utf8(data: bytes) -> Decoded | None:
    """UTF-8 with more valid non-ASCII characters than damaged bytes."""
    text = data.decode("utf-8", errors="replace")
    replaced = text.count("\ufffd")
    valid = sum(1 for c in text if c > "\x7f" and c != "\ufffd")
    if valid and valid >= replaced:
        return _finish(text, "utf-8-lossy", replaced)
    return None


def _detect(data: bytes) -> Decoded | None:
    from charset_normalizer import from_bytes

    matches = from_bytes(data)
    best = matches.best()
    if best is None:
        return None
    tied = [m for m in matches if m.chaos <= best.chaos + TIE_CHAOS and m.coherence >= best.coherence - TIE_COHERENCE]
    for preferred in PREFERRED_LEGACY:
        if any(m.encoding == preferred or preferred in m.could_be_from_charset for m in tied):
            try:
                return _finish(data.decode(preferred), codecs.lookup(preferred).name)
            except UnicodeDecodeError:
                continue
    name = codecs.lookup(best.encoding).name
    try:
        return _finish(data.decode(best.encoding), name)
    except UnicodeDecodeError:
        return _finish(str(best), name)


def decode(data: bytes) -> Decoded:
    """Decode file bytes (order in the module docstring). Raises BinaryContent for NULs in the first 8 KiB
    that are not UTF-16 or UTF-32 text."""
    for bom, name in _BOMS:
        if data.startswith(bom):
            codec = "utf-8" if name == "utf-8-sig" else name
            return _decode_lenient(data[len(bom) :], codec, name)
    if b"\x00" in data[:_NUL_SAMPLE]:
        utf16 = _utf16_without_bom(data)
        if utf16 is None:
            raise BinaryContent("binary content (NUL bytes)")
        return _finish(data.decode(utf16), utf16)
    try:
        return _finish(data.decode("utf-8"), "utf-8")
    except UnicodeDecodeError:
        pass
    try:
        text = data.decode("utf-8", errors="surrogatepass")
    except UnicodeDecodeError:
        pass
    else:
        return _finish(text, "utf-8")
    return _mostly_utf8(data) or _detect(data) or _decode_lenient(data, "utf-8", "utf-8-lossy")
