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
  the share of checks it says pass (the checks follow one another, as in the real pane);
- any other kind (MCP server state, SWE tests, Harbor test scripts, web site state, a desktop's
  files): the world model is asked the verifier as a whole, one aside turn whose action is
  `verifier_action(task.verifier)`, as real episodes record it.

How the world model is asked (`METHODS`, SimulatedSandbox's `verdicts`, the collectors'
`--simulated-verdicts`):

- `likelihood` (the default): nothing is generated. The answers the real sandbox could have recorded
  for the turn are scored teacher-forced (`WorldModelBackend.log_likelihood`), in the form the model
  was trained on (the tagged observation, or a delta model's edit script of the previous one), after
  the very prompt a generated turn would have; the verdict is the more likely answer. For a check:
  the pane with the wrapped check typed at its prompt and then PASS, against the same with FAIL
  (`sandboxes.terminal.check_turns`, the real recorder, composes both at the real pane's default
  size; a screen that does not end at a prompt gets the episode's last prompt on a new line, as a
  shell would show once the command ended). For a verifier asked as a whole: `reward: 1` against
  `reward: 0` (`verifier_observation`, the real recorder, writes both). A tie goes to the failure.
  The chosen answer becomes the aside turn the next check continues from. So every check the
  terminal can type gets a verdict (one-line checks only; where no screen of the episode shows a
  prompt to type it at, the check is generated instead, and its record says so).
- `generation`: the model writes the turn and its reply is read: a check's screen by `check_verdict`
  (a screen with no PASS or FAIL line has no verdict and does not pass; when no check got a verdict
  the reward is None: the model said nothing about the state, which is not a failure), a whole
  verifier's by its `reward:` line (none: reward None with the reason in `error`, never a made-up 0).
  This is what a backend without weights (an HTTP endpoint) gets when likelihood was asked: it
  cannot score, so the verdict falls back to generation and `details["fallback"]` says why.

`details["method"]` says which method reached the verdict (per check too, in `details["checks"]`),
and a likelihood verdict records both answers' log-likelihoods (nats, higher is likelier) and token
counts, so a report can say how each verdict was reached.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
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
    verifier_observation,
)

PREFIX = SIMULATED_PREFIX
LIKELIHOOD = "likelihood"
GENERATION = "generation"
METHODS = (LIKELIHOOD, GENERATION)  # the first is the default
__all__ = [
    "CHECK_WRAPPER",
    "GENERATION",
    "LIKELIHOOD",
    "METHODS",
    "PREFIX",
    "Asides",
    "ask_checks",
    "ask_whole",
    "simulated_verification",
    "verdict",
]
# One extra simulated turn, generated: the predicted observation for an action on the episode so far.
Ask = Callable[[Action], Observation]
# One extra turn, scored: per candidate observation, (its answer's negative log-likelihood, tokens).
Score = Callable[[Action, Sequence[Observation]], list[tuple[float, int]]]
# Go on as if the model had answered the action with the observation.
Keep = Callable[[Action, Observation], None]


@dataclass
class Asides:
    """How the verifier asks the world model its aside turns (SimulatedSandbox gives all three)."""

    ask: Ask
    score: Score | None = None
    keep: Keep | None = None
    method: str = LIKELIHOOD
    fallback: str = ""  # why likelihood could not be used (the backend's refusal); then generation

    def scoring(self) -> bool:
        """Whether the next aside turn is scored rather than generated."""
        scorable = self.score is not None and self.keep is not None
        return self.method == LIKELIHOOD and scorable and not self.fallback


def simulated_verification(
    domain: str, task: Task, steps: list[Step], initial: Observation | None, asides: Asides | Ask
) -> Verification | None:
    """The simulated episode's Verification (None when the task has no verifier). `initial`: the
    episode's first observation; `asides`: the world model's aside turns (a bare `ask` generates)."""
    if not isinstance(asides, Asides):
        asides = Asides(ask=asides, method=GENERATION)
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
            last = _last_view(steps, initial)
            screen, first = last.text if last else "", initial.text if initial else ""
            return ask_checks(task.verifier, asides, screen, first)
    except VerifierError as exc:  # a malformed verifier is as broken here as in the real sandbox
        return Verification(verifier=PREFIX + kind, error=f"VerifierError: {exc}")
    return ask_whole(kind, task.verifier, asides)


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


def _by_likelihood(
    asides: Asides, action: Action, candidates: dict[str, Observation]
) -> tuple[str, dict[str, Any]]:
    """The label of the likeliest candidate answer to `action` (the first of equals: candidates are
    given failure first), kept as the aside turn, and its record: each label's log-likelihood and
    token count. NotImplementedError when the backend cannot score."""
    assert asides.score is not None and asides.keep is not None
    labels = list(candidates)
    scores = asides.score(action, [candidates[label] for label in labels])
    likelihood = {label: -nll for label, (nll, _) in zip(labels, scores, strict=True)}
    chosen = max(labels, key=lambda label: likelihood[label])
    asides.keep(action, candidates[chosen])
    tokens = {label: n for label, (_, n) in zip(labels, scores, strict=True)}
    return chosen, {"log_likelihood": likelihood, "tokens": tokens}


def _method_of(methods: list[str], asides: Asides) -> dict[str, Any]:
    """The details' `method` (one of METHODS, or `mixed`) and, when likelihood was asked but the
    backend could not score, why the verdict fell back to generation."""
    found = sorted(set(methods))
    details: dict[str, Any] = {"method": found[0] if len(found) == 1 else "mixed" if found else asides.method}
    if asides.fallback:
        details["fallback"] = f"generation instead of likelihood: {asides.fallback}"
    return details


