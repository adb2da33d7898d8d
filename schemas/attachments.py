"""Content-addressed blob store for attachments (screenshots, large outputs).

A blob lives at `ROOT/attachments/sha256/<first2>/<hex>` exactly once, however many trajectories
refer to it; trajectories hold the relative uri, so a dataset can be moved or copied as one tree.
"""

from __future__ import annotations

import hashlib
import posixpath

from fsspec.core import url_to_fs

from schemas.atomic import atomic_write
from schemas.records import Attachment

ATTACHMENTS_DIR = "attachments"


class StorageError(RuntimeError):
    """A dataset cannot be written or read (permissions, corrupt file, missing path)."""


class AttachmentStore:
    def __init__(self, root: str) -> None:
        self.root = root
        self.fs, self.root_path = url_to_fs(root)

    def put(self, content: bytes, name: str, media_type: str) -> Attachment:
        digest = hashlib.sha256(content).hexdigest()
        uri = posixpath.join(ATTACHMENTS_DIR, "sha256", digest[:2], digest)
        target = posixpath.join(self.root_path, uri)
        if not self.fs.exists(target):
            try:
                # Concurrent writers of the same blob rename identical bytes onto one path: harmless.
                atomic_write(target, content, fs=self.fs)
            except OSError as exc:
                raise StorageError(f"cannot store attachment {name!r} under {self.root}: {exc}") from exc
        return Attachment(name=name, media_type=media_type, sha256=digest, size=len(content), uri=uri)

    def get(self, attachment: Attachment) -> bytes:
        """The blob's bytes, checked against its sha256 so silent corruption cannot pass as data."""
        path = posixpath.join(self.root_path, attachment.uri)
        try:
            with self.fs.open(path, "rb") as blob:
                content = blob.read()
        except OSError as exc:
            raise StorageError(f"cannot read attachment {attachment.uri} under {self.root}: {exc}") from exc
        if hashlib.sha256(content).hexdigest() != attachment.sha256:
            raise StorageError(f"attachment {attachment.uri} under {self.root} does not match its sha256")
        return content
