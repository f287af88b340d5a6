"""What the labelling server answers to requests that are not the page's.

- Malformed requests (a bad, missing or too large Content-Length, a body shorter than it says, a body that is
  not UTF-8 or not JSON, a key named twice, fields of the wrong type, unknown paths and methods) are answered
  with the right 4xx and a JSON error, never a traceback, and the server goes on; a seeded fuzz of the
  endpoints holds every answered label in the journal and nothing else.
- Host names: the page answers through a port forward to another loopback port, and under another name only
  when ``--allow-host`` names it; a DNS-rebinding name and a cross-site POST stay refused, saying why.
- Tabs: a tab's undo undoes its own last label only, also while another tab labels at the same time.
"""

from __future__ import annotations

import errno
import json
import random
import signal
import threading
from collections import Counter
from pathlib import Path

import pytest

from judge_runner.app.label.web import parse_host_rule
from tests.support.clitools import invoke
from tests.support.label_client import Forward, Job, act, fetch, raw, spawn_label, state, stop_process, wait_url
from tests.support.label_runs import write_run


@pytest.fixture
def run_file(tmp_path) -> Path:
    return write_run(tmp_path / "results")


@pytest.fixture
def job(tmp_path, run_file):
    job = Job(tmp_path, run_file)
    yield job
    job.stop()


