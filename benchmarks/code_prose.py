"""How much the product's code talks, and how wide its joints are: the figures the plain-speech pass is
measured by, computed the same way before and after.

    python benchmarks/code_prose.py [--root .] [--since REV]

- docstring share: docstring lines over all lines of ``judge_runner/*.py``;
- docstring lines per line of function body (body lines exclude the function's own docstring);
- median ``help=`` length of the click options and arguments in ``judge_runner/cli/``, in characters;
- functions with 9 or more parameters (``self``/``cls`` not counted);
- parameters annotated ``Any`` (alone, not inside another type);
- references to "issue N" in product code;
- median commit subject length in characters (``--since REV``: the commits after REV, else all).
"""

from __future__ import annotations

import argparse
import ast
import re
import statistics
import subprocess
from pathlib import Path

ISSUE_RE = re.compile(r"\bissues? \d+", re.IGNORECASE)


def _docstring_nodes(tree: ast.Module) -> list[ast.Constant]:
    out = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
                out.append(body[0].value)
        # attribute docstrings: a string statement right after an assignment
        body = getattr(node, "body", None)
        if isinstance(body, list):
            for prev, stmt in zip(body, body[1:]):
                if (
                    isinstance(prev, (ast.Assign, ast.AnnAssign))
                    and isinstance(stmt, ast.Expr)
                    and isinstance(stmt.value, ast.Constant)
                    and isinstance(stmt.value.value, str)
                ):
                    out.append(stmt.value)
    return out


def _lines(node: ast.AST) -> int:
    return (node.end_lineno or node.lineno) - node.lineno + 1  # type: ignore[attr-defined]


def measure(root: Path, since: str | None) -> dict[str, float]:
    files = sorted((root / "judge_runner").rglob("*.py"))
    total = doc = body = fn_doc = wide = any_params = issues = 0
    helps: list[int] = []
    for path in files:
        text = path.read_text(encoding="utf-8")
        tree = ast.parse(text)
        total += len(text.splitlines())
        doc += sum(_lines(n) for n in _docstring_nodes(tree))
        issues += len(ISSUE_RE.findall(text))
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                stmts = node.body
                first = stmts[0]
                has_doc = isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str)
                if has_doc:
                    fn_doc += _lines(first)
                    stmts = stmts[1:]
                if stmts:
                    body += (stmts[-1].end_lineno or 0) - stmts[0].lineno + 1
                args = [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs]
                named = [a for a in args if a.arg not in ("self", "cls")]
                if len(named) + (node.args.vararg is not None) + (node.args.kwarg is not None) >= 9:
                    wide += 1
                for a in [*args, node.args.vararg, node.args.kwarg]:
                    if a is not None and a.annotation is not None and ast.unparse(a.annotation) in ("Any", "typing.Any"):
                        any_params += 1
            if "cli" in path.parts and isinstance(node, ast.keyword) and node.arg == "help":
                try:
                    value = ast.literal_eval(node.value)
                except ValueError:
                    continue
                if isinstance(value, str):
                    helps.append(len(value))
    rev = f"{since}..HEAD" if since else "HEAD"
    subjects = subprocess.run(["git", "log", "--format=%s", rev], cwd=root, capture_output=True, text=True, check=True).stdout.splitlines()
    return {
        "product lines": total,
        "docstring share %": round(100 * doc / total, 1),
        "function docstring lines per body line": round(fn_doc / body, 2),
        "median option help chars": statistics.median(helps) if helps else 0,
        "functions with >= 9 parameters": wide,
        "parameters typed Any": any_params,
        "issue references": issues,
        "commits": len(subjects),
        "median commit subject chars": statistics.median(len(s) for s in subjects) if subjects else 0,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[1])
    parser.add_argument("--since", help="measure commit subjects after this revision only")
    args = parser.parse_args()
    for key, value in measure(args.root, args.since).items():
        print(f"{key:42} {value}")


if __name__ == "__main__":
    main()
