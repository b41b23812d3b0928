"""Where an alert service keeps its incidents in the state store, and how a stored one is changed.

Keys, all under the service's prefix (`alert:`, or `alert:<cluster>:` for an agent):
- `incident:<subject>`: the subject's current incident (open, or the last one closed);
- `was:<incident id>`: an incident a newer one of its subject replaced (it flapped, or it was
  superseded after a day), kept so its root is still recorded and updated: a post of its root
  in flight when it was replaced lands here, and its root says resolved, never "firing" forever;
- `fp:<fingerprint>`: the subject an alert's open incident is about;
- `early:<fingerprint>:<startsAt>`: a resolve that came before its firing (a day);
- `open:<shard>`: the open incidents ({subject: incident id}), what the stale sweep walks;
- `summary:<hour>`, `threads`, `settings`: the storm's.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable

import msgspec

from handlers.alert_subjects import Directory
from handlers.incidents import DAY_S, Incident, Policy
from handlers.ports import AlertObserver, JSONValue, NoAlertObserver, SlackPoster, StateStore
from handlers.walks import WalkService

# An incident nobody resolves is closed as stale long before this; the record outlives it so a
# late resolve still finds (and counts) it.
INCIDENT_TTL_S = 30 * 86400
LOCK_S = 30.0  # a subject's record is held for milliseconds; the Slack work for seconds
ARCHIVE = "was:"  # the sync key of a replaced incident: was:<incident id>
INDEX_SHARDS = 16  # the open-incident index, split so a storm's writers do not queue on one key
EARLY_TTL_S = DAY_S


class AlertSettings(msgspec.Struct, frozen=True):
    channel: str
    rewalk_s: float = 30 * 60
    max_threads_per_hour: int = 10
    duplicate_s: float = 60.0
    stale_s: float = 12 * 3600.0  # GPUBOT_ALERT_STALE_HOURS
    renew_s: float = DAY_S  # an open incident older than this gets a new root


class IncidentRecords:
    """The stored side of one alert service: its keys, and reading and changing its incidents."""

    def __init__(
        self,
        state: StateStore,
        walks: WalkService,
        directory: Directory,
        settings: AlertSettings,
        *,
        clock: Callable[[], float],
        observer: AlertObserver | None,
        cluster: str | None,
    ) -> None:
        self.state = state
        # Many clusters share one Redis: a cluster's agent keeps its incidents, fingerprints, storm
        # window and summaries under its own prefix (node gpu-7 of two clusters: two incidents).
        # The single process keeps the unprefixed keys it always had.
        self.prefix = f"alert:{cluster}:" if cluster else "alert:"
        self.walks = walks
        self.directory = directory
        self.settings = settings
        self.policy = Policy(
            rewalk_s=settings.rewalk_s, duplicate_s=settings.duplicate_s, renew_s=settings.renew_s
        )
        self.clock = clock
        self.observer: AlertObserver = observer or NoAlertObserver()

    @property
    def poster(self) -> SlackPoster:
        """The walk service's, read at each use (an agent's posts go through its own)."""
        return self.walks.poster

    # --- keys -------------------------------------------------------------------------------

    def _incident_key(self, subject_key: str) -> str:
        return f"{self.prefix}incident:{subject_key}"

    def _fingerprint_key(self, fp: str) -> str:
        return f"{self.prefix}fp:{fp}"

    def _archive_key(self, incident_id: str) -> str:
        return f"{self.prefix}{ARCHIVE}{incident_id}"

    def _early_key(self, fp: str, starts_at: str) -> str:
        return f"{self.prefix}early:{fp}:{starts_at[:40]}"

    def _index_key(self, subject_key: str) -> str:
        return f"{self.prefix}open:{zlib.crc32(subject_key.encode()) % INDEX_SHARDS}"

    # --- reading and writing ------------------------------------------------------------------

    def _get_many(self, keys: list[str]) -> list[JSONValue | None]:
        """GETs in one round trip where the store can (Redis: a pipeline), else one by one."""
        many = getattr(self.state, "get_many", None)
        return list(many(keys)) if many is not None else [self.state.get(k) for k in keys]

    def _set_many(self, items: dict[str, JSONValue], ttl_s: float) -> None:
        many = getattr(self.state, "set_many", None)
        if many is not None:
            many(items, ttl_s)
            return
        for key, value in items.items():
            self.state.set(key, value, ttl_s)

    def _load(self, key: str) -> Incident | None:
        """The incident a sync key names: a subject's current one, or a replaced one (`was:<id>`)."""
        if key.startswith(ARCHIVE):
            raw = self.state.get(self._archive_key(key.removeprefix(ARCHIVE)))
        else:
            raw = self.state.get(self._incident_key(key))
        return None if raw is None else Incident.from_dict(raw)

    def _store(self, inc: Incident) -> None:
        self.state.set(self._incident_key(inc.subject.key), inc.to_dict(), INCIDENT_TTL_S)

    def _archive(self, inc: Incident) -> None:
        self.state.set(self._archive_key(inc.id), inc.to_dict(), INCIDENT_TTL_S)

    def _update(self, key: str, incident_id: str, change: Callable[[Incident], None]) -> Incident | None:
        """Change the stored incident wherever it is now: the subject's current one, or, replaced
        meanwhile by a newer incident, its archived record (so a root posted just before is kept)."""
        if not key.startswith(ARCHIVE):
            with self.state.lock(f"{self.prefix}{key}", LOCK_S, wait_s=10.0):
                inc = self._load(key)
                if inc is not None and inc.id == incident_id:
                    change(inc)
                    self._store(inc)
                    return inc
        # Moved to the archive under the subject's lock, before this: only archive writers remain.
        with self.state.lock(f"{self.prefix}lock-{ARCHIVE}{incident_id}", LOCK_S, wait_s=10.0):
            inc = self._load(f"{ARCHIVE}{incident_id}")
            if inc is None:
                return None
            change(inc)
            self._archive(inc)
            return inc

    def _index(self, subject_key: str, incident_id: str | None) -> None:
        """Record (or, with None, drop) the subject's open incident in the index the sweep walks."""
        ikey = self._index_key(subject_key)
        with self.state.lock(ikey, LOCK_S, wait_s=10.0):
            index: dict[str, str] = self.state.get(ikey) or {}
            if incident_id is None:
                if index.pop(subject_key, None) is None:
                    return
            elif index.get(subject_key) == incident_id:
                return
            else:
                index[subject_key] = incident_id
            self.state.set(ikey, index, INCIDENT_TTL_S)

    def _unindex(self, shard_key: str, gone: dict[str, str]) -> None:
        """Drop entries the sweep found closed or replaced (unless the subject opened anew since)."""
        with self.state.lock(shard_key, LOCK_S, wait_s=10.0):
            index: dict[str, str] = self.state.get(shard_key) or {}
            for subject_key, incident_id in gone.items():
                if index.get(subject_key) == incident_id:
                    del index[subject_key]
            self.state.set(shard_key, index, INCIDENT_TTL_S)
