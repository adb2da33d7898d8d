"""The chat tokenizer of the corpus pipeline: a tokenizer.json plus its chat template, Beam-free.

It lives in `schemas` because both sides of the training/inference boundary need the same ids: the
corpus pipeline writes training samples with it, and training may import `schemas` but never
`beam_pipelines`. The tokenizer and template libraries are imported when a tokenizer is built.

Speed: an SFT sample repeats the history of the samples before it, so a batch holds the same message
text many times. The chat template is rendered per sample, but the rendered text is cut at the
template's control tokens (`<|im_start|>`, `<think>`, ...) and each distinct piece is encoded once per
batch with a `encode_batch` call. Hugging Face tokenizers split added tokens out before normalising
and pre-tokenising, so encoding the pieces apart gives exactly the ids of encoding the whole text
(the tests check it). Control-token text inside the data (a screen that shows `<|im_end|>`) is marked
before rendering and encoded as plain text, so captured content cannot forge a turn boundary.
"""

from __future__ import annotations

import hashlib
import json
import posixpath
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

import numpy as np
from fsspec.core import url_to_fs

from schemas.base_files import tokenizer_source
from schemas.tokenizer_files import default_tokenizer_dir

if TYPE_CHECKING:
    from jinja2 import nodes
    from jinja2.sandbox import ImmutableSandboxedEnvironment


class Encodable(Protocol):
    """A text to tokenise: with `messages`, the chat prompt whose assistant answer is `text` (the
    loss covers the answer); without, a whole document (`text` plus EOS)."""

    text: str
    messages: Sequence[dict] | None
    # Non-empty: earlier assistant messages that open with this text are trained too, after it (the
    # observations in a world-model prompt's history, see `Encoded.history_spans`).
    history_loss_after: str


Pieces = list[int | str]  # text to encode and control-token ids, in order

_MARK_OPEN, _MARK_CLOSE = "\ue000", "\ue001"  # private-use characters: cannot occur in the template


_SHARED_MAX = 4
_shared: OrderedDict[str, ChatTokenizer] = OrderedDict()
_shared_lock = threading.Lock()


def shared_tokenizer(path: str | None) -> ChatTokenizer:
    """One ChatTokenizer per tokenizer content and process: the formatter and tokeniser of a worker,
    and every corpus build of a process, share it (building one parses tokenizer.json twice: about a
    second and a few hundred MB). The files are read and hashed on every call (about 12 ms for the
    default 11 MB tokenizer.json) and the key is their content, so a tokenizer changed on disk is never
    served stale."""
    files = read_tokenizer_files(path)
    key = files.content_key
    with _shared_lock:
        if key in _shared:
            _shared.move_to_end(key)
            return _shared[key]
    tokenizer = ChatTokenizer(files=files)
    with _shared_lock:
        _shared[key] = tokenizer
        while len(_shared) > _SHARED_MAX:
            _shared.popitem(last=False)
    return tokenizer


def fingerprint(tokenizer_json: bytes, template: str | None) -> dict[str, str | None]:
    """What a corpus records of the tokenizer that made it, and what training and the simulator
    compare: the tokenizer.json bytes' and the chat template's SHA-256."""
    return {
        "tokenizer_sha256": hashlib.sha256(tokenizer_json).hexdigest(),
        "chat_template_sha256": hashlib.sha256(template.encode()).hexdigest() if template else None,
    }


def _read(path: str) -> bytes | None:
    fs, local = url_to_fs(path)
    if not fs.exists(local):
        return None
    with fs.open(local, "rb") as f:
        return f.read()


