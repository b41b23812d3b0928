"""The Slack app manifests ask for exactly the scopes the code's Web API calls need: the default one
all but the opt-in history scopes (issue 22 item 4), the history one all of them."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
MANIFEST = ROOT / "deploy" / "slack-app-manifest.yaml"
HISTORY_MANIFEST = ROOT / "deploy" / "slack-app-manifest-history.yaml"
# Read only with GPUBOT_SLACK_HISTORY=true, for the lost-post lookup: not in the default manifest.
OPT_IN = {"channels:history", "groups:history"}

# Web API method (as slack_sdk spells it) → the bot scope(s) Slack requires for it (None: no scope).
METHOD_SCOPES: dict[str, str | tuple[str, ...] | None] = {
    "chat_postMessage": "chat:write",
    "chat_update": "chat:write",
    "chat_postEphemeral": "chat:write",
    "chat_delete": "chat:write",
    "files_upload_v2": "files:write",  # files.getUploadURLExternal + files.completeUploadExternal
    "files_getUploadURLExternal": "files:write",
    "files_completeUploadExternal": "files:write",
    "usergroups_users_list": "usergroups:read",
    "usergroups_list": "usergroups:read",
    "users_info": "users:read",
    "conversations_info": "channels:read",
    # The root post's lookup before a retry, in public and private channels.
    "conversations_history": ("channels:history", "groups:history"),
    "conversations_replies": ("channels:history", "groups:history"),
    "conversations_join": "channels:join",
    "reactions_add": "reactions:write",
    "auth_test": None,
    "views_open": None,
    "views_update": None,
}
_CALL = re.compile(r"\.((?:chat|files|usergroups|users|conversations|reactions|auth|views)_\w+)\(")
_API_CALL = re.compile(r"api_call\(\s*[\"']([\w.]+)[\"']")


def _sources() -> list[Path]:
    # The cluster and telemetry adapters hold no Slack client (kube.py's `.auth_settings()` is
    # the kubernetes Configuration's, not the Web API's `auth.*`).
    sources = ROOT / "bot" / "sources"
    return sorted(
        p
        for p in [*(ROOT / "bot").rglob("*.py"), *(ROOT / "handlers").rglob("*.py")]
        if sources not in p.parents
    )


def called_methods() -> set[str]:
    found: set[str] = set()
    for path in _sources():
        text = path.read_text()
        found.update(_CALL.findall(text))
        found.update(m.replace(".", "_") for m in _API_CALL.findall(text))
    return found


def required_scopes() -> set[str]:
    methods = called_methods()
    unknown = sorted(m for m in methods if m not in METHOD_SCOPES)
    assert not unknown, f"Web API methods with no scope in this test's table: {unknown}"
    scopes: set[str] = set()
    for m in methods:
        needed = METHOD_SCOPES[m]
        scopes.update((needed,) if isinstance(needed, str) else needed or ())
    if any(re.search(r"@\w+\.command\(", p.read_text()) for p in _sources()):
        scopes.add("commands")  # a slash command needs the commands scope
    return scopes


def manifest(path: Path = MANIFEST) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(path.read_text())
    return data


def scopes(path: Path = MANIFEST) -> set[str]:
    return set(manifest(path)["oauth_config"]["scopes"]["bot"])


def test_code_calls_the_methods_we_expect() -> None:
    methods = called_methods()
    assert {"chat_postMessage", "chat_update", "chat_postEphemeral", "files_upload_v2"} <= methods


def test_scopes_equal_what_the_code_needs() -> None:
    assert required_scopes() >= OPT_IN  # the lookup is still in the code, behind its setting
    assert scopes() == required_scopes() - OPT_IN
    assert scopes(HISTORY_MANIFEST) == required_scopes()
    for path in (MANIFEST, HISTORY_MANIFEST):
        assert "user" not in manifest(path)["oauth_config"]["scopes"]  # no user-token scopes at all


def test_the_default_manifest_asks_no_history_scope() -> None:
    assert not {s for s in scopes() if s.endswith(":history")}


def test_the_history_manifest_is_the_default_one_plus_the_history_scopes() -> None:
    default, history = manifest(), manifest(HISTORY_MANIFEST)
    assert scopes(HISTORY_MANIFEST) - scopes() == OPT_IN
    default["oauth_config"]["scopes"]["bot"] = history["oauth_config"]["scopes"]["bot"] = []
    assert default == history


def test_gpu_command_interactivity_and_socket_mode() -> None:
    m = manifest()
    commands = [c["command"] for c in m["features"]["slash_commands"]]
    registered = {c for p in _sources() for c in re.findall(r"\.command\(\s*\"(/\w+)\"", p.read_text())}
    assert commands == ["/gpu"] and registered == {"/gpu"}
    assert m["settings"]["interactivity"]["is_enabled"] is True
    assert m["settings"]["socket_mode_enabled"] is True
    assert m["features"]["bot_user"]["display_name"]


def test_every_scope_is_justified_in_the_docs() -> None:
    doc = (ROOT / "docs" / "slack-app.md").read_text()
    for scope in scopes() | scopes(HISTORY_MANIFEST):
        assert f"`{scope}`" in doc, f"docs/slack-app.md does not explain {scope}"


def test_the_docs_table_justifies_each_scope_and_never_disowns_one() -> None:
    doc = (ROOT / "docs" / "slack-app.md").read_text()
    table = doc.split("## Why each scope", 1)[1]
    rows = {
        scope: why
        for first, why in re.findall(r"^\| ([^|]+) \| (.+) \|$", table, re.M)
        for scope in re.findall(r"`([\w:.]+)`", first)
    }
    not_requested = table.split("Not requested, on purpose:", 1)[1].split("\n\n", 1)[0]
    for scope in scopes() | scopes(HISTORY_MANIFEST):
        assert scope in rows, f"docs/slack-app.md's table has no row for {scope}"
        assert f"`{scope}`" not in not_requested, f"docs/slack-app.md lists {scope} as not requested"
    # The root lookup's scopes say what they read, that they are opt-in and what happens without them.
    for scope in OPT_IN:
        assert "conversations.history" in rows[scope] and "Without the scopes" in rows[scope]
        assert "Opt-in" in rows[scope] and "GPUBOT_SLACK_HISTORY" in rows[scope]
    assert "private" in rows["groups:history"]
