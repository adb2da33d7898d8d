"""Small, realistic workspaces that terminal tasks set up (shell commands run in the home dir).

Content is generated from a fixed seed so `make_tasks.py` always writes the same suite.
"""

from __future__ import annotations

import random
import shlex


def write_file(path: str, lines: list[str]) -> str:
    """A shell command that writes `lines` to `path` (printf takes them as arguments, never as format)."""
    return "printf '%s\\n' " + " ".join(shlex.quote(line) for line in lines) + " > " + shlex.quote(path)


def _app_log(rng: random.Random) -> list[str]:
    levels = ["INFO"] * 6 + ["WARN"] * 2 + ["ERROR"]
    events = {
        "INFO": ["request served path=/api/users", "cache hit key=session", "worker started pid=4121"],
        "WARN": ["slow query took=1840ms", "retrying upstream attempt=2"],
        "ERROR": ["database timeout after 30s", "failed to parse payload id=88", "disk quota exceeded"],
    }
    lines = []
    for minute in range(40):
        level = rng.choice(levels)
        lines.append(
            f"2024-05-14 09:{minute:02d}:{rng.randint(0, 59):02d} {level} {rng.choice(events[level])}"
        )
    return lines


def webapp() -> list[str]:
    rng = random.Random(7)
    return [
        "mkdir -p webapp/src webapp/tests webapp/logs",
        write_file(
            "webapp/src/app.py",
            [
                "from utils import slugify",
                "",
                "",
                "def handler(title):",
                '    return {"slug": slugify(title), "status": 200}',
                "",
                "",
                'if __name__ == "__main__":',
                '    print(handler("Hello World"))',
            ],
        ),
        write_file(
            "webapp/src/utils.py",
            [
                "def slugify(text):",
                '    return "-".join(text.lower().split())',
                "",
                "",
                "def chunks(items, size):",
                "    return [items[i:i + size] for i in range(0, len(items), size)]",
            ],
        ),
        write_file(
            "webapp/tests/test_app.py",
            [
                "from app import handler",
                "",
                "",
                "def test_handler():",
                '    assert handler("A B")["slug"] == "a-b"',
            ],
        ),
        write_file("webapp/README.md", ["# webapp", "", "A tiny service that turns titles into slugs.", ""]),
        write_file("webapp/requirements.txt", ["flask==3.0.3", "requests==2.32.3", "pytest==8.2.0"]),
        write_file(
            "webapp/config.ini", ["[server]", "port = 8080", "debug = false", "[db]", "host = localhost"]
        ),
        write_file("webapp/logs/app.log", _app_log(rng)),
    ]


def sales() -> list[str]:
    rng = random.Random(11)
    regions = ["north", "south", "east", "west"]
    products = ["widget", "gadget", "gizmo", "doohickey"]
    rows = ["date,region,product,units,price"]
    for day in range(1, 31):
        rows.append(
            f"2024-03-{day:02d},{rng.choice(regions)},{rng.choice(products)},{rng.randint(1, 40)},"
            f"{rng.choice(['2.50', '4.75', '9.99', '12.00'])}"
        )
    cities = ["Lyon", "Oslo", "Austin", "Pune", "Osaka"]
    names = ["Ada", "Grace", "Linus", "Ken", "Barbara", "Dennis", "Margaret", "Alan"]
    customers = ["id,name,city,joined"] + [
        f"{100 + i},{name},{rng.choice(cities)},2023-{rng.randint(1, 12):02d}-01"
        for i, name in enumerate(names)
    ]
    return ["mkdir -p data", write_file("data/sales.csv", rows), write_file("data/customers.csv", customers)]


def gitrepo() -> list[str]:
    quiet = "git -C repo"
    return [
        "mkdir -p repo",
        "git init -q -b main repo",
        f"{quiet} config user.email dev@example.com",
        f"{quiet} config user.name 'Dev Example'",
        write_file("repo/README.md", ["# inventory", "", "Tracks stock levels."]),
        write_file(
            "repo/stock.py", ["STOCK = {'apples': 12, 'pears': 4}", "", "def total():", "    return 0"]
        ),
        f"{quiet} add README.md stock.py",
        f"{quiet} commit -q -m 'Initial commit'",
        write_file(
            "repo/stock.py",
            ["STOCK = {'apples': 12, 'pears': 4}", "", "def total():", "    return sum(STOCK.values())"],
        ),
        f"{quiet} commit -q -am 'Compute total stock'",
        f"{quiet} checkout -q -b feature/report",
        write_file(
            "repo/report.py", ["from stock import STOCK, total", "", "print('items:', len(STOCK), total())"]
        ),
        f"{quiet} add report.py",
        f"{quiet} commit -q -m 'Add stock report'",
        f"{quiet} checkout -q main",
        write_file("repo/NOTES.txt", ["remember to add bananas"]),
    ]