class TokenizerFiles(NamedTuple):
    """What a tokenizer directory holds, as read: enough for the fingerprint without parsing the
    vocabulary (the expensive part of a ChatTokenizer)."""

    folder: str
    tokenizer_json: bytes
    config_json: bytes  # tokenizer_config.json, b"" where missing
    template: str | None  # chat_template.jinja, else tokenizer_config.json's chat_template

    @property
    def fingerprint(self) -> dict[str, str | None]:
        return fingerprint(self.tokenizer_json, self.template)

    @property
    def content_key(self) -> str:
        """A hash of everything a ChatTokenizer is built from."""
        digest = hashlib.sha256()
        for part in (self.tokenizer_json, self.config_json, (self.template or "").encode()):
            digest.update(hashlib.sha256(part).digest())
        return digest.hexdigest()


def read_tokenizer_files(path: str | None = None) -> TokenizerFiles:
    """The files of the tokenizer at `path` (see ChatTokenizer), read through fsspec."""
    path = tokenizer_source(path) or default_tokenizer_dir()
    is_file = path.endswith(".json")
    folder = posixpath.dirname(path) if is_file else path
    raw = _read(path if is_file else posixpath.join(folder, "tokenizer.json"))
    if raw is None:
        raise FileNotFoundError(f"no tokenizer.json at {path}")
    config = _read(posixpath.join(folder, "tokenizer_config.json")) or b""
    template = json.loads(config or b"{}").get("chat_template")
    jinja = _read(posixpath.join(folder, "chat_template.jinja"))
    template = jinja.decode() if jinja is not None else template
    return TokenizerFiles(folder, raw, config, template if isinstance(template, str) else None)


def _template_env() -> ImmutableSandboxedEnvironment:
    from jinja2.ext import loopcontrols
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    # chat templates are code from the tokenizer's author: run them sandboxed, with the helpers HF provides
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
    env.filters["tojson"] = lambda x, indent=None: json.dumps(x, ensure_ascii=False, indent=indent)
    env.globals["raise_exception"] = _raise_template_error
    return env


def _raise_template_error(message: str) -> None:
    raise ValueError(f"chat template: {message}")


