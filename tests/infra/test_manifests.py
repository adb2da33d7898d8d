"""The Kubernetes manifests (infra/k8s): rendered by kustomize, validated by kubeconform -strict
against the offline Kubernetes and Flink operator schemas, and the fleets' shard arguments checked by
the collectors' own argument parsers.

One module fixture makes sure kubeconform, kustomize and the schemas are in the cache (`validate.py --setup`,
a no-op once built; the first build fetches from the Go module proxy, PyPI and Maven Central).
"""

from __future__ import annotations

import copy
import functools
import importlib
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from collectors import cli
from collectors.tasks import Shard

ROOT = Path(__file__).resolve().parents[2]
K8S = ROOT / "infra" / "k8s"
VALIDATE = K8S / "validate.py"
OVERLAYS = sorted(p.name for p in (K8S / "overlays").iterdir() if (p / "kustomization.yaml").exists())
DOMAINS = {"terminal", "swe", "mcp", "search", "web", "desktop", "android"}
SHARD_ARG = "--shard=$(JOB_COMPLETION_INDEX)/$(SHARD_COUNT)"


@pytest.fixture(scope="module", autouse=True)
def kubeconform() -> dict:
    setup = subprocess.run(
        [sys.executable, str(VALIDATE), "--setup-only"], capture_output=True, text=True, timeout=900
    )
    assert setup.returncode == 0, setup.stderr
    paths = subprocess.run(
        [sys.executable, str(VALIDATE), "--print-paths"], capture_output=True, text=True, timeout=60
    )
    return json.loads(paths.stdout)


@functools.cache
def rendered(directory: Path) -> str:
    kustomize = json.loads(
        subprocess.run(
            [sys.executable, str(VALIDATE), "--print-paths"], capture_output=True, text=True, timeout=60
        ).stdout
    )["kustomize"]
    return subprocess.run(
        [kustomize, "build", str(directory)], check=True, capture_output=True, text=True, timeout=120
    ).stdout


def render(directory: Path) -> list[dict]:
    """Fresh documents of the rendering (kustomize runs once per directory per session)."""
    return [doc for doc in yaml.safe_load_all(rendered(directory)) if doc]


def conform(
    tools: dict, documents: list[dict], tmp_path: Path, strict: bool = True
) -> subprocess.CompletedProcess:
    manifest = tmp_path / "manifest.yaml"
    manifest.write_text(yaml.safe_dump_all(documents))
    argv = [tools["kubeconform"], "-summary", "-kubernetes-version", tools["kubernetes_version"]]
    argv += ["-strict"] if strict else []
    for location in tools["schema_locations"]:
        argv += ["-schema-location", location]
    return subprocess.run([*argv, str(manifest)], capture_output=True, text=True, timeout=120)


def one(documents: list[dict], kind: str) -> dict:
    [found] = [d for d in documents if d["kind"] == kind]
    return found


def test_every_domain_has_a_fleet() -> None:
    assert set(OVERLAYS) == DOMAINS


