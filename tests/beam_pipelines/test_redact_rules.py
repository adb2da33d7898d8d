"""The pure redaction rules (beam_pipelines.secret_rules and .redaction), on the forms terminals show."""

from __future__ import annotations

import pytest

from beam_pipelines.redaction import Redactor
from beam_pipelines.secret_rules import plausible_secret

PASSWORD = "S3cure!Passw0rd-2024"
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
TOKEN = "tok_9f8E7d6C5b4A3z2Y1x0W"


def redact_all(*texts: str, width: int = 0) -> list[str]:
    """Both passes over `texts`, as the stage does over a trajectory's fields."""
    redactor = Redactor()
    for text in texts:
        redactor.scan(text, width)
    return [redactor.redact(text, width) for text in texts]


@pytest.mark.parametrize(
    ("text", "secret", "kind"),
    [
        (
            f"[default]\naws_access_key_id = AKIAZ3MHEXAMPLE7QK2B\naws_secret_access_key = {AWS_SECRET}",
            AWS_SECRET,
            "secret",
        ),
        (f"HOME=/root\nDB_PASSWORD={PASSWORD}\nPATH=/usr/bin", PASSWORD, "password"),
        (f'$ export DB_PASSWORD="{PASSWORD}"', PASSWORD, "password"),
        (f"$ export API_TOKEN='{TOKEN}'", TOKEN, "token"),
        (f"database:\n  host: db\n  password: {PASSWORD}\n", PASSWORD, "password"),
        (f'{{"user": "app", "client_secret": "{TOKEN}", "port": 5432}}', TOKEN, "secret"),
        (f'  "apiKey": "{TOKEN}",', TOKEN, "secret"),
        (f"STRIPE_SECRET_KEY={TOKEN}\nPGPASSWORD={PASSWORD} psql -h db", TOKEN, "secret"),
        (f"PGPASSWORD={PASSWORD} psql -h db", PASSWORD, "password"),
        (f"postgresql://app:{PASSWORD}@10.0.0.5:5432/shop", PASSWORD, "url_credentials"),
        (f"https://{TOKEN}@git.example.com/org/repo.git", TOKEN, "url_credentials"),
        (f"$ curl -H 'Authorization: Bearer {TOKEN}' http://10.0.0.5/api", TOKEN, "auth_header"),
        ("Authorization: Basic dXNlcjpodW50ZXIyMDI0", "dXNlcjpodW50ZXIyMDI0", "auth_header"),
        (f"Server=db;Database=shop;User Id=sa;Password={PASSWORD};", PASSWORD, "password"),
        (f"jdbc:mysql://db:3306/shop?user=app&password={PASSWORD}&ssl=true", PASSWORD, "password"),
        (
            f"DefaultEndpointsProtocol=https;AccountName=x;AccountKey={AWS_SECRET}==;",
            f"{AWS_SECRET}==",
            "secret",
        ),
        (f"$ mysql --password {PASSWORD} shop", PASSWORD, "password"),
        (f"$ curl -u admin:{PASSWORD} http://10.0.0.5/", PASSWORD, "password"),
        (f"machine git.example.com login agent password {PASSWORD}", PASSWORD, "password"),
        (f"shop=# CREATE USER app WITH PASSWORD '{PASSWORD}';", PASSWORD, "password"),
        (f"mysql> CREATE USER 'app'@'%' IDENTIFIED BY '{PASSWORD}';", PASSWORD, "password"),
        (f"machine git.example.com\n  login agent\n  password {PASSWORD}", PASSWORD, "password"),
    ],
)
def test_key_value_forms(text: str, secret: str, kind: str) -> None:
    (redacted,) = redact_all(text)
    assert secret not in redacted, redacted
    assert f"<REDACTED:{kind}:1>" in redacted, redacted


