"""Simulated verdicts by likelihood (training/simulated_verify.py): the world model scores the answers a
real check could have recorded, and the likelier is the verdict. Real parts only: a bwrap terminal
records the checks, qwen3-tiny (a random-init Qwen3 with the real tokenizer, on transformers) scores
them, and the scores are recomputed here through the same backend from the recorder's own turns. The
llama.cpp path (a GGUF in the collector's process) runs in tests/collectors/test_simulated_backend.py."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from sandboxes.episode import Episode
from sandboxes.terminal import TerminalConfig, TerminalSandbox, command_action, make_backend
from sandboxes.terminal.check_turns import check_turns
from schemas.edit_script import HEADER
from schemas.records import (
    Environment,
    Observation,
    Outcome,
    Policy,
    Provenance,
    Step,
    Task,
    Trajectory,
    Verification,
)
from schemas.render import OPEN_TAG, chat_messages, turn_target
from schemas.verification_turns import verification_turn, verifier_action, verifier_observation
from tests.training.test_backends import scripted_chat_server
from tests.training.test_simulated_verify import check_world
from training.backends.base import GenerationConfig, WorldModelBackend
from training.backends.openai_http import OpenAIBackend
from training.backends.transformers_local import TransformersBackend
from training.simulated_verify import check_candidates
from training.simulator import SimulatedSandbox
from training.targets import answer_form

PROMPT = "agent@sandbox:~$"
CHECKS = ["test -f done.txt", "grep -qx 3 count.txt", "test -d missing"]
TASK = Task(id="checks", verifier={"kind": "command", "checks": CHECKS})
SIZE = TerminalConfig()  # the pane size both the real recorder and the candidates use


@pytest.fixture(scope="module")
def tiny() -> Iterator[TransformersBackend]:
    backend = TransformersBackend("qwen3-tiny")
    yield backend
    backend.close()


@pytest.fixture(scope="module")
def played() -> Iterator[Episode]:
    """A real bwrap episode whose three checks answer PASS, PASS, FAIL, with its recorded turns."""
    if shutil.which("bwrap") is None or shutil.which("tmux") is None:
        pytest.fail("bwrap and tmux are needed (apt-get install bubblewrap tmux)")
    sandbox = TerminalSandbox(TerminalConfig(backend=make_backend("bwrap")))
    sandbox.start()
    try:
        episode = Episode(sandbox, TASK, 10)
        episode.reset()
        for command in ["touch done.txt", "echo 3 > count.txt"]:
            episode.step(command_action(command))
        episode.end()
        episode.verify()
        yield episode
    finally:
        sandbox.close()


def trajectory(steps: list[Step], initial: Observation, task: Task, domain: str = "terminal") -> Trajectory:
    """The fields the renderer reads of an episode with these steps (verification turns included)."""
    now = datetime.now(UTC)
    environment = Environment(name=domain, backend="test")
    provenance = Provenance("test", "0", "host", now, now)
    return Trajectory(
        "t", domain, environment, task, Policy("scripted"), initial, steps, Outcome("completed"), provenance
    )


def rescored(backend: WorldModelBackend, view: Trajectory, k: int, form: str) -> tuple[float, int, str]:
    """(log-likelihood, tokens, answer) of turn k of `view` as the model of target form `form` was
    trained on it: the corpus's prompt and answer, scored again through the backend."""
    messages = chat_messages(view, k)
    answer = turn_target(view, k, answer_form(form, k, messages))
    ((nll, tokens),) = backend.log_likelihood([messages], [answer])
    return -nll, tokens, answer


def test_candidates_are_what_the_real_terminal_records(played: Episode) -> None:
    # typed one after another along the real words, the candidates are the recorded turns, exactly
    turns = played.outcome.verification.turns
    assert [t.info["passed"] for t in turns] == [True, True, False]
    screen = played.steps[-1].observation.text
    for turn in turns:
        candidates, added = check_candidates(screen, turn.info["check"])
        assert not added and list(candidates) == ["FAIL", "PASS"]
        chosen = candidates["PASS" if turn.info["passed"] else "FAIL"]
        assert chosen.text == turn.observation.text and chosen.format == turn.observation.format
        other = candidates["FAIL" if turn.info["passed"] else "PASS"]
        assert other.text.split("\n")[:-2] == chosen.text.split("\n")[:-2]  # only the word differs
        screen = chosen.text
    # a screen the model left without a prompt gets the episode's prompt on a line of its own
    command = "{ test -d missing; } >/dev/null 2>&1 && echo PASS || echo FAIL"
    candidates, added = check_candidates("", "test -d missing", f"hello\n{PROMPT}")
    assert added and candidates["FAIL"].text == f"{PROMPT} {command}\nFAIL\n{PROMPT}"
    candidates, added = check_candidates("garbage", "test -d missing", PROMPT)
    assert added and candidates["PASS"].text == f"garbage\n{PROMPT} {command}\nPASS\n{PROMPT}"
    assert check_candidates("no prompt at all", "test -d missing", "") == ({}, False)


