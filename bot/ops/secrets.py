"""The one masking of credentials in text: the log, everything said to Slack, and bundles.

`mask_text` replaces what authenticates with `<masked>`: Slack, GitHub,
Hugging Face, OpenAI, NGC, GitLab, Google and AWS tokens by their prefixes,
JWTs, PEM blocks, `Authorization`/`Bearer`/`Basic` values, passwords in URLs,
webhook URLs, `key=value` pairs whose key ends in a secret-ish word
(`DB_PASS=`, `DD_APP_KEY:`, `AccountKey=`, `SENTRY_DSN=`, `cookie:`), and
`using token X`, curl's `-u user:password`. The key, scheme and host are kept, so the text still says
what was there.

Every pattern runs in linear time on any input (issue 10): a quantified run is
never preceded by another that can match the same characters, and where a
token may start inside a run of its own characters a lookbehind lets only the
run's first character start it. tests/test_linear_patterns.py times each one
on 64 KB of hostile text; benchmarks/regex_bench.py prints the figures.
"""

from __future__ import annotations

import re
from collections.abc import Callable

__all__ = ["MASK", "mask_text"]

MASK = "<masked>"  # a valid YAML plain scalar, unlike `***` (an alias)

# The end of a key that names a secret: `DB_PASS`, `client_secret`, `DD_APP_KEY`, `AccountKey`.
_KEYWORD = (
    r"(?:password|passwd|pass|pwd|passphrase|secret|token|credentials?|"
    r"(?:api|access|private|client|auth|account|app|signing|master)[_-]?key|[_-]key|"
    r"dsn|webhook[_-]?url|cookie|session(?:[_-]?id)?|sig)"
)
_HARMLESS = frozenset({"true", "false", "null", "none", "yes", "no", "", "0", "1", "redacted", MASK.lower()})

_PEM = re.compile(
    r"-----BEGIN ([A-Z0-9 ]{1,40})-----(?:(?!-----BEGIN ).)*?(?:-----END [A-Z0-9 ]{1,40}-----|\Z)", re.S
)
_AUTH_HEADER = re.compile(
    r"(?i)(authorization[\"']?[ \t]*[:=][ \t]*[\"']?)(?:(basic|bearer|token|negotiate|digest)[ \t]+)?[^\s\"',]+"
)
# Prose says "basic checks" and "bearer tokens": a credential has a digit, a capital or base64 padding.
_BEARER = re.compile(
    r"\b([Bb]earer|[Bb]asic|BEARER|BASIC)[ \t]+(?=[a-z\-._~]*[A-Z0-9+/=])[A-Za-z0-9\-._~+/]{8,}=*"
)
_URL_CREDENTIALS = re.compile(r"(?i)(?<![a-z0-9+.-])([a-z][a-z0-9+.-]*://[^/\s:@]*):[^/\s@]+@")
_WEBHOOK = re.compile(
    r"(?i)(https?://(?:hooks\.slack\.com/(?:services|workflows|triggers)|(?:discord|discordapp)\.com/api/webhooks"
    r"|[a-z0-9.-]*\.webhook\.office\.com/webhookb2|[a-z0-9.-]*\.logic\.azure\.com[^\s/]*/workflows))/[^\s\"'<>]+"
)
# The lookahead is the keywords' first letters: without it every position tries every keyword (4x slower).
_KEY_VALUE = re.compile(
    r"(?i)(?=[pstcamdw_-])(" + _KEYWORD + r")([\"']?[ \t]*[:=][ \t]*[\"']?)([^\s\"',;&}\]]+)"
)
_USING = re.compile(
    r"(?i)\b(?=[uwv])((?:using|with|via)[ \t]+(?:the[ \t]+)?(?:token|password|passphrase|secret|api[ _-]?key|key)[ \t]+)"
    r"([^\s\"',;]+)"
)
# curl's `-u user:password` (and --user, --proxy-user), on a command line or in a script.
_CURL_USER = re.compile(r"(?<!\S)(-u|--user|--proxy-user)([ \t]+|=)([^\s:'\"]+):([^\s'\"]+)")
_AWS_KEY_ID = re.compile(r"(?<![A-Z0-9])(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[0-9A-Z]{16}(?![A-Z0-9])")
_JWT = re.compile(r"(?<![A-Za-z0-9_-])eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}")
_VENDOR_TOKENS = re.compile(
    r"(?<![A-Za-z0-9_-])(?:xox[abeoprs]-[A-Za-z0-9-]{6,}|xapp-[A-Za-z0-9-]{6,}|gh[pousr]_[A-Za-z0-9]{20,}"
    r"|github_pat_[A-Za-z0-9_]{20,}|hf_[A-Za-z0-9]{20,}|glpat-[A-Za-z0-9_-]{20,}|sk-[A-Za-z0-9_-]{20,}"
    r"|nvapi-[A-Za-z0-9_-]{20,}|AIza[0-9A-Za-z_-]{35}|(?:sk|rk)_live_[A-Za-z0-9]{20,}|npm_[A-Za-z0-9]{36})"
)

