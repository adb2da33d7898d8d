"""Likelihood of the real observation, teacher-forced: did training make the real answer more likely?

For every turn (with `--held-out`, every held-out turn: `--max-turns` and `--limit-trajectories`
bound generation, not this), each system with weights scores the answer it was trained to give
(`schemas.render.turn_target`: the tagged real observation, or for a model trained on delta targets
its edit script of the previous observation) after the prompt teacher-forced generation
sends (`chat_messages`, the same context budget). Forward passes only
(`WorldModelBackend.log_likelihood`), so it is cheap enough for every turn where generating replies is
not (DESIGN.md 4d).

Two numbers per system and domain: NLL per answer token (its own tokenizer's tokens) and bits per byte
of the observation text (the answer's total NLL / ln 2 over the observation's UTF-8 bytes), which
compares models with different tokenizers. Bits per byte is pooled (total bits over total bytes), and
the paired cluster bootstrap (bootstrap.py) weighs each turn by its bytes, so a difference's estimate
is exactly the difference of the pooled values. A turn with an empty observation has no bytes to score
per and is left out of bits per byte.
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from tqdm import tqdm

from schemas.records import Trajectory
from schemas.render import chat_messages, turn_target
from training.backends.base import WorldModelBackend
from training.fidelity.bootstrap import LEVEL, RESAMPLES, SEED, paired_difference
from training.fidelity.cache import ReplyCache
from training.fidelity.comparison import difference_text, find_difference
from training.fidelity.teacher_forced import fits_chars
from training.targets import answer_form, model_target

# Pairs per backend call: enough to fill the backend's batches and hold a trajectory's turns together,
# small enough that a killed run keeps most of its cached scores.
CHUNK = 32
ROLE_ORDER = ("model", "compare", "base")


@dataclass(frozen=True)
class Turn:
    """One scored turn: the prompt and the observation's bytes (the denominator)."""

    trajectory: Trajectory
    turn_idx: int
    messages: list[dict]

    @property
    def domain(self) -> str:
        return self.trajectory.domain

    @property
    def observation_bytes(self) -> int:
        return len(self.trajectory.steps[self.turn_idx - 1].observation.text.encode())

    def answer(self, form: str) -> str:
        """The answer a model of target form `form` was trained to give here: the whole tagged
        observation, or an edit script of the previous one, except where the prompt lost that previous
        observation (the corpus pipeline makes the same exception: beam_pipelines.stages.format)."""
        return turn_target(self.trajectory, self.turn_idx, answer_form(form, self.turn_idx, self.messages))


def likelihood_turns(trajectories: Sequence[Trajectory], context_chars: int) -> list[Turn]:
    """Every turn of every trajectory, prompted as teacher-forced generation prompts it."""
    fits = fits_chars(context_chars)
    return [
        Turn(t, k, chat_messages(t, k, fits=fits)) for t in trajectories for k in range(1, len(t.steps) + 1)
    ]


def _key(describe: dict, messages: list[dict], answer: str) -> str:
    payload = json.dumps(["log_likelihood", describe, messages, answer], sort_keys=True)
    return hashlib.sha256(payload.encode()).hexdigest()


def score_system(
    backend: WorldModelBackend,
    turns: Sequence[Turn],
    cache: ReplyCache,
    *,
    describe: dict | None = None,
    progress: bool = False,
    desc: str = "likelihood",
    form: str = "full",
) -> list[dict] | str:
    """Per turn {domain, trajectory_id, turn_idx, nll, tokens, bytes}, or why the system has no
    likelihood (a backend without weights). `form`: the answer form the model was trained on
    (training.targets). Scores already in `cache` (same backend description, prompt and answer) are
    not computed again. `describe`: see CachedBackend."""
    describe = describe or backend.describe()
    pairs = [(turn.messages, turn.answer(form)) for turn in turns]
    keys = [_key(describe, messages, answer) for messages, answer in pairs]
    found = {k: json.loads(v) for k in keys if (v := cache.get(k)) is not None}
    # in turn order: the turns of one trajectory share most of their context, and a backend reuses
    # what consecutive pairs of one call share (a GPU backend sorts a call's pairs by length itself)
    missing = list({k: pair for k, pair in zip(keys, pairs, strict=True) if k not in found}.items())
    chunks = [missing[i : i + CHUNK] for i in range(0, len(missing), CHUNK)]
    for chunk in tqdm(chunks, desc=desc, unit=f"{CHUNK} turns", disable=not progress):
        try:
            scores = backend.log_likelihood([m for _, (m, _) in chunk], [a for _, (_, a) in chunk])
        except NotImplementedError as exc:
            return f"no likelihood: {exc}"
        for (key, _), (nll, tokens) in zip(chunk, scores, strict=True):
            found[key] = [nll, tokens]
            cache.put(key, json.dumps([nll, tokens]))
    return [
        {
            "domain": turn.domain,
            "trajectory_id": turn.trajectory.trajectory_id,
            "turn_idx": turn.turn_idx,
            "nll": found[key][0],
            "tokens": found[key][1],
            "bytes": turn.observation_bytes,
        }
        for key, turn in zip(keys, turns, strict=True)
    ]


