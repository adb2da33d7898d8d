"""Training and inference render the same tokens.

For every domain's system prompt, the ids the corpus pipeline writes for an SFT sample are the ids the
simulator sends the model for the same turn (`schemas.render.chat_messages`, then the Hugging Face
tokenizer's `apply_chat_template` with the generation prompt, as training/backends build them),
followed by the assistant target; the loss starts exactly where the inference prompt ends.
"""

from __future__ import annotations

from transformers import AutoTokenizer

from beam_pipelines.stages.common import SFT
from beam_pipelines.stages.shards import BuildShards
from schemas.domains import KNOWN_DOMAINS
from schemas.render import chat_messages, target_text
from schemas.tokenizer_files import default_tokenizer_dir
from tests.beam_pipelines.conftest import documents, parked, pipeline, variant


def _in_domain(domain: str):
    def edit(t) -> None:
        t.domain = domain

    return edit


def test_written_sft_ids_are_the_simulator_prompt_ids_plus_the_target(recorded, tmp_path):
    base = max(recorded[:6], key=lambda t: len(t.steps))
    trajectories = [variant(base, f"{domain}-0001", _in_domain(domain)) for domain in sorted(KNOWN_DOMAINS)]
    with pipeline() as p:
        refs = parked(p, [("train", t) for t in trajectories], tmp_path)
        _ = refs | BuildShards(str(tmp_path), (SFT,), seq_len=32768, shards=1)
    written = documents(tmp_path, SFT)
    hf = AutoTokenizer.from_pretrained(default_tokenizer_dir(), local_files_only=True)

    def ids(messages: list[dict], generation: bool) -> list[int]:
        text = hf.apply_chat_template(messages, add_generation_prompt=generation, tokenize=False)
        return hf(text, add_special_tokens=False)["input_ids"]

    systems = set()
    for t in trajectories:
        for k, step in enumerate(t.steps, start=1):
            messages = chat_messages(t, k)
            systems.add(messages[0]["content"])
            prompt = ids(messages, generation=True)
            full = ids([*messages, {"role": "assistant", "content": target_text(step.observation)}], False)
            got, mask = written[f"{t.trajectory_id}:{k}"]
            assert got == full, (t.domain, k)
            assert got[: len(prompt)] == prompt, (t.domain, k)
            # the final target is trained from the first token the simulator generates
            assert mask[len(prompt) - 1] == 0 and all(mask[len(prompt) :]), (t.domain, k)
    assert len(systems) == len(KNOWN_DOMAINS)  # every domain's own system prompt was covered
