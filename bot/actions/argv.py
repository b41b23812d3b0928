"""Command lines in a bundle: every value masked, the shape and what the walk reads kept.

A command line cannot be masked by what its flags are called (`-p`, `-a`, `--pw`, `--bearer`
and `sh -c "…"` all carried secrets past a denylist), so every argument is masked but:

- the program (a command's first element, and each command's first word in a shell script);
- a plain flag (`--enforce-eager`, `-v`): no value rides on it; `--flag=value` keeps `--flag=`;
- the value of a flag the walk reads, when it is a plain number: `--gpu-memory-utilization`,
  `--mem-fraction-static` and `--cuda-memory-fraction` say how much GPU memory an inference
  server reserves (layers/facts/inference.py `reservation_args`, layer 4's evidence); a number
  there is a fraction, never a credential;
- a word that names an inference server (`vllm.entrypoints.openai.api_server`, `tritonserver`:
  layers/facts/inference.py `name_in`, how layer 4 recognises the server), unless it follows a
  secret-named flag;
- a shell's `-c` script, which is masked word by word by the same rules, so `sh -c "vllm serve
  … --api-key X"` keeps `vllm serve` and loses `X`.

Every kept word still goes through the free-text detector (bot/actions/detector.py).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from bot.actions.detector import MASK, scrub
from layers.facts.inference import name_in

# The flags whose numeric values the walk reads (layers/facts/inference.py `_RESERVATION`).
NUMERIC_FLAGS = frozenset({"--gpu-memory-utilization", "--mem-fraction-static", "--cuda-memory-fraction"})
_NUMBER = re.compile(r"[0-9]+(?:\.[0-9]+)?")
_SHELLS = frozenset({"sh", "bash", "dash", "ash", "zsh", "ksh", "busybox"})
_SECRET_FLAG = re.compile(r"(?i)pass|pwd|pw$|secret|token|bearer|auth|key|cred|sig|cookie|^-[pa]$")
_FLAG = re.compile(r"-{1,2}[A-Za-z0-9][A-Za-z0-9_.-]*")
# A shell word: quoted parts and plain runs with nothing between them; operators apart.
_SHELL_TOKEN = re.compile(
    r"""(?P<op>&&|\|\||[;&|()\n])|(?P<word>(?:"(?:[^"\\]|\\.)*"?|'[^']*'?|[^\s;&|()'"]+)+)|(?P<space>[ \t\r]+)""",
    re.S,
)
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")
_HEAD_KEEPERS = frozenset({"sudo", "exec", "env", "nohup", "time", "then", "do", "else", "if", "while", "!"})


def _is_shell(program: str) -> bool:
    return program.rsplit("/", 1)[-1] in _SHELLS


def _kept_value(flag: str | None, word: str) -> bool:
    if flag is not None and _SECRET_FLAG.search(flag.lstrip("-") if len(flag) > 2 else flag):
        return False
    if flag in NUMERIC_FLAGS and _NUMBER.fullmatch(word):
        return True
    if flag is not None and word in ("true", "false"):
        return True  # a switch's setting (`--fail-on-init-error=false`) carries nothing
    return name_in(word) is not None


def _glued(word: str) -> str | None:
    """`-pS3cret` (mysql's password glued to its flag) as `-p<masked>`; None for a flag that is
    only letters in lower case (`-rf`, `-logtostderr`) or no single-dash flag at all."""
    if len(word) <= 2 or word[0] != "-" or word[1] == "-":
        return None
    if word.startswith("-p") or not (word[1:].isalpha() and word[1:].islower()):
        return word[:2] + MASK
    return None


def mask_argv(argv: Sequence[object], *, program: bool) -> list[object]:
    """A command (`program`: its first element is the program) or an args list, masked."""
    out: list[object] = []
    pending: str | None = None  # the flag whose value the next word would be
    script_next = False
    for i, arg in enumerate(argv):
        if not isinstance(arg, str):
            out.append(arg)
            pending = None
            continue
        if i == 0 and program:
            out.append(scrub(arg))
            script_next = _is_shell(arg)
            continue
        if script_next and arg.startswith("-") and not arg.startswith("--") and arg.endswith("c"):
            out.append(arg)
            pending = "-c"
            continue
        if pending == "-c" and script_next:
            out.append(mask_script(arg))
            pending, script_next = None, False
            continue
        flag = _FLAG.match(arg)
        if flag and flag.end() == len(arg):  # a plain flag, maybe taking the next word
            out.append(_glued(arg) or arg)
            pending = arg
            continue
        if flag and arg[flag.end()] == "=":
            name, value = arg[: flag.end()], arg[flag.end() + 1 :]
            out.append(arg if _kept_value(name, value) and scrub(value) == value else f"{name}={MASK}")
            pending = None
            continue
        out.append(arg if _kept_value(pending, arg) and scrub(arg) == arg else MASK)
        pending = None
    return out


def mask_script(script: str) -> str:
    """A shell script (`sh -c` text, a ConfigMap's script file) with every argument masked."""
    out: list[str] = []
    head = True
    pending: str | None = None
    for m in _SHELL_TOKEN.finditer(script):
        if m.group("op") is not None:
            out.append(m.group("op"))
            head, pending = True, None
            continue
        word = m.group("word")
        if word is None:
            out.append(m.group(0))
            continue
        if head:
            assign = _ASSIGNMENT.match(word)
            if assign:  # VAR=value before a command: the value may be anything
                out.append(word[: assign.end()] + MASK)
                continue
            out.append(scrub(word))
            head = word in _HEAD_KEEPERS or word == "export"
            if word == "export":
                pending = "export"
            continue
        if pending == "export" and _ASSIGNMENT.match(word):
            out.append(word[: _ASSIGNMENT.match(word).end()] + MASK)  # type: ignore[union-attr]
            continue
        bare = word.strip("'\"")
        flag = _FLAG.match(bare)
        if flag and flag.end() == len(bare):
            out.append(_glued(bare) or word)
            pending = bare
            continue
        if flag and bare[flag.end()] == "=":
            name, value = bare[: flag.end()], bare[flag.end() + 1 :]
            out.append(word if _kept_value(name, value) and scrub(value) == value else f"{name}={MASK}")
            pending = None
            continue
        out.append(word if _kept_value(pending, bare) and scrub(word) == word else MASK)
        pending = None
    # Whatever the tokens missed (an unmatched quote's tail) is scrubbed as text.
    return scrub("".join(out))
