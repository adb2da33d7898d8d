"""The three task-level numbers of `python -m training.fidelity agents` (single-step accuracy, success
in the simulator vs for real, WM2Real), recomputed here from the datasets: the real ones from a REAL
bwrap terminal collection (the terminal collector's scripted policy, as a subprocess), the simulated
ones written here from them with known changes; and the rank correlation and inflation over three
policies' datasets whose rates are known."""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from sandboxes.terminal import command_action
from schemas import TrajectoryWriter, read_trajectories
from schemas.records import Environment, Observation, Outcome, Policy, Step, Trajectory, Verification
from tests.training.conftest import OFFLINE, ROOT
from tests.training.test_fidelity_agents import LS, OUT, episode
from training.fidelity.agents import WM2REAL_FILE
from training.fidelity.agreement import cohens_kappa
from training.fidelity.bootstrap import paired_difference
from training.fidelity.task_numbers import spearman
from training.fidelity.wm2real import Wm2RealStore, replay_and_verify, run_wm2real

DEMO_TASKS = ROOT / "collectors" / "terminal" / "tasks.jsonl"
# A task of our own whose first screen differs between any two real runs (nanoseconds of the clock):
# the turn single-step accuracy can only score fairly with a real replay's volatile spans.
STAMP = {
    "id": "stamp",
    "instruction": "Print the clock in nanoseconds, then leave a done.txt.",
    "actions": [{"command": "date +%s%N"}, {"command": "touch done.txt"}],
    "setup": [],
    "verifier": {"kind": "command", "checks": ["test -f done.txt"]},
}
NANOS = re.compile(r"^\d{19}$", re.MULTILINE)


def run_module(*argv: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, "-m", *argv], cwd=ROOT, env=OFFLINE, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done


@pytest.fixture(scope="module")
def real_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Trajectory]:
    """Two demo tasks and STAMP played by the scripted policy in real bwrap sandboxes: {task id: episode}."""
    if shutil.which("bwrap") is None or shutil.which("tmux") is None:
        pytest.fail("bwrap and tmux are needed (apt-get install bubblewrap tmux)")
    root = tmp_path_factory.mktemp("real_run")
    demo = {t["id"]: t for t in map(json.loads, DEMO_TASKS.read_text().splitlines()) if t.get("id")}
    tasks = root / "tasks.jsonl"
    chosen = [demo["files-create-notes"], demo["files-rename"], STAMP]
    tasks.write_text("".join(json.dumps(t) + "\n" for t in chosen))
    run_module(
        "collectors.terminal", "--policy", "scripted", "--tasks", str(tasks), "--backend", "bwrap",
        "--max-steps", "4", "--no-progress", "--out", str(root / "real"),
    )  # fmt: skip
    found = {t.task.id: t for t in read_trajectories(str(root / "real"))}
    assert sorted(found) == ["files-create-notes", "files-rename", "stamp"]
    assert all(t.outcome.reward == 1.0 and t.environment.backend == "bwrap" for t in found.values())
    assert [len(found[i].steps) for i in ("files-create-notes", "files-rename", "stamp")] == [2, 2, 2]
    return found


def simulated(real: Trajectory, steps: list[Step], reward: float | None) -> Trajectory:
    """`real` as a simulated run would have recorded it: the simulator, the world model's verdict."""
    return dataclasses.replace(
        real,
        trajectory_id=f"{real.trajectory_id}-sim",
        environment=Environment("terminal", "simulator", config={"backend": "openai", "model": "wm"}),
        steps=steps,
        outcome=Outcome("completed", reward=reward, verification=Verification("simulated:command", reward)),
        provenance=dataclasses.replace(real.provenance, simulated=True),
    )


def with_text(step: Step, text: str) -> Step:
    return dataclasses.replace(step, observation=dataclasses.replace(step.observation, text=text))


