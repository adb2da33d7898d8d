"""Terminal sandbox configuration: where the shell runs (backend) is separate from what it does.

A backend is a small config class; `make_backend` picks one by name, as `--backend docker` would.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from typing import Any, Literal

from schemas.records import Environment

DEFAULT_IMAGE = "agentworld/terminal:latest"


@dataclass(frozen=True)
class DockerBackend:
    """A fresh container per episode; the shell runs as the image's `agent` user."""

    kind: Literal["docker"] = "docker"
    image: str = DEFAULT_IMAGE
    cpus: float = 1.0
    memory: str = "512m"
    pids_limit: int = 256
    network: bool = False
    env: tuple[str, ...] = ()  # NAME=value set in the container (the agent's shell and the verifier's)


@dataclass(frozen=True)
class BwrapBackend:
    """Bubblewrap over a root filesystem of its own (`sandboxes.jail`): the host's system
    directories (/usr, /bin, /lib...) and an allow-listed part of /etc read-only, with a private
    home, /tmp and /run per episode; nothing else of the host (no /home, /root, /opt, /var, /work,
    no checkout or data folder) unless listed in `ro_paths`.

    `ro_paths`: absolute host paths shown read-only at their own path inside, for programs the
    agent's commands need from outside the system directories (e.g. a virtual environment's
    site-packages). Each one is visible to the agent, so list exactly what is needed.

    Resources are always bounded; `limits` says how:

    - "cgroup": one cgroup per sandbox (v2, or the v1 memory/pids/cpu controllers) caps the whole
      sandbox at `memory` bytes, `pids_limit` processes and `cpus` CPUs. Needs root and a
      writable /sys/fs/cgroup; without them the sandbox refuses to start.
    - "rlimit": resource limits on every process of the sandbox, set with prlimit inside it.
      Memory is per process (RLIMIT_AS = `memory` of address space, so programs that reserve large
      virtual ranges, such as JVMs, may fail to start, and N processes may together use N times
      `memory`); processes are counted per sandbox (RLIMIT_NPROC = `pids_limit`, charged to the
      sandbox's own user namespace); CPU is a total, not a rate (RLIMIT_CPU = `cpu_seconds` of CPU
      time per process, after which the kernel kills it), and `cpus` is not enforced.
    - "auto" (default): "cgroup" where this host allows it, else "rlimit", with a warning.
    """

    kind: Literal["bwrap"] = "bwrap"
    network: bool = False
    memory: str = "512m"
    pids_limit: int = 256
    cpus: float = 1.0
    cpu_seconds: int = 600
    limits: Literal["auto", "cgroup", "rlimit"] = "auto"
    ro_paths: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "ro_paths", tuple(self.ro_paths))  # a list given: still hashable
        relative = [p for p in self.ro_paths if not p.startswith("/")]
        if relative:
            raise ValueError(f"bwrap ro_paths must be absolute paths, not {', '.join(relative)}")
        if self.limits not in ("auto", "cgroup", "rlimit"):
            raise ValueError(f"bwrap limits must be 'auto', 'cgroup' or 'rlimit', not {self.limits!r}")
        if (
            parse_memory(self.memory) < 1 << 20
            or self.pids_limit < 1
            or self.cpus <= 0
            or self.cpu_seconds < 1
        ):
            raise ValueError("bwrap limits need memory >= 1m, pids_limit >= 1, cpus > 0 and cpu_seconds >= 1")


@dataclass(frozen=True)
class LocalBackend:
    """A plain bash on the host in a temporary HOME: no isolation at all."""

    kind: Literal["local"] = "local"


Backend = DockerBackend | BwrapBackend | LocalBackend

_BACKENDS: dict[str, type[DockerBackend] | type[BwrapBackend] | type[LocalBackend]] = {
    "docker": DockerBackend,
    "bwrap": BwrapBackend,
    "local": LocalBackend,
}


def make_backend(name: str, **opts: Any) -> Backend:
    """Build a backend config by name ("docker", "bwrap", "local") with its options."""
    try:
        cls = _BACKENDS[name]
    except KeyError:
        raise ValueError(f"unknown terminal backend {name!r}; choose one of {sorted(_BACKENDS)}") from None
    return cls(**opts)


def recorded_backend(environment: Environment, backend: str, isolated: Sequence[str]) -> Backend:
    """The backend a trajectory was recorded in, for replaying it; `backend` overrides the recorded
    one ("auto" keeps it). A kind not in `isolated` (the host itself, `local`, or an unknown one) is
    replaced by the first isolated kind: replayed actions must never touch the host."""
    kind = environment.backend if backend == "auto" else backend
    if kind not in isolated:
        kind = isolated[0]
    options = {}
    if kind == environment.backend:  # another backend's limits do not carry over
        names = {f.name for f in fields(_BACKENDS[kind])} - {"kind"}
        options = {k: v for k, v in environment.config.items() if k in names and v is not None}
    return make_backend(kind, **options)


@dataclass(frozen=True)
class TerminalConfig:
    backend: Backend = field(default_factory=DockerBackend)
    width: int = 160
    height: int = 40
    history_limit: int = 10000
    command_timeout: float = 30.0
    # Setup commands install packages or build files: they get more time than an agent's command.
    setup_timeout: float = 300.0
    # Cap on the raw output of one step kept for the output.txt attachment (head and tail kept).
    max_output_bytes: int = 4 * 1024 * 1024
    # Cap on the observation text; the screen is already bounded by width x height.
    max_observation_chars: int = 64 * 1024


def parse_memory(value: str) -> int:
    """Docker-style size ("512m", "2g", "1048576") to bytes."""
    units = {"b": 1, "k": 1024, "m": 1024**2, "g": 1024**3}
    text = value.strip().lower()
    if text and text[-1] in units:
        return int(float(text[:-1]) * units[text[-1]])
    return int(text)
