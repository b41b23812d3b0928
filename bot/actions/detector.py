"""Secrets in the strings of a bundle's objects (labels, names, reasons, every string field the
structure keeps): found by detect-secrets' plugins, plus the few shapes no plugin covers, and
replaced by `<masked>`. Free text (logs, messages, summary.md, errors) is masked default-deny by
bot/actions/freetext.py instead (issue 28): there this detector found nothing more, at five
times the cost (CHANGELOG.md, issue 28); it still runs over the text members as the archive
writes them (bot/actions/archive.py).

Free text has no structure to decide by, so a maintained detector does: detect-secrets (Yelp,
PyPI `detect-secrets>=1.5`), whose plugins know the vendors' token shapes (AWS, Slack, Stripe
live keys, SendGrid, PyPI, GitHub, GitLab, npm, OpenAI, Square, Mailchimp, Azure storage keys,
JWTs, private keys, passwords in URLs), secret-named assignments (its keyword plugin) and
high-entropy quoted strings. Its plugins are configured once with `transient_settings` and then
asked per line through `analyze_string` (never `verify`, which calls the vendors' APIs: a bundle
is collected offline); detect-secrets' own heuristic filters (UUIDs, sequences, templates,
`$VAR` and indirect references) drop what is no secret, so a GPU UUID is never masked.

Plugins left out, and why: Discord and Telegram tokens have no literal to pre-filter on (their
regexes would run over every byte of megabytes of logs) and Twilio's `AC…`/`SK…` would gate on
nearly every line; IBM, Cloudant, Softlayer and Artifactory cost 0.1-0.2 s per 3 MB each for
clouds a GPU cluster seldom logs about (bot/ops/secrets.py still masks their `…key=` forms).

The patterns added here are shapes no plugin covers (detect-secrets 1.5.0):
Stripe *test* keys (its plugin knows `sk_live_` only), Docker Hub PATs (`dckr_pat_`), Vault
tokens (`hvs.`/`hvb.`/`hvr.`), Google OAuth client secrets (`GOCSPX-`), pre-signed URL
signatures and tokens in query strings (`X-Amz-Signature=`, `sig=`, `Signature=`,
`X-Goog-Credential=` …), kubeconfig `*-data:` values and base64 PEM (`LS0tLS1CRUdJTi…`),
`.netrc` passwords, a CLI login's key (`wandb login KEY`), `key => value` with a secret-named key, and a value after a secret-named
flag (`--pw X`, `--bearer=X`, `-p X`, `-pX`, `-a X`).

Speed: a line is looked at only when one RE2 pass over the whole text (google-re2, already a
dependency) finds a gate in it: a literal every match of a plugin or pattern holds, or a quoted
run the entropy plugins could flag. A log with no candidate line costs that pass, ~20 ms for
10 MB; benchmarks/must_gather_bench.py measures the bundle (README there).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from functools import lru_cache
from typing import Any

from bot.ops.secrets import MASK
from bot.ops.secrets import mask_text as _mask_known

__all__ = ["MASK", "PLUGINS", "detected", "scrub"]

# detect-secrets plugin -> lower-cased substrings, one of which every match of the plugin holds.
PLUGINS: dict[str, tuple[str, ...]] = {
    "AWSKeyDetector": ("akia", "asia", "abia", "acca", "a3t", "aws"),
    "SlackDetector": ("xox", "hooks.slack.com"),
    "StripeDetector": ("k_live_",),
    "SendGridDetector": ("sg.",),
    "PypiTokenDetector": ("pypi-",),
    "GitHubTokenDetector": ("ghp_", "gho_", "ghu_", "ghs_", "ghr_"),
    "GitLabTokenDetector": (
        *("glpat-", "gldt-", "glft-", "glsoat-", "glrt-", "gr1348941", "glcbt-"),
        *("glimt-", "glptt-", "glagent-", "gloas-"),
    ),
    "JwtTokenDetector": ("eyj",),
    "PrivateKeyDetector": ("private key", "putty-user-key"),
    "BasicAuthDetector": ("://",),
    "AzureStorageKeyDetector": ("accountkey=",),
    "NpmDetector": ("_authtoken",),
    "OpenAIDetector": ("t3blbkfj",),
    "SquareOAuthDetector": ("sq0csp-",),
    "MailchimpDetector": ("-us",),
    # Its DENYLIST words all hold one of these (tests/test_bundle_detector.py holds that).
    "KeywordDetector": ("key", "pass", "pwd", "secret", "contrase"),
    # Gated by _QUOTED below: a quoted run long enough to pass their entropy limits.
    "Base64HighEntropyString": (),
    "HexHighEntropyString": (),
}
# detect-secrets' defaults: 4.5 bits per base64 character, 3.0 per hex digit.
_LIMITS = {"Base64HighEntropyString": 4.5, "HexHighEntropyString": 3.0}

# A quoted run of base64 or hex characters: what the entropy plugins read, at least as long as a
# string must be to pass 3.0 bits per character (2**3 = 8 distinct characters).
_QUOTED = re.compile(r"[\"'][A-Za-z0-9+/=_-]{8,}[\"']")
_ENTROPY = frozenset(_LIMITS)

_NOT_SECRET = frozenset({"true", "false", "null", "none", "yes", "no", "redacted", MASK.lower()})

# --- the shapes no detect-secrets plugin covers (see the module's docstring) -------------------
_SECRETISH = r"(?:pass(?:word|wd|phrase)?|pwd|pw|secret|token|bearer|auth(?:orization)?|api[_-]?key|apikey|creds?|credentials?|sig(?:nature)?|cookie|private[_-]?key)"
_SECRET_WORD = re.compile(r"(?i)" + _SECRETISH)
# `-p`/`-a` after what may precede a flag (a GPU UUID's `-a…` is no flag); a text's first word too.
_SHORT_FLAGS = tuple(f"{before}-{flag}" for before in " \t\n\"'=(" for flag in "pa")
_WORDS = ("pass", "pwd", "pw", "secret", "token", "bearer", "auth", "key", "cred", "sig", "cookie")
_Replacement = str | Callable[[re.Match[str]], str]
_EXTRA: tuple[tuple[tuple[str, ...], re.Pattern[str], _Replacement], ...] = (
    # (gates, pattern, replacement): every match holds one of the lower-cased gates.
    (
        ("_test_",),
        re.compile(r"(?<![A-Za-z0-9_])(?:sk|rk|pk)_test_[A-Za-z0-9]{10,}"),
        MASK,
    ),
    (("dckr_pat_",), re.compile(r"dckr_pat_[A-Za-z0-9_-]{10,}"), MASK),
    (("hvs.", "hvb.", "hvr."), re.compile(r"(?<![A-Za-z0-9_.])hv[sbr]\.[A-Za-z0-9_-]{20,}"), MASK),
    (("gocspx-",), re.compile(r"GOCSPX-[A-Za-z0-9_-]{10,}"), MASK),
    (("ls0tls1crudjt",), re.compile(r"LS0tLS1CRUdJT[A-Za-z0-9+/=]*"), MASK),
    (
        ("?",),  # a query string starts with one
        re.compile(
            r"(?i)([?&;](?:x-amz-signature|x-amz-credential|x-amz-security-token|x-goog-signature|"
            r"x-goog-credential|signature|sig|policy|token|access_token|id_token|auth|apikey|api_key|"
            r"key|password|pw|secret|client_secret|code)=)[^&\s\"'#<>]+"
        ),
        r"\1" + MASK,
    ),
    (
        ("-data",),
        re.compile(
            r"(?i)((?:client-key|client-certificate|token|key)-data[\"']?[ \t]*[:=][ \t]*[\"']?)[A-Za-z0-9+/=]{8,}"
        ),
        r"\1" + MASK,
    ),
    (
        ("=>",),
        # Linear: the key is one possessive run, and whether it names a secret is asked after.
        re.compile(r"(?i)(?<![\w.-])([\"']?([\w.-]++)[\"']?[ \t]*=>[ \t]*)(\"[^\"]*\"|'[^']*'|[^\s,}\]]+)"),
        lambda m: m.group(1) + MASK if _SECRET_WORD.search(m.group(2)) else m.group(0),
    ),
    (
        ("password", "passwd"),
        re.compile(r"(?im)^([ \t]*(?:(?:machine|default)\b.*?[ \t])?(?:password|passwd)[ \t]+)(?![=:])(\S+)"),
        r"\1" + MASK,
    ),
    (
        _WORDS,
        re.compile(
            r"(?<![\w-])(--?([\w-]++))([ \t]*=[ \t]*|[ \t]+)(?![-<])(\"[^\"]*\"|'[^']*'|[^\s'\";|&]+)"
        ),
        lambda m: m.group(1) + m.group(3) + MASK if _SECRET_WORD.search(m.group(2)) else m.group(0),
    ),
    # A CLI login given its key as a word (`wandb login KEY`, `huggingface-cli login KEY`).
    (("login",), re.compile(r"(?i)(\blogin[ \t]+)(?!-)[A-Za-z0-9_-]{20,}(?![^\s'\"])"), r"\1" + MASK),
    # Short flags that take a password: mysql's -p / -pX, redis-cli's -a.
    (
        _SHORT_FLAGS,
        re.compile(r"(?<![\w-])(-[pa])([ \t]+|=)(?![-<])(\"[^\"]*\"|'[^']*'|[^\s'\";|&]+)"),
        r"\1\2" + MASK,
    ),
    (_SHORT_FLAGS[::2], re.compile(r"(?<![\w-])(-p)(?![<\s'\"=-])[^\s'\";|&]+"), r"\1" + MASK),
)


@lru_cache(maxsize=1)
def _plugins() -> tuple[tuple[Any, tuple[str, ...]], ...]:
    """The configured plugin instances with their gates (built once: transient_settings re-imports)."""
    from detect_secrets.settings import get_plugins, transient_settings

    config = [{"name": name, **({"limit": _LIMITS[name]} if name in _LIMITS else {})} for name in PLUGINS]
    with transient_settings({"plugins_used": config}):
        plugins = list(get_plugins())
    return tuple((p, PLUGINS[type(p).__name__]) for p in plugins)


@lru_cache(maxsize=1)
def _keyword_line() -> Any:
    """An RE2 superset of what the keyword plugin's regexes can match (a word of its DENYLIST
    followed by `:`, `=`, `!=`, `=>`… or a quoted value, or a quoted value compared with one):
    its regexes cost ~150 µs a line and run only where this linear test passes."""
    import re2
    from detect_secrets.plugins.keyword import DENYLIST

    words = "(?:" + "|".join(DENYLIST) + ")"
    return re2.compile(
        r"(?i)" + words + r"\w*(?:[\]'\"]{0,2}\s*[:=!?|&]|\S{0,50}\s*['\"`])|[!=]{2,3}\s*\w*" + words
    )


@lru_cache(maxsize=1)
def _keyword_regexes() -> tuple[dict[Any, int], ...]:
    from detect_secrets.plugins import keyword

    # `key: value` / `key=value` as in config files, and the quoted forms (`=> "x"`) of code.
    return keyword.CONFIG_DENYLIST_REGEX_TO_GROUP, keyword.QUOTES_REQUIRED_DENYLIST_REGEX_TO_GROUP


def _filtered(secret: str, line: str, plugin: Any) -> bool:
    """detect-secrets' default heuristic filters: what they drop is no secret."""
    from detect_secrets.filters import heuristic as h

    return (
        len(secret) < 4
        or secret.lower() in _NOT_SECRET
        or MASK in secret
        or h.is_potential_uuid(secret)
        or h.is_sequential_string(secret)
        or h.is_templated_secret(secret)
        or h.is_prefixed_with_dollar_sign(secret)
        or h.is_likely_id_string(secret, line, plugin)
    )