@pytest.mark.parametrize("form", ["full", "delta"])
def test_a_terminal_check_verdict_is_the_likelier_recorded_answer(
    played: Episode, tiny: TransformersBackend, form: str
) -> None:
    sim = SimulatedSandbox(tiny, "terminal", target=form)
    sim.resume(TASK, played.initial, played.steps)  # the real episode is the history
    found = sim.verify(TASK, played.steps)
    assert found is not None and found.verifier == "simulated:command"
    details = found.details
    assert details["method"] == "likelihood" and "fallback" not in details
    said = [c["said"] for c in details["checks"]]
    assert set(said) <= {"PASS", "FAIL"} and details["decided"] == details["total"] == 3
    assert found.reward == said.count("PASS") / 3 and not found.error
    # each check's scores recomputed: the turn the real recorder would write had the checks before it
    # answered as the model chose, prompted and answered as the corpus trains it
    screen, n = played.steps[-1].observation.text, len(played.steps)
    for k, check in enumerate(details["checks"]):
        assert check["method"] == "likelihood" and set(check["log_likelihood"]) == {"PASS", "FAIL"}
        likelihood = check["log_likelihood"]
        assert check["said"] == ("PASS" if likelihood["PASS"] > likelihood["FAIL"] else "FAIL")
        for word in ("PASS", "FAIL"):
            words = [c["said"] for c in details["checks"][:k]] + [word]
            results = [
                {"command": c, "exit_code": None, "passed": w == "PASS"}
                for c, w in zip(CHECKS, words, strict=False)
            ]
            at = datetime.now(UTC)
            turns = check_turns(
                screen,
                results,
                width=SIZE.width,
                height=SIZE.height,
                first_index=n,
                started_at=at,
                elapsed_s=0,
            )
            view = trajectory([*played.steps, *turns], played.initial, TASK)
            score, tokens, answer = rescored(tiny, view, n + k + 1, form)
            assert check["tokens"][word] == tokens
            assert likelihood[word] == pytest.approx(score, rel=1e-4, abs=1e-3)
            assert answer.startswith(
                f"{OPEN_TAG}\n{HEADER}\n" if form == "delta" else f"{OPEN_TAG}\n{PROMPT}"
            )


def test_a_whole_verifier_verdict_is_the_likelier_recorded_reward(tiny: TransformersBackend) -> None:
    sim = SimulatedSandbox(tiny, "mcp")
    verifier = {"kind": "files", "files": {"a.txt": {"exists": True}}}
    task = Task(id="m", verifier=verifier)
    initial = sim.reset(task)
    found = sim.verify(task, [])
    assert found is not None and found.verifier == "simulated:files"
    likelihood = found.details["log_likelihood"]
    assert found.details["method"] == "likelihood" and set(likelihood) == {"0", "1"}
    best = 1.0 if likelihood["1"] > likelihood["0"] else 0.0
    assert found.reward == best and found.output == f"reward: {best:.4g}" and not found.error
    for reward in ("0", "1"):
        # the turn a real episode records for a verifier asked as a whole with this reward
        observation = verifier_observation(Verification(verifier="files", reward=float(reward)))
        assert observation.text == f"reward: {reward}"
        turn = verification_turn(0, verifier_action(verifier), observation, datetime.now(UTC), 0.0)
        view = trajectory([turn], initial, task, "mcp")
        score, tokens, _ = rescored(tiny, view, 1, "full")
        assert found.details["tokens"][reward] == tokens
        assert likelihood[reward] == pytest.approx(score, rel=1e-4, abs=1e-3)


def test_a_backend_that_cannot_score_falls_back_to_generation_and_says_so() -> None:
    with scripted_chat_server(check_world) as server:
        sim = SimulatedSandbox(OpenAIBackend(server.base_url))  # likelihood asked (the default)
        assert sim.verdicts == "likelihood" and sim.describe().config["verdicts"] == "likelihood"
        task = Task(
            id="t", verifier={"kind": "command", "checks": ["test -f done.txt", "test -f missing.txt"]}
        )
        sim.reset(task)
        found = sim.verify(task, [])
        assert found.details["method"] == "generation"
        assert found.details["fallback"].startswith("generation instead of likelihood: no weights")
        assert [(c["said"], c["method"]) for c in found.details["checks"]] == [
            ("PASS", "generation"),
            ("FAIL", "generation"),
        ]
        assert "log_likelihood" not in found.details["checks"][0] and found.reward == 0.5
        mcp = SimulatedSandbox(OpenAIBackend(server.base_url), "mcp")
        whole = Task(id="m", verifier={"kind": "files", "files": {"a.txt": {"exists": True}}})
        mcp.reset(whole)
        found = mcp.verify(whole, [])
        assert (found.reward, found.details["method"]) == (1.0, "generation")
        assert "no weights" in found.details["fallback"]


def test_generation_asked_on_a_backend_that_can_score(tiny: TransformersBackend) -> None:
    sim = SimulatedSandbox(
        tiny, "terminal", generation=GenerationConfig(max_new_tokens=4), verdicts="generation"
    )
    sim.reset(TASK)
    found = sim.verify(TASK, [])
    assert found.details["method"] == "generation" and "fallback" not in found.details
    assert all("log_likelihood" not in c for c in found.details["checks"])
    with pytest.raises(ValueError, match="verdicts must be one of"):
        SimulatedSandbox(tiny, verdicts="vote")


def test_a_check_the_terminal_refuses_has_no_verdict_by_likelihood_either(tiny: TransformersBackend) -> None:
    task = Task(id="t", verifier={"kind": "command", "checks": ["test -f a", "printf 'a\\n';\necho b"]})
    sim = SimulatedSandbox(tiny, "terminal")
    sim.reset(task)
    found = sim.verify(task, [])
    first, second = found.details["checks"]
    assert first["said"] in ("PASS", "FAIL") and "prompt_added" not in first
    assert second["said"] is None and "one line" in second["error"]
    assert found.details["decided"] == 1 and found.details["total"] == 2
