"""The task reward of a simulated episode (DESIGN 4c: a simulated sandbox says what its reward is).

A world model keeps no real state for a task's verifier to inspect, so each verifier kind is read one
of three ways, and the Verification's `verifier` is `simulated:<kind>` so that no report mistakes it
for a real sandbox's verdict:

- pure functions of the episode run unchanged on the simulated steps: search `answer` (the agent's
  last answer), web `page_url` (the URL of the last page the world model showed), android
  `android_state` node and package checks, os `desktop_state` node checks (on the last tree the world
  model showed; a device's shell checks are skipped; a desktop verifier that reads files is asked
  as a whole, below);
- terminal `command`: the world model itself is asked what each check prints, one extra simulated
  turn per check on a copy of the episode (`schemas.verification_turns.check_action`: the very action
  a real terminal records as its verification turn), never recorded as an episode step; the reward is
  the share of checks it says pass (the checks follow one another, as in the real pane). A check
  whose predicted screen holds no PASS or FAIL line has no verdict and does not pass; when no check
  got a verdict the reward is None (the model said nothing about the state, which is not a failure);
- any other kind (MCP server state, SWE tests, Harbor test scripts, web site state, a desktop's
  files): the world model is asked the verifier as a whole, one aside turn whose action is
  `verifier_action(task.verifier)`, as real episodes record it; its answer's `reward:` line is the
  reward, and an answer without one is reward None with the reason in `error`, never a made-up 0.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sandboxes.base import VERIFIER_OUTPUT_CHARS, VerifierError
from sandboxes.domains import find_domain
from schemas.records import Action, Observation, Step, Task, Verification
from schemas.verification_turns import (
    CHECK_WRAPPER,
    SIMULATED_PREFIX,
    check_action,
    check_verdict,
    reward_line,
    verifier_action,
)

PREFIX = SIMULATED_PREFIX
__all__ = ["CHECK_WRAPPER", "PREFIX", "ask_checks", "ask_whole", "simulated_verification", "verdict"]
# What one extra simulated turn returns: the predicted observation for an action on the episode so far.
Ask = Callable[[Action], Observation]


def simulated_verification(
    domain: str, task: Task, steps: list[Step], initial: Observation | None, ask: Ask
) -> Verification | None:
    """The simulated episode's Verification (None when the task has no verifier). `initial`: the
    episode's first observation; `ask`: one aside turn of the world model (SimulatedSandbox._aside)."""
    kind = str(task.verifier.get("kind", "none")) if task.verifier else "none"
    if kind == "none":
        return None
    # A kind is read the same way in every domain whose record lists it; another domain's is unsupported.
    spec = find_domain(domain)
    if spec is None or kind not in spec.verifier_kinds:
        return unsupported(kind, domain)
    try:
        if kind == "answer":
            from sandboxes.search.verify import verify_answer

            return _renamed(verify_answer(task.verifier, steps), "pure function of the agent's last answer")
        if kind == "page_url":
            return _page_url(task.verifier, _last_view(steps, initial))
        if kind == "android_state":
            return _android(task.verifier, _last_view(steps, initial))
        if kind == "desktop_state" and not _desktop_files(task.verifier):
            return _desktop(task.verifier, _last_view(steps, initial))
        if kind == "command":
            return ask_checks(task.verifier, ask)
    except VerifierError as exc:  # a malformed verifier is as broken here as in the real sandbox
        return Verification(verifier=PREFIX + kind, error=f"VerifierError: {exc}")
    return ask_whole(kind, task.verifier, ask)


def unsupported(kind: str, domain: str) -> Verification:
    reason = (
        f"no simulated verdict for a {kind!r} verifier in the {domain} domain: it reads real state "
        "(a server, a test run, files) that a world model does not keep, and no observation shows it"
    )
    return Verification(verifier=PREFIX + kind, error=reason, details={"method": "none"})


def _renamed(found: Verification, method: str) -> Verification:
    found.verifier = PREFIX + found.verifier
    found.details = {**found.details, "method": method}
    return found


def _last_view(steps: list[Step], initial: Observation | None) -> Observation | None:
    """The last observation that shows the environment: error observations (a refused action, which
    the runner writes without asking the sandbox) change nothing, so they are passed over."""
    for observation in [*(s.observation for s in reversed(steps)), initial]:
        if observation is not None and observation.format != "error":
            return observation
    return None


