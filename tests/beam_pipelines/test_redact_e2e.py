"""End to end: secrets planted in real terminal sessions (bubblewrap + tmux + bash, recorded by the
collector CLI) never reach any file `build_corpus` writes, decoded token shards included; and the
git SHAs, UUIDs, checksums and private addresses of ordinary output do."""

from __future__ import annotations

import base64
import hashlib
import json
import re
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from schemas import read_trajectories
from schemas.chat_tokens import shared_tokenizer
from tests.conftest import build_corpus_in_process

pytestmark = [pytest.mark.bwrap, pytest.mark.tmux]

ROOT = Path(__file__).resolve().parents[2]
AWS_KEY_ID = "AKIAQ4RZ7WEXAMPLE2NB"
AWS_SECRET = "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"
DB_PASSWORD = "Vt9#qLm2!xRw7-Kp"
STRIPE_KEY = "rk9Fq2LmX7vB4nT8wZ3c"
YAML_PASSWORD = "Hq4zN8-wP2rT"
JSON_SECRET = "Yx7Wm3Kq9Rv2Lp5N"
DOTENV_TOKEN = "Gm5Tz8Qw2Xc7Vb4N"
URL_PASSWORD = "Pk7Rm2Xw9Lq4"
BEARER = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhZ2VudCJ9.Zk3Pq8Rw2Tx5Vy7B"
CONN_PASSWORD = "Wn6Jx3Qc8Zt1"
PUBLIC_IP = "34.117.59.81"
EMAIL = "jane.roe@corp-mail.com"
# Longer than the 160-column screen is wide: `cat` shows it wrapped over two rows.
WRAPPED = base64.b64encode(hashlib.sha512(b"wrapped").digest() * 2).decode()
SECRETS = (
    AWS_KEY_ID,
    AWS_SECRET,
    DB_PASSWORD,
    STRIPE_KEY,
    YAML_PASSWORD,
    JSON_SECRET,
    DOTENV_TOKEN,
    URL_PASSWORD,
    BEARER,
    CONN_PASSWORD,
    PUBLIC_IP,
    EMAIL,
    WRAPPED,
)
CHECKSUM = hashlib.sha256(b"hello\n").hexdigest()
UUID = str(uuid.uuid5(uuid.NAMESPACE_DNS, "agentworld"))
KEPT = (CHECKSUM, UUID, "10.0.0.5", "192.168.1.20", "2.4.61.271")


def _write(path: str, *lines: str) -> str:
    """A setup command writing `lines` to `path` without showing them: the task's own fields hold
    only their base64, so every secret below is found on the screens alone."""
    encoded = base64.b64encode("".join(line + "\n" for line in lines).encode()).decode()
    return f"echo {encoded} | base64 -d > {path}"


def _tasks() -> list[dict]:
    def run(*commands: str) -> list[dict]:
        return [{"command": c} for c in commands]

    return [
        {
            "id": "redact-aws-env",
            "instruction": "Check the credentials and the environment.",
            "setup": [
                "mkdir -p ~/.aws",
                _write(
                    "~/.aws/credentials",
                    "[default]",
                    f"aws_access_key_id = {AWS_KEY_ID}",
                    f"aws_secret_access_key = {AWS_SECRET}",
                ),
                _write("stripe.env", f"STRIPE_SECRET_KEY={STRIPE_KEY}"),
                "export $(cat stripe.env) && rm stripe.env",
            ],
            "actions": run(
                "cat ~/.aws/credentials",
                f"export DB_PASSWORD='{DB_PASSWORD}'",
                "echo $DB_PASSWORD",
                "printenv | grep -E '^(STRIPE|DB_|HOME)' | sort",
                f"echo 'Accepted publickey for agent from {PUBLIC_IP}; mail {EMAIL}'",
            ),
        },
        {
            "id": "redact-config-files",
            "instruction": "Read the service configuration.",
            "setup": [
                _write("config.yaml", "database:", "  host: 10.0.0.5", f"  password: {YAML_PASSWORD}"),
                _write("config.json", json.dumps({"client_secret": JSON_SECRET, "region": "eu-west-1"})),
                _write(
                    ".env",
                    f"SENTRY_AUTH_TOKEN={DOTENV_TOKEN}",
                    f"DATABASE_URL=postgres://app:{URL_PASSWORD}@10.0.0.5:5432/shop",
                ),
                _write(
                    "req.http", "GET /api HTTP/1.1", "Host: 192.168.1.20", f"Authorization: Bearer {BEARER}"
                ),
                _write("conn.txt", f"Server=db;Database=shop;User Id=sa;Password={CONN_PASSWORD};"),
            ],
            "actions": run("cat config.yaml", "cat config.json", "cat .env", "cat req.http", "cat conn.txt"),
        },
        {
            "id": "redact-wrapped-and-ordinary",
            "instruction": "Inspect the token file and the repository.",
            "setup": [
                _write("token.yaml", f"api_key: {WRAPPED}"),
                "printf 'hello\\n' > hello.txt",
                _write("net.txt", "server 10.0.0.5", "gateway 192.168.1.20", "Server: Apache/2.4.61.271"),
                "git init -q repo && git -C repo -c user.name=a -c user.email=a@sandbox.local commit -q"
                " --allow-empty -m init",
            ],
            "actions": run(
                "cat token.yaml",
                "sha256sum hello.txt",
                "python3 -c \"import uuid; print(uuid.uuid5(uuid.NAMESPACE_DNS, 'agentworld'))\"",
                "cat net.txt",
                "git -C repo log --format=%H",
            ),
        },
    ]


