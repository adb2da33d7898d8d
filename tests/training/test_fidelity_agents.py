"""Task-level sim-vs-real: the agreement math, the divergence turn and the report, on datasets written
here (so every number is known), read back from Parquet as `python -m training.fidelity agents` reads
a collector's; and its clear errors."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from schemas import TrajectoryWriter, read_trajectories
from schemas.records import Action, Environment, Observation, Outcome, Task, Trajectory, Verification
from tests.schemas.factories import trajectory as build_trajectory
from tests.training.conftest import OFFLINE, ROOT
from training.fidelity.__main__ import main as fidelity_main
from training.fidelity.agreement import cohens_kappa, confusion, verdict
from training.fidelity.episodes import (
    compare_datasets,
    first_divergence,
    observation_match,
    pair_key,
    pair_up,
)

NOW = datetime(2026, 1, 1, tzinfo=UTC)
SCREEN = "agent@sandbox:~$ {cmd}\n{out}\nagent@sandbox:~$"


def table(cells: dict[tuple[str, str], int]) -> list[tuple[str, str]]:
    return [pair for pair, count in cells.items() for _ in range(count)]


S, F = "success", "failure"


def test_kappa_of_known_tables() -> None:
    # 50 episodes: 20 both succeed, 15 both fail, 5 real-only, 10 sim-only successes.
    k = cohens_kappa(table({(S, S): 20, (S, F): 5, (F, S): 10, (F, F): 15}))
    # p_o = 35/50; p_e = (25*30 + 25*20) / 50^2 = 0.5; kappa = (0.7 - 0.5) / 0.5
    assert (k.n, k.observed_agreement, k.expected_agreement) == (50, 0.7, 0.5)
    assert k.value == pytest.approx(0.4) and not k.undefined
    assert cohens_kappa(table({(S, S): 3, (F, F): 2})).value == 1.0
    assert cohens_kappa(table({(S, F): 2, (F, S): 2})).value == -1.0
    # one side constant: chance agreement explains all the agreement there is
    one_sided = cohens_kappa(table({(S, S): 2, (S, F): 2}))
    assert one_sided.value == 0.0 and one_sided.expected_agreement == 0.5
    # `none` verdicts are not a category either side chose: left out of kappa
    with_none = cohens_kappa(table({(S, S): 20, (S, F): 5, (F, S): 10, (F, F): 15, ("none", S): 7}))
    assert with_none.n == 50 and with_none.value == pytest.approx(0.4)


def test_kappa_is_undefined_where_chance_explains_everything() -> None:
    same = cohens_kappa(table({(S, S): 4}))
    assert same.value is None and same.observed_agreement == 1.0 and same.expected_agreement == 1.0
    assert "both sides said success on all 4 episodes" in same.undefined
    empty = cohens_kappa(table({("none", S): 2, (F, "none"): 1}))
    assert (empty.value, empty.n) == (None, 0) and "no episode has a reward on both sides" in empty.undefined


def test_verdicts_and_confusion_keep_none_apart() -> None:
    assert [verdict(r, 1.0) for r in (1.0, 0.99, None, 1.5)] == [S, F, "none", S]
    assert verdict(0.5, 0.5) == S
    matrix = confusion([(S, S), (S, "none"), ("none", "none"), (S, S)])
    assert matrix[S] == {S: 2, F: 0, "none": 1} and matrix["none"]["none"] == 1 and matrix[F][F] == 0


def episode(
    task_id: str,
    slot: int,
    commands: list[str],
    outputs: list[str],
    reward: float | None = 1.0,
    simulated: bool = False,
    status: str = "completed",
) -> Trajectory:
    steps = [
        (Action("command", {"command": c}, c), Observation("terminal_screen", SCREEN.format(cmd=c, out=o)))
        for c, o in zip(commands, outputs, strict=True)
    ]
    verifier = "simulated:command" if simulated else "command"
    details = {"method": "likelihood"} if simulated else {}
    verification = Verification(
        verifier, reward, error="" if reward is not None else "no verdict", details=details
    )
    return build_trajectory(
        steps,
        trajectory_id=f"terminal-s0-{slot:06d}-{'sim' if simulated else 'real'}",
        environment=Environment("terminal", "simulator" if simulated else "bwrap"),
        task=Task(id=task_id, metadata={"slot": slot, "episode": 0}, verifier={"kind": "command"}),
        initial=Observation("terminal_screen", "agent@sandbox:~$"),
        outcome=Outcome(status, reward=reward, verification=verification),
        collector="collectors.terminal",
        simulated=simulated,
        at=NOW,
    )


LS = ["ls", "cat notes.txt", "wc -l notes.txt"]
OUT = ["notes.txt", "buy milk\nwater the plants", "2 notes.txt"]


def test_first_divergence_by_action_observation_and_length() -> None:
    real = episode("t", 0, LS, OUT)
    same = first_divergence(real, episode("t", 0, LS, OUT, simulated=True))
    assert (same.turn, same.kind, same.action_turn) == (None, "none", None) and same.scores == [1.0] * 3
    other_action = episode("t", 0, [*LS[:2], "wc -c notes.txt"], OUT, simulated=True)
    found = first_divergence(real, other_action)
    assert (found.turn, found.kind, found.action_turn) == (3, "action", 3) and len(found.scores) == 2
    wrong_screen = "Segmentation fault (core dumped) while reading an unrelated long file name"
    invented = episode("t", 0, LS, [OUT[0], wrong_screen, OUT[2]], simulated=True)
    found = first_divergence(real, invented)
    assert (found.turn, found.kind, found.action_turn) == (2, "observation", None)
    assert found.scores[1] < 0.8 and found.scores[2] == 1.0
    # a wrong screen and later other actions: the observation came first
    both = episode("t", 0, [*LS[:2], "pwd"], [OUT[0], wrong_screen, "/home"], simulated=True)
    assert (first_divergence(real, both).turn, first_divergence(real, both).action_turn) == (2, 3)
    shorter = first_divergence(real, episode("t", 0, LS[:1], OUT[:1], simulated=True))
    assert (shorter.turn, shorter.kind) == (2, "length")
    # the match is the domain's main metric: terminal's is edit similarity
    assert observation_match("terminal", "abcd", "abce") == pytest.approx(0.75)


def write(root: Path, trajectories: list[Trajectory]) -> str:
    writer = TrajectoryWriter(str(root))
    for t in trajectories:
        writer.write(t)
    writer.close()
    return str(root)


def datasets(tmp_path: Path) -> tuple[str, str]:
    """Four paired episodes and one unpaired on each side, with every number of the report known:
    rewards (real, sim) = (1, 1), (1, 0), (0, 0), (1, None); steps (3, 3), (3, 3), (3, 1), (3, 3)."""
    real = [
        episode("a", 0, LS, OUT),
        episode("b", 1, LS, OUT),
        episode("c", 2, LS, OUT, reward=0.0),
        episode("d", 3, LS, OUT, status="truncated"),
        episode("e", 4, LS, OUT),
    ]
    sim = [
        episode("a", 0, LS, OUT, simulated=True),
        episode("b", 1, [*LS[:2], "pwd"], OUT, reward=0.5, simulated=True),
        episode("c", 2, LS[:1], OUT[:1], reward=0.0, simulated=True),
        episode(
            "d", 3, LS, [OUT[0], "nothing like it at all, not one bit", OUT[2]], reward=None, simulated=True
        ),
        episode("f", 5, LS, OUT, simulated=True),
    ]
    return write(tmp_path / "real", real), write(tmp_path / "sim", sim)


def test_compare_datasets_read_back_from_parquet(tmp_path: Path) -> None:
    real_path, sim_path = datasets(tmp_path)
    domains, rows = compare_datasets(read_trajectories(real_path), read_trajectories(sim_path))
    assert [r["task_id"] for r in rows] == ["a", "b", "c", "d"]
    t = domains["terminal"]
    assert (
        t["pairs"] == 4
        and t["real_only"] == [["terminal", "e", "4"]]
        and t["sim_only"] == [["terminal", "f", "5"]]
    )
    reward = t["reward"]
    assert reward["confusion"][S] == {S: 1, F: 1, "none": 1} and reward["confusion"][F] == {
        S: 0,
        F: 1,
        "none": 0,
    }
    # (S,S), (S,F), (F,F): p_o 2/3, p_e (2*1 + 1*2)/9 = 4/9, kappa (2/3 - 4/9) / (5/9) = 0.4
    assert reward["kappa"]["n"] == 3 and reward["kappa"]["value"] == pytest.approx(0.4)
    assert reward["mean_real"] == pytest.approx(2 / 3) and reward["mean_sim"] == pytest.approx(0.5)
    assert reward["sim_verdict_methods"] == {"likelihood": 4}
    assert reward["sim_verifiers"] == {"simulated:command": 4} and reward["sim_none_reasons"] == {
        "no verdict": 1
    }
    steps = t["steps"]
    assert (steps["real_mean"], steps["sim_mean"]) == (3.0, 2.5)
    assert steps["difference"]["difference"] == -0.5 and steps["difference"]["trajectories"] == 4
    assert (steps["equal"], steps["sim_shorter"], steps["sim_longer"]) == (3, 1, 0)
    assert steps["real_status"] == {"completed": 3, "truncated": 1}
    div = t["divergence"]
    assert div["by_kind"] == {"action": 1, "observation": 1, "length": 1, "none": 1}
    assert [r["divergence"]["turn"] for r in rows] == [None, 3, 2, 2]
    assert div["turn_mean"] == pytest.approx(7 / 3) and div["turn_median"] == 2.0
    assert div["undiverged_after"] == {"1": 1.0, "2": 0.5, "3": 0.25}
    assert div["match_by_turn"]["1"] == {"pairs": 4, "mean": 1.0}
    assert div["match_by_turn"]["3"]["pairs"] == 2 and div["metric"] == ["edit_similarity"]
    # same-action turns: a 3 (all right), b 2 (actions differ at 3), c 1, d 3 (turn 2 invented): 8 of 9
    assert [r["single_step"] for r in rows] == [
        {"turns": 3, "right": 3, "measured": 0},
        {"turns": 2, "right": 2, "measured": 0},
        {"turns": 1, "right": 1, "measured": 0},
        {"turns": 3, "right": 2, "measured": 0},
    ]
    numbers = t["numbers"]
    assert numbers["single_step"] == {
        "turns": 9,
        "right": 8,
        "accuracy": 8 / 9,
        "turns_with_replay_spans": 0,
    }
    # rated on both sides: a (S, S), b (S, F), c (F, F): real 2/3, simulated 1/3
    success = numbers["success"]
    assert (success["rated"], success["real_successes"], success["sim_successes"]) == (3, 2, 1)
    assert (success["real_rate"], success["sim_rate"]) == (2 / 3, 1 / 3)
    assert success["inflation"]["difference"] == pytest.approx(-1 / 3)
    assert numbers["wm2real"] == {
        "replayed": 0,
        "rewarded": 0,
        "successes": 0,
        "success_rate": None,
        "none_reasons": {},
    }


def run_agents(*argv: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "training.fidelity", "agents", *argv]
    return subprocess.run(command, cwd=ROOT, env=OFFLINE, capture_output=True, text=True, timeout=120)


def test_cli_on_recorded_datasets_writes_the_report(tmp_path: Path) -> None:
    real_path, sim_path = datasets(tmp_path)
    out = tmp_path / "report"
    done = run_agents("--real-data", real_path, "--sim-data", sim_path, "--out", str(out), "--no-wm2real")
    assert done.returncode == 0, done.stderr
    assert "terminal: 4 paired episodes" in done.stdout and "Cohen's kappa 0.400 over 3" in done.stdout
    report = json.loads((out / "report.json").read_text())
    assert report["domains"]["terminal"]["reward"]["kappa"]["value"] == pytest.approx(0.4)
    assert len(report["episodes"]) == 4 and report["meta"]["policy"] == ["scripted"]
    assert any("1 real and 1 simulated episodes have no partner" in n for n in report["notes"])
    assert any("WM2Real was not run (--no-wm2real)" in n for n in report["notes"])
    assert (
        "terminal: simulated verdicts reached by likelihood 4 (training/simulated_verify.py)."
        in report["notes"]
    )
    assert (
        "scripted: single-step accuracy 0.889 (8/9); success real 0.667 (2/3), sim 0.333 (1/3)" in done.stdout
    )
    md = (out / "report.md").read_text()
    for heading in (
        "## terminal: 4 paired episodes",
        "### Three numbers",
        "### Task reward",
        "### Steps to the end",
        "### Divergence",
    ):
        assert heading in md
    assert "| success | 1 | 1 | 1 |" in md
    assert "<table>" in (out / "report.html").read_text()


def test_a_degenerate_table_has_no_kappa_and_says_why(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    real = write(tmp_path / "real", [episode("a", 0, LS, OUT), episode("b", 1, LS, OUT)])
    sim = write(tmp_path / "sim", [episode(t, n, LS, OUT, simulated=True) for n, t in enumerate("ab")])
    argv = ["agents", "--real-data", real, "--sim-data", sim, "--out", str(tmp_path / "r"), "--no-wm2real"]
    assert fidelity_main(argv) == 0
    report = json.loads((tmp_path / "r" / "report.json").read_text())
    kappa = report["domains"]["terminal"]["reward"]["kappa"]
    assert kappa["value"] is None and kappa["observed_agreement"] == 1.0
    assert any("kappa is undefined: both sides said success on all 2 episodes" in n for n in report["notes"])
    assert "Cohen's kappa: undefined" in capsys.readouterr().out
    assert "Cohen's kappa: undefined" in (tmp_path / "r" / "report.md").read_text()


def test_clear_errors(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    def agents(*argv: str) -> tuple[int, str]:
        code = fidelity_main(["agents", *argv])
        return code, capsys.readouterr().err

    real_path, _ = datasets(tmp_path)
    other = write(tmp_path / "other", [episode("z", 9, LS, OUT, simulated=True)])
    code, err = agents("--real-data", real_path, "--sim-data", other, "--out", str(tmp_path / "r"))
    assert code == 2 and "has a partner" in err
    empty = tmp_path / "empty.jsonl"
    empty.write_text("not json\n")
    endpoint = ("--model-endpoint", "http://127.0.0.1:9/v1")
    code, err = agents(
        "--policy", "scripted", "--tasks", str(empty), *endpoint, "--out", str(tmp_path / "r2")
    )
    assert code == 2 and f"no valid tasks in {empty}" in err
    with pytest.raises(SystemExit):
        agents("--policy", "scripted", "--out", str(tmp_path / "r3"))
    assert "needs --model-endpoint" in capsys.readouterr().err
    # a collector that fails: its own stderr comes back
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(json.dumps({"id": "t", "actions": [{"command": "true"}]}) + "\n")
    bad = "--collector-arg=--no-such-option"
    code, err = agents(
        "--policy", "scripted", "--tasks", str(tasks), *endpoint, bad, "--out", str(tmp_path / "r4")
    )
    assert code == 2 and "collectors.terminal exited with 2" in err
    assert "unrecognized arguments: --no-such-option" in err
    # once episodes are recorded, the same --out with other settings is refused: a resume would mix
    # two runs' episodes (nothing was recorded in r4 yet, so its next run could still change them)
    write(tmp_path / "r4" / "real", [episode("t", 0, LS, OUT)])
    code, err = agents(
        "--policy", "explorer", "--tasks", str(tasks), *endpoint, "--out", str(tmp_path / "r4")
    )
    assert code == 2 and "holds a run with other settings (real, sim)" in err
    with pytest.raises(SystemExit):
        agents("--help")
    help_text = capsys.readouterr().out
    assert "examples:" in help_text and "--real-data" in help_text


def test_pairs_follow_the_slot_order_and_a_slot_twice_is_refused() -> None:
    real = [episode("t", n, LS[:1], OUT[:1]) for n in (10, 2, 1)]
    sim = [episode("t", n, LS[:1], OUT[:1], simulated=True) for n in (1, 10, 2)]
    pairs, real_only, sim_only = pair_up(real, sim)
    assert [r.task.metadata["slot"] for r, _ in pairs] == [1, 2, 10] and real_only == sim_only == []
    assert all(pair_key(r) == pair_key(s) for r, s in pairs)
    with pytest.raises(ValueError, match="two episodes of task 't' slot 2 in one dataset"):
        pair_up([*real, episode("t", 2, LS, OUT)], sim)


def test_the_simulated_run_takes_a_gguf_and_a_verdict_method(tmp_path: Path, capsys) -> None:
    from training.fidelity.agents import collector_argv, parse_args

    common = ["--policy", "scripted", "--out", str(tmp_path)]
    args = parse_args([*common, "--model-gguf", "m.gguf", "--simulated-verdicts", "generation"])
    sim = collector_argv(args, "scripted", "sim")
    assert sim[sim.index("--backend") :][:6] == [
        "--backend", "simulator", "--model-gguf", "m.gguf", "--simulated-verdicts", "generation",
    ]  # fmt: skip
    assert "--model-gguf" not in collector_argv(args, "scripted", "real")
    # the collector's own default (likelihood) unless asked: a plan recorded before stays the same
    sim = collector_argv(parse_args([*common, "--model-endpoint", "http://x/v1"]), "scripted", "sim")
    assert "--simulated-verdicts" not in sim and sim[sim.index("--model-endpoint") + 1] == "http://x/v1"
    with pytest.raises(SystemExit):
        parse_args([*common, "--model-gguf", "m.gguf", "--model-endpoint", "http://x/v1"])
    assert (
        "--model-endpoint URL (e.g. http://127.0.0.1:8000/v1) or --model-gguf PATH" in capsys.readouterr().err
    )