def simulated_run(real: dict[str, Trajectory]) -> list[Trajectory]:
    """notes: the real actions, its second screen wrong (a fourth line for the third), judged a failure;
    rename: another action that renames nothing, judged a success; stamp: the real actions, the clock
    screen holding other nanoseconds (right: the clock is volatile), judged a success."""
    notes, rename, stamp = real["files-create-notes"], real["files-rename"], real["stamp"]
    cat = notes.steps[1].observation.text
    assert "\nthird\n" in cat  # the file's last line, shown by `cat` (the typed printf names it too)
    head, _, tail = cat.rpartition("\nthird\n")
    wrong_cat = [notes.steps[0], with_text(notes.steps[1], f"{head}\nfourth\n{tail}")]
    screen = "agent@sandbox:~$ ls notes\nideas-2024.md  meeting-2024-05-01.txt  todo.txt\nagent@sandbox:~$"
    ls = Step(
        0, command_action("ls notes"), Observation("terminal_screen", screen), notes.steps[0].started_at, 0.0
    )
    clock = stamp.steps[0].observation.text
    assert len(NANOS.findall(clock)) == 1
    other_clock = NANOS.sub("1700000000123456789", clock)
    return [
        simulated(notes, wrong_cat, 0.0),
        simulated(rename, [ls], 1.0),
        simulated(stamp, [with_text(stamp.steps[0], other_clock), stamp.steps[1]], 1.0),
    ]


def write(root: Path, trajectories: list[Trajectory]) -> str:
    writer = TrajectoryWriter(str(root))
    for t in trajectories:
        writer.write(t)
    writer.close()
    return str(root)


@pytest.mark.bwrap
@pytest.mark.tmux
def test_wm2real_replays_the_simulated_actions_in_a_real_bwrap_terminal(
    real_run: dict[str, Trajectory], tmp_path: Path
) -> None:
    rename = real_run["files-rename"]
    solved = replay_and_verify(rename, [s.action for s in rename.steps])
    assert (solved.reward, solved.status, solved.steps, solved.verifier) == (1.0, "completed", 2, "command")
    assert solved.observations[0].endswith(
        "agent@sandbox:~$ mv notes/ideas.md notes/ideas-2024.md\nagent@sandbox:~$"
    )
    assert "ideas-2024.md" in solved.observations[1] and solved.error == ""
    # `ls` renames nothing: the real verifier's checks fail (the file is still ideas.md)
    unsolved = replay_and_verify(rename, [command_action("ls notes")])
    assert (unsolved.reward, unsolved.steps, unsolved.verifier) == (0.0, 1, "command")
    assert "ideas.md" in unsolved.observations[0]
    # the store: a second run reads the replay back instead of replaying
    sim = simulated(rename, list(rename.steps), 1.0)
    store = Wm2RealStore(tmp_path / "wm2real.jsonl")
    first = run_wm2real([(rename, sim)], store)
    lines = (tmp_path / "wm2real.jsonl").read_text().splitlines()
    assert len(lines) == 1 and first[sim.trajectory_id].reward == 1.0
    again = run_wm2real([(rename, sim)], Wm2RealStore(tmp_path / "wm2real.jsonl"))
    assert again == first and (tmp_path / "wm2real.jsonl").read_text().splitlines() == lines