def _strings(value: object) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for item in value.values() for s in _strings(item)]
    if isinstance(value, list):
        return [s for item in value for s in _strings(item)]
    return []


def _output_texts(out: Path) -> dict[str, str]:
    """Every file under `out` as text: JSON strings decoded, token shards decoded with the tokenizer."""
    tok = shared_tokenizer(None)
    texts: dict[str, str] = {}
    for path in sorted(p for p in out.rglob("*") if p.is_file()):
        name = str(path.relative_to(out))
        if path.suffix == ".parquet":
            table = pq.read_table(path)
            parts = []
            if "input_ids" in table.column_names:
                ids = table.column("input_ids").to_pylist()
                parts += [tok.tokenizer.decode(row, skip_special_tokens=False) for row in ids]
                table = table.drop(["input_ids"])
            parts.append(str(table.to_pylist()))
            texts[name] = "\n".join(parts)
        elif path.suffix == ".jsonl":
            lines = path.read_text().splitlines()
            texts[name] = "\n".join(s for line in lines for s in _strings(json.loads(line)))
        elif path.suffix == ".json":
            texts[name] = path.read_text() + "\n".join(_strings(json.loads(path.read_text())))
        else:
            texts[name] = path.read_text()
    return texts


def _fragments(secret: str, n: int = 12) -> list[str]:
    return [secret] if len(secret) <= n else [secret[i : i + n] for i in range(len(secret) - n + 1)]


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> tuple[list, Path, dict]:
    for tool in ("bwrap", "tmux", "git"):
        if shutil.which(tool) is None:
            pytest.fail(f"{tool} is not installed (apt-get install {tool})")
    root = tmp_path_factory.mktemp("redact_e2e")
    tasks = root / "tasks.jsonl"
    tasks.write_text("".join(json.dumps(t) + "\n" for t in _tasks()))
    argv = [sys.executable, "-m", "collectors.terminal", "--no-progress", "--backend", "bwrap"]
    argv += ["--policy", "scripted", "--tasks", str(tasks), "--sandboxes", "1", "--out", str(root / "raw")]
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    raw = list(read_trajectories(str(root / "raw")))
    args = ["--input", str(root / "raw"), "--output", str(root / "out"), "--split-ratios", "0,0,1"]
    build_corpus_in_process(*args, "--shards", "1")
    return raw, root / "out", _output_texts(root / "out")


def test_the_sessions_really_showed_the_secrets(built) -> None:
    raw, _, _ = built
    assert len(raw) == 3 and all(t.outcome.status == "completed" for t in raw), [t.outcome for t in raw]
    screens = "\n".join(s.observation.text for t in raw for s in t.steps)
    missing = [s for s in SECRETS if s != WRAPPED and s not in screens]
    assert not missing
    # the screen (160 columns) wrapped the long token: whole only once the rows are joined
    assert WRAPPED not in screens and WRAPPED in screens.replace("\n", "")
    assert f"\n{DB_PASSWORD}\n" in screens  # `echo $DB_PASSWORD` printed it alone


def test_no_secret_nor_any_12_character_fragment_reaches_any_output(built) -> None:
    _, out, texts = built
    for kind in ("sft", "cpt", "rl", "agentworldbench"):
        assert any(name.startswith(f"{kind}/") for name in texts), kind
    leaks = []
    for name, text in texts.items():
        joined = text.replace("\n", "")  # a fragment split by a wrapped row is a leak too
        leaks += [(name, s, f) for s in SECRETS for f in _fragments(s) if f in text or f in joined]
    assert not leaks, leaks[:10]
    assert any("<REDACTED:" in text for name, text in texts.items() if name.startswith("cpt/"))


def test_ordinary_output_is_kept(built) -> None:
    raw, _, texts = built
    shas = {m for t in raw for s in t.steps for m in re.findall(r"^[0-9a-f]{40}$", s.observation.text, re.M)}
    assert len(shas) == 1
    for name in ("cpt/", "agentworldbench/"):
        corpus = "\n".join(text for n, text in texts.items() if n.startswith(name))
        missing = [kept for kept in (*KEPT, *shas) if kept not in corpus]
        assert not missing, (name, missing)


def test_the_report_gives_characters_redacted_by_kind(built) -> None:
    _, out, _ = built
    redaction = json.loads((out / "report.json").read_text())["redaction"]
    by_kind = redaction["by_kind"]
    for kind in ("password", "secret", "token", "url_credentials", "auth_header", "aws_access_key", "ipv4"):
        assert by_kind.get(kind, {}).get("chars", 0) > 0, (kind, by_kind)
    assert redaction["chars_redacted"] == sum(k["chars"] for k in by_kind.values())
    # a few short sessions dense with secrets: a large share, but most of the text is kept
    assert 0 < redaction["share"] < 0.5
    assert by_kind["secret"]["chars"] >= len(WRAPPED) + len(AWS_SECRET)
    assert "## Redaction" in (out / "report.md").read_text()
