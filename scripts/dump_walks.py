"""Dump `gpubot why --all --format json` of every scenario with an x-expect target into one folder.

Used to show a refactor is byte-identical: dump before, dump after, `diff -r` the two folders.

    python scripts/dump_walks.py /tmp/before     # bot/scenarios and tests/incidents/**
"""

from __future__ import annotations

import contextlib
import io
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def scenario_files() -> list[Path]:
    files = sorted((ROOT / "bot" / "scenarios").glob("*.yaml"))
    files += sorted((ROOT / "tests" / "incidents").rglob("*.yaml"))
    return files


def target(path: Path) -> str | None:
    data = yaml.load(path.read_text(encoding="utf-8"), Loader=_LOADER)
    exp = data.get("x-expect") if isinstance(data, dict) else None
    return str(exp["target"]) if isinstance(exp, dict) and exp.get("target") else None


def main(argv: list[str]) -> int:
    if argv in (["-h"], ["--help"]):
        print(__doc__)
        return 0
    # An option is not a folder: `--help` used to create a folder named "--help".
    if len(argv) != 1 or argv[0].startswith("-"):
        print("usage: dump_walks.py OUT_DIR", file=sys.stderr)
        return 2
    # This checkout's code, not whatever `gpubot` the environment has installed.
    sys.path.insert(0, str(ROOT))
    import layers
    from bot.cli.main import main as gpubot

    assert Path(layers.__file__).resolve().is_relative_to(ROOT), layers.__file__

    out = Path(argv[0])
    out.mkdir(parents=True, exist_ok=True)
    for path in scenario_files():
        who = target(path)
        if who is None:
            continue
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(buf):
            rc = gpubot(["why", "--all", "--format", "json", "--scenario", str(path), who])
        name = str(path.relative_to(ROOT)).replace("/", "__")
        (out / f"{name}.json").write_text(f"rc={rc}\n{buf.getvalue()}", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