def ask_whole(kind: str, verifier: dict[str, Any], asides: Asides) -> Verification:
    """A verifier asked of the world model as a whole, in the form real episodes record it."""
    action = verifier_action(verifier)
    if asides.scoring():
        # failure first, so that a tie is no success
        candidates = {
            str(r): verifier_observation(Verification(verifier=kind, reward=float(r))) for r in (0, 1)
        }
        try:
            chosen, scores = _by_likelihood(asides, action, candidates)
        except NotImplementedError as exc:
            asides.fallback = str(exc)
        except Exception as exc:  # a backend failure, a context it does not fit: no verdict
            details = {"method": LIKELIHOOD}
            return Verification(verifier=PREFIX + kind, error=f"{type(exc).__name__}: {exc}", details=details)
        else:
            details = {"method": LIKELIHOOD, **scores}
            output = candidates[chosen].text
            return Verification(verifier=PREFIX + kind, reward=float(chosen), output=output, details=details)
    details = _method_of([GENERATION], asides)
    try:
        answer = asides.ask(action).text
    except Exception as exc:  # a backend failure: no verdict, not a failed task
        return Verification(verifier=PREFIX + kind, error=f"{type(exc).__name__}: {exc}", details=details)
    reward = reward_line(answer)
    output = answer[-VERIFIER_OUTPUT_CHARS:]
    if reward is None:
        error = "the world model's answer has no reward line: the state it checked is unknown"
        return Verification(verifier=PREFIX + kind, output=output, details=details, error=error)
    return Verification(verifier=PREFIX + kind, reward=reward, output=output, details=details)


def check_candidates(screen: str, check: str, prompts_from: str = "") -> tuple[dict[str, Observation], bool]:
    """({"FAIL": screen, "PASS": screen}: what a real pane records for `check` typed at the prompt
    `screen` ends at, composed by the real recorder at the real pane's default size; whether a prompt
    line was added first): a screen that does not end at a prompt gets the last prompt line it shows,
    else the last one `prompts_from` (the episode's first screen) shows, on a new line. ({}, False)
    when neither shows a prompt."""
    from sandboxes.terminal.check_turns import check_turns, last_prompt
    from sandboxes.terminal.config import TerminalConfig

    added = False
    if last_prompt(screen) is None:
        prompt = _last_prompt_line(screen) or _last_prompt_line(prompts_from)
        if prompt is None:
            return {}, False
        screen, added = (f"{screen.rstrip(chr(10))}\n{prompt}" if screen.strip() else prompt), True
    size = TerminalConfig()
    candidates = {}
    for word, passed in (("FAIL", False), ("PASS", True)):
        # exit_code None: a composed candidate knows the wrapper's word, not the check's own status
        result = {"command": check, "exit_code": None, "passed": passed}
        (turn,) = check_turns(
            screen,
            [result],
            width=size.width,
            height=size.height,
            first_index=0,
            started_at=datetime.now(UTC),
            elapsed_s=0.0,
        )
        candidates[word] = turn.observation
    return candidates, added


def _last_prompt_line(screen: str) -> str | None:
    from sandboxes.terminal.check_turns import last_prompt

    for line in reversed(screen.rstrip("\n").split("\n")):
        if line and last_prompt(line) is not None:
            return line
    return None


def ask_checks(
    verifier: dict[str, Any], asides: Asides, screen: str = "", first_screen: str = ""
) -> Verification:
    """A terminal `command` verifier answered by the world model, one aside turn per check, the first
    typed at `screen` (the episode's last), each next one at the screen the one before left;
    `first_screen` (the episode's first) lends its prompt to a screen that shows none."""
    from sandboxes.terminal.verify import checks_of

    results: list[dict[str, Any]] = []
    log: list[str] = []
    for check in checks_of(verifier):
        result, screen, note = _ask_check(check, asides, screen, first_screen)
        results.append(result)
        shown = result["error"] if "error" in result else screen[-1000:]
        said = f"{result['said']}: {note}" if note else result["said"]
        log.append(f"$ {check_action(check).text}\n{shown}\n[model says {said}]")
    passed = sum(r["said"] == "PASS" for r in results)
    decided = sum(r["said"] is not None for r in results)
    details = {
        **_method_of([r["method"] for r in results], asides),
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


def _ask_check(check: str, asides: Asides, screen: str, first_screen: str) -> tuple[dict[str, Any], str, str]:
    """(the check's record: command, said, method and, by likelihood, the scores; the screen the next
    check is typed at; a note for the log)."""
    action = check_action(check)
    result: dict[str, Any] = {"command": check, "said": None, "method": asides.method}
    try:
        if asides.scoring():
            candidates, added = check_candidates(screen, check, first_screen)
            if not candidates:
                result["note"] = "no prompt on any screen to type the check at: generated instead"
            else:
                try:
                    word, scores = _by_likelihood(asides, action, candidates)
                except NotImplementedError as exc:
                    asides.fallback = str(exc)
                else:
                    result.update(said=word, method=LIKELIHOOD, **scores)
                    if added:
                        result["prompt_added"] = True
                    shown = ", ".join(f"{w} {v:.3f}" for w, v in scores["log_likelihood"].items())
                    return result, candidates[word].text, f"log-likelihood {shown}"
        result["method"] = GENERATION
        screen = asides.ask(action).text
        said = verdict(screen, action.text)
        result["said"] = None if said is None else ("PASS" if said else "FAIL")
    except Exception as exc:  # a multi-line check (one-line commands only), a backend failure
        result["error"] = f"{type(exc).__name__}: {exc}"
    return result, screen, ""
