from __future__ import annotations

import json

import apache_beam as beam
from apache_beam.metrics.metric import MetricsFilter
from apache_beam.testing.util import assert_that, equal_to

from beam_pipelines.dead_letter import NAMESPACE
from beam_pipelines.stages.redact import RedactSecrets
from schemas import to_row
from tests.beam_pipelines.conftest import pipeline, variant

AWS_KEY = "AKIAIOSFODNN7EXAMPLE"
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
GITHUB_TOKEN = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
GITHUB_PAT = "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyzABCDEFGHIJKL"
KEY_BODY = [
    "MIIEowIBAAKCAQEAx7Jq3nL0v2aQ9bV3Xk1zYt8Wm5Rs2Lp6Hc4Nd0Fg",
    "Zm9vYmFyYmF6cXV4cXV1eHF1dXg1234567890abcdEFGHijklMNOPqrst",
]
PRIVATE_KEY = "-----BEGIN RSA PRIVATE KEY-----\n" + "\n".join(KEY_BODY) + "\n-----END RSA PRIVATE KEY-----"
EMAIL = "jane.doe@corp-mail.example.com"
PASSWORD = "s3cr3t-Pa55w0rd-xyz"
DB_PASSWORD = "Qz7!vR2#mK9-pL4"
LLM_KEY = "sk-proj-4fT9qW2eR7yU1iO3pA6sD8fG"
PUBLIC_IP = "34.117.59.81"
PLANTED = [AWS_KEY, AWS_SECRET, GITHUB_TOKEN, GITHUB_PAT, *KEY_BODY, EMAIL, PASSWORD, DB_PASSWORD, LLM_KEY]
PLANTED.append(PUBLIC_IP)


def plant(t):
    t.task.instruction = f"Mail the report to {EMAIL}"
    t.steps[0].action.text = f"export AWS_ACCESS_KEY_ID={AWS_KEY}"
    t.steps[0].action.arguments = {"command": t.steps[0].action.text}
    t.steps[0].observation.text += f"\n$ echo {AWS_KEY}\n{AWS_KEY}\n$"
    t.steps[1].observation.text += f"\n$ cat ~/.ssh/id_rsa\n{PRIVATE_KEY}\n$ git push\nremote: {GITHUB_TOKEN}"
    t.steps[2].observation.text += f'\naws_secret_access_key = "{AWS_SECRET}"\npassword = "{PASSWORD}"'
    t.steps[2].observation.data["note"] = f"token {GITHUB_PAT} from {EMAIL} at {PUBLIC_IP}"
    t.initial_observation.text = f"Last login from {PUBLIC_IP} by {EMAIL}\n" + t.initial_observation.text
    # Found in one field, printed bare in the others: every field is scanned before any is replaced.
    t.task.setup = [*t.task.setup, f"export DB_PASSWORD='{DB_PASSWORD}'"]
    t.task.metadata["db"] = DB_PASSWORD
    t.environment.config["env"] = {"OPENAI_API_KEY": LLM_KEY}
    t.policy.config["api_key"] = LLM_KEY
    t.steps[3].info["echo"] = [f"{DB_PASSWORD}"]
    t.steps[3].observation.text += f"\n$ echo $DB_PASSWORD\n{DB_PASSWORD}\n$ env | grep KEY\nKEY={LLM_KEY}"
    t.outcome.error = f"setup failed: psql -W {DB_PASSWORD}"


def _row_text(t) -> str:
    return json.dumps(to_row(t), default=str, ensure_ascii=False)


def test_planted_secrets_are_gone_with_stable_placeholders(recorded):
    planted = variant(recorded[0], "planted", plant)
    p = pipeline()
    out = p | beam.Create([*recorded, planted]) | RedactSecrets()
    texts = out | "Serialise" >> beam.Map(_row_text)
    leaks = texts | "Leaks" >> beam.FlatMap(lambda text: [s for s in PLANTED if s in text])
    assert_that(leaks, equal_to([]))

    def placeholders(t):
        if t.trajectory_id != "planted":
            return []
        return [
            t.steps[0].action.text,
            t.steps[0].action.arguments["command"],
            t.task.instruction,
            t.steps[0].observation.text.splitlines()[-2],
            t.task.setup[-1],
            t.task.metadata["db"],
            t.steps[3].info["echo"][0],
            t.outcome.error,
            t.policy.config["api_key"],
            t.environment.config["env"]["OPENAI_API_KEY"],
        ]

    assert_that(
        out | "Placeholders" >> beam.FlatMap(placeholders),
        equal_to(
            [
                "export AWS_ACCESS_KEY_ID=<REDACTED:aws_access_key:1>",
                "export AWS_ACCESS_KEY_ID=<REDACTED:aws_access_key:1>",
                "Mail the report to <REDACTED:email:1>",
                "<REDACTED:aws_access_key:1>",
                "export DB_PASSWORD='<REDACTED:password:1>'",
                "<REDACTED:password:1>",
                "<REDACTED:password:1>",
                "setup failed: psql -W <REDACTED:password:1>",
                "<REDACTED:secret:1>",
                "<REDACTED:secret:1>",
            ]
        ),
        label="Stable",
    )
    unchanged = out | "Unchanged" >> beam.Filter(lambda t: t.trajectory_id != "planted")
    assert_that(unchanged, equal_to(recorded), label="CleanUntouched")
    result = p.run()
    result.wait_until_finish()
    counters = {
        c.key.metric.name: c.committed
        for c in result.metrics().query(MetricsFilter().with_namespace(NAMESPACE))["counters"]
    }
    # Distinct values per kind, then characters replaced per kind (every occurrence): our key/value
    # rules find the secret access key, the password and the API key before detect-secrets does.
    total = counters.pop("redact/chars_total")
    assert total > sum(len(t.initial_observation.text) for t in recorded)
    assert counters == {
        "redact/aws_access_key": 1,
        "redact/email": 1,
        "redact/github_token": 2,
        "redact/ipv4": 1,
        "redact/password": 2,
        "redact/private_key": 1,
        "redact/secret": 2,
        "redact/chars_aws_access_key": 4 * len(AWS_KEY),
        "redact/chars_email": 3 * len(EMAIL),
        "redact/chars_github_token": len(GITHUB_TOKEN) + len(GITHUB_PAT),
        "redact/chars_ipv4": 2 * len(PUBLIC_IP),
        "redact/chars_password": 5 * len(DB_PASSWORD) + len(PASSWORD),
        "redact/chars_private_key": len(PRIVATE_KEY),
        "redact/chars_secret": len(AWS_SECRET) + 3 * len(LLM_KEY),
        "redact/trajectories_clean": len(recorded),
        "redact/trajectories_redacted": 1,
    }
