"""Build a Harbor task's image from its `environment/Dockerfile`, offline, cached by content.

No registry is reachable from our machines, so every `FROM` image must be present locally. One
that is not may be mapped onto our locally built terminal image when the user allows it
(`map_base_images`, the CLI's `--map-base-images`), by this table (repository name, any tag, with
or without `docker.io/` or `library/`):

    ubuntu, debian, python, buildpack-deps, bash  ->  agentworld/terminal:3  (Debian 12, bash,
                                                      coreutils, python3 3.11, git, tmux)
    ghcr.io/laude-institute/t-bench/ubuntu-24-04  ->  agentworld/terminal-bench:1  (Debian 13,
    ghcr.io/laude-institute/t-bench/python-3-13       python3 3.13, pip, build-essential, curl, uv,
                                                      pytest; a wheelhouse and uv's cache, offline)

terminal-bench's base images are the `FROM` of its tasks (all 3,566 of the TermiGen collection name
ubuntu-24-04); agentworld/terminal-bench is built by infra/terminal-bench-image/build.sh. A mapped
`FROM` is followed by `USER root`, since those images run as root and ours as `agent`, and by an
`ARG` for each variable of the target's `agentworld.offline-env` label (pip and uv offline, from the
image's wheelhouse and cache): visible to the build's `RUN` lines only, not kept in the image. Any
other missing image is refused, mapping or not; so is a mapping whose target is not built. The build
runs without network (`--network none`), so a Dockerfile that installs packages from the internet
fails with the build's message.

Then a thin layer makes the image fit the terminal sandbox, which opens its shell as the user named
`agent`: that name is made an alias of the task's agent user (task.toml's `agent.user`, else the
image's `USER`, else root, as Harbor runs the agent), and `environment.workdir`, when set, becomes
the working directory; the image's own user stays its default (the verifier's). Images are tagged
`agentworld/harbor-<task>:<hash>`, the hash covering the environment folder, the resolved base
images (names and ids) and the layer, so an unchanged task is never rebuilt, and one whose base was
rebuilt is.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from sandboxes.harbor.diagnose import no_network
from sandboxes.harbor.loader import HarborError, HarborTask

MAPPED_BASE = "agentworld/terminal:3"
TERMINAL_BENCH_BASE = "agentworld/terminal-bench:1"
TERMINAL_BENCH_IMAGES = tuple(
    f"ghcr.io/laude-institute/t-bench/{name}" for name in ("ubuntu-24-04", "python-3-13")
)
BASE_IMAGE_MAP = {
    **dict.fromkeys(("ubuntu", "debian", "python", "buildpack-deps", "bash"), MAPPED_BASE),
    **dict.fromkeys(TERMINAL_BENCH_IMAGES, TERMINAL_BENCH_BASE),
}
BUILD_HINTS = {
    MAPPED_BASE: "bash infra/terminal-image/build.sh",
    TERMINAL_BENCH_BASE: "bash infra/terminal-bench-image/build.sh",
}
# The label an image names the variables in that make its tools work without a network.
OFFLINE_ENV_LABEL = "agentworld.offline-env"
MAP_FLAG = "--map-base-images"
# Bumped when the fitting layer changes: its images get new tags.
LAYER_VERSION = "2"
_ANSI = re.compile(r"\x1b\[[0-9;]*m")  # the colours docker build gives a step's stderr
_FROM = re.compile(r"^(\s*FROM\s+)((?:--\S+\s+)*)(\S+)(.*)$", re.IGNORECASE)


@dataclass(frozen=True)
class BuiltImage:
    tag: str
    sources: dict[str, str]  # each FROM image of the Dockerfile -> the image it was built from
    cached: bool
    user: str  # the image's own user (its USER, else root): the verifier's, unless task.toml says
    # Its OFFLINE_ENV_LABEL: what a container of it without network is given.
    offline_env: dict[str, str] = field(default_factory=dict)


def image_present(image: str) -> bool:
    probe = subprocess.run(["docker", "image", "inspect", image], capture_output=True, text=True)
    return probe.returncode == 0


def mapped_image(image: str) -> str | None:
    """The local image the table maps `image` onto, or None when it is not in the table."""
    name = image.split("@")[0]
    last = name.rsplit("/", 1)[-1]
    if ":" in last:
        name = name[: len(name) - len(last)] + last.split(":")[0]
    for prefix in ("docker.io/", "index.docker.io/", "library/"):
        name = name.removeprefix(prefix)
    return BASE_IMAGE_MAP.get(name)


def resolve_dockerfile(text: str, map_base_images: bool) -> tuple[str, dict[str, str]]:
    """(Dockerfile with its FROM images resolved, {original: resolved}); HarborError when one
    cannot be: absent and not mappable, or mappable but mapping not allowed."""
    stages: set[str] = set()
    sources: dict[str, str] = {}
    lines: list[str] = []
    for line in text.splitlines():
        match = _FROM.match(line)
        if not match:
            lines.append(line)
            continue
        head, flags, image, rest = match.groups()
        alias = re.search(r"\bAS\s+(\S+)", rest, re.IGNORECASE)
        if image.lower() in stages or image == "scratch":
            lines.append(line)
        elif image_present(image):
            sources[image] = image
            lines.append(line)
        else:
            target = mapped_image(image)
            if target is None:
                raise HarborError(
                    f"base image {image} is not present locally and no registry is reachable; it is not"
                    f" one {MAP_FLAG} maps ({', '.join(sorted(BASE_IMAGE_MAP))}): build it locally first"
                )
            if not map_base_images:
                raise HarborError(
                    f"base image {image} is not present locally and no registry is reachable; pass"
                    f" {MAP_FLAG} to build on {target} instead"
                )
            if not image_present(target):
                raise HarborError(
                    f"base image {image} maps onto {target}, which is not built: run"
                    f" `{BUILD_HINTS.get(target, 'docker build -t ' + target)}` first"
                )
            sources[image] = target
            lines += [f"{head}{flags}{target}{rest}", "USER root"]
            lines += [f"ARG {name}={value}" for name, value in offline_env(target).items()]
        if alias:
            stages.add(alias.group(1).lower())
    return "\n".join(lines) + "\n", sources


def _folder_digest(folder: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        digest.update(str(path.relative_to(folder)).encode() + b"\0")
        digest.update(hashlib.sha256(path.read_bytes()).digest())
        digest.update(str(os.stat(path).st_mode & 0o111).encode())
    return digest.hexdigest()


def _image_id(image: str) -> str:
    probe = subprocess.run(
        ["docker", "image", "inspect", "-f", "{{.Id}}", image], capture_output=True, text=True
    )
    return probe.stdout.strip()


def image_tag(task: HarborTask, sources: dict[str, str]) -> str:
    digest = hashlib.sha256()
    digest.update(_folder_digest(Path(task.paths["environment_dir"])).encode())
    for key in sorted(sources):
        # The image's id too: a rebuilt base (a new agentworld/terminal-bench) rebuilds its tasks.
        digest.update(f"{key}={sources[key]}@{_image_id(sources[key])}\0".encode())
    env, agent = task.environment, task.agent
    digest.update(f"{LAYER_VERSION}\0{env.get('workdir')}\0{agent.get('user')}".encode())
    name = re.sub(r"[^a-z0-9._-]+", "-", task.name.lower()).strip("-._") or "task"
    return f"agentworld/harbor-{name}:{digest.hexdigest()[:16]}"


def _fitting_layer(base: str, image_user: str, agent_user: str, workdir: str | None) -> str:
    """The layer that lets the sandbox open its shell as `agent` = the task's agent user."""
    check = (
        "command -v bash >/dev/null || { echo 'the terminal sandbox needs bash in the image' >&2; exit 1; }"
    )
    alias = (
        'entry=$(getent passwd "$AGENT_USER") || { echo "no user $AGENT_USER in the image" >&2; exit 1; }; '
        'if [ "${entry%%:*}" != agent ]; then '
        "grep -v '^agent:' /etc/passwd > /tmp/passwd; cat /tmp/passwd > /etc/passwd; rm /tmp/passwd; "
        'echo "$entry" | awk -F: -v OFS=: \'{$1 = "agent"; $7 = "/bin/bash"; print}\' >> /etc/passwd; fi'
    )
    lines = [f"FROM {base}", "USER root", f"ARG AGENT_USER={agent_user}", f"RUN {check}; {alias}"]
    if workdir:
        lines.append(f"WORKDIR {workdir}")
    lines.append(f"USER {image_user}")
    return "\n".join(lines) + "\n"


