"""Format: (split, Trajectory) -> SFT samples, CPT documents, RL prompts and AgentWorldBench records.

Every text comes from `schemas.render`, the renderer the world model uses at inference time. SFT and
RL prompts are trimmed (oldest turns first) to the sequence budget with real token counts: each
distinct message text of a trajectory is counted once, so the cost is linear in the trajectory even
though every turn's sample repeats the history.

Targets come in the form `--target` chose (`schemas.render.turn_target`): the whole observation, or
an edit script of the previous one. A script edits an observation the model must see, so a turn whose
previous observation was trimmed out of its prompt gets the whole observation as its target.

Verification turns (a verifier's recorded check, `schemas.verification_turns`) are SFT samples after
the trajectory's steps, rendered as the turns that follow them (the history holds the steps and the
turns before), so a world model learns to answer the checks a simulated verifier asks. They are never
steps: no RL prompt, no AgentWorldBench record, no step count (`total_turns`) includes them; the
dead-letter counter `verification_turns` counts their samples. `verification_turns=False` leaves them out.

History loss (on by default): an SFT sample trains the observations of its history too, the text after
`**Environment Observation:**` in each earlier assistant message. Those are the real observations of
the earlier turns, so one forward pass teaches every turn the sample holds, where the final answer
alone is a few hundred of its thousands of tokens. The header and the end of each message stay
untrained, so the answer form (`<predicted_observation>` tags, an edit script for delta targets) is
still learned from final answers only. Earlier turns appear in more samples than later ones, so they
weigh more per epoch; an echo sample's weight applies to its history too.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator

from apache_beam.pvalue import TaggedOutput

from beam_pipelines import dead_letter
from beam_pipelines.stages.common import (
    AGENTWORLDBENCH,
    AGENTWORLDBENCH_TASKS,
    CPT,
    EVAL_SPLIT,
    RL,
    SFT,
    Sample,
    shard_name,
    shard_of,
    shards_for,
)
from schemas.chat_tokens import shared_tokenizer
from schemas.records import Trajectory
from schemas.render import (
    OBSERVATION_HEADER,
    agentworldbench_record,
    cpt_document,
    is_echo_turn,
    record_messages,
    trajectory_system_prompt,
    turn_target,
)
from schemas.verification_turns import verification_turns, with_verification_turns

STAGE = "format"


class Formatter:
    """Formats one (split, trajectory) into tagged outputs: "sft" and "cpt" `Sample`s, "rl" and
    "agentworldbench" (relative path, record) pairs, and dead letters. The shard builder
    (`beam_pipelines.stages.shards`) runs it; corpora not in `emit` are not made."""

    def __init__(
        self,
        emit: tuple[str, ...],
        tokenizer: str | None,
        seq_len: int,
        shards: int,
        target: str = "full",
        verification_turns: bool = True,
        history_loss: bool = True,
    ) -> None:
        self._emit = emit
        self._history = OBSERVATION_HEADER if history_loss else ""
        self._verification_turns = verification_turns
        self._target = target
        self._seq_len = seq_len
        self._shards = shards
        self._tok = shared_tokenizer(tokenizer) if {SFT, RL} & set(self._emit) else None
        if self._tok is not None:
            # what the template adds around each message, measured once: the budget check adds it per message
            probe = [
                {"role": r, "content": c} for r, c in (("system", "a"), ("user", "b"), ("assistant", "c"))
            ]
            rendered = self._tok.render(probe)
            extra = len(self._tok.tokenizer.encode(rendered, add_special_tokens=False)) - 3
            self._per_message = math.ceil(extra / len(probe)) + 2

    def format(self, split: str, t: Trajectory) -> Iterator:
        if CPT in self._emit:
            dead_letter.count(STAGE, CPT)
            yield TaggedOutput(CPT, Sample(CPT, t.trajectory_id, split, t.domain, cpt_document(t)))
        turns = len(t.steps)
        if turns == 0:
            return
        # One system prompt per trajectory (its tools and initial state), shared by every turn's record.
        system = trajectory_system_prompt(t)
        records = [agentworldbench_record(t, k, system_str=system) for k in range(1, turns + 1)]
        if AGENTWORLDBENCH in self._emit and split == EVAL_SPLIT:
            dead_letter.count(STAGE, AGENTWORLDBENCH, turns)
            path = f"{AGENTWORLDBENCH}/{t.domain}_{EVAL_SPLIT}.jsonl"
            for record in records:
                yield TaggedOutput(AGENTWORLDBENCH, (path, record))
            tasks_path = f"{AGENTWORLDBENCH}/tasks/{t.domain}_{EVAL_SPLIT}.jsonl"
            yield TaggedOutput(AGENTWORLDBENCH_TASKS, (tasks_path, _task_record(t)))
        if self._tok is not None:
            yield from self._prompts(split, t, records)
            if SFT in self._emit and self._verification_turns and verification_turns(t):
                yield from self._verification_samples(split, t, system)

    def _verification_samples(self, split: str, t: Trajectory, system: str) -> Iterator:
        """SFT samples of the verification turns, the trajectory's steps as their history."""
        view = with_verification_turns(t)
        first = len(t.steps) + 1
        records = [
            agentworldbench_record(view, k, system_str=system) for k in range(first, len(view.steps) + 1)
        ]
        for tagged in self._prompts(split, view, records, first=first, corpora=(SFT,)):
            dead_letter.count(STAGE, "verification_turns", int(tagged.tag == SFT))
            yield tagged

    def _prompts(
        self,
        split: str,
        t: Trajectory,
        records: list[dict],
        first: int = 1,
        corpora: tuple[str, ...] = (SFT, RL),
    ) -> Iterator:
        """Samples of turns `first`.. of `t` (one record each, in order) for the `corpora` emitted."""
        turns = range(first, len(t.steps) + 1)
        full = [turn_target(t, k) for k in turns]
        chosen = full if self._target == "full" else [turn_target(t, k, self._target) for k in turns]
        texts = {records[0]["system_str"], *records[-1]["prompt"], *records[-1]["response"], *full, *chosen}
        counted = dict(zip(texts, self._tok.count(list(texts)), strict=True))
        n = shards_for(split, self._shards)
        rl_path = f"{RL}/{split}/{shard_name(t.domain, shard_of(t.trajectory_id, n), n)}.jsonl"
        for record, target, whole, step in zip(records, chosen, full, t.steps[first - 1 :], strict=True):
            fits = self._fits(counted, target)
            messages = record_messages(record, fits=fits)
            if target != whole and record["turn_idx"] > 1 and len(messages) == 2:
                # the previous observation the script edits is not in the prompt: the whole one it is
                target, fits = whole, self._fits(counted, whole)
                dead_letter.count(STAGE, "delta_without_previous")
                messages = record_messages(record, fits=fits)
            if not fits(messages):
                dead_letter.count(STAGE, "prompt_over_seq_len")
                yield TaggedOutput(
                    dead_letter.DEAD_LETTER,
                    dead_letter.DeadLetter(
                        STAGE,
                        "prompt_over_seq_len",
                        "system prompt + current turn exceed --seq-len",
                        "",
                        record["id"],
                    ),
                )
                continue
            echo = is_echo_turn(step)
            dead_letter.count(STAGE, "echo_turns", int(echo))
            if SFT in self._emit and SFT in corpora:
                dead_letter.count(STAGE, SFT)
                yield TaggedOutput(
                    SFT,
                    Sample(SFT, record["id"], split, t.domain, target, tuple(messages), echo, self._history),
                )
            if RL in self._emit and RL in corpora:
                dead_letter.count(STAGE, RL)
                yield TaggedOutput(RL, (rl_path, _rl_record(record, messages, step, t, split, echo)))

    def _fits(self, counted: dict[str, int], target: str) -> Callable[[list[dict]], bool]:
        """Whether prompt messages leave room in --seq-len for `target`."""
        budget = self._seq_len - counted[target] - self._per_message

        def fits(messages: list[dict]) -> bool:
            used = sum(counted[m["content"]] for m in messages) + self._per_message * len(messages)
            return used <= budget

        return fits


