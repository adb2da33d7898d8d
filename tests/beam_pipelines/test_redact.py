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
PLANTED = [AWS_KEY, AWS_SECRET, GITHUB_TOKEN, GITHUB_PAT, *KEY_BODY, EMAIL, PASSWORD, "203.0.113.77"]


def plant(t):
    t.task.instruction = f"Mail the report to {EMAIL}"
    t.steps[0].action.text = f"export AWS_ACCESS_KEY_ID={AWS_KEY}"
    t.steps[0].action.arguments = {"command": t.steps[0].action.text}
    t.steps[0].observation.text += f"\n$ echo {AWS_KEY}\n{AWS_KEY}\n$"
    t.steps[1].observation.text += f"\n$ cat ~/.ssh/id_rsa\n{PRIVATE_KEY}\n$ git push\nremote: {GITHUB_TOKEN}"
    t.steps[2].observation.text += f'\naws_secret_access_key = "{AWS_SECRET}"\npassword = "{PASSWORD}"'
    t.steps[2].observation.data["note"] = f"token {GITHUB_PAT} from {EMAIL} at 203.0.113.77"
    t.initial_observation.text = f"Last login from 203.0.113.77 by {EMAIL}\n" + t.initial_observation.text


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
        ]

    assert_that(
        out | "Placeholders" >> beam.FlatMap(placeholders),
        equal_to(
            [
                "export AWS_ACCESS_KEY_ID=<REDACTED:aws_access_key:1>",
                "export AWS_ACCESS_KEY_ID=<REDACTED:aws_access_key:1>",
                "Mail the report to <REDACTED:email:1>",
                "<REDACTED:aws_access_key:1>",
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
    # Distinct values per kind; detect-secrets files the secret access key under "AWS Access Key"
    # too, and its keyword plugin finds the password.
    assert counters == {
        "redact/aws_access_key": 2,
        "redact/email": 1,
        "redact/github_token": 2,
        "redact/ipv4": 1,
        "redact/private_key": 1,
        "redact/secret_keyword": 1,
        "redact/trajectories_clean": len(recorded),
        "redact/trajectories_redacted": 1,
    }