def test_every_rendered_manifest_validates(kubeconform: dict) -> None:
    done = subprocess.run([sys.executable, str(VALIDATE)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{len(OVERLAYS) + 3} valid, 0 invalid" in done.stdout  # fleets, Flink, 2 cache jobs
    bad = subprocess.run(
        [sys.executable, str(VALIDATE), "--files", str(K8S / "base" / "collector" / "kustomization.yaml")],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert bad.returncode == 1 and "0 valid, 1 invalid" in bad.stdout  # not a Kubernetes object


def test_every_project_image_comes_from_the_users_registry() -> None:
    """One registry setting (components/registry) reaches every container, sidecars included."""
    prepared = [K8S / "prepare" / "swe", K8S / "prepare" / "mcp"]
    for directory in [K8S / "flink", *prepared, *(K8S / "overlays" / name for name in OVERLAYS)]:
        images = re.findall(r"image: (\S+)", rendered(directory))
        ours = [image for image in images if not image.startswith("flink:")]  # Flink's own image
        assert ours and all(image.startswith("REGISTRY/agentworld/") for image in ours), (directory, images)


@pytest.mark.parametrize("domain", ["swe", "mcp"])
def test_a_fleet_reads_the_cache_its_prepare_job_fills(domain: str) -> None:
    prepare = render(K8S / "prepare" / domain)
    claim = one(prepare, "PersistentVolumeClaim")["metadata"]["name"]
    writer = one(prepare, "Job")["spec"]["template"]["spec"]
    fleet = one(render(K8S / "overlays" / domain), "Job")["spec"]["template"]["spec"]
    for pod in (writer, fleet):
        [volume] = [v for v in pod["volumes"] if "persistentVolumeClaim" in v]
        assert volume["persistentVolumeClaim"]["claimName"] == claim
        [container] = pod["containers"]
        [mount] = [m for m in container["volumeMounts"] if m["name"] == volume["name"]]
        env = {e["name"]: e.get("value") for e in container["env"]}
        assert mount["mountPath"] == env["AGENTWORLD_CACHE_DIR"] == "/cache"  # absolute venv paths
    assert volume["persistentVolumeClaim"]["readOnly"] is True  # the fleet's pods only read it


def test_a_wrong_field_type_fails(kubeconform: dict, tmp_path: Path) -> None:
    documents = render(K8S / "overlays" / "terminal")
    assert conform(kubeconform, documents, tmp_path).returncode == 0
    one(documents, "Job")["spec"]["completions"] = "four"
    done = conform(kubeconform, documents, tmp_path)
    assert done.returncode == 1
    assert "/spec/completions" in done.stdout


def test_an_unknown_field_fails_under_strict(kubeconform: dict, tmp_path: Path) -> None:
    documents = render(K8S / "overlays" / "desktop")
    assert conform(kubeconform, documents, tmp_path).returncode == 0
    one(documents, "Job")["spec"]["template"]["spec"]["containers"][0]["resource"] = {}  # resources
    done = conform(kubeconform, documents, tmp_path)
    assert done.returncode == 1
    assert "'resource' not allowed" in done.stdout


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        (("flinkVersion",), "v1_99", "/spec/flinkVersion"),
        (("taskManager", "replicaCount"), 2, "'replicaCount' not allowed"),
        (("taskManager", "podTemplate", "spec", "containers", 1, "args"), "--worker_pool", "/args"),
    ],
)
def test_a_bad_flinkdeployment_fails(
    kubeconform: dict, tmp_path: Path, path: tuple, value: object, message: str
) -> None:
    documents = render(K8S / "flink")
    assert conform(kubeconform, documents, tmp_path).returncode == 0
    broken = copy.deepcopy(documents)
    node = one(broken, "FlinkDeployment")["spec"]
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    done = conform(kubeconform, broken, tmp_path)
    assert done.returncode == 1
    assert message in done.stdout


def expand(text: str, env: dict[str, str]) -> str:
    """Kubernetes' $(VAR) expansion of container args from the container's environment."""
    return re.sub(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", lambda m: env.get(m.group(1), m.group(0)), text)


def pod_environment(documents: list[dict], container: dict, index: int) -> dict[str, str]:
    """The environment the kubelet gives pod `index` of the Job (ConfigMaps from the rendering)."""
    maps = {d["metadata"]["name"]: d["data"] for d in documents if d["kind"] == "ConfigMap"}
    env = {}
    for var in container["env"]:
        source = var.get("valueFrom", {})
        if "value" in var:
            env[var["name"]] = var["value"]
        elif "configMapKeyRef" in source:
            env[var["name"]] = maps[source["configMapKeyRef"]["name"]][source["configMapKeyRef"]["key"]]
        elif (
            source.get("fieldRef", {})
            .get("fieldPath", "")
            .endswith("['batch.kubernetes.io/job-completion-index']")
        ):
            env[var["name"]] = str(index)
    return env


@pytest.mark.parametrize("domain", sorted(DOMAINS))
def test_shards_cover_every_episode_exactly_once(domain: str) -> None:
    documents = render(K8S / "overlays" / domain)
    job = one(documents, "Job")
    spec = job["spec"]
    count = spec["completions"]
    assert spec["completionMode"] == "Indexed"
    assert spec["parallelism"] == count
    [container] = [c for c in spec["template"]["spec"]["containers"] if c["name"] == "collector"]
    assert container["args"][0] == domain and SHARD_ARG in container["args"]
    collector = importlib.import_module(f"collectors.{domain}.__main__").SPEC
    owners: dict[int, list[int]] = {}
    roots = set()
    for index in range(count):
        env = pod_environment(documents, container, index)
        argv = [expand(arg, env) for arg in container["args"][1:]]
        assert not any("$(" in arg for arg in argv), argv
        args = cli.parse_args(collector, argv)  # its own parser: flags, counts, the shard's sub-root
        assert args.shard == Shard(index, count)
        roots.add(args.dataset_root)
        for slot in range(args.episodes):
            if args.shard.owns(slot):
                owners.setdefault(slot, []).append(index)
    assert len(roots) == 1 and next(iter(roots)).startswith("s3://")  # one dataset, every shard in it
    assert sorted(owners) == list(range(args.episodes))
    assert all(len(shards) == 1 for shards in owners.values())


@pytest.mark.parametrize("domain", sorted(DOMAINS))
def test_failures_cooperate_with_resume(domain: str) -> None:
    job = one(render(K8S / "overlays" / domain), "Job")
    spec = job["spec"]
    pod = spec["template"]["spec"]
    assert pod["restartPolicy"] == "Never" and spec["backoffLimitPerIndex"] >= 1
    rules = {rule["action"]: rule for rule in spec["podFailurePolicy"]["rules"]}
    usage = rules["FailJob"]["onExitCodes"]
    assert usage == {"containerName": "collector", "operator": "In", "values": [2]}
    assert rules["Ignore"]["onPodConditions"][0]["type"] == "DisruptionTarget"
    for container in pod["containers"]:
        assert container["securityContext"]["allowPrivilegeEscalation"] is False
        assert container["securityContext"]["capabilities"]["drop"] == ["ALL"]
        assert "memory" in container["resources"]["limits"]


def test_the_corpus_launcher_reaches_the_session_cluster_and_its_worker_pool() -> None:
    """The launcher's arguments, read by the pipeline's own parser and Beam's options, name the
    session cluster's REST service and the worker-pool sidecar that each TaskManager carries."""
    from apache_beam.options.pipeline_options import FlinkRunnerOptions, PortableOptions, StandardOptions

    from beam_pipelines.options import parse_args

    documents = render(K8S / "flink")
    flink = one(documents, "FlinkDeployment")
    assert "job" not in flink["spec"]  # a session cluster
    [pool] = [c for c in flink["spec"]["taskManager"]["podTemplate"]["spec"]["containers"] if c.get("image")]
    assert pool["args"] == ["--worker_pool"]
    [launcher] = one(documents, "Job")["spec"]["template"]["spec"]["containers"]
    env = pod_environment(documents, launcher, index=0)
    config, options = parse_args([expand(arg, env) for arg in launcher["args"]])
    assert config.input.startswith("s3://") and config.output.startswith("s3://")
    assert options.view_as(StandardOptions).runner == "FlinkRunner"
    portable = options.view_as(PortableOptions)
    assert portable.environment_type == "EXTERNAL"
    assert portable.environment_config == f"localhost:{pool['ports'][0]['containerPort']}"
    runner = options.view_as(FlinkRunnerOptions)
    assert runner.flink_master == f"{flink['metadata']['name']}-rest:8081"
    assert runner.flink_submit_uber_jar and runner.flink_job_server_jar.endswith(".jar")


@pytest.mark.parametrize("domain", sorted(DOMAINS))
def test_the_network_policy_holds_the_fleets_pods(domain: str) -> None:
    """The policy selects the Job's pods (labels that drift would leave them open), lets nothing in,
    and lets out only DNS and the object store."""
    documents = render(K8S / "overlays" / domain)
    policy = one(documents, "NetworkPolicy")["spec"]
    pod_labels = one(documents, "Job")["spec"]["template"]["metadata"]["labels"]
    assert policy["podSelector"]["matchLabels"].items() <= pod_labels.items()
    assert set(policy["policyTypes"]) == {"Ingress", "Egress"} and policy["ingress"] == []
    ports = sorted(port["port"] for rule in policy["egress"] for port in rule["ports"])
    assert ports == [53, 53, 9000]


def test_android_pods_land_only_on_kvm_nodes_with_the_device() -> None:
    pod = one(render(K8S / "overlays" / "android"), "Job")["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"agentworld.dev/kvm": "true"}
    assert pod["tolerations"][0]["key"] == "agentworld.dev/kvm"
    [collector] = pod["containers"]
    resources = collector["resources"]
    assert (
        resources["requests"]["devices.kubevirt.io/kvm"]
        == resources["limits"]["devices.kubevirt.io/kvm"]
        == "1"
    )
    assert not any(v.get("hostPath", {}).get("path") == "/dev/kvm" for v in pod["volumes"])
    [appium] = pod["initContainers"]
    assert appium["restartPolicy"] == "Always"  # a native sidecar: the Job completes with the collector
    assert "--appium-url=http://127.0.0.1:4723/" in collector["args"]
    assert appium["startupProbe"]["tcpSocket"]["port"] == 4723
