"""Bombs in scenarios, bundles and webhook bodies (issue 28, item 4): each is one line and exit 2,
refused before it is built, within bounded memory. Every bomb is generated here, none committed.

- a `.json` scenario and a YAML scenario (flow `[[[…` and block `- - - …`) nested 200,000 deep:
  the JSON decoders stop with RecursionError and libyaml's C composer crashes (SIGSEGV) there;
- a bundle whose scenario.yaml is nested 200,000 deep;
- a bundle of a few MB holding a 700 MB comment-only scenario.yaml (refused from its tar header,
  before a byte of it is inflated), and one whose member is under the size cap but inflates
  over MAX_RATIO times the bundle (refused the same way), with a lying header refused by the
  running count;
- an Alertmanager body nested 200,000 deep (400; the HTTP path at 100,000 is
  tests/test_probe5_alert_incidents.py).
"""

from __future__ import annotations

import io
import json
import resource
import subprocess
import sys
import tarfile
import time
import zlib
from pathlib import Path

import pytest

from bot.sources import bundle_reader
from bot.sources.bounded import MAX_DEPTH
from bot.sources.bundle_reader import read_bundle
from bot.sources.scenario import ScenarioError, load_scenario
from handlers.alert_payload import PayloadError, parse_payload

DEEP = 200_000
PEAK_MB = 300  # a bomb's refusal costs the interpreter and the imports (~120 MB), no more


def _why(*args: str) -> tuple[int, str, str, float, float]:
    """`gpubot why …` in a child: its exit code, stdout, stderr, wall seconds and peak RSS in MB."""
    code = (
        "import sys\n"
        "from bot.cli.main import main\n"
        "try:\n    rc = main(sys.argv[1:])\n"
        "except SystemExit as e:\n    rc = e.code\n"
        "sys.stdout.flush()\n"
        # VmHWM, not ru_maxrss: ru_maxrss survives exec, so a child forked from a large test worker
        # would report the worker's size.
        "hwm = [l for l in open('/proc/self/status') if l.startswith('VmHWM:')][0].split()[1]\n"
        "print(hwm, file=sys.stderr)\n"
        "sys.exit(rc)\n"
    )
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", code, "why", *args], capture_output=True, text=True, timeout=120, check=False
    )
    took = time.perf_counter() - started
    *err, peak = done.stderr.strip().splitlines()
    return done.returncode, done.stdout, "\n".join(err), took, int(peak) / 1024


def _one_line_exit_2(*args: str, said: str) -> tuple[float, float]:
    rc, out, err, took, peak = _why(*args)
    assert rc == 2, (rc, out, err[-2000:])
    assert out == ""
    assert len(err.splitlines()) == 1 and said in err, err[-2000:]
    assert "Error" not in err.split(":")[0] and "Traceback" not in err
    assert peak < PEAK_MB, peak
    return took, peak


def _nested_json(n: int) -> bytes:
    return b'{"kind": "Scenario", "name": "bomb", "objects": [' + b'{"a": ' * n + b"1" + b"}" * n + b"]}"