@pytest.mark.bwrap
@pytest.mark.tmux
def test_three_numbers_recomputed_from_the_datasets(real_run: dict[str, Trajectory], tmp_path: Path) -> None:
    real_path = write(tmp_path / "real", list(real_run.values()))
    sim_path = write(tmp_path / "sim", simulated_run(real_run))
    out = tmp_path / "report"
    done = run_module("training.fidelity", "agents", "--real-data", real_path, "--sim-data", sim_path,
                      "--out", str(out), "--wm2real-workers", "1")  # fmt: skip
    report = json.loads((out / "report.json").read_text())
    rows = {r["task_id"]: r for r in report["episodes"]}
    # WM2Real: the real verifier on the simulated actions, replayed for real
    assert {t: r["wm2real"]["reward"] for t, r in rows.items()} == {
        "files-create-notes": 1.0,  # the real actions: they solve it
        "files-rename": 0.0,  # `ls notes` renames nothing
        "stamp": 1.0,
    }
    # single-step: the turns before the actions differ; the stamp's clock is volatile between the real
    # run and its replay, so other nanoseconds are right; notes' invented fourth line is not
    replays = [json.loads(line)["result"] for line in (out / WM2REAL_FILE).read_text().splitlines()]
    stamp_replay = next(r for r in replays if "touch done.txt" in r["observations"][-1])
    assert NANOS.findall(stamp_replay["observations"][0]) != NANOS.findall(
        real_run["stamp"].steps[0].observation.text
    )
    assert {t: r["single_step"] for t, r in rows.items()} == {
        "files-create-notes": {"turns": 2, "right": 1, "measured": 2},
        "files-rename": {"turns": 0, "right": 0, "measured": 0},
        "stamp": {"turns": 2, "right": 2, "measured": 2},
    }
    numbers = report["domains"]["terminal"]["numbers"]
    assert numbers["single_step"] == {"turns": 4, "right": 3, "accuracy": 0.75, "turns_with_replay_spans": 4}
    # success: every real episode succeeded; the simulator said success for rename and stamp only
    verdicts = [("success", "failure"), ("success", "success"), ("success", "success")]
    success = numbers["success"]
    assert (success["rated"], success["real_rate"], success["sim_rate"]) == (3, 1.0, 2 / 3)
    sim = {(t, f"scripted/{r['slot']}"): float(r["sim"]["reward"]) for t, r in rows.items()}
    real = dict.fromkeys(sim, 1.0)
    assert success["inflation"] == paired_difference(sim, real).as_dict()
    assert success["inflation"]["difference"] == pytest.approx(-1 / 3)
    assert report["domains"]["terminal"]["reward"]["kappa"] == cohens_kappa(verdicts).as_dict()
    assert numbers["wm2real"] == {
        "replayed": 3,
        "rewarded": 3,
        "successes": 2,
        "success_rate": 2 / 3,
        "none_reasons": {},
    }
    # one policy: the per-policy table is the pooled one, and no rank correlation
    assert report["policies"]["scripted"]["domains"]["terminal"]["numbers"] == numbers
    assert (
        report["across_policies"]["terminal"]["spearman"]["undefined"]
        == "1 policies: a rank correlation needs 3"
    )
    line = "scripted: single-step accuracy 0.750 (3/4); success real 1.000 (3/3), sim 0.667 (2/3), "
    line += "inflation -0.333"
    assert line in done.stdout and "WM2Real 0.667 (2/3) of 3 replayed" in done.stdout
    md = (out / "report.md").read_text()
    assert "| scripted | 3 | 0.750 (3/4) | 4 | 1.000 (3/3) | 0.667 (2/3) | -0.333 [" in md
    # without the replays there is no WM2Real, and the clock counts as wrong: every span is stable
    bare = tmp_path / "bare"
    run_module("training.fidelity", "agents", "--real-data", real_path, "--sim-data", sim_path,
               "--out", str(bare), "--no-wm2real")  # fmt: skip
    bare_numbers = json.loads((bare / "report.json").read_text())["domains"]["terminal"]["numbers"]
    assert bare_numbers["single_step"] == {
        "turns": 4,
        "right": 2,
        "accuracy": 0.5,
        "turns_with_replay_spans": 0,
    }
    assert bare_numbers["wm2real"]["replayed"] == 0 and not (bare / WM2REAL_FILE).exists()


def policy_run(policy: str, real_rewards: list[float], sim_rewards: list[float]) -> tuple[list, list]:
    """One policy's episodes of tasks t0..t3 (one slot each), with the given rewards."""

    def one(task: int, reward: float, simulated: bool) -> Trajectory:
        t = episode(f"t{task}", task, LS, OUT, reward=reward, simulated=simulated)
        return dataclasses.replace(t, policy=Policy(policy))

    real = [one(k, r, False) for k, r in enumerate(real_rewards)]
    sim = [one(k, r, True) for k, r in enumerate(sim_rewards)]
    return real, sim


