"""Is requirements.lock the lock of pyproject.toml's ranges?

    python -m tests.lockcheck                # exit 1 with one line if the lock is out of step
    python -m tests.lockcheck --stamp LOCK   # record pyproject's ranges in LOCK (`make lock`)

Two checks: every requirement of pyproject.toml (the extras included) is pinned in the lock at a
version its range allows, and the lock records the hash of the ranges it was made from, so a
range changed, added or removed without `make lock` is caught even when the old pins still fit.
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LOCK = ROOT / "requirements.lock"
STAMP = "# pyproject.toml ranges sha256: "
REFRESH = "run `make lock`"


def ranges(pyproject: Path = ROOT / "pyproject.toml") -> list[str]:
    project = tomllib.loads(pyproject.read_text())["project"]
    extras = project.get("optional-dependencies", {})
    return [*project["dependencies"], *(r for name in sorted(extras) for r in extras[name])]


def ranges_digest(reqs: list[str]) -> str:
    return hashlib.sha256(json.dumps(reqs).encode()).hexdigest()


def pins(lock_text: str) -> dict[str, str]:
    from packaging.utils import canonicalize_name  # `--stamp` runs before the venv has it

    found = re.findall(r"^([A-Za-z0-9_.\-]+)==([^\s;\\]+)", lock_text, flags=re.M)
    return {canonicalize_name(name): version for name, version in found}


def problems(lock_text: str, reqs: list[str]) -> list[str]:
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    pinned = pins(lock_text)
    out = []
    for line in reqs:
        req = Requirement(line)
        version = pinned.get(canonicalize_name(req.name))
        if version is None:
            out.append(f"{req.name} is not in the lock")
        elif not req.specifier.contains(version, prereleases=True):
            out.append(f"{req.name}=={version} is outside {req.specifier}")
    if not out and f"{STAMP}{ranges_digest(reqs)}" not in lock_text:
        out.append("pyproject.toml's ranges changed since the lock was made")
    return out


def main(argv: list[str]) -> int:
    if argv[:1] == ["--stamp"]:
        lock = Path(argv[1])
        lines = [ln for ln in lock.read_text().splitlines() if not ln.startswith(STAMP)]
        lines.insert(2, STAMP + ranges_digest(ranges()))
        lock.write_text("\n".join(lines) + "\n")
        return 0
    found = problems(LOCK.read_text(), ranges())
    if found:
        print(
            f"requirements.lock is out of step with pyproject.toml ({'; '.join(found)}): {REFRESH}"
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
