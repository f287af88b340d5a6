"""PostgreSQL connection strings in messages, the password never shown. Apart from the backend, so the
settings can import it; in ``search/``, the only package that may import psycopg.
"""

from __future__ import annotations

import re
from urllib.parse import unquote


def _password_of(dsn: str) -> str | None:
    """A DSN's password: in a URL, from the user info's first ``:`` to the last ``@`` (a password may hold
    an unescaped ``@``), else ``password=``."""
    found = re.search(r"password\s*=\s*('([^']*)'|[^\s&]+)", dsn)
    if found:
        return unquote(found.group(2) if found.group(2) is not None else found.group(1))
    if "://" in dsn:
        userinfo = dsn.split("://", 1)[1].split("/", 1)[0].rpartition("@")[0]
        if ":" in userinfo:
            return unquote(userinfo.split(":", 1)[1])
    return None


def scrub_secrets(text: str, dsn: str) -> str:
    """``text`` with the DSN's password, and every piece an unescaped ``@`` split off, as ``***``."""
    password = _password_of(dsn)
    if not password:
        return text
    for piece in sorted({password, *password.split("@")}, key=len, reverse=True):
        if len(piece) >= 3:
            text = text.replace(piece, "***")
    return text


def redact_dsn(dsn: str) -> str:
    """``dsn`` as a ``postgresql://user@host:port/dbname`` URL without its password."""
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
