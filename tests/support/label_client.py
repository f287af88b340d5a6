"""What the labelling tests use to drive ``judge-runner label``: the job in a thread, the command in a process,
plain and raw HTTP requests, a loopback port forward, and headless Chromium (Debian's ``chromium`` and
``chromedriver``, driven by Selenium)."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from judge_runner.app.label.server import LabelRequest, label_job
from judge_runner.config import load_settings
from judge_runner.core.printer import Printer
from judge_runner.human.options import Sampling

ROOT = Path(__file__).resolve().parents[2]
QUIET = Printer(lambda m: None, lambda m: None, quiet=True)


class Lines:
    """A Printer that keeps what it printed: ``out`` and ``err`` lines."""

    def __init__(self) -> None:
        self.out: list[str] = []
        self.err: list[str] = []
        self.printer = Printer(self.out.append, self.err.append)

    def text(self) -> str:
        return "\n".join(self.out + self.err)


class Job:
    """``label_job`` running in a thread: ``server`` once it listens, ``settings``, ``lines`` (its output),
    ``result`` (what it returned) once stopped."""

    def __init__(self, tmp_path: Path, run_file: Path | None, name: str = "team", labeller: str = "ada", **options):
        folder = options.pop("folder", tmp_path / "labels")
        cache = options.pop("cache", tmp_path / "judgments.sqlite")
        overrides = {"no_cache": True} if cache is None else {"cache": cache}
        self.settings = load_settings(overrides, cwd=tmp_path, environ={})
        self.lines = Lines()
        self.result = None
        self.error: BaseException | None = None
        self.server = None
        started = threading.Event()
        sampling = Sampling(**{"queries": 4, **options.pop("sampling", {})})

        def on_ready(server) -> None:
            self.server = server
            started.set()

        def run() -> None:
            try:
                request = LabelRequest(
                    name=name, folder=folder, labeller=labeller, results=(run_file,) if run_file else (), sampling=sampling, **options
                )
                self.result = label_job(self.settings, request, self.lines.printer, on_ready)
            except BaseException as exc:  # handed to the test's thread
                self.error = exc
            finally:
                started.set()

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()
        assert started.wait(60), "the labelling job neither started nor failed"
        if self.error is not None:
            raise self.error

    @property
    def url(self) -> str:
        return self.server.url

    def stop(self):
        self.server.shutdown()
        self.thread.join(30)
        assert not self.thread.is_alive(), "the labelling job did not stop"
        if self.error is not None:
            raise self.error
        return self.result


def fetch(url: str, body: dict | None = None, headers: dict | None = None, timeout: float = 20) -> tuple[int, bytes, dict]:
    """``(status, body, headers)`` of a GET (``body`` None) or a JSON POST."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        url, data=data, headers={"Content-Type": "application/json", **(headers or {})} if data else (headers or {})
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, response.read(), dict(response.headers)
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read(), dict(exc.headers)


def state(url: str, tab: str | None = None) -> dict:
    """The session's state as the page gets it (``tab``: as that tab gets it)."""
    status, body, _ = fetch(url + "api/state" + (f"?tab={tab}" if tab else ""))
    assert status == 200, body
    return json.loads(body)


def act(url: str, kind: str, tab: str, **body) -> tuple[int, dict]:
    """POST one act as a tab of the page does: ``(status, answer)``."""
    status, answer, _ = fetch(url + f"api/{kind}", {"tab": tab, **body})
    return status, json.loads(answer)


def raw(port: int, data: bytes, *, half_close: bool = False, timeout: float = 20) -> tuple[int | None, dict, bytes]:
    """Send ``data`` as it is on a fresh connection and read one answer: ``(status, headers, body)``;
    status None when the server closed the connection without answering. ``half_close``: shut the
    sending side after ``data`` (the server then sees the body end)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(data)
        if half_close:
            sock.shutdown(socket.SHUT_WR)
        received = b""
        while b"\r\n\r\n" not in received:
            chunk = sock.recv(65536)
            if not chunk:
                return None, {}, received
            received += chunk
        head, _, body = received.partition(b"\r\n\r\n")
        status_line, *header_lines = head.decode("latin-1").split("\r\n")
        headers = {k.strip().lower(): v.strip() for k, _, v in (h.partition(":") for h in header_lines)}
        length = int(headers.get("content-length", "0"))
        while len(body) < length:
            chunk = sock.recv(65536)
            if not chunk:
                break
            body += chunk
        return int(status_line.split()[1]), headers, body[:length]


class Forward:
    """A loopback port forward (as ``ssh -L`` makes one): connections to ``port`` are relayed to ``target``."""

    def __init__(self, target: int):
        self.target = target
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self._stop = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._stop:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.target))
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(src: socket.socket, dst: socket.socket) -> None:
        try:
            while chunk := src.recv(65536):
                dst.sendall(chunk)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self) -> None:
        self._stop = True
        self.listener.close()


def spawn_label(tmp_path: Path, *args: str, name: str = "team", folder: Path | None = None, cache: Path | None = None) -> subprocess.Popen:
    """``judge-runner label ARGS --name NAME`` in its own process (text pipes)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
    command = [sys.executable, "-m", "judge_runner.cli", "label", *args, "--name", name]
    command += ["--folder", str(folder or tmp_path / "labels"), "--cache", str(cache or tmp_path / "judgments.sqlite")]
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path)


def wait_url(proc: subprocess.Popen, seconds: float = 90) -> str:
    """The page's URL once the process printed it (fails when it exits or says nothing in ``seconds``)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if line.strip().startswith("http://127.0.0.1:"):
            return line.strip()
        if not line and proc.poll() is not None:
            pytest.fail(f"the label process ended (exit {proc.returncode}) without a URL: {proc.stderr.read()}")
    pytest.fail("no URL printed")


def stop_process(proc: subprocess.Popen, sig: int) -> tuple[str, str]:
    """Send ``sig`` and return the rest of the process's ``(stdout, stderr)``."""
    proc.send_signal(sig)
    try:
        return proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()


def chromium_driver():
    """Headless Chromium through chromedriver; skips, saying why, when either is missing."""
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        pytest.skip("Chromium is not installed (Debian package `chromium`); cannot drive the labelling page in a real browser")
    driver_path = shutil.which("chromedriver")
    if driver_path is None:
        pytest.skip("chromedriver is not installed (Debian package `chromium-driver`); cannot drive the labelling page")
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        pytest.skip("selenium is not installed (the test extra pins it); cannot drive the labelling page")
    options = webdriver.ChromeOptions()
    options.binary_location = browser
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1366,900"):
        options.add_argument(arg)
    return webdriver.Chrome(service=Service(driver_path), options=options)