def _task_reward(t: Trajectory) -> dict:
    """The trajectory's task reward and which verifier gave it (None and "" when none ran)."""
    verification = t.outcome.verification
    return {"task_reward": t.outcome.reward, "task_verifier": verification.verifier if verification else ""}


def _task_record(t: Trajectory) -> dict:
    """The AgentWorldBench metadata of one trajectory: its records are ids `<trajectory_id>:<turn>`."""
    return {
        "trajectory_id": t.trajectory_id,
        "task": t.domain,
        "task_id": t.task.id,
        "instruction": t.task.instruction,
        "total_turns": len(t.steps),
        "outcome": t.outcome.status,
        **_task_reward(t),
    }


def _rl_record(record: dict, messages: list[dict], step, t: Trajectory, split: str, echo: bool) -> dict:
    """An RL prompt with what a verifier needs to score a predicted observation against the real one."""
    return {
        "id": record["id"],
        "trajectory_id": t.trajectory_id,
        "task_id": t.task.id,
        "domain": t.domain,
        "split": split,
        "turn_idx": record["turn_idx"],
        "total_turns": record["total_turns"],
        "messages": messages,
        "reference": step.observation.text,
        "reference_format": step.observation.format,
        "reference_data": step.observation.data,
        "action": {"kind": step.action.kind, "arguments": step.action.arguments, "text": step.action.text},
        "echo": echo,
        # the episode's own task reward: the outcome a trajectory-level RL reward can use
        **_task_reward(t),
    }
