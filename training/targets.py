"""Which answer form a world model was trained on (`schemas.edit_script.TARGET_FORMS`), and the full
observation its reply stands for.

A corpus built with `build_corpus --target delta` trains a model to write an edit script of the
previous observation wherever that is shorter. Training copies the corpus manifest's `target` into
the checkpoint's corpus.json (`training.bases.lineage`), and `training.export gguf` copies corpus.json
into the GGUF file's metadata, so the simulator and the fidelity evaluation read the form from the
model they are given. A model with no record (a base, a server's model name) answers in full.
"""

from __future__ import annotations

import json
import os

from schemas.edit_script import TARGET_FORMS, EditScriptError, apply
from training.backends.base import WorldModelBackend

GGUF_CORPUS_KEY = "agentworld.corpus"  # where training.export puts the checkpoint's corpus.json


def _gguf_corpus(path: str) -> dict | None:
    from gguf import GGUFReader

    field = GGUFReader(path).get_field(GGUF_CORPUS_KEY)
    return json.loads(bytes(field.parts[field.data[0]]).decode()) if field is not None else None


def trained_target(model: str) -> str:
    """The target form the model at `model` (a checkpoint or training run directory, or a GGUF file)
    was trained on; "full" when it has no record of one."""
    if os.path.isdir(model):
        # only here: training.bases imports torch, which a simulator over a server never needs
        from training.bases import trained_corpus
        from training.models import resolve_checkpoint

        corpus = trained_corpus(resolve_checkpoint(model))  # a run directory: its latest checkpoint
    elif model.endswith(".gguf") and os.path.isfile(model):
        corpus = _gguf_corpus(model)
    else:
        corpus = None
    form = (corpus or {}).get("target", "full")
    if form not in TARGET_FORMS:
        raise ValueError(f"{model} records target form {form!r}, not one of {TARGET_FORMS}")
    return form


def model_target(backend: WorldModelBackend) -> str:
    """The target form of the model behind `backend`, from the checkpoint or GGUF file it runs."""
    described = backend.describe()
    model = described.get("model") or described.get("model_path") or ""
    return trained_target(model) if isinstance(model, str) and model else "full"


def rebuild(previous: str, answer: str, domain: str, form: str) -> tuple[str, str]:
    """(the full observation, "") for a model answer of target form `form`, or (answer, the reason)
    when it is an edit script that does not apply to `previous`: a format failure, never a crash."""
    if form != "delta":
        return answer, ""
    try:
        return apply(previous, answer, domain), ""
    except EditScriptError as exc:
        return answer, f"the edit script does not apply to the previous observation: {exc}"


def answer_form(form: str, turn_idx: int, messages: list[dict]) -> str:
    """The form of the answer a model of target form `form` was trained to give for turn `turn_idx`
    prompted with `messages`: its own form, except that a delta model answers in full where the prompt
    lost the previous observation its edit script would edit (the corpus pipeline makes the same
    exception: beam_pipelines.stages.format)."""
    if form != "full" and turn_idx > 1 and len(messages) == 2:
        return "full"
    return form
