"""The teacher's replies on disk, so a rerun of a build asks the teacher only for what it lacks.

One small JSON file per sample, `ROOT/<2 hex>/<sha256>.json` = {"replies": [reply or null, ...]}, keyed
by everything that decides the replies: the prompt messages, the teacher (URL and model), k, the seed,
the temperature, the token limit and any extra request fields. A null is a candidate whose request
failed: it is not an answer, so the next run asks for it again. Files are written under a temporary
name and moved into place, so a killed run leaves whole entries or none; on object stores the move is
a copy that appears at once.
"""

from __future__ import annotations

import hashlib
import json
import posixpath
import uuid
from collections.abc import Sequence

from fsspec.core import url_to_fs

from beam_pipelines.synthesis.settings import SynthesisConfig

Replies = list[str | None]


def cache_key(messages: Sequence[dict], config: SynthesisConfig) -> str:
    identity = {
        "messages": list(messages),
        "teacher": config.teacher_id,
        "k": config.k,
        "seed": config.seed,
        "temperature": config.temperature,
        "max_tokens": config.max_tokens,
        "extra_body": config.extra_body,
    }
    return hashlib.sha256(json.dumps(identity, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


class ReplyCache:
    def __init__(self, root: str, k: int) -> None:
        self._fs, self._root = url_to_fs(root)
        self._k = k

    def _path(self, key: str) -> str:
        return posixpath.join(self._root, key[:2], f"{key}.json")

    def get(self, key: str) -> Replies:
        """The k replies stored under `key`, None where a candidate still has no answer."""
        try:
            stored = json.loads(self._fs.cat_file(self._path(key)))["replies"]
        except FileNotFoundError:
            return [None] * self._k
        except (ValueError, KeyError, TypeError):
            return [None] * self._k  # not an entry this code wrote: ask again and overwrite it
        if not isinstance(stored, list) or len(stored) != self._k:
            return [None] * self._k
        return [r if isinstance(r, str) else None for r in stored]

    def put(self, key: str, replies: Replies) -> None:
        path = self._path(key)
        self._fs.makedirs(posixpath.dirname(path), exist_ok=True)
        temporary = f"{path}.{uuid.uuid4().hex}.tmp"
        self._fs.pipe_file(temporary, json.dumps({"replies": replies}, ensure_ascii=False).encode())
        self._fs.mv(temporary, path)
