"""What reaches a stream that cannot encode every character: ASCII fallbacks, never an exception, never a
silent ``?``; an ASCII stream is taken as UTF-8; a UTF-8 stream is left alone."""

from __future__ import annotations

import io
import sys

from judge_runner.core.printer import FALLBACK_ERRORS, fit_console


def written(text: str, encoding: str) -> bytes:
    buffer = io.BytesIO()
    stream = io.TextIOWrapper(buffer, encoding=encoding, errors=FALLBACK_ERRORS)
    stream.write(text)
    stream.flush()
    return buffer.getvalue()


def test_a_cp1252_stream_keeps_what_it_can_encode_and_falls_back_for_the_rest():
    text = "Δ vs baseline ▲+0.050 ▼-0.010 ·+0.001 ±0.03 → … “x” ┏━┳┓┃│└─┴┘ café ＞ 引"
    out = written(text, "cp1252")
    assert out.decode("cp1252") == "d vs baseline ^+0.050 v-0.010 ·+0.001 ±0.03 -> … “x” +-++||+-++ café > \\u5f15"
    assert b"?" not in out


def test_an_undecodable_byte_of_a_file_name_goes_out_as_that_byte():
    assert written("notes/caf\udce9.md", "cp1252") == b"notes/caf\xe9.md"


def test_a_latin1_stream_falls_back_for_what_cp1252_would_have():
    assert written("… “q” — ‹3›", "latin-1") == b'... "q" -- <3>'


def test_fit_console_sets_the_fallback_on_cp1252_and_utf8_on_ascii(monkeypatch):
    cp1252 = io.TextIOWrapper(io.BytesIO(), encoding="cp1252")
    ascii_stream = io.TextIOWrapper(io.BytesIO(), encoding="ascii", errors="strict")
    monkeypatch.setattr(sys, "stdout", cp1252)
    monkeypatch.setattr(sys, "stderr", ascii_stream)
    fit_console()
    assert (cp1252.encoding, cp1252.errors) == ("cp1252", FALLBACK_ERRORS)
    assert (ascii_stream.encoding, ascii_stream.errors) == ("utf-8", "strict")
    utf8 = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="strict")
    monkeypatch.setattr(sys, "stdout", utf8)
    fit_console()
    assert utf8.errors == "strict"