class ChatTokenizer:
    """A tokenizer.json plus its chat template, read through fsspec (local, gs://, s3://).

    `path` is a tokenizer directory or a tokenizer.json file (its directory is searched for
    tokenizer_config.json / chat_template.jinja); None means `default_tokenizer_dir()`.
    """

    def __init__(self, path: str | None = None, *, files: TokenizerFiles | None = None) -> None:
        files = files or read_tokenizer_files(path)
        raw, template = files.tokenizer_json, files.template
        from tokenizers import Tokenizer

        spec = json.loads(raw)
        self.tokenizer = Tokenizer.from_str(raw.decode())
        # the same model without added tokens: encodes control-token text as ordinary text
        self.plain = Tokenizer.from_str(json.dumps({**spec, "added_tokens": []}))
        self.control_ids = {t["content"]: t["id"] for t in spec.get("added_tokens", [])}
        config = json.loads(files.config_json or b"{}")
        self.template = _template_env().from_string(template) if template is not None else None
        self.fingerprint = files.fingerprint
        self._fast = _FastRender(template) if template is not None else None
        self.special = {k: _token_text(config.get(k)) for k in ("bos_token", "eos_token", "pad_token")}
        self.eos_id = self.control_ids.get(self.special["eos_token"] or "")
        names = sorted(self.control_ids, key=len, reverse=True) or ["(?!)"]
        alternatives = "|".join(map(re.escape, names))
        self._control_re = re.compile(alternatives)
        self._split_re = re.compile(
            f"{_MARK_OPEN}({alternatives}){_MARK_CLOSE}|({alternatives})|[\ue000\ue001]"
        )
        self._generation_header = self._probe_generation_header()

    def _probe_generation_header(self) -> str:
        if self.template is None:
            return ""
        probe = [{"role": "user", "content": "x"}]
        bare, prompted = self.render(probe), self.render(probe, add_generation_prompt=True)
        return prompted[len(bare) :] if prompted.startswith(bare) else ""

    def _mark(self, text: str) -> str:
        text = text.replace(_MARK_OPEN, "").replace(_MARK_CLOSE, "")
        return self._control_re.sub(f"{_MARK_OPEN}\\g<0>{_MARK_CLOSE}", text)

    def render(self, messages: list[dict], *, add_generation_prompt: bool = False) -> str:
        """The chat template's text, with control-token text from the messages marked as data."""
        if self.template is None:
            raise ValueError("the tokenizer has no chat template; pass a tokenizer directory that has one")
        if self._fast is not None:
            rendered = self._fast.render(messages, add_generation_prompt, self._mark, self._slow_render)
            if rendered is not None:
                return rendered
        return self._slow_render(
            [{**m, "content": self._mark(m["content"])} for m in messages], add_generation_prompt
        )

    def _slow_render(self, marked: list[dict], add_generation_prompt: bool) -> str:
        return self.template.render(
            messages=marked, add_generation_prompt=add_generation_prompt, **self.special
        )

    def target_start(self, messages: list[dict], rendered: str) -> int:
        """Where the final assistant message's generated part starts in `rendered` (prompt + target)."""
        header = self._generation_header
        at = rendered.rfind(header) if header else -1
        if at >= 0:
            return at + len(header)
        prompt = self.render(messages[:-1], add_generation_prompt=True)
        if not rendered.startswith(prompt):
            raise ValueError("chat template renders the prompt differently inside the full conversation")
        return len(prompt)

    def pieces(self, rendered: str) -> Pieces:
        """`rendered` as text pieces (to encode) and control-token ids, in order."""
        out: Pieces = []
        buf: list[str] = []
        pos = 0
        for m in self._split_re.finditer(rendered):
            buf.append(rendered[pos : m.start()])
            if m.group(1):
                buf.append(m.group(1))  # data that looks like a control token: plain text
            elif m.group(2):
                if any(buf):
                    out.append("".join(buf))
                buf.clear()
                out.append(self.control_ids[m.group(2)])
            pos = m.end()
        buf.append(rendered[pos:])
        if any(buf):
            out.append("".join(buf))
        return out

    def count(self, texts: list[str]) -> list[int]:
        """Token counts of plain texts (no template)."""
        return [len(e) for e in self.plain.encode_batch_fast(texts, add_special_tokens=False)]

    def split_samples(self, samples: Sequence[Encodable]) -> tuple[list[str], list[SplitSample]]:
        """(the distinct text pieces of `samples`, each once; per sample, its pieces, how many of them
        precede the loss, and the trained stretches of earlier pieces). Encoding the distinct pieces is
        all the tokenizer work a batch needs."""
        split: list[SplitSample] = []
        for s in samples:
            if s.messages is None:
                pieces = self.pieces(s.text)
                if self.eos_id is not None:
                    pieces.append(self.eos_id)  # documents end with EOS so packed neighbours stay apart
                split.append(SplitSample(pieces, 0, ()))
            else:
                messages = [*s.messages, {"role": "assistant", "content": s.text}]
                rendered = self.render(messages)
                # cut at the target so the loss boundary falls between pieces
                cut = self.target_start(messages, rendered)
                prompt = self.pieces(rendered[:cut])
                trained = _history_stretches(prompt, s.messages, s.history_loss_after)
                split.append(SplitSample(prompt + self.pieces(rendered[cut:]), len(prompt), trained))
        distinct: dict[str, None] = {}
        for pieces, _, _ in split:
            distinct.update((p, None) for p in pieces if isinstance(p, str))
        return list(distinct), split

    def encode_pieces(self, texts: list[str]) -> list[np.ndarray]:
        """Ids of plain text pieces (control-token text in them is text), one batch call."""
        encoded = self.plain.encode_batch_fast(texts, add_special_tokens=False)
        return [np.asarray(e.ids, dtype=np.int32) for e in encoded]

    def _token_stretches(self, stretches: dict[tuple[str, int, int], None]) -> dict[tuple, tuple[int, int]]:
        """Per (piece, first char, end char): the tokens of the piece wholly inside those characters. A
        token that straddles an edge (a newline merged with the text after it) stays untrained."""
        texts = list(dict.fromkeys(piece for piece, _, _ in stretches))
        encoded = self.plain.encode_batch(texts, add_special_tokens=False)
        offsets = {t: e.offsets for t, e in zip(texts, encoded, strict=True)}
        out = {}
        for key in stretches:
            piece, first, end = key
            inside = [i for i, (a, b) in enumerate(offsets[piece]) if a >= first and b <= end]
            out[key] = (inside[0], inside[-1] + 1) if inside else (0, 0)
        return out

    def encode_samples(self, samples: Sequence[Encodable]) -> list[Encoded]:
        """Ids, where the final target's loss starts and the trained stretches of the history, per sample."""
        distinct, split = self.split_samples(samples)
        arrays = dict(zip(distinct, self.encode_pieces(distinct), strict=True))
        stretch_keys = {(pieces[i], a, b): None for pieces, _, trained in split for i, a, b in trained}
        tokens = self._token_stretches(stretch_keys) if stretch_keys else {}
        out = []
        for pieces, boundary, trained in split:
            parts = [arrays[p] if isinstance(p, str) else np.array([p], np.int32) for p in pieces]
            starts = np.cumsum([0] + [len(a) for a in parts])
            spans = []
            for i, a, b in trained:
                first, end = tokens[(pieces[i], a, b)]
                if end > first:
                    spans.append((int(starts[i]) + first, int(starts[i]) + end))
            ids = np.concatenate(parts) if parts else np.zeros(0, np.int32)
            out.append(Encoded(ids, int(starts[boundary]), tuple(spans)))
        return out


