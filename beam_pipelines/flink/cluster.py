"""A local standalone Flink cluster: one JobManager and N TaskManagers, each its own process.

    with LocalFlinkCluster(flink_home) as cluster:
        cluster.rest_url        # http://127.0.0.1:PORT (the REST API and web UI)
        cluster.master          # 127.0.0.1:PORT, for --flink_master

Every port is chosen free at start and every socket is bound to 127.0.0.1, so clusters never clash
with each other or with a Flink on the default 8081. Heaps are bounded (`MEMORY`) to fit a small shared
machine. Each process runs in the foreground (`bin/jobmanager.sh start-foreground`, likewise
`taskmanager.sh`) in its own process group, so stopping kills the group: the JVM and what it
started. Start-up waits, bounded, until the REST API lists every TaskManager; a failure raises
`FlinkClusterError` naming the log directory and stops whatever had started.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

# process sizes for a 2-core machine shared with others: a JobManager and two TaskManagers in 2.8 GiB.
# Beam's portable runner keeps its state on the heap, so little managed (off-heap) memory is reserved.
MEMORY = {
    "jobmanager.memory.process.size": "768m",
    "taskmanager.memory.process.size": "1024m",
    "taskmanager.memory.managed.fraction": 0.1,
}
STOP_GRACE_S = 10.0


class FlinkClusterError(RuntimeError):
    """The cluster did not start (or a request to it failed); the message says where the logs are."""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _java_opts(flink_home: Path) -> str:
    """The distribution's own `env.java.opts.all` (the --add-opens/--add-exports Java 17+ needs)."""
    text = (flink_home / "conf" / "config.yaml").read_text()
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("all: --add-"):
            return stripped.removeprefix("all: ")
    return "--add-opens=java.base/java.lang=ALL-UNNAMED --add-opens=java.base/java.util=ALL-UNNAMED"