# Cheap substring tests that gate each pattern: most operand logs contain none of these, and a
# regex pass over a 5 MB log costs tens of milliseconds each.
_KEY_HINTS = (
    "pass",
    "pwd",
    "secret",
    "token",
    "credential",
    "key",
    "dsn",
    "webhook",
    "cookie",
    "session",
    "sig",
)
_AWS_HINTS = ("AKIA", "ASIA", "AGPA", "AIDA", "AROA", "ANPA", "ANVA", "AIPA")
_VENDOR_HINTS = (
    "xox",
    "xapp-",
    "gh",
    "github_pat_",
    "hf_",
    "glpat-",
    "sk-",
    "nvapi-",
    "AIza",
    "_live_",
    "npm_",
)
_WEBHOOK_HINTS = ("hooks.slack.com", "discord", "webhook.office.com", "logic.azure.com")


def _key_value(m: re.Match[str]) -> str:
    if m.group(3).lower() in _HARMLESS or m.group(3).startswith(("$", "<")):
        return m.group(0)  # a flag, or a reference such as $(DB_PASS) / ${TOKEN}, is no secret
    return m.group(1) + m.group(2) + MASK


def _said(low: str) -> bool:
    return any(w in low for w in ("token", "password", "passphrase", "secret", "key"))


def _using(m: re.Match[str]) -> str:
    return m.group(0) if m.group(2).lower() in _HARMLESS else m.group(1) + MASK


_Rule = tuple[Callable[[str, str], bool], re.Pattern[str], str | Callable[[re.Match[str]], str]]
_RULES: tuple[_Rule, ...] = (
    (lambda t, low: "-----begin " in low, _PEM, r"-----BEGIN \1-----" + MASK + r"-----END \1-----"),
    (
        lambda t, low: "authorization" in low,
        _AUTH_HEADER,
        lambda m: m.group(1) + (m.group(2) + " " if m.group(2) else "") + MASK,
    ),
    (lambda t, low: "bearer" in low or "basic" in low, _BEARER, r"\1 " + MASK),
    (lambda t, low: any(h in low for h in _WEBHOOK_HINTS), _WEBHOOK, r"\1/" + MASK),
    (lambda t, low: "://" in t, _URL_CREDENTIALS, r"\1:" + MASK + "@"),
    (lambda t, low: any(h in low for h in _KEY_HINTS), _KEY_VALUE, _key_value),
    (lambda t, low: ("using " in low or "with " in low or "via " in low) and _said(low), _USING, _using),
    (lambda t, low: "-u" in t or "--user" in low or "--proxy-user" in low, _CURL_USER, r"\1\2\3:" + MASK),
    (lambda t, low: any(h in t for h in _AWS_HINTS), _AWS_KEY_ID, MASK),
    (lambda t, low: "eyJ" in t, _JWT, MASK),
    (lambda t, low: any(h in t for h in _VENDOR_HINTS), _VENDOR_TOKENS, MASK),
)


# Every hint above in one pattern: most strings of an object (names, images, conditions) hold none,
# and on a short string one search is cheaper than the rules' dozens of substring tests (31,000
# strings per bundle).
_ANY_HINT = re.compile(
    "(?i)"
    + "|".join(
        re.escape(h)
        for h in (
            *_KEY_HINTS,
            *_AWS_HINTS,
            *_VENDOR_HINTS,
            *_WEBHOOK_HINTS,
            "-----begin ",
            "authorization",
            "bearer",
            "basic",
            "://",
            "-u",
            "--user",
            "--proxy-user",
            "eyJ",
        )
    )
)


def mask_text(text: str) -> str:
    """The text with every credential-shaped value replaced by <masked>."""
    if len(text) < 512 and not _ANY_HINT.search(text):  # on a long text, the substring tests are faster
        return text
    # The hints are read from the original text: a substitution only removes them.
    low = text.lower()
    for applies, pattern, replacement in _RULES:
        if applies(text, low):
            text = pattern.sub(replacement, text)
    return text
