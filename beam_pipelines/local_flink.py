"""Build a corpus on a local standalone Flink cluster (JobManager + two TaskManagers), optionally
checking it against the FnApiRunner build of the same input.

    python -m beam_pipelines.local_flink corpus --input DIR --output OUT [--compare]

The cluster comes from `infra/flink/install.sh` (the apache-flink wheels); Beam's FlinkRunner starts
its job server from the jar that script fetched with Maven and submits to the cluster's REST port,
with LOOPBACK SDK workers (this process). The cluster is stopped on exit, failure included.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

import apache_beam

from beam_pipelines.build_corpus import main as build_corpus
from beam_pipelines.compare import compare_outputs
from beam_pipelines.flink.cluster import FlinkClusterError, LocalFlinkCluster
from schemas.cli import command_parser, subcommands

FLINK_VERSION = "2.2.1"  # the newest Flink minor Beam 2.77 supports; infra/flink/install.sh installs it
FLINK_MINOR = FLINK_VERSION.rsplit(".", 1)[0]
CACHE = os.environ.get("AGENTWORLD_CACHE", "/var/cache/agentworld")

EXAMPLES = """\
examples:
  # install the cluster, Prism and (where Maven serves it) Beam's Flink job server
  bash infra/flink/install.sh

  # build the demo corpus on the local cluster and check it equals the FnApiRunner build
  python -m beam_pipelines.local_flink corpus --input out/demo/raw --output out/demo/corpus-flink \\
      --compare

  # any build_corpus option passes through after --
  python -m beam_pipelines.local_flink corpus --input out/demo/raw --output out/flink -- --seq-len 2048
"""


def default_flink_home() -> Path:
    return Path(
        os.environ.get("AGENTWORLD_FLINK_HOME") or f"{CACHE}/flink/apache-flink-{FLINK_VERSION}/pyflink"
    )


def job_server_jar() -> Path:
    """Beam's Flink job server jar in the local Maven repository, at the SDK's version."""
    version = apache_beam.__version__
    name = f"beam-runners-flink-{FLINK_MINOR}-job-server"
    jar = Path.home() / ".m2/repository/org/apache/beam" / name / version / f"{name}-{version}.jar"
    if not jar.is_file():
        raise FileNotFoundError(
            f"no Flink job server jar at {jar}: run `bash infra/flink/install.sh` (it fetches "
            f"org.apache.beam:{name}:{version} with Maven; where Maven does not serve it, the "
            "FlinkRunner cannot run)"
        )
    return jar


def flink_runner_args(cluster: LocalFlinkCluster, jar: Path) -> list[str]:
    """Beam options that run on `cluster`; LOOPBACK because a host:port master defaults to DOCKER."""
    return [
        "--runner=FlinkRunner",
        f"--flink_master={cluster.master}",
        f"--flink_version={FLINK_MINOR}",
        f"--flink_job_server_jar={jar}",
        "--environment_type=LOOPBACK",
        f"--parallelism={cluster.taskmanagers * cluster.slots}",
    ]


def job_metrics(cluster: LocalFlinkCluster) -> list[dict[str, Any]]:
    """The cluster's finished jobs with Flink's own numbers: duration, vertices, records/bytes in/out."""
    jobs = []
    for job in cluster.get("/jobs/overview")["jobs"]:
        detail = cluster.get(f"/jobs/{job['jid']}")
        totals = {"read-records": 0, "write-records": 0, "read-bytes": 0, "write-bytes": 0}
        for vertex in detail["vertices"]:
            for key in totals:
                totals[key] += int(vertex.get("metrics", {}).get(key, 0))
        jobs.append(
            {
                "job_id": job["jid"],
                "name": job["name"],
                "state": job["state"],
                "duration_ms": job["duration"],
                "vertices": len(detail["vertices"]),
                **{k.replace("-", "_"): v for k, v in totals.items()},
            }
        )
    return jobs


def run_corpus(args: argparse.Namespace) -> int:
    jar = job_server_jar()  # fail before starting anything
    common = ["--input", args.input, *args.build_args]
    started = time.monotonic()
    with LocalFlinkCluster(args.flink_home, start_timeout_s=args.start_timeout) as cluster:
        print(f"flink: cluster up at {cluster.rest_url} in {time.monotonic() - started:.1f} s", flush=True)
        build_started = time.monotonic()
        build_corpus([*common, "--output", args.output, *flink_runner_args(cluster, jar)])
        flink_seconds = time.monotonic() - build_started
        jobs = job_metrics(cluster)
    print(f"flink: corpus built in {flink_seconds:.1f} s (wall, cluster start excluded)")
    for job in jobs:
        print(
            f"flink job {job['job_id']} {job['state']}: {job['duration_ms'] / 1000:.1f} s, "
            f"{job['vertices']} vertices, records in/out {job['read_records']:,}/{job['write_records']:,}, "
            f"bytes in/out {job['read_bytes']:,}/{job['write_bytes']:,}"
        )
    if not args.compare:
        return 0
    reference = f"{args.output.rstrip('/')}-fnapi"
    fn_started = time.monotonic()
    build_corpus([*common, "--output", reference])
    print(f"fnapi: same input built in {time.monotonic() - fn_started:.1f} s into {reference}")
    differences = compare_outputs(args.output, reference)
    if differences:
        print("\n".join(differences))
        print(f"DIFFERENT: the Flink build differs from the FnApiRunner build ({len(differences)} lines)")
        return 1
    print("EQUAL: the Flink build equals the FnApiRunner build")
    return 0


def parser() -> argparse.ArgumentParser:
    p = command_parser(
        "python -m beam_pipelines.local_flink",
        "Run the corpus pipeline on a local Flink cluster (JobManager + 2 TaskManagers).",
        EXAMPLES,
    )
    corpus = subcommands(p).add_parser("corpus", help="build a corpus on the cluster")
    corpus.add_argument("--input", required=True, help="raw trajectory dataset (path or URI)")
    corpus.add_argument("--output", required=True, help="corpus output root")
    corpus.add_argument(
        "--compare", action="store_true", help="also build with FnApiRunner into OUTPUT-fnapi and compare"
    )
    corpus.add_argument("--flink-home", type=Path, default=default_flink_home(), help="Flink distribution")
    corpus.add_argument("--start-timeout", type=float, default=180.0, help="seconds to wait for the cluster")
    corpus.add_argument("build_args", nargs="*", help="build_corpus options, after --")
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return run_corpus(args)
    except (FileNotFoundError, FlinkClusterError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