def request(job: Job, method: str, route: str, body: bytes = b"", headers: dict | None = None, length: str | None = "auto") -> bytes:
    """The bytes of one HTTP/1.1 request to the job's server."""
    path = "/" + job.server.token + route
    lines = [f"{method} {path} HTTP/1.1", f"Host: 127.0.0.1:{job.server.port}"]
    for key, value in (headers if headers is not None else {"Content-Type": "application/json"}).items():
        lines.append(f"{key}: {value}")
    if length == "auto":
        lines.append(f"Content-Length: {len(body)}")
    elif length is not None:
        lines.append(f"Content-Length: {length}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


def test_malformed_requests_are_answered_4xx_without_a_traceback(job, capfd):
    item = state(job.url)["item"]["id"]

    def label(**fields) -> bytes:
        return json.dumps({"item": item, "grade": 2, "tab": "tab-a-000001", **fields}).encode()

    good = label()
    cases = [
        ("bad Content-Length", request(job, "POST", "/api/label", good, length="abc"), {400}),
        ("negative Content-Length", request(job, "POST", "/api/label", good, length="-5"), {400}),
        ("two Content-Lengths", request(job, "POST", "/api/label", good, length=f"{len(good)}, {len(good)}"), {400}),
        ("missing Content-Length", request(job, "POST", "/api/label", good, length=None), {411}),
        ("oversized Content-Length", request(job, "POST", "/api/label", good, length="999999999"), {413}),
        ("oversized body", request(job, "POST", "/api/label", b'{"item":"' + b"x" * 70000 + b'"}'), {413}),
        ("not UTF-8", request(job, "POST", "/api/label", b'{"item":"\xff\xfe","grade":2,"tab":"tab-a-000001"}'), {400}),
        ("UTF-16", request(job, "POST", "/api/label", good.decode().encode("utf-16")), {400}),
        ("not JSON", request(job, "POST", "/api/label", b"{item: 1"), {400}),
        ("JSON not an object", request(job, "POST", "/api/label", b"[1, 2]"), {400}),
        ("NaN", request(job, "POST", "/api/label", b'{"item":"i1","grade":NaN,"tab":"tab-a-000001"}'), {400}),
        ("a key twice", request(job, "POST", "/api/label", label()[:-1] + b', "grade": 3}'), {400}),
        ("grade a string", request(job, "POST", "/api/label", label(grade="2")), {400}),
        ("grade a bool", request(job, "POST", "/api/label", label(grade=True)), {400}),
        ("grade a float", request(job, "POST", "/api/label", label(grade=2.0)), {400}),
        ("grade 7", request(job, "POST", "/api/label", label(grade=7)), {400}),
        ("grade huge", request(job, "POST", "/api/label", b'{"item":"i1","grade":' + b"9" * 3000 + b',"tab":"tab-a-000001"}'), {400}),
        ("item a number", request(job, "POST", "/api/label", label(item=1)), {400}),
        ("no tab", request(job, "POST", "/api/label", json.dumps({"item": item, "grade": 2}).encode()), {400}),
        ("tab a list", request(job, "POST", "/api/undo", json.dumps({"tab": ["x"]}).encode()), {400}),
        ("unknown field", request(job, "POST", "/api/skip", json.dumps({"item": item, "tab": "tab-a-000001", "x": 1}).encode()), {400}),
        ("form post", request(job, "POST", "/api/label", b"item=i1&grade=3", {"Content-Type": "application/x-www-form-urlencoded"}), {415}),
        ("unknown path", request(job, "POST", "/api/relabel", good), {404}),
        ("unknown path GET", request(job, "GET", "/api/nothing", length=None, headers={}), {404}),
        ("GET on a POST route", request(job, "GET", "/api/label", length=None, headers={}), {405}),
        ("POST on the state", request(job, "POST", "/api/state", good), {405}),
        ("PUT", request(job, "PUT", "/api/label", good), {405}),
        ("DELETE", request(job, "DELETE", "/api/label", length=None, headers={}), {405}),
        ("OPTIONS", request(job, "OPTIONS", "/api/label", length=None, headers={}), {405}),
        ("PATCH", request(job, "PATCH", "/", good), {405}),
        ("no Host", request(job, "GET", "/api/state", length=None, headers={}).replace(b"Host: 127.0.0.1", b"X-Host: 127.0.0.1"), {403}),
    ]
    for what, data, expected in cases:
        status, headers, body = raw(job.server.port, data)
        assert status in expected, (what, status, body)
        assert json.loads(body)["error"], what
    status, _, body = raw(job.server.port, request(job, "POST", "/api/label", label()[:-1] + b', "grade": 3}'))
    assert json.loads(body)["error"] == "the body names 'grade' twice", body  # not the last one kept silently
    # a body shorter than its Content-Length: the end of the body (half-close), then a sender that stalls
    status, _, body = raw(job.server.port, request(job, "POST", "/api/label", good[:10], length=str(len(good))), half_close=True)
    assert status == 400 and b"shorter" in body, body
    job.server.read_timeout_s = 0.5
    status, _, body = raw(job.server.port, request(job, "POST", "/api/label", good[:10], length=str(len(good))))
    assert status == 400 and b"shorter" in body, body
    status, headers, body = raw(job.server.port, request(job, "HEAD", "/", length=None, headers={}))
    assert status == 200 and body == b""
    # nothing was labelled, nothing printed, and the server still answers the page
    assert state(job.url)["progress"]["labelled"] == 0
    assert act(job.url, "label", "tab-a-000001", item=item, grade=2)[0] == 200
    printed = capfd.readouterr()
    assert "Traceback" not in printed.err + printed.out, printed.err


def test_a_label_the_journal_cannot_take_is_answered_not_saved_and_nothing_is_counted(job, capfd):
    def disk_full(line):
        raise OSError(errno.ENOSPC, "No space left on device")

    job.server.session._append = disk_full
    item = state(job.url)["item"]["id"]
    status, answer = act(job.url, "label", "tab-a-000001", item=item, grade=2)
    assert status == 507 and answer["error"].startswith("NOT saved: the disk holding the journal is full"), answer
    assert answer["state"]["progress"]["labelled"] == 0 and answer["state"]["item"]["id"] == item
    assert job.server.session.qrels.read_text(encoding="utf-8").strip() == ""  # the qrels file has no label either
    assert "Traceback" not in capfd.readouterr().err


def fuzz_request(job: Job, rng: random.Random, item: str) -> bytes:
    method = rng.choice(["GET", "POST", "POST", "POST", "PUT", "DELETE", "HEAD", "OPTIONS", "BREW"])
    route = rng.choice(["/", "/api/state", "/api/label", "/api/skip", "/api/undo", "/api/x", "/../etc", "/api/label?x=1", "/%ff"])
    values = [None, True, 0, 3, -1, 2**70, 1.5, "", "x" * 70, item, "i999", [], {}, "tab-fuzz-0001"]
    if rng.random() < 0.6:
        fields = {k: rng.choice(values) for k in rng.sample(["item", "grade", "tab", "kind"], rng.randint(0, 4))}
        body = json.dumps(fields).encode()
    else:
        body = bytes(rng.randrange(256) for _ in range(rng.randint(0, 40)))
    headers = {}
    if rng.random() < 0.85:
        headers["Content-Type"] = rng.choice(["application/json", "application/json; charset=utf-8", "text/plain", "application/jsonx"])
    length = rng.choice(["auto", "auto", "auto", None, "-1", "zz", str(len(body) + 1000), "0", "1e3", " 5"])
    if length == str(len(body) + 1000):
        length = "auto"  # a stalling sender waits for the read timeout: tested above, too slow to fuzz
    return request(job, method, route, body, headers, length)


def test_a_seeded_fuzz_of_the_endpoints_gets_4xx_or_200_and_the_journal_holds_every_answered_label(job, capfd):
    rng = random.Random(29)
    item = state(job.url)["item"]["id"]
    answered: Counter[int] = Counter()
    labelled = 0
    for _ in range(250):
        data = fuzz_request(job, rng, state(job.url)["item"]["id"] if rng.random() < 0.5 else item)
        status, _, body = raw(job.server.port, data)
        assert status is not None and (status == 200 or 400 <= status < 500), (data[:200], status, body[:200])
        answered[status] += 1
        if status == 200 and b" /" + job.server.token.encode() + b"/api/label" in data:
            labelled += 1
    assert answered[200] and sum(n for s, n in answered.items() if s >= 400) > 150, answered
    journal = [json.loads(line) for line in (job.server.session.journal).read_text(encoding="utf-8").splitlines()]
    assert sum(1 for line in journal if line["type"] == "label") == labelled
    printed = capfd.readouterr()
    assert "Traceback" not in printed.err + printed.out, printed.err


def test_a_port_forward_to_another_loopback_port_is_answered_and_other_names_need_allow_host(tmp_path, run_file):
    job = Job(tmp_path, run_file, allow_hosts=[parse_host_rule("devbox:8080"), parse_host_rule("labels.internal")])
    forward = Forward(job.server.port)
    try:
        path = "/" + job.server.token + "/"
        through = f"http://localhost:{forward.port}{path}"
        status, page, _ = fetch(through)  # ssh -L PORT2:127.0.0.1:PORT: the browser sends Host: localhost:PORT2
        assert status == 200 and b"<title>judge-runner label</title>" in page
        item = state(through)["item"]["id"]
        origin = {"Origin": f"http://localhost:{forward.port}"}
        assert fetch(through + "api/label", {"item": item, "grade": 2, "tab": "tab-fw-000001"}, origin)[0] == 200
        assert fetch(f"http://127.0.0.1:{forward.port}{path}api/state")[0] == 200
        for host in ("devbox:8080", "DEVBOX:8080", "labels.internal:9999"):  # named by --allow-host
            assert fetch(job.url + "api/state", headers={"Host": host})[0] == 200, host
        for host in ("evil.example:%d" % job.server.port, "devbox:9090", "localhost.evil.example", ""):  # DNS rebinding
            status, body, _ = fetch(job.url + "api/state", headers={"Host": host})
            assert status == 403, host
            assert "--allow-host" in json.loads(body)["error"] and "DNS rebinding" in json.loads(body)["error"]
        # a cross-site POST (another page in the labeller's browser) is refused, even with the token
        item = state(job.url)["item"]["id"]
        status, body, _ = fetch(job.url + "api/label", {"item": item, "grade": 3, "tab": "tab-x-000001"}, {"Origin": "http://evil.example"})
        assert status == 403 and "another site" in json.loads(body)["error"]
        status, _, _ = fetch(job.url + "api/label", {"item": item, "grade": 3, "tab": "tab-x-000001"}, {"Sec-Fetch-Site": "cross-site"})
        assert status == 403
        assert state(job.url)["progress"]["labelled"] == 1
    finally:
        forward.close()
        job.stop()
    assert "http://devbox:8080/" + job.server.token + "/" in job.lines.text()


def test_label_help_says_why_another_host_name_is_refused_and_bad_allow_hosts_are_usage_errors(tmp_path):
    help_text = " ".join(invoke(["label", "--help"]).output.split())
    assert "--allow-host" in help_text and "port forward" in help_text and "DNS rebinding" in help_text
    for bad in ("http://devbox:8080", "devbox:0", "devbox:99999", "dev box", "devbox/x", "a@b"):
        result = invoke(["label", "--name", "team", "--folder", str(tmp_path), "--no-cache", "--allow-host", bad])
        assert result.exit_code == 2 and "--allow-host" in result.output, (bad, result.output)


def test_a_stale_tabs_undo_undoes_its_own_label_not_the_other_tabs(job):
    url = job.url
    a, b = "tab-a-000001", "tab-b-000002"
    stale = state(url, a)
    first = stale["item"]["id"]
    assert act(url, "label", a, item=first, grade=2)[0] == 200
    second = state(url, b)["item"]["id"]
    assert act(url, "label", b, item=second, grade=1)[0] == 200
    assert state(url, a)["canUndo"] and state(url, b)["canUndo"]
    status, answer = act(url, "undo", a)  # tab a has not reloaded since its label: its undo is its own
    assert status == 200, answer
    assert answer["state"]["item"]["id"] == first  # its own label undone, shown again
    labels = job.server.session.state.labels
    assert labels == {second: 1}
    assert not answer["state"]["canUndo"]
    status, answer = act(url, "undo", a)  # nothing of tab a's left: refused, tab b's label stays
    assert status == 409 and "this tab" in answer["error"]
    assert job.server.session.state.labels == {second: 1}
    assert act(url, "undo", "tab-c-000003")[0] == 409  # a new tab has nothing to undo


def test_undo_in_one_tab_while_another_labels_never_takes_the_other_tabs_label(job):
    url = job.url
    errors: list = []

    def labeller(tab: str, undo_every: int) -> None:
        try:
            for n in range(12):
                current = state(url, tab)["item"]
                if current is None:
                    return
                act(url, "label", tab, item=current["id"], grade=n % 4)  # 409 when the other tab was quicker
                if undo_every and n % undo_every == 0:
                    act(url, "undo", tab)
        except Exception as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=labeller, args=("tab-a-000001", 2)), threading.Thread(target=labeller, args=("tab-b-000002", 0))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors
    journal = [json.loads(line) for line in job.server.session.journal.read_text(encoding="utf-8").splitlines()[1:]]
    given_by: dict[str, str] = {}
    undone = 0
    for line in journal:
        if line["type"] == "label":
            given_by[line["item"]] = line["tab"]
        elif line["type"] == "undo":
            assert given_by[line["item"]] == line["tab"] == "tab-a-000001", line
            undone += 1
    assert undone >= 1
    b_labels = [line["item"] for line in journal if line["type"] == "label" and line["tab"] == "tab-b-000002"]
    assert all(item in job.server.session.state.labels for item in b_labels)  # not one of tab b's labels was taken away


def test_sigterm_stops_label_saying_so_with_the_exit_code_of_a_stopped_command(tmp_path, run_file):
    proc = spawn_label(tmp_path, str(run_file), "--queries", "2")
    try:
        url = wait_url(proc)
        item = state(url, "tab-term-01")["item"]
        assert act(url, "label", "tab-term-01", item=item["id"], grade=2)[0] == 200
    finally:
        out, err = stop_process(proc, signal.SIGTERM)
    assert proc.returncode == 3, err  # stopped from outside, as any command a signal stops; Ctrl+C ends label with 0
    assert "stopped (SIGTERM)" in err and "Ctrl+C" not in err.replace("Ctrl+C stops the server", ""), err
    assert "1 of " in out and "run the same command to go on" in out, out  # everything given is saved