def _pooled(rows: list[dict]) -> dict:
    tokens = sum(r["tokens"] for r in rows)
    with_bytes = [r for r in rows if r["bytes"]]
    total_bytes = sum(r["bytes"] for r in with_bytes)
    return {
        "turns": len(rows),
        "trajectories": len({r["trajectory_id"] for r in rows}),
        "tokens": tokens,
        "bytes": total_bytes,
        "nll_per_token": sum(r["nll"] for r in rows) / tokens if tokens else None,
        "bits_per_byte": sum(r["nll"] for r in with_bytes) / math.log(2) / total_bytes
        if total_bytes
        else None,
    }


def _bits_per_byte(rows: list[dict]) -> tuple[dict, dict]:
    """(per (trajectory, turn) its bits per byte, its bytes as the bootstrap weight)."""
    scored = [r for r in rows if r["bytes"]]
    return (
        {(r["trajectory_id"], r["turn_idx"]): r["nll"] / math.log(2) / r["bytes"] for r in scored},
        {(r["trajectory_id"], r["turn_idx"]): float(r["bytes"]) for r in scored},
    )


def summarise(
    scored: dict[str, list[dict]],
    roles: dict[str, str],
    skipped: dict[str, str],
    forms: dict[str, str] | None = None,
    *,
    resamples: int = RESAMPLES,
    seed: int = SEED,
) -> dict:
    """The report's likelihood section. `scored`: system -> its turn rows; `roles`: system -> model,
    compare or base; `skipped`: system -> why it has no likelihood; `forms`: system -> the answer form
    it was scored in (default full). Differences on bits per byte, per domain: the model minus the
    base and minus each --compare, and each --compare minus the base; below 0 means the first finds
    the real observations more likely."""
    names = sorted(scored, key=lambda n: (ROLE_ORDER.index(roles[n]), n))
    base = next((n for n in names if roles[n] == "base"), None)
    pairs = [(a, b) for i, a in enumerate(names) for b in names[i + 1 :]]
    domains = sorted({r["domain"] for rows in scored.values() for r in rows})
    out: dict = {
        # schemas.render.turn_target: the whole tagged observation, or for "delta" an edit script
        "answer": {n: (forms or {}).get(n, "full") for n in names},
        "systems": names,
        "roles": {n: roles[n] for n in names},
        "reference": base,
        "skipped": skipped,
        "bootstrap": {
            "resamples": resamples,
            "seed": seed,
            "level": LEVEL,
            "cluster": "trajectory",
            "weight": "observation bytes",
        },
        "overall": {n: _pooled(scored[n]) for n in names},
        "domains": {},
    }
    for domain in domains:
        rows = {n: [r for r in scored[n] if r["domain"] == domain] for n in names}
        values = {n: _bits_per_byte(rows[n]) for n in names}
        differences = []
        for a, b in pairs:
            if values[a][0] and values[b][0]:
                d = paired_difference(
                    values[a][0], values[b][0], weights=values[a][1], resamples=resamples, seed=seed
                )
                differences.append({"a": a, "b": b, **d.as_dict()})
        out["domains"][domain] = {
            "systems": {n: _pooled(rows[n]) for n in names},
            "differences": differences,
        }
    return out