class LocalFlinkCluster:
    """A JobManager and `taskmanagers` TaskManagers from the distribution at `flink_home`."""

    def __init__(
        self,
        flink_home: str | Path,
        taskmanagers: int = 2,
        slots_per_taskmanager: int = 1,
        start_timeout_s: float = 120.0,
        work_dir: str | Path | None = None,
    ) -> None:
        self.flink_home = Path(flink_home)
        self.taskmanagers = taskmanagers
        self.slots = slots_per_taskmanager
        self.start_timeout_s = start_timeout_s
        self._own_work_dir = work_dir is None
        self.work_dir = Path(work_dir or tempfile.mkdtemp(prefix="agentworld-flink-"))
        self.log_dir = self.work_dir / "log"
        self.rpc_port = self.rest_port = 0
        self._processes: list[subprocess.Popen] = []

    @property
    def rest_url(self) -> str:
        return f"http://127.0.0.1:{self.rest_port}"

    @property
    def master(self) -> str:
        return f"127.0.0.1:{self.rest_port}"

    def _write_conf(self) -> Path:
        conf = self.work_dir / "conf"
        conf.mkdir(parents=True, exist_ok=True)
        for name in ("log4j-console.properties", "log4j-cli.properties", "log4j.properties"):
            if (self.flink_home / "conf" / name).is_file():
                shutil.copy(self.flink_home / "conf" / name, conf / name)
        settings: dict[str, Any] = {
            "jobmanager.rpc.address": "127.0.0.1",
            "jobmanager.rpc.port": self.rpc_port,
            "jobmanager.bind-host": "127.0.0.1",
            "taskmanager.bind-host": "127.0.0.1",
            "taskmanager.host": "127.0.0.1",
            "taskmanager.numberOfTaskSlots": self.slots,
            "rest.address": "127.0.0.1",
            "rest.bind-address": "127.0.0.1",
            "rest.port": self.rest_port,
            "parallelism.default": 1,
            "io.tmp.dirs": str(self.work_dir / "tmp"),
            "env.java.opts.all": _java_opts(self.flink_home),
            **MEMORY,
        }
        # flattened keys are valid in Flink's config.yaml; values quoted as JSON strings where textual
        lines = [f"{k}: {json.dumps(v) if isinstance(v, str) else v}" for k, v in settings.items()]
        (conf / "config.yaml").write_text("\n".join(lines) + "\n")
        (self.work_dir / "tmp").mkdir(exist_ok=True)
        return conf

    def _spawn(self, service: str, name: str, conf: Path) -> None:
        # the service scripts compute the memory/CPU split a TaskManager needs, then exec the JVM
        script = self.flink_home / "bin" / service
        env = {
            **os.environ,
            "FLINK_CONF_DIR": str(conf),
            "FLINK_LOG_DIR": str(self.log_dir),
            "FLINK_HOME": str(self.flink_home),
        }
        env.setdefault("JAVA_HOME", "/usr/lib/jvm/java-17-openjdk-amd64")
        log = open(self.log_dir / f"{name}.out", "wb")  # noqa: SIM115 - the child holds it; closed on stop
        try:
            proc = subprocess.Popen(
                ["bash", str(script), "start-foreground"],
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,  # its own process group, killed as one on stop
            )
        finally:
            log.close()
        self._processes.append(proc)

    def get(self, path: str, timeout_s: float = 10.0) -> Any:
        """GET a REST API path (e.g. "/taskmanagers") as parsed JSON."""
        try:
            with urllib.request.urlopen(self.rest_url + path, timeout=timeout_s) as response:
                return json.load(response)
        except (OSError, ValueError) as error:
            raise FlinkClusterError(f"Flink REST {path} failed: {error}; logs in {self.log_dir}") from error

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.start_timeout_s
        registered = -1
        while time.monotonic() < deadline:
            for proc in self._processes:
                if proc.poll() is not None:
                    raise FlinkClusterError(
                        f"a Flink process exited with status {proc.returncode} during start-up; "
                        f"logs in {self.log_dir}"
                    )
            try:
                registered = len(self.get("/taskmanagers", timeout_s=2.0)["taskmanagers"])
            except FlinkClusterError:
                registered = -1
            if registered >= self.taskmanagers:
                return
            time.sleep(0.5)
        raise FlinkClusterError(
            f"Flink did not list {self.taskmanagers} TaskManagers within {self.start_timeout_s:.0f} s "
            f"(last seen: {max(registered, 0)}); logs in {self.log_dir}"
        )

    def start(self) -> LocalFlinkCluster:
        if not (self.flink_home / "bin" / "taskmanager.sh").is_file():
            raise FlinkClusterError(
                f"{self.flink_home} is not a Flink distribution (no bin/taskmanager.sh): "
                "run `bash infra/flink/install.sh` and pass the 'flink home' it prints"
            )
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.rpc_port, self.rest_port = _free_port(), _free_port()
        conf = self._write_conf()
        try:
            self._spawn("jobmanager.sh", "jobmanager", conf)
            for i in range(self.taskmanagers):
                self._spawn("taskmanager.sh", f"taskmanager-{i}", conf)
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Stop every process group: SIGTERM, then SIGKILL after a bounded grace period."""
        for proc in self._processes:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + STOP_GRACE_S
        for proc in self._processes:
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
            try:  # the group too: a JVM's children outlive a shell that exited
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait(timeout=STOP_GRACE_S)
            _wait_group_gone(proc.pid, STOP_GRACE_S)
        self._processes.clear()

    def __enter__(self) -> LocalFlinkCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
        if self._own_work_dir and exc[0] is None:
            shutil.rmtree(self.work_dir, ignore_errors=True)

    def pids(self) -> list[int]:
        return [p.pid for p in self._processes]


def _wait_group_gone(pgid: int, timeout_s: float) -> None:
    """Wait (bounded) until no live process of group `pgid` is left. SIGKILL is delivered at
    once but a JVM takes a while to tear down its heap, and until then it is still listed with
    its command line; a JVM whose shell has exited is nobody's child here, so no wait() covers it."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and _group_members(pgid):
        time.sleep(0.02)


def _group_members(pgid: int) -> list[int]:
    members = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[0] != "Z" and int(fields[2]) == pgid:  # state, ppid, pgrp
            members.append(int(name))
    return members
