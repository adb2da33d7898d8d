"""The local Flink cluster (real Flink from infra/flink/install.sh) and the Flink corpus command.

Beam's Flink job server jar is not served by the Maven mirror our machines reach, so no test here runs
the corpus pipeline on Flink; they check the cluster itself (JobManager + 2 TaskManagers, each a
process, running a real Flink job at parallelism 2 and reporting its metrics, then down again), its
failures, and that the corpus command says what is missing.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import psutil
import pytest

from beam_pipelines import local_flink
from beam_pipelines.flink.cluster import FlinkClusterError, LocalFlinkCluster

from .conftest import FIXTURE

COUNT_JOB = Path(__file__).parent / "fixtures" / "flink" / "CountJob.java"
JAVA_HOME = os.environ.get("JAVA_HOME", "/usr/lib/jvm/java-17-openjdk-amd64")


def _alive(pids: list[int]) -> list[int]:
    """The processes of these groups still running (a group's leader may be gone, its JVM not)."""
    alive = []
    for proc in psutil.process_iter(["pid"]):
        try:
            if os.getpgid(proc.pid) in pids and proc.status() != psutil.STATUS_ZOMBIE:
                alive.append(proc.pid)
        except (ProcessLookupError, psutil.NoSuchProcess):
            continue
    return alive


@pytest.fixture(scope="module")
def flink_home():
    home = local_flink.default_flink_home()
    assert (home / "bin" / "taskmanager.sh").is_file(), f"no Flink at {home}: run bash infra/flink/install.sh"
    return home


def _count_job_jar(flink_home: Path, out: Path) -> Path:
    """A small Flink job (a keyed sum over 10,000 numbers, batch mode) compiled against the cluster."""
    javac, jar = f"{JAVA_HOME}/bin/javac", f"{JAVA_HOME}/bin/jar"
    subprocess.run(
        [javac, "-cp", f"{flink_home}/lib/*", "-d", str(out), str(COUNT_JOB)], check=True, timeout=120
    )
    classes = sorted(p.name for p in out.glob("CountJob*.class"))
    subprocess.run(
        [jar, "cfe", str(out / "count.jar"), "CountJob", *classes], cwd=out, check=True, timeout=60
    )
    return out / "count.jar"


def test_cluster_runs_a_job_on_two_taskmanagers_and_stops_them(flink_home, tmp_path):
    job = _count_job_jar(flink_home, tmp_path)
    with LocalFlinkCluster(flink_home, work_dir=tmp_path / "cluster") as cluster:
        pids = cluster.pids()
        assert len(pids) == 3 and len(_alive(pids)) >= 3
        overview = cluster.get("/overview")
        assert overview["taskmanagers"] == 2 and overview["slots-total"] == 2
        assert overview["flink-version"] == local_flink.FLINK_VERSION
        addresses = {tm["id"].split(":")[0] for tm in cluster.get("/taskmanagers")["taskmanagers"]}
        assert addresses == {"127.0.0.1"}
        assert cluster.rest_port != 8081
        env = {**os.environ, "FLINK_CONF_DIR": str(cluster.work_dir / "conf"), "JAVA_HOME": JAVA_HOME}
        command = [
            "bash",
            str(flink_home / "bin" / "flink"),
            "run",
            "-m",
            cluster.master,
            "-p",
            "2",
            str(job),
        ]
        run = subprocess.run(command, env=env, capture_output=True, text=True, timeout=180)
        assert run.returncode == 0, run.stderr[-2000:]
        [metrics] = local_flink.job_metrics(cluster)
        assert metrics["state"] == "FINISHED" and metrics["name"] == "agentworld-count"
        assert metrics["vertices"] == 2 and metrics["read_records"] == 10_000
        vertices = cluster.get(f"/jobs/{metrics['job_id']}")["vertices"]
        assert max(v["parallelism"] for v in vertices) == 2  # one slot per TaskManager: both worked
    assert _alive(pids) == []


def test_a_broken_distribution_fails_with_the_log_path_and_leaves_no_process(flink_home, tmp_path):
    broken = tmp_path / "flink"
    shutil.copytree(flink_home / "bin", broken / "bin")
    shutil.copytree(flink_home / "conf", broken / "conf")
    (broken / "lib").mkdir()  # no jars: every JVM exits at once
    cluster = LocalFlinkCluster(broken, work_dir=tmp_path / "cluster", start_timeout_s=60)
    with pytest.raises(FlinkClusterError, match=f"logs in {tmp_path / 'cluster' / 'log'}"):
        cluster.start()
    assert cluster.pids() == []
    assert not any(p.info["cmdline"] and str(broken) in " ".join(p.info["cmdline"]) for p in
                   psutil.process_iter(["cmdline"]))  # fmt: skip


def test_a_directory_without_flink_is_a_clear_error(tmp_path):
    with pytest.raises(FlinkClusterError, match="not a Flink distribution.*infra/flink/install.sh"):
        LocalFlinkCluster(tmp_path).start()


def test_the_corpus_command_names_the_missing_job_server_before_starting_anything(tmp_path, capsys):
    if _jar_present():
        pytest.fail("a Flink job server jar is installed: extend this module with a real Flink build")
    code = local_flink.main(["corpus", "--input", str(FIXTURE), "--output", str(tmp_path / "out")])
    assert code == 2
    err = capsys.readouterr().err
    assert "no Flink job server jar" in err and "infra/flink/install.sh" in err
    assert not (tmp_path / "out").exists()


def _jar_present() -> bool:
    try:
        local_flink.job_server_jar()
    except FileNotFoundError:
        return False
    return True
