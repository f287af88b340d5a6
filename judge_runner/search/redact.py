"""PostgreSQL connection strings in messages: the password never shown.

A neutral module beside the search's settings, not a backend: the settings (``Settings.index_label``),
the crash log and the PostgreSQL backend all need it, and the settings must not import a backend. It is
in ``search/`` because it reads a key=value DSN with psycopg, which only ``search/`` may import (the
third-party contracts in pyproject.toml).
"""

from __future__ import annotations

import re
from urllib.parse import unquote


def _password_of(dsn: str) -> str | None:
    """The password written in a DSN, read as a person wrote it: in a URL everything between the first
    ``:`` of the user info and the LAST ``@`` (an unescaped ``@`` inside a password must not leak its
    tail as a host name), or a ``password=`` parameter."""
    found = re.search(r"password\s*=\s*('([^']*)'|[^\s&]+)", dsn)
    if found:
        return unquote(found.group(2) if found.group(2) is not None else found.group(1))
    if "://" in dsn:
        userinfo = dsn.split("://", 1)[1].split("/", 1)[0].rpartition("@")[0]
        if ":" in userinfo:
            return unquote(userinfo.split(":", 1)[1])
    return None


def scrub_secrets(text: str, dsn: str) -> str:
    """``text`` (e.g. a driver's error message) with the DSN's password and every piece of it that an
    unescaped ``@`` may have split off replaced by ``***``."""
    password = _password_of(dsn)
    if not password:
        return text
    for piece in sorted({password, *password.split("@")}, key=len, reverse=True):
        if len(piece) >= 3:
            text = text.replace(piece, "***")
    return text


def redact_dsn(dsn: str) -> str:
    """``dsn`` as a ``postgresql://user@host:port/dbname`` URL without its password, for messages."""
    if "://" in dsn:
        userinfo, _, hostpart = dsn.split("://", 1)[1].rpartition("@")
        if "@" in userinfo:  # an unescaped @ in the password: never let libpq read a piece of it as the host
            user = userinfo.split(":", 1)[0]
            return f"postgresql://{user + '@' if user else ''}{hostpart.split('?', 1)[0]}"
    try:
        from psycopg.conninfo import conninfo_to_dict

        params = conninfo_to_dict(dsn)
    except Exception:
        return "postgresql://(unparsable DSN)"
    user = str(params.get("user") or "")
    host = str(params.get("host") or params.get("hostaddr") or "localhost")
    port = params.get("port")
    db = str(params.get("dbname") or "")
    return f"postgresql://{user + '@' if user else ''}{host}{':' + str(port) if port else ''}/{db}"