def _bundle(path: Path, members: dict[str, bytes]) -> None:
    with tarfile.open(path, "w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


def test_a_json_scenario_nested_200000_deep_is_one_line_and_exit_2(tmp_path: Path) -> None:
    bomb = tmp_path / "deep.json"
    bomb.write_bytes(_nested_json(DEEP))
    _one_line_exit_2(
        "ml/x", "--scenario", str(bomb), said=f"nested too deep to be a scenario (over {MAX_DEPTH} levels)"
    )


@pytest.mark.parametrize(
    "text",
    [
        "kind: Scenario\nname: bomb\nobjects: " + "[" * DEEP + "]" * DEEP + "\n",
        "kind: Scenario\nname: bomb\nobjects:\n" + "- " * DEEP + "x\n",
        # `{` first and no JSON: YAML flow style, judged as YAML.
        "{kind: Scenario, objects: " + "{a: " * DEEP + "1" + "}" * DEEP + "}\n",
    ],
    ids=["flow", "block", "flow-mapping"],
)
def test_a_yaml_scenario_nested_200000_deep_is_refused_before_libyaml_composes_it(
    tmp_path: Path, text: str
) -> None:
    bomb = tmp_path / "deep.yaml"
    bomb.write_text(text)
    with pytest.raises(ScenarioError, match=r"nested too deep to be a scenario \(over 200 levels\)"):
        load_scenario(bomb)


def test_nesting_a_real_object_needs_is_read(tmp_path: Path) -> None:
    """The limit sits far above what clusters nest: 150 levels of flow and block are read."""
    flow = tmp_path / "flow.yaml"
    flow.write_text(
        "kind: Scenario\nname: ok\nnow: '2026-01-01T00:00:00Z'\nx: " + "[" * 150 + "]" * 150 + "\n"
    )
    with pytest.raises(ScenarioError) as flow_err:
        load_scenario(flow)  # read, then judged by its keys (not by its depth)
    assert "nested too deep" not in str(flow_err.value)
    deep_ok = tmp_path / "ok.json"
    deep_ok.write_bytes(_nested_json(150))
    with pytest.raises(ScenarioError) as err:
        load_scenario(deep_ok)
    assert "nested too deep" not in str(err.value)


def test_a_bundle_whose_scenario_is_nested_200000_deep_is_one_line_and_exit_2(tmp_path: Path) -> None:
    bomb = tmp_path / "deep.tar.gz"
    _bundle(bomb, {"scenario.yaml": b"kind: Scenario\nobjects:\n" + b"- " * DEEP + b"x\n"})
    _one_line_exit_2(
        "ml/x", "--bundle", str(bomb), said=f"nested too deep to be a scenario (over {MAX_DEPTH} levels)"
    )


def _comment_bomb(path: Path, size: int) -> int:
    """A tar.gz whose scenario.yaml is `size` bytes of comment lines, streamed through zlib."""
    line = b"# " + b"x" * 61 + b"\n"
    block = line * (1 << 14)  # 1 MiB
    header = tarfile.TarInfo("scenario.yaml")
    header.size = size
    gz = zlib.compressobj(6, zlib.DEFLATED, 31)
    with path.open("wb") as out:
        out.write(gz.compress(header.tobuf(format=tarfile.GNU_FORMAT)))
        left = size
        while left:
            piece = block[: min(left, len(block))]
            out.write(gz.compress(piece))
            left -= len(piece)
        out.write(gz.compress(b"\0" * (-size % 512) + b"\0" * 1024))
        out.write(gz.flush())
    return path.stat().st_size


def test_a_700_mb_comment_only_scenario_in_a_small_bundle_is_refused_from_its_header(tmp_path: Path) -> None:
    bomb = tmp_path / "bomb.tar.gz"
    packed = _comment_bomb(bomb, 700 << 20)
    assert packed < 8 << 20  # a few MB on disk
    took, peak = _one_line_exit_2("ml/x", "--bundle", str(bomb), said="inflates to 700 MiB")
    assert took < 20
    print(f"700 MB bomb ({packed / 1e6:.1f} MB): {took:.2f} s, peak RSS {peak:.0f} MB")


def test_a_member_under_the_size_cap_that_inflates_past_the_ratio_is_refused(tmp_path: Path) -> None:
    bomb = tmp_path / "ratio.tar.gz"
    packed = _comment_bomb(bomb, 64 << 20)
    assert bundle_reader.MAX_RATIO * packed < (64 << 20)
    with pytest.raises(ScenarioError, match="compression bomb"):
        read_bundle(bomb)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    # Members before scenario.yaml are skipped by inflating them: their sizes count too.
    junk = tmp_path / "junk.tar.gz"
    with tarfile.open(junk, "w:gz") as tar:
        info = tarfile.TarInfo("logs/huge.log")
        info.size = 64 << 20
        tar.addfile(info, io.BytesIO(b"\n" * info.size))
        tar.addfile(tarfile.TarInfo("scenario.yaml"), io.BytesIO(b""))
    with pytest.raises(ScenarioError, match="the bundle inflates"):
        read_bundle(junk)
    assert (
        resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 100 << 10
    )  # KB: nothing inflated whole


def test_a_scenario_member_is_never_extracted_to_disk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tempfile

    def no_temp(*_a: object, **_k: object) -> None:
        raise AssertionError("a bundle member was extracted to a temporary file")

    monkeypatch.setattr(tempfile, "TemporaryDirectory", no_temp)
    monkeypatch.setattr(tempfile, "NamedTemporaryFile", no_temp)
    ok = tmp_path / "ok.tar.gz"
    _bundle(ok, {"scenario.yaml": b"kind: Scenario\nname: tiny\nnow: '2026-01-01T00:00:00Z'\nobjects: []\n"})
    assert read_bundle(ok).name == "tiny"


def test_an_alertmanager_body_nested_200000_deep_is_one_line() -> None:
    body = b'{"version": "4", "alerts": [' + b'{"a": ' * DEEP + b"1" + b"}" * DEEP + b"]}"
    with pytest.raises(PayloadError) as err:
        parse_payload(body)
    assert "nested too deep" in str(err.value) and "\n" not in str(err.value)
    with pytest.raises(PayloadError, match="nested too deep"):
        parse_payload(
            json.dumps({"version": "4"}).encode()[:-1] + b', "x": ' + b"[" * DEEP + b"]" * DEEP + b"}"
        )
