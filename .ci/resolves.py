"""Check that the project's dependencies (with the test extra), held to constraints.txt, resolve to wheels
for each Python named on the command line (default 3.12 and 3.13): pip's resolver in --dry-run, nothing
installed, the Pythons side by side. Needs the package index. Exit 1 naming a Python that does not resolve."""

from __future__ import annotations

import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def requirements() -> list[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    return [*project["dependencies"], *project["optional-dependencies"]["test"]]


def resolver(version: str, listed: Path) -> subprocess.Popen[str]:
    # pip (23.2) wants --target beside --python-version; with --dry-run nothing is written there
    command = [sys.executable, "-m", "pip", "install", "-q", "--dry-run", "--ignore-installed", "--only-binary=:all:"]
    command += ["--python-version", version, "--target", str(listed.parent / version)]
    command += ["-c", str(ROOT / "constraints.txt"), "-r", str(listed)]
    return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def main() -> int:
    versions = sys.argv[1:] or ["3.12", "3.13"]
    failed = 0
    with tempfile.TemporaryDirectory() as folder:
        listed = Path(folder, "requirements.txt")
        listed.write_text("\n".join(requirements()) + "\n", encoding="utf-8")
        for version, process in [(v, resolver(v, listed)) for v in versions]:
            _, err = process.communicate()
            if process.returncode:
                failed += 1
                errors = "\n".join(line for line in err.splitlines() if "is ignored: it is neither" not in line)
                print(f"Python {version}: the dependency set does not resolve\n{errors}", file=sys.stderr)
            else:
                print(f"Python {version}: the dependency set resolves (wheels only, held to constraints.txt)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