class SplitSample(NamedTuple):
    pieces: Pieces
    boundary: int  # pieces before the final target
    trained: tuple[tuple[int, int, int], ...]  # (piece index, first char, end char) trained in the history


class Encoded(NamedTuple):
    """One tokenised sample: the loss covers ids[loss_start:] and each [start, end) of `history_spans`
    (observations of the prompt's history, when the sample asks for them)."""

    ids: np.ndarray
    loss_start: int
    history_spans: tuple[tuple[int, int], ...] = ()


def _history_stretches(
    prompt: Pieces, messages: Sequence[dict], after: str
) -> tuple[tuple[int, int, int], ...]:
    """(piece index, first char, end char) of each earlier assistant message that opens with `after`:
    the text after it. A message is found as the piece that holds it whole (a chat template cuts
    messages apart at its control tokens)."""
    if not after:
        return ()
    contents = {
        m["content"].replace(_MARK_OPEN, "").replace(_MARK_CLOSE, "")
        for m in messages
        if m["role"] == "assistant" and m["content"].startswith(after)
    }
    out = []
    for i, piece in enumerate(prompt):
        at = piece.find(after) if isinstance(piece, str) else -1
        if at < 0:
            continue
        rest = piece[at:]
        content = rest if rest in contents else next((c for c in contents if rest.startswith(c)), None)
        if content is not None:
            out.append((i, at + len(after), at + len(content)))
    return tuple(out)


# Filters that change text: a template using any of them may transform contents in ways stand-ins
# do not show.
_REWRITING_FILTERS = frozenset(
    "upper lower title capitalize replace truncate wordwrap center indent striptags escape e "
    "urlencode format forceescape".split()
)
_EDGE_METHODS = frozenset({"strip", "lstrip", "rstrip"})