def offline_env(image: str) -> dict[str, str]:
    """The variables `image`'s OFFLINE_ENV_LABEL names ("NAME=value NAME=value"); {} without one."""
    probe = subprocess.run(
        ["docker", "image", "inspect", "-f", f'{{{{index .Config.Labels "{OFFLINE_ENV_LABEL}"}}}}', image],
        capture_output=True,
        text=True,
    )
    pairs = (item.partition("=") for item in probe.stdout.split() if "=" in item)
    return {name: value for name, _, value in pairs if probe.returncode == 0}


def _image_user(image: str) -> str:
    probe = subprocess.run(
        ["docker", "image", "inspect", "-f", "{{.Config.User}}", image], capture_output=True, text=True
    )
    return probe.stdout.strip().split(":")[0] or "root"


def _docker_build(dockerfile: str, context: Path, tag: str, timeout: float) -> None:
    with tempfile.NamedTemporaryFile("w", suffix=".Dockerfile", delete=False) as handle:
        handle.write(dockerfile)
    argv = ["docker", "build", "--network", "none", "-q", "-f", handle.name, "-t", tag, str(context)]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        raise HarborError(f"docker build of {tag} ran past the task's build timeout ({timeout:g} s)") from exc
    finally:
        os.unlink(handle.name)
    if done.returncode != 0:
        output = _ANSI.sub("", done.stdout + done.stderr).strip()
        offline = no_network(output, dockerfile)
        cause = f"; no network for {', '.join(item.format() for item in offline)}" if offline else ""
        raise HarborError(f"docker build of {tag} failed ({done.returncode}){cause}:\n{output[-2000:]}")


