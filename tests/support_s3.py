"""A real S3-compatible server for tests: moto's server mode (`moto_server`, PyPI `moto[server]`)
as a subprocess on a free 127.0.0.1 port.

`S3Server.start()` waits (bounded) until the server answers, `bucket()` creates a fresh bucket,
and `env()` is what a subprocess (a collector, a pipeline) needs to reach it: botocore and s3fs
take the endpoint from AWS_ENDPOINT_URL, plus dummy credentials and a region. `use_in_process()`
sets the same variables in this process, for in-process readers and writers.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

START_TIMEOUT_S = 30.0
CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_EC2_METADATA_DISABLED": "true",  # never wait on an instance-metadata credential lookup
}


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _moto_server() -> str:
    beside_python = Path(sys.executable).with_name("moto_server")
    found = str(beside_python) if beside_python.exists() else shutil.which("moto_server")
    if not found:
        raise RuntimeError("moto_server is not installed: pip install 'moto[server]'")
    return found


class S3Server:
    def __init__(self) -> None:
        self.port = _free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self._process: subprocess.Popen[bytes] | None = None
        # A file, not a pipe: the server logs every request, and an unread pipe fills and blocks it.
        self._log = tempfile.TemporaryFile()

    def start(self) -> S3Server:
        self._process = subprocess.Popen(
            [_moto_server(), "-H", "127.0.0.1", "-p", str(self.port)],
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                self._log.seek(0)
                error = self._log.read().decode(errors="replace")
                raise RuntimeError(f"moto_server exited with {self._process.returncode}: {error[-2000:]}")
            try:
                with urllib.request.urlopen(f"{self.endpoint}/moto-api/", timeout=2):
                    return self
            except (urllib.error.URLError, OSError):
                time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"moto_server did not answer on {self.endpoint} within {START_TIMEOUT_S:.0f} s")

    def stop(self) -> None:
        if self._process is None:
            return
        self._process.terminate()
        try:
            self._process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait(timeout=10)
        self._process = None
        self._log.close()

    def env(self) -> dict[str, str]:
        """Variables that point botocore and s3fs in a child process at this server."""
        return {**CREDENTIALS, "AWS_ENDPOINT_URL": self.endpoint, "AWS_ENDPOINT_URL_S3": self.endpoint}

    def child_env(self) -> dict[str, str]:
        return {**os.environ, **self.env()}

    def bucket(self, prefix: str = "test") -> str:
        """A new empty bucket; returns its name."""
        name = f"{prefix}-{uuid.uuid4().hex[:12]}"
        s3_client(self).create_bucket(Bucket=name)
        return name

    @contextmanager
    def use_in_process(self) -> Iterator[None]:
        """This process's s3fs talks to the server while the block runs (fresh s3fs instances:
        fsspec caches one per set of options, and a cached one would keep its old endpoint)."""
        import fsspec

        saved = {key: os.environ.get(key) for key in self.env()}
        os.environ.update(self.env())
        fsspec.get_filesystem_class("s3").clear_instance_cache()
        try:
            yield
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value
            fsspec.get_filesystem_class("s3").clear_instance_cache()


def s3_objects(server: S3Server, bucket: str, prefix: str = "") -> list[str]:
    """Every object key under `prefix`, listed through boto3: no s3fs listing cache in the way."""
    client = s3_client(server)
    keys: list[str] = []
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        keys.extend(item["Key"] for item in page.get("Contents", []))
    return keys


def s3_client(server: S3Server):  # noqa: ANN201 (a boto3 client has no importable type)
    import boto3

    return boto3.client("s3", endpoint_url=server.endpoint, **_boto_credentials())


def _boto_credentials() -> dict[str, str]:
    return {
        "aws_access_key_id": CREDENTIALS["AWS_ACCESS_KEY_ID"],
        "aws_secret_access_key": CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
        "region_name": CREDENTIALS["AWS_DEFAULT_REGION"],
    }


@contextmanager
def running_s3_server() -> Iterator[S3Server]:
    """A started server, stopped (the process killed if need be) when the block ends."""
    server = S3Server().start()
    try:
        yield server
    finally:
        server.stop()