def _content_tests(tree: nodes.Template) -> tuple[set[str], bool]:
    """(the string constants a template tests or splits text with, whether stand-in rendering is sound).

    Constants in `in` tests and in method arguments (`startswith`, `split`, ...) are what a content
    may not hold; whitespace is only allowed as an argument of strip methods (contents with blank
    edges are never rendered by stand-ins)."""
    from jinja2 import nodes

    tested: set[str] = set()
    for f in tree.find_all(nodes.Filter):
        if f.name in _REWRITING_FILTERS:
            return set(), False
    for cmp in tree.find_all(nodes.Compare):
        for operand in cmp.ops:
            if operand.op in ("in", "notin"):
                for side in (cmp.expr, operand.expr):
                    if isinstance(side, nodes.Const) and isinstance(side.value, str):
                        tested.add(side.value)
    for call in tree.find_all(nodes.Call):
        method = call.node.attr if isinstance(call.node, nodes.Getattr) else ""
        for arg in call.args:
            if isinstance(arg, nodes.Const) and isinstance(arg.value, str):
                if arg.value.strip():
                    tested.add(arg.value)
                elif method not in _EDGE_METHODS:
                    return set(), False
    return {t for t in tested if t.strip()}, True


_SENTINELS = (("\ue010", "\ue011"), ("\ue012", "\ue013"))


class _FastRender:
    """The chat template rendered once per message layout (the roles in order), with stand-in contents,
    then filled in by string joins: a sample's rendering costs a join instead of a template run over
    its whole history. Only used where it provably gives the template's own text:

    - the layout renders each stand-in exactly once, in order, and two different stand-in families
      give the same literal text around them (the template does not transform or inspect content);
    - a content is not blank, does not start or end with whitespace (templates strip), and holds none
      of the template's string constants (templates test content for `</think>`, `<tool_response>`...).

    Anything else (other message keys, tools) goes through the template itself.
    """

    # Contents repeat within one trajectory's samples (each repeats the history before it), so a
    # memo of a few thousand serves; a larger one holds whole observations twice for nothing.
    def __init__(self, source: str, memo: int = 4096) -> None:
        tested, self.usable = _content_tests(_template_env().parse(source))
        self._unsafe = re.compile("|".join(map(re.escape, sorted(tested, key=len, reverse=True))) or "(?!)")
        self._layouts: dict[tuple, list[str] | None] = {}
        self._safe: dict[str, str | None] = {}
        self._memo = memo

    def _content(self, content: str, mark: Callable[[str], str]) -> str | None:
        done = self._safe.get(content, False)
        if done is False:
            if len(self._safe) >= self._memo:
                self._safe.clear()
            ok = content and not content[0].isspace() and not content[-1].isspace()
            done = self._safe[content] = mark(content) if ok and not self._unsafe.search(content) else None
        return done

    def _layout(self, roles: tuple[str, ...], generation: bool, slow: Callable) -> list[str] | None:
        key = (roles, generation)
        if key not in self._layouts:
            found: list[list[str]] = []
            for open_, close in _SENTINELS:
                stand_ins = [{"role": r, "content": f"{open_}{i}{close}"} for i, r in enumerate(roles)]
                text = slow(stand_ins, generation)
                parts = re.split(f"{open_}(\\d+){close}", text)
                if parts[1::2] != [str(i) for i in range(len(roles))]:
                    found = []
                    break
                found.append(parts[0::2])
            self._layouts[key] = found[0] if len(found) == 2 and found[0] == found[1] else None
        return self._layouts[key]

    def render(
        self, messages: list[dict], generation: bool, mark: Callable[[str], str], slow: Callable
    ) -> str | None:
        if not self.usable or any(
            len(m) != 2 or "role" not in m or not isinstance(m.get("content"), str) for m in messages
        ):
            return None
        contents = [self._content(m["content"], mark) for m in messages]
        if None in contents:
            return None
        parts = self._layout(tuple(m["role"] for m in messages), generation, slow)
        if parts is None:
            return None
        out = [parts[0]]
        for content, part in zip(contents, parts[1:], strict=True):
            out += (content, part)
        return "".join(out)


def _token_text(value: Any) -> str | None:
    return value.get("content") if isinstance(value, dict) else value
