"""Cached model replies: a rerun (or a run resumed after a kill) asks the model nothing twice.

Replies are appended to a JSONL file, one line per request, flushed at once; a line torn by a kill is
skipped when reading, so only that request runs again. The key is the sha256 of the backend's
description, the generation config and the messages: change any of them and the cache misses.
"""

from __future__ import annotations

import hashlib
import json
import threading
from dataclasses import asdict
from pathlib import Path

from training.backends.base import GenerationConfig, WorldModelBackend


def cache_key(describe: dict, config: GenerationConfig, messages: list[dict]) -> str:
    payload = json.dumps([describe, asdict(config), messages], sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(payload.encode()).hexdigest()


class ReplyCache:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._replies: dict[str, str] = {}
        if path.exists():
            for line in path.read_text(encoding="utf-8").splitlines():
                try:
                    row = json.loads(line)
                    self._replies[row["key"]] = row["reply"]
                except (ValueError, KeyError, TypeError):
                    continue
        path.parent.mkdir(parents=True, exist_ok=True)
        self._file = path.open("a", encoding="utf-8")

    def __len__(self) -> int:
        return len(self._replies)

    def get(self, key: str) -> str | None:
        with self._lock:
            return self._replies.get(key)

    def put(self, key: str, reply: str) -> None:
        with self._lock:
            self._replies[key] = reply
            self._file.write(json.dumps({"key": key, "reply": reply}, ensure_ascii=False) + "\n")
            self._file.flush()

    def close(self) -> None:
        with self._lock:
            self._file.close()


class CachedBackend(WorldModelBackend):
    """Wraps a backend: cached replies are returned as they are, misses are asked and stored.

    `requests` counts the calls that reached the model; `hits` those answered from the cache.
    """

    def __init__(self, backend: WorldModelBackend, cache: ReplyCache, describe: dict | None = None) -> None:
        self.backend = backend
        self.cache = cache
        self.name = backend.name
        # `describe` tells apart backends that would describe themselves alike (random vs trained weights).
        self._describe = describe or backend.describe()
        self._count_lock = threading.Lock()
        self.requests = 0
        self.hits = 0

    def complete(self, messages: list[dict], config: GenerationConfig) -> str:
        key = cache_key(self._describe, config, messages)
        found = self.cache.get(key)
        if found is not None:
            with self._count_lock:
                self.hits += 1
            return found
        reply = self.backend.complete(messages, config)
        with self._count_lock:
            self.requests += 1
        self.cache.put(key, reply)
        return reply

    def describe(self) -> dict:
        return self._describe

    def close(self) -> None:
        self.backend.close()
