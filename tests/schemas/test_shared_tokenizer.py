"""The process-wide tokenizer cache: one ChatTokenizer per tokenizer content, never a stale one after
the files change; and the fingerprint read from the files' bytes equals a built tokenizer's (training
checks corpora with it, `training.bases.tokenizer_fingerprint`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tokenizers import Tokenizer
from tokenizers.models import WordLevel
from tokenizers.pre_tokenizers import Whitespace

from schemas.chat_tokens import ChatTokenizer, read_tokenizer_files, shared_tokenizer

TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def _tokenizer_dir(folder: Path, eos: str = "<|im_end|>", template: str = TEMPLATE) -> Path:
    """A real, small tokenizer directory: a word-level tokenizer.json and a config with a template."""
    words = ["[UNK]", "user", "assistant", "hi", "there"]
    tokenizer = Tokenizer(WordLevel({w: i for i, w in enumerate(words)}, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = Whitespace()
    tokenizer.add_special_tokens(["<|im_start|>", "<|im_end|>", "<|endoftext|>"])
    folder.mkdir(parents=True, exist_ok=True)
    tokenizer.save(str(folder / "tokenizer.json"))
    config = {"chat_template": template, "eos_token": eos, "pad_token": "<|endoftext|>"}
    (folder / "tokenizer_config.json").write_text(json.dumps(config))
    return folder


def test_the_same_files_give_the_same_tokenizer_object(tmp_path: Path) -> None:
    folder = _tokenizer_dir(tmp_path / "tok")
    first = shared_tokenizer(str(folder))
    assert shared_tokenizer(str(folder)) is first
    # another directory with the same bytes is the same tokenizer
    copy = _tokenizer_dir(tmp_path / "copy")
    assert shared_tokenizer(str(copy)) is first
    assert first.render([{"role": "user", "content": "hi"}]) == "<|im_start|>user\nhi<|im_end|>\n"


def test_changed_files_are_never_served_stale(tmp_path: Path) -> None:
    folder = _tokenizer_dir(tmp_path / "tok")
    before = shared_tokenizer(str(folder))
    assert before.special["eos_token"] == "<|im_end|>" and before.eos_id == 6

    # a config change outside the fingerprint (the EOS token) still builds a new tokenizer
    _tokenizer_dir(folder, eos="<|endoftext|>")
    after_eos = shared_tokenizer(str(folder))
    assert after_eos is not before
    assert after_eos.special["eos_token"] == "<|endoftext|>" and after_eos.eos_id == 7
    assert after_eos.fingerprint == before.fingerprint

    # a chat template in chat_template.jinja takes precedence and changes the fingerprint
    (folder / "chat_template.jinja").write_text(TEMPLATE.replace("\n{{ m.content }}", ": {{ m.content }}"))
    after_template = shared_tokenizer(str(folder))
    assert after_template is not after_eos
    assert after_template.render([{"role": "user", "content": "hi"}]) == "<|im_start|>user: hi<|im_end|>\n"
    assert after_template.fingerprint["chat_template_sha256"] != before.fingerprint["chat_template_sha256"]
    assert after_template.fingerprint["tokenizer_sha256"] == before.fingerprint["tokenizer_sha256"]


def test_the_fingerprint_from_the_files_equals_a_built_tokenizers(tmp_path: Path) -> None:
    folder = _tokenizer_dir(tmp_path / "tok")
    built = ChatTokenizer(str(folder)).fingerprint
    assert read_tokenizer_files(str(folder)).fingerprint == built
    assert set(built) == {"tokenizer_sha256", "chat_template_sha256"} and all(built.values())
    # a tokenizer.json path reads its directory's template as the directory does
    assert read_tokenizer_files(str(folder / "tokenizer.json")).fingerprint == built

    (folder / "tokenizer.json").unlink()
    with pytest.raises(FileNotFoundError, match="no tokenizer.json"):
        read_tokenizer_files(str(folder))