class LikelihoodPass:
    """The fidelity CLI's likelihood pass over fixed turns: each system scores them while its weights
    are loaded for generation (one model in memory at a time), cached in `cache_path` for reruns."""

    def __init__(
        self,
        trajectories: Sequence[Trajectory],
        context_chars: int,
        cache_path: Path,
        progress: bool,
        note: str | None = None,
    ) -> None:
        self.note = note
        self.turns = likelihood_turns(trajectories, context_chars)
        self.trajectories = len(trajectories)
        self.cache = ReplyCache(cache_path)
        self.progress = progress
        self.scored: dict[str, list[dict]] = {}
        self.roles: dict[str, str] = {}
        self.skipped: dict[str, str] = {}
        self.forms: dict[str, str] = {}
        self.seconds = 0.0

    def score(self, name: str, role: str, backend: WorldModelBackend, describe: dict) -> None:
        started = time.monotonic()
        form = model_target(backend)
        found = score_system(
            backend,
            self.turns,
            self.cache,
            describe=describe,
            progress=self.progress,
            desc=f"{name} likelihood",
            form=form,
        )
        self.seconds += time.monotonic() - started
        if isinstance(found, str):
            self.skipped[name] = found
        else:
            self.scored[name], self.roles[name], self.forms[name] = found, role, form

    def section(self) -> dict:
        """The report's likelihood section (summarise), with the turns, trajectories and seconds."""
        return {
            **summarise(self.scored, self.roles, self.skipped, self.forms),
            "turns": len(self.turns),
            "trajectories": self.trajectories,
            "seconds": round(self.seconds, 1),
            "notes": [self.note] if self.note else [],
        }

    def close(self) -> None:
        self.cache.close()


CAPTION = (
    "Likelihood of the real observation, teacher-forced on every turn: bits per byte of the observation "
    "text (lower: the system finds the real answer more likely; comparable across tokenizers) and NLL "
    "per answer token, per system; each difference in bits per byte with its paired bootstrap 95% "
    "interval over trajectories (below 0: the first system is better); * marks an interval that "
    "excludes 0."
)


def shown_pairs(section: dict) -> list[tuple[str, str]]:
    """Every system against the base, and the model against each --compare (report.json: all pairs)."""
    names, base = section["systems"], section["reference"]
    pairs = [(n, base) for n in names if base is not None and n != base]
    if "model" in names:
        pairs += [("model", n) for n in names if section["roles"][n] == "compare"]
    return pairs


def likelihood_table(section: dict) -> tuple[list[str], list[list[str]]]:
    """(header, rows): per domain, turns, each system's bits per byte and NLL per token, and the shown
    differences in bits per byte."""
    names, pairs = section["systems"], shown_pairs(section)
    header = ["domain", "turns", *(f"{n} bits/byte" for n in names), *(f"{n} nll/token" for n in names)]
    header += [f"{a} - {b} bits/byte (95% CI)" for a, b in pairs]
    body = []
    for domain, entry in section["domains"].items():
        systems = entry["systems"]
        row = [domain, str(max(s["turns"] for s in systems.values()))]
        row += [_fmt(systems[n]["bits_per_byte"]) for n in names]
        row += [_fmt(systems[n]["nll_per_token"]) for n in names]
        row += [difference_text(find_difference(entry, a, b)) for a, b in pairs]
        body.append(row)
    return header, body


def likelihood_lines(section: dict) -> list[str]:
    """Plain sentences: the tally per shown pair, and the systems without a likelihood."""
    out = []
    for a, b in shown_pairs(section):
        found = [(d, find_difference(e, a, b)) for d, e in section["domains"].items()]
        found = [(d, diff) for d, diff in found if diff is not None]
        lower = [d for d, diff in found if diff["excludes_zero"] and diff["difference"] < 0]
        higher = [d for d, diff in found if diff["excludes_zero"] and diff["difference"] > 0]
        out.append(
            f"{a} vs {b}: fewer bits per byte in {len(lower)} of {len(found)} domains "
            f"({', '.join(lower) or 'none'}), more in {len(higher)} ({', '.join(higher) or 'none'}), "
            "by a 95% interval that excludes 0."
        )
    out += [
        f"{name} is scored on its {form} answers (edit scripts of the previous observation), per byte of "
        "the whole observation."
        for name, form in section["answer"].items()
        if form != "full"
    ]
    out += [f"{name}: {why}." for name, why in section["skipped"].items()]
    return out + section.get("notes", [])


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"