# real and simulated success by task t0..t3: scripted 3/4 and 4/4, explorer 1/4 and 2/4, llm 2/4 and 1/4
RUNS = {
    "scripted": ([1.0, 1.0, 1.0, 0.0], [1.0, 1.0, 1.0, 1.0]),
    "explorer": ([1.0, 0.0, 0.0, 0.0], [1.0, 1.0, 0.0, 0.0]),
    "llm": ([1.0, 1.0, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0]),
}


def test_rank_correlation_and_inflation_over_three_policies(tmp_path: Path) -> None:
    argv = ["training.fidelity", "agents", "--out", str(tmp_path / "report"), "--no-wm2real"]
    for name, rewards in RUNS.items():
        real, sim = policy_run(name, *rewards)
        argv += ["--real-data", write(tmp_path / name / "real", real)]
        argv += ["--sim-data", write(tmp_path / name / "sim", sim)]
    done = run_module(*argv)
    report = json.loads((tmp_path / "report" / "report.json").read_text())
    across = report["across_policies"]["terminal"]
    assert across["policies"] == ["scripted", "explorer", "llm"]
    assert (across["sim_rates"], across["real_rates"]) == ([1.0, 0.5, 0.25], [0.75, 0.25, 0.5])
    # ranks: simulated 3, 2, 1; real 3, 1, 2: rho = 1 - 6 * (0 + 1 + 1) / (3 * (9 - 1)) = 0.5
    assert across["spearman"] == {"value": pytest.approx(0.5), "n": 3, "undefined": ""}
    # inflation over the 12 pairs: +1 (scripted t3), +1 (explorer t1), -1 (llm t1): 1/12, tasks resampled
    sim = {(f"t{k}", f"{name}/{k}"): s for name, (_, sims) in RUNS.items() for k, s in enumerate(sims)}
    real = {(f"t{k}", f"{name}/{k}"): r for name, (reals, _) in RUNS.items() for k, r in enumerate(reals)}
    expected = paired_difference(sim, real).as_dict()
    assert across["inflation"] == expected and expected["difference"] == pytest.approx(1 / 12)
    assert expected["trajectories"] == 4 and expected["ci_low"] == 0.0 and expected["ci_high"] > 1 / 12
    per_policy = {n: p["domains"]["terminal"]["numbers"]["success"] for n, p in report["policies"].items()}
    assert {n: s["inflation"]["difference"] for n, s in per_policy.items()} == {
        "scripted": 0.25,
        "explorer": 0.25,
        "llm": -0.25,
    }
    assert report["domains"]["terminal"]["pairs"] == 12 and report["meta"]["runs"] == list(RUNS)
    assert (
        "Spearman rank correlation of simulated and real success rates: 0.500 over 3 policies" in done.stdout
    )
    md = (tmp_path / "report" / "report.md").read_text()
    assert "| explorer | 4 | 1.000 (12/12) |" in md and "| all | 12 |" in md
    assert "| policy | task | slot |" in md


def test_spearman_ties_and_undefined_cases() -> None:
    assert spearman([0.1, 0.2, 0.3], [0.3, 0.2, 0.1])["value"] == pytest.approx(-1.0)
    # ties take their mean rank: x ranks 1, 2.5, 2.5, 4
    tied = spearman([0.0, 0.5, 0.5, 1.0], [0.0, 0.4, 0.6, 1.0])["value"]
    assert tied == pytest.approx(4.5 / (4.5 * 5.0) ** 0.5)
    assert spearman([0.1, 0.2], [0.1, 0.2])["undefined"] == "2 policies: a rank correlation needs 3"
    same = spearman([0.5, 0.5, 0.5], [0.1, 0.2, 0.3])
    assert same["value"] is None and same["undefined"] == "every policy has the same simulated success rate"
