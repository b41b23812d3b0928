"""Default-deny masking of a bundle's free text: log lines, event and condition messages,
summary.md, errors (issue 28, item 2).

A denylist of secret shapes always misses the next shape (issue 28 found 17 of 181 planted
secrets leaking past detect-secrets and our own patterns), so a token of free text reaches a
bundle only when it is known to be safe, and everything else becomes `<masked>`. Known safe:

- a word of the GPU stack's own vocabulary (bot/actions/data/vocabulary.txt, written by
  scripts/vocabulary.py from real operand logs, the scenarios and incidents, every string of
  layers/ (the log signatures, the finding texts) and the Xid catalog); CamelCase reasons
  (`XidCriticalError`, `CrashLoopBackOff`) when each part is one;
- a name the bundle already holds (`names`: nodes, pods, namespaces, containers, images, UIDs,
  container and image IDs, as the masked objects carry them);
- numbers (up to 20 digits), and so timestamps, durations, versions (`v1.29.4`,
  `5.14.0-284.30.1.el9_2.x86_64`), PCI addresses and IPs, which are numbers between dots and
  colons; a word of at most four letter/digit parts whose letter parts are short (`x86`, `h100`,
  `sm90`) or words;
- hex up to 12 digits (PCI domains, addresses, short IDs) and `0x` numbers up to 16: longer hex
  is the shape of an API key or a hash of one (a wandb key is 40 hex digits) and is kept only
  when it is a container or image ID the bundle holds; GPU UUIDs (`GPU-…`, `MIG-…`); any other
  UUID only when it is an object's UID the bundle holds (an API key may be a UUID);
- paths: each segment judged alone; a URL's userinfo is always masked.

A token is judged whole: a run of `[\\w+/.~-]` (`AzUr3AcC0untK3y+abc/def==` is one) keeps all of
its parts or none, so no vocabulary word survives out of a secret. A base64 run (16+ characters,
digits and both cases) is decoded and judged by what it holds: text with anything masked (a
kubeconfig's token, a .dockerconfigjson's auth) or binary (key material) masks it. A run with
URL escapes is judged decoded too. Whatever follows a secret-named key (`password`, `pw`,
`token`, `secret`, `X-Amz-Signature`, `private_key_id`, `Passwort`, `contraseña`, …) after `=`,
`:`, `=>`, `is` or a space is masked whatever it looks like (a number, a word, the whole of a
quoted phrase); after an `Authorization:` or `Cookie:` header the rest of the value. A token
wrapped across two lines (a JWT cut by a terminal, a PEM body) is judged joined: a masked
base64-ish token of 16+ characters at a line's end masks the next line's first token (unless
that is a plain word of the vocabulary), and a PEM block's lines are masked whole.

Linear: every pattern is a single character class or possessive (tests/test_linear_patterns.py);
each distinct token is judged once per text (a log repeats its words).
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterable
from functools import lru_cache
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from bot.ops.secrets import MASK

__all__ = ["MASK", "FreeText", "names_of"]

_SPAN = re.compile(r"[\w+/.~\-]++")
_ATOM = re.compile(r"[^\W_]+")
_CAMEL = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+")
_SEGMENTS = re.compile(r"[A-Za-z]+|[0-9]+")
_GPU_UUID = re.compile(r"(?:MIG-)?(?:GPU|MIG)-[0-9a-fA-F]{8}(?:-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}")
_UUID = re.compile(r"[0-9a-fA-F]{8}(?:-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}")
_HEX = re.compile(r"[0-9a-fA-F]+")
_BASE64 = re.compile(r"[A-Za-z0-9+/_\-]{16,}+")
_ESCAPE = re.compile(r"%[0-9A-Fa-f]{2}")
_WORD = re.compile(r"\S++")
_USERINFO = re.compile(r"(://)([^/@\s\"'<>]++)@")
_KEYWORD = re.compile(r"[\w.\-]++")
_PARTS = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[^\W\d_]+|\d+")
# After a secret-named key: its closing quote, a separator, then the value (all possessive).
# Quotes may be escaped once or twice (JSON inside a JSON or logfmt log line: `{\"pw\":\"x\"}`).
_VALUE = re.compile(
    r"""(?:\\{0,2}["'])?+[ \t]*+(=>|[:=]|(?:is|was|are|of)(?=[ \t]))?+[ \t]*+"""
    r"""(?:\\{0,2}"((?:[^"\\\n]++|\\[^"\\\n])*+)|'([^'\n]*+)'?|([^\s,;&"'<>)\]}\\]++))"""
)
_HEADER_VALUE = re.compile(r"""(?:\\{0,2}["'])?+[ \t]*+:[ \t]*+([^"'\\\n]++)""")
_PEM_BEGIN = re.compile(r"-----BEGIN[ A-Z0-9]*-----")
_PEM_END = re.compile(r"-----END[ A-Z0-9]*-----")
_WRAP_TAIL = re.compile(r"[A-Za-z0-9+/=_.\-]++$")
_WRAP_HEAD = re.compile(
    r"(?:\d{4}-\d\d-\d\dT\S++[ \t]++|std(?:out|err)[ \t]++[FP][ \t]++)*+([A-Za-z0-9+/=_.\-]++)"
)


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


# Parts of a key that say its value is a secret, in any language a log may be in.
STRONG = _words(
    "password passwd pass pwd pw passphrase passcode secret secrets token bearer apikey credential "
    "credentials cred creds cookie auth authorization oauth signature sig jwt otp pin dsn privatekey "
    "passwort kennwort contraseña contrasena senha parola wachtwoord lösenord losenord salasana hasło "
    "haslo heslo пароль 密码 密碼 パスワード 비밀번호 mdp motdepasse clave geheim jeton токен"
)
# Parts that name a secret only with `=` or `:` after them (`key=…`, `private_key_id: …`).
WEAK = _words("key session sessionid private access salt hmac login user username")
HEADERS = _words("authorization cookie set-cookie proxy-authorization x-api-key x-auth-token")
# Words after a key word and a space that make it prose (`token expired`), not a value (`password hunter2`).
PROSE = _words(
    "expired required invalid incorrect missing changed reset rejected accepted refresh refreshed "
    "rotated revoked mismatch denied not is was has for and or the a an to from of in on with file "
    "policy must should will can cannot could be been request requests length count"
)
# A key's last part that says its value is about the secret, not the secret (`password_file`,
# `TokenExpiredError`, `auth_url`).
ABOUT = _words(
    "warning error errors exception failed failure expired required invalid length count size type "
    "kind name file path ttl url uri endpoint mode method provider plugin header policy format "
    "source ref hint"
)
HARMLESS = frozenset(
    {"true", "false", "null", "none", "nil", "", "redacted", "masked", "***", "set", "unset"}
)
_DATA = Path(__file__).with_name("data") / "vocabulary.txt"


@lru_cache(maxsize=1)
def vocabulary() -> frozenset[str]:
    # The key words themselves are safe to keep (what follows them is masked): `password: <masked>`.
    keys = {w.lower() for w in STRONG | WEAK} | {p for h in HEADERS for p in h.split("-")}
    return (
        frozenset(_DATA.read_text().split())
        | keys
        | {"masked", "begin", "end", "rsa", "ec", "openssh", "pgp"}
    )


def names_of(values: Iterable[object]) -> set[str]:
    """Names a bundle holds, with their parts (`nvcr.io/nvidia/k8s-device-plugin:v0.14.1` gives
    the image, its path segments and its tag; `containerd://abc…` its ID)."""
    out: set[str] = set()
    for value in values:
        if not isinstance(value, str) or not value or MASK in value:
            continue
        out.add(value)
        for span in _SPAN.findall(value):
            out.add(span)
            out.update(part for part in span.split("/") if part)
    return out


def _word_ok(atom: str, vocab: frozenset[str]) -> bool:
    """One letters-or-digits run (see the module's docstring)."""
    if atom.isascii() and atom.isdigit():
        return len(atom) <= 20
    low = atom.lower()
    if low in vocab:
        return True
    if not atom.isascii():
        return False
    if atom.isalpha():
        if len(atom) == 1:
            return True
        parts = _CAMEL.findall(atom)
        if "".join(parts) != atom or len(parts) > 4:
            return False
        return all(p.lower() in vocab if len(p) > 1 else len(parts) <= 2 for p in parts)
    if _HEX.fullmatch(atom):
        return len(atom) <= 12
    if low.startswith("0x") and _HEX.fullmatch(atom[2:]):
        return len(atom) <= 18
    segments = _SEGMENTS.findall(atom)
    return (
        len(segments) <= 4
        and len(atom) <= 16
        and all(s.isdigit() or len(s) <= 2 or s.lower() in vocab for s in segments)
    )


class FreeText:
    """A masker for one bundle: the vocabulary, the names the bundle holds, and the judged tokens."""

    def __init__(self, names: Iterable[str] = ()) -> None:
        self.vocab = vocabulary()
        self.names = set(names)
        self._judged: dict[str, bool] = {}
        self._ok: set[str] = set()  # tokens kept so far: a line made only of them is kept as it is

    def add_names(self, names: Iterable[str]) -> None:
        new = set(names) - self.names
        if new:
            self.names |= new
            self._judged.clear()

    # --- tokens ------------------------------------------------------------------------

    def _span_ok(self, span: str) -> bool:
        seen = self._judged.get(span)
        if seen is None:
            if len(self._judged) > 200_000:
                self._judged.clear()
            seen = self._judged[span] = self._judge(span)
        return seen

    def _judge(self, span: str) -> bool:
        core = span.strip(".")
        if not core or core in self.names or core.lower() in self.vocab:
            return True
        if _GPU_UUID.fullmatch(core):
            return True
        if _UUID.fullmatch(core):
            return False  # not a UID the bundle holds (names)
        if _BASE64.fullmatch(span) and _mixed(core) and not _dashed(core) and not self._holds_text(span):
            return False
        if "/" in core:  # `ns/pod`, `nvidia.com/gpu`: each part judged, the whole kept only if all are
            return all(not part or self._span_ok(part) for part in core.split("/"))
        if "_" in core and any(p in self.names for p in core.split("_")):
            return all(
                not p or self._span_ok(p) for p in core.split("_")
            )  # kubelet's `pod=NAME_NAMESPACE(UID)`
        return all(_word_ok(a, self.vocab) for a in _ATOM.findall(core))

    def _holds_text(self, span: str) -> bool:
        """Whether a base64 run decodes to text the masker keeps whole (else it holds a secret or
        key material)."""
        padded = span + "=" * (-len(span) % 4)
        try:
            raw = base64.b64decode(padded.replace("-", "+").replace("_", "/"), validate=True)
            text = raw.decode("utf-8")
        except (binascii.Error, ValueError):
            return False
        if not text.isprintable() and not all(c.isprintable() or c in "\n\t\r" for c in text):
            return False
        return self.mask(text) == text

    def _path(self, span: str) -> str:
        out = []
        for segment in span.split("/"):
            out.append(segment if not segment or self._span_ok(segment) else MASK)
        return "/".join(out)

    def _plain(self, text: str) -> str:
        """Text outside the forced values: each token kept whole or masked."""
        if "://" in text:
            text = _USERINFO.sub(lambda m: m.group(1) + MASK + "@", text)
        if "%" in text:
            text = _WORD.sub(self._unescaped, text)
        elif self._ok.issuperset(_SPAN.findall(text)):
            return text  # most lines of a log: every token seen and kept before (one set test)
        out: list[str] = []
        at = 0
        ok = self._ok
        if len(ok) > 500_000:
            ok.clear()
        for m in _SPAN.finditer(text):
            span = m.group(0)
            out.append(text[at : m.start()])
            at = m.end()
            if span.startswith(("/", "./", "~/")) or "//" in span:
                kept = self._path(span)
            else:
                kept = span if self._span_ok(span) else MASK
            if kept is span or kept == span:
                ok.add(span)
            out.append(kept)
        out.append(text[at:])
        return "".join(out)

    def _unescaped(self, word: re.Match[str]) -> str:
        """A word with URL escapes (`%2F`), masked whole when it holds a secret once decoded."""
        text = word.group(0)
        if not _ESCAPE.search(text):
            return text
        decoded = unquote(text)
        return text if self._line(decoded) == decoded else MASK

    # --- lines ---------------------------------------------------------------------------

    def _forced(self, line: str) -> list[tuple[int, int]]:
        """The values after secret-named keys: (start, end) to mask whatever they hold."""
        out: list[tuple[int, int]] = []
        gate = _gate()
        if not gate.search(line):
            return out
        for m in _KEYWORD.finditer(line):
            word = m.group(0)
            if len(word) > 80 or (out and m.start() < out[-1][1]) or not gate.search(word):
                continue
            parts = {p.lower() for p in _PARTS.findall(word)}
            low = word.lower().strip("-.")
            if low in HEADERS or (
                parts & {"authorization", "cookie"} and low.endswith(("authorization", "cookie"))
            ):
                header = _HEADER_VALUE.match(line, m.end())
                if header:
                    out.append((header.start(1), header.end(1)))
                    continue
            strong, weak = _key_kind(word)
            if not strong and not weak:
                continue
            value = _VALUE.match(line, m.end())
            if value is None:
                continue
            sep = value.group(1)
            if not strong and sep not in ("=", ":", "=>"):
                continue
            group = next(g for g in (2, 3, 4) if value.group(g) is not None)
            found = value.group(group)
            if found.lower() in HARMLESS or found == MASK:
                continue
            if sep is None and group == 4 and found.lower() in PROSE:
                continue  # `token expired`, `password required`: prose, not a value
            out.append((value.start(group), value.end(group)))
        return out

    def _line(self, line: str, keyed: bool = True) -> str:
        """One line: `keyed` is False when the text's gate scan found no key word in it."""
        forced = self._forced(line) if keyed else []
        if not forced:
            return self._plain(line)
        out: list[str] = []
        at = 0
        for start, end in forced:
            out += [self._plain(line[at:start]), MASK if end > start else ""]
            at = end
        out.append(self._plain(line[at:]))
        return "".join(out)

    def mask(self, text: str) -> str:
        """`text` with every token not known safe replaced by `<masked>` (see the module)."""
        out: list[str] = []
        pem = False
        wrapped = False
        # Where the key words are, found in one RE2 pass over the whole text (not a search a line).
        hits = [m.start() for m in _gate().finditer(text)] if _gate().search(text) else []
        hit = 0
        at = 0
        for line in text.splitlines(keepends=True):
            start, at = at, at + len(line)
            keyed = False
            while hit < len(hits) and hits[hit] < at:
                keyed = keyed or hits[hit] >= start
                hit += 1
            body = line.rstrip("\r\n")
            end = line[len(body) :]
            if pem:  # a PEM body: every line masked whole, up to its END line
                pem = _PEM_END.search(body) is None
                out.append((MASK if body.strip() else body) if pem else self._line(body))
                out.append(end)
                continue
            masked = self._line(body, keyed)
            if wrapped:  # the rest of a token cut at the line before: masked with it
                head = _WRAP_HEAD.match(masked)
                word = head.group(1) if head else ""
                if head and not word.startswith("<") and not (word.isalpha() and word.lower() in self.vocab):
                    masked = masked[: head.start(1)] + MASK + masked[head.end(1) :]
            begin = _PEM_BEGIN.search(body) if "-----" in body else None
            pem = begin is not None and _PEM_END.search(body, begin.end()) is None
            tail = _WRAP_TAIL.search(body) if masked.endswith(MASK) else None
            wrapped = tail is not None and len(tail.group(0)) >= 16
            out += [masked, end]
        return "".join(out)


@lru_cache(maxsize=4096)
def _key_kind(word: str) -> tuple[bool, bool]:
    """(strong, weak): whether a key names a secret (any part a STRONG word, unless its last part
    says it is about one), or may (its last part a WEAK word, or `…_key_id`)."""
    parts = [p.lower() for p in _PARTS.findall(word)]
    if not parts:
        return False, False
    low = word.lower().strip("-.")
    last = parts[-1]
    strong = (low in STRONG or any(p in STRONG for p in parts)) and last not in ABOUT
    weak = last in WEAK or (last == "id" and len(parts) > 1 and parts[-2] in WEAK | STRONG)
    return strong, weak


@lru_cache(maxsize=1)
def _gate() -> Any:
    """An RE2 alternation of the key words (STRONG, WEAK, HEADERS): one linear pass tells whether a
    line holds any, so most log lines never look for keys word by word."""
    import re2  # google-re2, a dependency already (layers/facts/kubecel.py)

    words = sorted(STRONG | WEAK | HEADERS, key=len, reverse=True)
    return re2.compile("(?i)" + "|".join(re.escape(w) for w in words))


def _dashed(core: str) -> bool:
    """An identifier of short dashed parts (`Tesla-V100-PCIE-32GB`), not base64url: its atoms are
    judged one by one instead of its decoding."""
    parts = re.split(r"[-_/]", core)
    return len(parts) >= 3 and all(len(p) <= 12 for p in parts)


def _mixed(core: str) -> bool:
    """Base64-like: digits and both cases (a path, a name or a word is not)."""
    return (
        any(c.isdigit() for c in core) and any(c.isupper() for c in core) and any(c.islower() for c in core)
    )
