from __future__ import annotations

import numpy as np

from beam_pipelines.text import (
    MinHasher,
    dedup_key_text,
    estimated_jaccard,
    mask_volatile,
    normalise_text,
    shingle_hashes,
)
from tests.beam_pipelines.conftest import variant


def test_normalise_text_rules():
    assert normalise_text("cafe\u0301") == "caf\u00e9"
    assert normalise_text("a\r\nb\rc") == "a\nb\nc"
    assert normalise_text("\x1b[1;31mred\x1b[0m \x1b]0;title\x07done\x1b(B") == "red done"
    assert normalise_text("$ ls   \nfile\t\n", screen=True) == "$ ls\nfile\n"
    # Outside a screen, trailing blanks may be content (Markdown line breaks): kept.
    assert normalise_text("line  \nnext") == "line  \nnext"
    clean = "agent@sandbox:~$ ls\nfile"
    assert normalise_text(clean, screen=True) is clean


def test_mask_volatile_masks_runtime_values_only():
    text = (
        "2024-05-14T09:00:09Z started pid=4121\n"
        "-rw-r--r-- 1 agent agent 4096 Nov 30 09:51 notes.txt\n"
        "[1] 12345\n"
        "  812 pts/0    00:00:00 bash\n"
        "/tmp/tmp.Ab3dE9 123e4567-e89b-12d3-a456-426614174000 commit 9fceb02d\n"
        "echo $$\n48213\n"
        "seq 5 gives 15"
    )
    assert mask_volatile(text) == (
        "<TS> started pid=<PID>\n"
        "-rw-r--r-- 1 agent agent 4096 <DATE> <TIME> notes.txt\n"
        "[1] <PID>\n"
        "<PID> pts/0    <TIME> bash\n"
        "<TMP> <UUID> commit <HEX>\n"
        "echo $$\n<NUM>\n"
        "seq 5 gives 15"
    )


def test_dedup_key_text_ignores_volatile_values_but_not_content(recorded):
    t = recorded[0]

    def shift_clock(copy):
        for step in copy.steps:
            step.observation.text = step.observation.text.replace("09:5", "11:2")

    def change_content(copy):
        copy.steps[-1].observation.text += "\nsomething else"

    assert dedup_key_text(variant(t, "b", shift_clock)) == dedup_key_text(t)
    assert dedup_key_text(variant(t, "c", change_content)) != dedup_key_text(t)


def test_minhash_is_deterministic_and_estimates_jaccard():
    words = [f"w{i}" for i in range(400)]
    a = "\n".join(" ".join(words[i : i + 8]) for i in range(0, 400, 8))
    b = a.replace("w17 ", "changed ")
    signature = MinHasher(128, seed=3).signature(shingle_hashes(a))
    assert signature == MinHasher(128, seed=3).signature(shingle_hashes(a))
    assert estimated_jaccard(signature, MinHasher(128, seed=3).signature(shingle_hashes(b))) > 0.85
    other = MinHasher(128, seed=3).signature(shingle_hashes("entirely different text here"))
    assert estimated_jaccard(signature, other) < 0.1
    assert shingle_hashes(a).dtype == np.uint64