def logs() -> list[str]:
    rng = random.Random(23)
    ips = ["10.0.0.5", "10.0.0.17", "192.168.1.20", "172.16.4.2", "10.0.0.5"]
    paths = ["/", "/login", "/api/items", "/static/app.js", "/api/items/42", "/admin"]
    access = []
    for second in range(50):
        status = rng.choice([200, 200, 200, 200, 304, 404, 500, 302])
        access.append(
            f"{rng.choice(ips)} - - [14/May/2024:10:15:{second:02d} +0000] "
            f'"GET {rng.choice(paths)} HTTP/1.1" {status} {rng.randint(120, 5400)}'
        )
    errors = [
        f"[2024-05-14 10:{m:02d}] kernel: usb 1-{m % 3}: device descriptor read error"
        for m in range(0, 12, 3)
    ]
    return [
        "mkdir -p logs/old",
        write_file("logs/access.log", access),
        write_file("logs/error.log", errors),
        write_file("logs/old/access.log.1", access[:10]),
    ]


def notes() -> list[str]:
    return [
        "mkdir -p notes",
        write_file("notes/todo.txt", ["buy milk", "fix bike", "call mom", "fix bike", "renew passport"]),
        write_file(
            "notes/ideas.md", ["# Ideas", "- a tiny shell tutorial", "- plant tracker", "- recipe scaler"]
        ),
        write_file(
            "notes/meeting-2024-05-01.txt",
            ["Attendees: Ana, Bo, Cy", "Decision: ship v2 on Friday", "Action: Bo writes release notes"],
        ),
    ]


def scripts() -> list[str]:
    return [
        "mkdir -p scripts",
        write_file(
            "scripts/hello.py",
            [
                "import sys",
                "",
                "name = sys.argv[1] if len(sys.argv) > 1 else 'world'",
                "print(f'hello, {name}')",
            ],
        ),
        write_file(
            "scripts/fib.py",
            [
                "def fib(n):",
                "    a, b = 0, 1",
                "    for _ in range(n):",
                "        a, b = b, a + b",
                "    return a",
                "",
                "print([fib(i) for i in range(10)])",
            ],
        ),
        write_file(
            "scripts/wordcount.py",
            ["import sys", "", "words = sys.stdin.read().split()", "print(len(words), 'words')"],
        ),
        write_file("scripts/broken.py", ["def greet(name)", "    print('hi', name)"]),
        write_file(
            "scripts/backup.sh", ["#!/bin/sh", 'tar czf /tmp/notes-backup.tgz "$HOME/notes"', "echo done"]
        ),
    ]


def locked() -> list[str]:
    return [
        "mkdir -p secure/vault",
        write_file("secure/secret.txt", ["the launch code is 0000"]),
        write_file("secure/vault/keys.txt", ["key-1", "key-2"]),
        "chmod 000 secure/secret.txt",
        "chmod 500 secure/vault",
    ]


def projects() -> list[str]:
    dirs = [
        "projects/alpha/src/core",
        "projects/alpha/docs",
        "projects/beta/lib",
        "projects/gamma/assets/img",
    ]
    return [
        "mkdir -p " + " ".join(dirs),
        write_file(
            "projects/alpha/src/core/engine.c", ["#include <stdio.h>", "int main(void) { return 0; }"]
        ),
        write_file("projects/alpha/docs/design.md", ["# Alpha design", "Engine runs one loop."]),
        write_file("projects/beta/lib/helpers.py", ["def add(a, b):", "    return a + b"]),
        write_file("projects/gamma/assets/img/logo.svg", ['<svg xmlns="http://www.w3.org/2000/svg"/>']),
        write_file("projects/gamma/TODO", ["draw a better logo"]),
    ]


WORKSPACES = {
    "webapp": webapp,
    "sales": sales,
    "gitrepo": gitrepo,
    "logs": logs,
    "notes": notes,
    "scripts": scripts,
    "locked": locked,
    "projects": projects,
}


def setup_for(*names: str) -> list[str]:
    commands: list[str] = []
    for name in names:
        commands.extend(WORKSPACES[name]())
    return commands