@pytest.mark.parametrize(
    "text",
    [
        "commit 3f1c2a9e8b7d6c5f4e3d2c1b0a9f8e7d6c5b4a39\nAuthor: agent\norigin git@github.com:org/repo.git",
        "request 123e4567-e89b-42d3-a456-426614174000 done",
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855  empty.txt",
        "CONTAINER ID   IMAGE\n4f2a9c1b7e3d   agentworld/terminal:2",
        "inet 10.0.0.5/24 brd 10.0.0.255\nvia 192.168.1.20 dev eth0 from 172.17.0.2 fe80::1",
        "docs 192.0.2.10 198.51.100.3 203.0.113.77 2001:db8::1 and 127.0.0.1 169.254.169.254",
        "Server version: Apache/2.4.61.271 (Unix)\nLinux 5.4.0.150-generic\nversion 1.2.3.4\nv10.1.2.3",
        "max_tokens: 512\nTOKENIZERS_PARALLELISM=false\npassword: ${DB_PASSWORD}",
        "DB_PASSWORD_FILE=/run/secrets/db\nPASSWORD=$(cat /run/secrets/db)",
        "Error: Token: expired\npassword_file = ~/.pgpass\nauth: none\nsecret_name: app-config",
        "passwd: all authentication tokens updated successfully.\nPassword: ",
        "token = get_token()\napi_key = os.environ['API_KEY']\npassword = self.password",
        "Password: ********\npassword=xxxxxx\nagent@sandbox:~$ ls 12:34:56",
    ],
)
def test_ordinary_output_stays(text: str) -> None:
    (redacted,) = redact_all(text)
    assert redacted == text


def test_public_addresses_and_emails_go_private_ones_stay() -> None:
    redactor = Redactor()
    first = redactor.redact("mail ana@corp.com from 34.117.59.81, not 10.0.0.5/127.0.0.1/1.2.3")
    second = redactor.redact("again ana@corp.com and bo@corp.com via 8.8.8.8")
    assert first == "mail <REDACTED:email:1> from <REDACTED:ipv4:1>, not 10.0.0.5/127.0.0.1/1.2.3"
    assert second == "again <REDACTED:email:1> and <REDACTED:email:2> via <REDACTED:ipv4:2>"
    assert redactor.counts == {"email": 2, "ipv4": 2}
    assert Redactor().redact("listening on 2606:4700::1111, 2001:db8::1, fe80::1 and ::1") == (
        "listening on <REDACTED:ipv6:1>, 2001:db8::1, fe80::1 and ::1"
    )
    clean = "agent@sandbox:~$ ls 12:34:56"
    assert Redactor().redact(clean) is clean


def test_a_value_found_anywhere_is_replaced_everywhere_with_one_placeholder() -> None:
    export = f'$ export DB_PASSWORD="{PASSWORD}"'
    echo = f"$ echo $DB_PASSWORD\n{PASSWORD}\n$"
    note = {"text": f"the password is {PASSWORD}"}["text"]
    redacted = redact_all(echo, note, export)
    assert redacted == [
        "$ echo $DB_PASSWORD\n<REDACTED:password:1>\n$",
        "the password is <REDACTED:password:1>",
        '$ export DB_PASSWORD="<REDACTED:password:1>"',
    ]


def test_short_or_plain_values_are_replaced_only_where_found() -> None:
    found, elsewhere = "DB_PASS=letmein\nPOSTGRES_PASSWORD=postgres", "$ psql -U postgres\nletmein ok"
    assert redact_all(found, elsewhere) == [
        "DB_PASS=<REDACTED:password:1>\nPOSTGRES_PASSWORD=<REDACTED:password:2>",
        elsewhere,
    ]