# Some plugins' regexes take time quadratic in a line's length on hostile text (the keyword
# plugin's `\w*` before its words: 0.9 s for 2 KB of `api_keyapi_key…`; npm's `//.+/`): a long
# line is seen in windows overlapping by more than a token's length, and the keyword plugin sees
# word runs cut to _RUN characters (a value reported cut is masked with the rest of its word,
# _mask_values). tests/test_bundle_detector.py holds 64 KB of each hostile line under 2 s.
_WINDOW, _OVERLAP = 2048, 512
_RUN = 24
_LONG_RUN = re.compile(r"\w{" + str(_RUN + 1) + ",}")


def _windows(line: str) -> Iterator[str]:
    if len(line) <= _WINDOW:
        yield line
        return
    for start in range(0, len(line) - _OVERLAP, _WINDOW - _OVERLAP):
        yield line[start : start + _WINDOW]


def _found(plugin: Any, line: str) -> Iterator[str]:
    name = type(plugin).__name__
    for window in _windows(line):
        if name == "KeywordDetector":
            from detect_secrets.filters.heuristic import is_indirect_reference

            cut = _LONG_RUN.sub(lambda m: m.group(0)[:_RUN], window)
            if not _keyword_line().search(cut) or is_indirect_reference(cut):
                continue
            for regexes in _keyword_regexes():
                yield from plugin.analyze_string(cut, denylist_regex_to_group=regexes)
        elif name in _LIMITS:
            limit = _LIMITS[name]
            for value in plugin.analyze_string(window):
                if plugin.calculate_shannon_entropy(value) > limit:
                    yield value
        else:
            yield from plugin.analyze_string(window)