def _page_url(verifier: dict[str, Any], last: Observation | None) -> Verification:
    from sandboxes.web.verify import score_page_url
    from training.observations.parsers import parse_web

    page = parse_web(last.text) if last is not None else None
    if page is None or not page.url:
        return Verification(
            verifier=PREFIX + "page_url",
            error="the last simulated page shows no URL line, so the page the episode ended on is unknown",
            details={"method": "the last simulated page's URL"},
        )
    return _renamed(score_page_url(verifier, page.url), "the last simulated page's URL")


def _android(verifier: dict[str, Any], last: Observation | None) -> Verification:
    from sandboxes.android.tree_text import parse_tree
    from sandboxes.android.verify import evaluate

    def no_shell(command: str) -> str:  # never called: device checks are skipped (device=False)
        raise VerifierError(f"a simulated device has no shell to run {command!r}")

    found = evaluate(verifier, parse_tree(last.text if last else ""), False, no_shell)
    return _renamed(found, "node and package checks on the last simulated screen; device checks skipped")


def _desktop_files(verifier: dict[str, Any]) -> list[str]:
    """The files a desktop verifier reads: no simulated tree shows them, so it is asked as a whole."""
    from sandboxes.desktop.verify import file_paths, parse_checks

    return file_paths(parse_checks(verifier))


def _desktop(verifier: dict[str, Any], last: Observation | None) -> Verification:
    from sandboxes.desktop.tree_text import parse_tree
    from sandboxes.desktop.verify import evaluate, parse_checks

    checks = parse_checks(verifier)
    return _renamed(
        evaluate(checks, parse_tree(last.text if last else ""), {}), "node checks on the last simulated tree"
    )


verdict = check_verdict  # the reading of a predicted check screen, shared with the real recording


def ask_whole(kind: str, verifier: dict[str, Any], ask: Ask) -> Verification:
    """A verifier asked of the world model as a whole, in the form real episodes record it."""
    action = verifier_action(verifier)
    details: dict[str, Any] = {"method": "asked the world model the verifier as a whole, one aside turn"}
    try:
        answer = ask(action).text
    except Exception as exc:  # a backend failure: no verdict, not a failed task
        return Verification(verifier=PREFIX + kind, error=f"{type(exc).__name__}: {exc}", details=details)
    reward = reward_line(answer)
    output = answer[-VERIFIER_OUTPUT_CHARS:]
    if reward is None:
        error = "the world model's answer has no reward line: the state it checked is unknown"
        return Verification(verifier=PREFIX + kind, output=output, details=details, error=error)
    return Verification(verifier=PREFIX + kind, reward=reward, output=output, details=details)


def ask_checks(verifier: dict[str, Any], ask: Ask) -> Verification:
    """A terminal `command` verifier answered by the world model, one aside turn per check."""
    from sandboxes.terminal.verify import checks_of

    results: list[dict[str, Any]] = []
    log: list[str] = []
    for check in checks_of(verifier):
        action = check_action(check)
        command = action.text
        said: bool | None = None
        screen, error = "", ""
        try:
            observation = ask(action)
            screen = observation.text
            said = verdict(screen, command)
        except Exception as exc:  # a multi-line check (one-line commands only), a backend failure
            error = f"{type(exc).__name__}: {exc}"
        results.append({"command": check, "said": None if said is None else ("PASS" if said else "FAIL")})
        if error:
            results[-1]["error"] = error
        log.append(f"$ {command}\n{screen[-1000:] if screen else error}\n[model says {results[-1]['said']}]")
    passed = sum(r["said"] == "PASS" for r in results)
    decided = sum(r["said"] is not None for r in results)
    details = {
        "method": "asked the world model, one aside turn per check",
        "checks": results,
        "passed": passed,
        "decided": decided,
        "total": len(results),
    }
    output = "\n".join(log)[-VERIFIER_OUTPUT_CHARS:]
    if decided == 0:
        error = "the world model said neither PASS nor FAIL for any check: its state is unknown"
        return Verification(verifier=PREFIX + "command", output=output, details=details, error=error)
    return Verification(
        verifier=PREFIX + "command", reward=passed / len(results), output=output, details=details
    )
