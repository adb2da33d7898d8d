"""SWE sandbox configuration. Where `bash` runs reuses the terminal sandbox's backend configs
(`--backend bwrap` by default, `docker`, or `local` only when asked)."""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path

from sandboxes.terminal.config import Backend, BwrapBackend, DockerBackend, make_backend

# Where the agent sees the repository (bwrap and docker); `local` shows the host path.
REPO_IN_SANDBOX = "/repo"
MAX_TIMEOUT_S = 600


def default_backend() -> Backend:
    """bwrap where it is installed; otherwise docker. Never the host itself unless asked."""
    return BwrapBackend() if shutil.which("bwrap") else DockerBackend()


def default_cache_dir() -> Path:
    """Where prepared repositories are cached: the repository module's own default."""
    from sandboxes.swe.repos import default_cache_dir as repos_default  # only when a config is made

    return repos_default()


@dataclass(frozen=True)
class SweConfig:
    backend: Backend = field(default_factory=default_backend)
    # A bash step's timeout when the action gives none, and the most an action may ask for.
    command_timeout_s: int = 60
    max_timeout_s: int = MAX_TIMEOUT_S
    # Cap on one observation's text: a longer output or file keeps its head and tail around a
    # `[... N of M bytes truncated ...]` marker (N dropped of M in all).
    max_output_bytes: int = 32 * 1024
    # Files larger than this are not read by `read`/`edit` (bash can still page through them).
    max_file_bytes: int = 8 * 1024 * 1024
    cache_dir: Path = field(default_factory=default_cache_dir)

    def __post_init__(self) -> None:
        if not 1 <= self.command_timeout_s <= self.max_timeout_s:
            raise ValueError(f"command_timeout_s must be between 1 and {self.max_timeout_s}")
        if self.max_output_bytes < 256:
            raise ValueError("max_output_bytes must be at least 256")


def make_config(
    backend: str = "auto", cache_dir: str | Path | None = None, **backend_opts: object
) -> SweConfig:
    """A config by backend name ("auto", "bwrap", "docker", "local"), as `--backend` gives it."""
    if backend == "auto":
        backend = default_backend().kind
    chosen = make_backend(backend, **backend_opts)
    extra = {"cache_dir": Path(cache_dir)} if cache_dir is not None else {}
    return SweConfig(backend=chosen, **extra)