def detected(line: str) -> set[str]:
    """The secret values detect-secrets' plugins report in one line, after its filters."""
    low = line.lower()
    out: set[str] = set()
    for plugin, gates in _plugins():
        if any(g in low for g in gates) or (type(plugin).__name__ in _ENTROPY and _QUOTED.search(line)):
            out |= {s for s in _found(plugin, line) if s and not _filtered(s, line, plugin)}
    return out


def _mask_values(line: str, secrets: set[str]) -> str:
    """Each value reported, with the rest of its word (a value seen in a window or a cut run
    may be the start of a longer one)."""
    for secret in sorted(secrets, key=len, reverse=True):
        line = re.sub(r"(?<![A-Za-z0-9])" + re.escape(secret) + r"[A-Za-z0-9_]*+", MASK, line)
    return line


def _mask_extra(line: str) -> str:
    """The shapes no plugin covers (_EXTRA), on one line."""
    low = line.lower()
    first = low.startswith(("-p", "-a"))
    for gates, pattern, replacement in _EXTRA:
        if any(g in low for g in gates) or (first and gates[0] in _SHORT_FLAGS):
            line = pattern.sub(replacement, line)
    return line


def _mask_detected(line: str) -> str:
    secrets = detected(line)
    return _mask_values(line, secrets) if secrets else line