def test_tokens_wrapped_by_the_screen_width_are_found_and_replaced_whole() -> None:
    width = 40
    token = "ghp_" + "Zq9Xw8Vu7Ts6Rq5Po4Nm3Lk2Ji1Hg0FeDcBa"  # 40 characters
    long_secret = "Xk8" * 30  # 90 characters, no pattern of its own
    line = f"agent@sandbox:~$ export SERVICE_TOKEN={long_secret}"
    screen = "\n".join([line[i : i + width] for i in range(0, len(line), width)] + ["$ git push"])
    echo = "\n".join(["$ echo $SERVICE_TOKEN", long_secret[:width], long_secret[width:80], long_secret[80:]])
    remote = f"remote: https://x:{token}@github.com/o/r"
    wrapped_remote = f"{remote[:width]}\n{remote[width:]}"
    redacted = redact_all(screen, echo, wrapped_remote, width=width)
    joined = "".join(redacted)
    for fragment in (long_secret[i : i + 12] for i in range(len(long_secret) - 11)):
        assert fragment not in joined.replace("\n", "")
    assert token[:12] not in joined.replace("\n", "") and token[-12:] not in joined.replace("\n", "")
    assert redacted[0] == "agent@sandbox:~$ export SERVICE_TOKEN=<R\nEDACTED:token:1>\n$ git push"
    assert redacted[1] == "$ echo $SERVICE_TOKEN\n<REDACTED:token:1>"
    assert all(len(row) <= width for text in redacted for row in text.split("\n"))
    # a full-width row that is not a wrapped secret keeps its rows
    rows = "a" * width + "\nls -la"
    assert redact_all(rows, width=width) == [rows]


def test_private_keys_whole_cut_and_scrolled() -> None:
    body = "MIIEowIBAAKCAQEAx7Jq3nL0v2aQ9bV3\nZm9vYmFyYmF6cXV4cXV1eHF1dXg1234\n"
    whole = f"$ cat id_rsa\n-----BEGIN RSA PRIVATE KEY-----\n{body}-----END RSA PRIVATE KEY-----\n$"
    cut_start = f"{body}-----END OPENSSH PRIVATE KEY-----\n$"
    cut_end = f"-----BEGIN OPENSSH PRIVATE KEY-----\n{body.rstrip()}"
    for text in (whole, cut_start, cut_end):
        (redacted,) = redact_all(text)
        assert "MIIEow" not in redacted and "Zm9vYmFy" not in redacted, redacted
        assert "<REDACTED:private_key:1>" in redacted
    # a later screen scrolled so that only the middle of the key shows
    _, scrolled = redact_all(whole, "Zm9vYmFyYmF6cXV4cXV1eHF1dXg1234\n$ ls")
    assert scrolled == "<REDACTED:private_key:1>\n$ ls"


def test_characters_are_counted_by_kind() -> None:
    redactor = Redactor()
    texts = [f"DB_PASSWORD={PASSWORD}", f"{PASSWORD} and {PASSWORD}", "from 34.117.59.81"]
    for text in texts:
        redactor.scan(text)
    for text in texts:
        redactor.redact(text)
    assert redactor.characters == sum(map(len, texts))
    assert redactor.chars == {"password": 3 * len(PASSWORD), "ipv4": len("34.117.59.81")}


@pytest.mark.parametrize(
    "value",
    [
        "true",
        "${X}",
        "$X",
        "%X%",
        "{{ .x }}",
        "****",
        "./f",
        "5432",
        "a.b",
        "<x>",
        "=9.0.1",
        "https://x.org/a",
    ],
)
def test_references_and_literals_are_not_secrets(value: str) -> None:
    assert not plausible_secret(value)


def test_a_structured_field_named_for_a_secret_is_a_secret_and_found_elsewhere() -> None:
    redactor = Redactor()
    fields = [("OPENAI_API_KEY", TOKEN), ("token_count", "12"), ("auth", "none"), ("db_pass", "letmein")]
    for key, value in fields:
        redactor.scan(value, key=key)
    redactor.scan(f"KEY={TOKEN}")
    assert [redactor.redact(value, key=key) for key, value in fields] == [
        "<REDACTED:secret:1>",
        "12",
        "none",
        "<REDACTED:password:1>",
    ]
    assert redactor.redact(f"KEY={TOKEN}") == "KEY=<REDACTED:secret:1>"
    assert redactor.redact("letmein") == "letmein"  # too plain to replace outside its field