def build_image(task: HarborTask, map_base_images: bool) -> BuiltImage:
    """The task's image, built (or found in the cache); HarborError naming what went wrong."""
    env = task.environment
    dockerfile = Path(task.paths["dockerfile"])
    if dockerfile.is_file():
        text = dockerfile.read_text()
    elif env.get("docker_image"):
        text = f"FROM {env['docker_image']}\n"
    else:
        raise HarborError(f"{task.path}: neither environment/Dockerfile nor environment.docker_image")
    resolved, sources = resolve_dockerfile(text, map_base_images)
    tag = image_tag(task, sources)
    if image_present(tag):
        return BuiltImage(tag, sources, cached=True, user=_image_user(tag), offline_env=offline_env(tag))
    timeout = float(env.get("build_timeout_sec") or 600.0)
    context = Path(task.paths["environment_dir"])
    if not context.is_dir():
        context = Path(tempfile.mkdtemp(prefix="harbor-context-"))
    env_tag = f"{tag}-env"
    _docker_build(resolved, context, env_tag, timeout)
    user = _image_user(env_tag)
    agent_user = str(task.agent.get("user") or user)
    _docker_build(_fitting_layer(env_tag, user, agent_user, env.get("workdir")), context, tag, timeout)
    return BuiltImage(tag, sources, cached=False, user=user, offline_env=offline_env(tag))