@lru_cache(maxsize=1)
def _gates() -> tuple[Any, Any]:
    """RE2 alternations of the gates (_EXTRA's; the plugins' and _QUOTED): a DFA finds every gate in
    one pass at hundreds of MB/s, where Python's `re` tries each alternative at each position
    (1.7 s for 10 MB) and a substring test per gate is ~80 passes."""
    import re2  # google-re2, a dependency already (layers/facts/kubecel.py)

    def alternation(gates: set[str], *more: str) -> Any:
        return re2.compile("|".join([*(re.escape(g) for g in sorted(gates, key=len, reverse=True)), *more]))

    extra = {g for gs, _p, _r in _EXTRA for g in gs}
    plugins = {g for _p, gs in _plugins() for g in gs}
    return alternation(extra, "^-[pa]"), alternation(plugins, _QUOTED.pattern)


def _per_line(text: str, low: str, gate: Any, mask: Any) -> str:
    """`text` with `mask` applied to each line in which `gate` finds something."""
    out: list[str] = []
    at = 0
    pos = 0
    while (m := gate.search(low, pos)) is not None:
        start = low.rfind("\n", 0, m.start()) + 1
        end = low.find("\n", m.end())
        end = len(low) if end == -1 else end
        line = text[start:end]
        masked = mask(line)
        if masked != line:
            out += [text[at:start], masked]
            at = end
        pos = end + 1
        if pos > len(low):
            break
    if not out:
        return text
    out.append(text[at:])
    return "".join(out)


def scrub(text: str) -> str:
    """`text` with every secret found replaced by `<masked>`: the shapes above, bot/ops/secrets.py's
    patterns (the masking the log and Slack use), then detect-secrets' plugins, line by line where
    a gate says one of them may match."""
    extra, plugins = _gates()
    # The shapes above first: bot/ops/secrets.py's `key=value` would take `=>` for `=`.
    text = _per_line(text, text.lower(), extra, _mask_extra)
    text = _mask_known(text)
    return _per_line(text, text.lower(), plugins, _mask_detected)
