"""ATIF files of other producers (Harbor's agents) into our trajectories: the mapping.

`collectors.importers.atif` reads and checks the file; this maps its steps. The domain is `--domain`,
else terminal (Harbor's tasks are terminal tasks: `sandboxes/harbor` runs them in our terminal
sandbox).
- The first user step's message is the task's instruction, and its observation (where it has one) the
  first observation; otherwise the first observation was not recorded (the domain's first text, data
  `{"not_recorded": true}`). Later user messages go to task.metadata `later_user_messages`, system
  messages to `system_messages`.
- Each agent step's tool calls are actions, checked by the domain's own parser (`sandboxes.domains`):
  in terminal the `bash_command` calls of a step are one keystrokes action (Terminus 2's batch: the
  same {keystrokes, duration} items) and `mark_task_complete` sets the step's info `task_complete`;
  in mcp (a domain whose record's `atif_calls` is ATIF_CALL_AS_TOOL) each call is a `tool_call` of its
  tool (any tool: `--domain mcp` takes any agent's calls);
  elsewhere a call's function name is the action's kind. A call the domain's parser refuses makes the
  file a dead letter that names it.
- Observation results go to the action whose call they name (`source_call_id`); a result that names
  none goes to the step's only action (with several, which it answers is unknown: a dead letter).
  Text parts are joined by line breaks, image and audio parts become attachments; in mcp (as_tool) the
  text is our MCP result (`chat_messages.mcp_result`), and a first observation not recorded lists the
  agent's tools. Actions with no result at the end of the file make the trajectory `truncated`; one
  before answered actions is a dead letter (the history would have a hole).
- Skipped and counted in task.metadata `skipped_steps`: agent steps without an action (no tool call:
  a reply that was no action, such as Terminus 2's parse errors, whose observation is the agent's own
  prompt; or in terminal only `mark_task_complete`, which then marks the previous action's info) and
  steps marked `is_copied_context` (already in an earlier trajectory; ATIF says not to train on them).
- A step's info: `atif_step_id`, its `metrics` (tokens and cost; not token ids or logprobs), and its
  `model_name` where the step names one. Its `timestamp` is the step's start; no latency is recorded.
- The agent is the policy (name; config: `model`, `agent_version`, `agent_extra`, `final_metrics`),
  its `tool_definitions` the environment's tools; the environment's config names the format and its
  `atif_version`. The task id is the trial's folder name where the file is at
  `<trial>/agent/trajectory.json`, else the `session_id`, else the file's path. A file that
  `continued_trajectory_ref` names (the rest of a long run) is not followed: the trajectory is
  `truncated` and says where the rest is.
Not mapped: the agent's own message and reasoning (the agent's, not the environment's), embedded
subagent trajectories (counted in `subagent_trajectories`), and rewards (Harbor keeps them in the
trial's result.json, not in the trajectory: the outcome has no reward).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from collectors.importers.atif_steps import AtifStep, Call, Result, media_file, tools_of
from collectors.importers.base import BadRow, Episode, ImportContext, SourceRow, Turn, require
from collectors.importers.chat_messages import mcp_result, unnamed_server_initial
from sandboxes.base import InvalidActionError
from sandboxes.domains import DomainSpec, domain_spec
from schemas.atif import FILE_NAME, TASK_COMPLETE_TOOL, TERMINAL_TOOL, action_of_calls, atif_calls
from schemas.domains import ATIF_CALL_AS_TOOL, ATIF_CALL_PER_KEYSTROKE
from schemas.records import DOMAINS, Attachment, Environment, Observation, Outcome, Policy, Task

DEFAULT_DOMAIN = "terminal"
METRICS = ("prompt_tokens", "completion_tokens", "cached_tokens", "cost_usd")


def harbor_episode(
    document: dict[str, Any],
    agent: dict[str, Any],
    steps: list[AtifStep],
    row: SourceRow,
    context: ImportContext,
) -> Episode:
    domain = context.domain or DEFAULT_DOMAIN
    if domain not in DOMAINS:
        raise BadRow(f"--domain {domain!r} is not one of {', '.join(DOMAINS)}")
    spec = domain_spec(domain)
    users = [step for step in steps if step.source == "user"]
    metadata: dict[str, Any] = {}
    skipped: Counter[str] = Counter()
    turns: list[Turn] = []
    unanswered: list[str] = []
    for step in steps:
        if step.source != "agent":
            continue
        if step.raw.get("is_copied_context"):
            skipped["copied_context"] += 1
            continue
        groups, complete = _actions(domain, step.calls)
        if not groups:
            skipped["without_action"] += 1
            if complete and turns:  # Terminus 2 confirming the end: the last action ended the task
                turns[-1].info["task_complete"] = True
            continue
        for group, results in zip(groups, _pair(step, groups), strict=True):
            if not results:
                unanswered.append(f"{group[0].name} (step {step.step_id})")
                continue
            if unanswered:
                raise BadRow(
                    f"the call to {unanswered[0]} has no result, but later calls do: "
                    "the history would have a hole"
                )
            action = _action(domain, spec, group, step.step_id)
            info = _info(step, complete)
            turns.append(
                Turn(
                    action,
                    _observation(domain, spec, action.kind, group, results, row.uri),
                    info=info,
                    started_at=step.timestamp,
                )
            )
    if not turns:
        raise BadRow("no agent step makes a tool call that got a result: there is no step to import")
    tools = tools_of(agent)
    _describe(document, steps, users, skipped, metadata)
    return Episode(
        domain=domain,
        task=Task(
            id=_task_id(document, row), instruction=users[0].message if users else "", metadata=metadata
        ),
        initial=_initial(domain, spec, users, tools, row.uri),
        turns=turns,
        environment=Environment(
            name=domain,
            backend="imported",
            config={"source_format": "atif", "atif_version": document["schema_version"]},
        ),
        policy=Policy(
            name=require(agent, "name", str, " of the agent"), config=_agent_config(agent, document)
        ),
        outcome=_outcome(document, unanswered),
        started_at=next((step.timestamp for step in steps if step.timestamp is not None), None),
        tools=tools,
    )


def _actions(domain: str, calls: list[Call]) -> tuple[list[list[Call]], bool]:
    """The step's calls grouped into actions, and whether it marked its task complete (Terminus 2's
    way, that of a domain whose keystrokes are one call per item: the terminal)."""
    complete = False
    if atif_calls(domain) == ATIF_CALL_PER_KEYSTROKE:
        complete = any(call.name == TASK_COMPLETE_TOOL for call in calls)
        calls = [call for call in calls if call.name != TASK_COMPLETE_TOOL]
        if calls and all(call.name == TERMINAL_TOOL for call in calls):
            return [calls], complete
    return [[call] for call in calls], complete


def _pair(step: AtifStep, groups: list[list[Call]]) -> list[list[Result]]:
    """Each action's results: those naming one of its calls, and those naming none when it is alone."""
    group_of = {call.call_id: n for n, group in enumerate(groups) for call in group}
    paired: list[list[Result]] = [[] for _ in groups]
    for result in step.results:
        n = group_of.get(result.call_id) if result.call_id is not None else None
        if n is None:
            if len(groups) > 1:
                raise BadRow(
                    f"step {step.step_id}: a result names none of its {len(groups)} calls, "
                    "so which one it answers is unknown"
                )
            n = 0
        paired[n].append(result)
    return paired


def _action(domain: str, spec: DomainSpec, group: list[Call], step_id: int):
    kind, arguments = action_of_calls(domain, [(call.name, call.arguments) for call in group]) or ("", {})
    try:
        return spec.parse_action(kind, arguments)
    except InvalidActionError as exc:
        raise BadRow(
            f"step {step_id}: the call to {group[0].name!r} is not a {domain} action ({exc}); "
            "--domain mcp takes any tool call"
        ) from None


def _observation(
    domain: str, spec: DomainSpec, kind: str, group: list[Call], results: list[Result], uri: str
) -> Observation:
    texts = [result.text for result in results]
    if atif_calls(domain) == ATIF_CALL_AS_TOOL:  # the call is the tool's own: its result is the tool's
        observation = mcp_result("", group[0].name, texts)
    else:
        formats = dict(spec.action_formats)
        observation = Observation(
            format=formats.get(kind, spec.observation_format),
            text="\n".join(texts),
            data={"source_text": True},
        )
    observation.attachments = _media(results, uri)
    return observation


def _media(results: list[Result], uri: str) -> list[Attachment]:
    return [
        media_file(uri, path, media_type, where)
        for result in results
        for path, media_type, where in result.media
    ]


def _info(step: AtifStep, complete: bool) -> dict[str, Any]:
    info: dict[str, Any] = {"atif_step_id": step.step_id}
    metrics = step.raw.get("metrics")
    if isinstance(metrics, dict):
        kept = {key: metrics[key] for key in METRICS if isinstance(metrics.get(key), int | float)}
        if kept:
            info["metrics"] = kept
    if isinstance(step.raw.get("model_name"), str):
        info["model_name"] = step.raw["model_name"]
    if complete:
        info["task_complete"] = True
    return info


def _initial(domain: str, spec: DomainSpec, users: list[AtifStep], tools: list, uri: str) -> Observation:
    first = users[0] if users else None
    if first is not None and first.results:
        text = "\n".join(result.text for result in first.results)
        media = _media(first.results, uri)
        return Observation(
            format=spec.observation_format, text=text, data={"source_text": True}, attachments=media
        )
    if atif_calls(domain) == ATIF_CALL_AS_TOOL:  # the agent's tools are the server's: what is known of it
        return unnamed_server_initial([tool.name for tool in tools])
    return Observation(format=spec.observation_format, text=spec.initial_text, data={"not_recorded": True})


def _describe(
    document: dict[str, Any], steps: list[AtifStep], users: list[AtifStep], skipped: Counter, metadata: dict
) -> None:
    """What the file says of the run that is not a step: into task.metadata."""
    if isinstance(document.get("session_id"), str):
        metadata["session_id"] = document["session_id"]
    if isinstance(document.get("notes"), str) and document["notes"]:
        metadata["notes"] = document["notes"]
    if len(users) > 1:
        metadata["later_user_messages"] = [step.message for step in users[1:]]
    system = [step.message for step in steps if step.source == "system"]
    if system:
        metadata["system_messages"] = system
    if skipped:
        metadata["skipped_steps"] = dict(skipped)
    subagents = document.get("subagent_trajectories")
    if isinstance(subagents, list) and subagents:
        metadata["subagent_trajectories"] = len(subagents)


def _agent_config(agent: dict[str, Any], document: dict[str, Any]) -> dict[str, Any]:
    config: dict[str, Any] = {}
    for key, name in (("model_name", "model"), ("version", "agent_version"), ("extra", "agent_extra")):
        if agent.get(key) not in (None, "", {}):
            config[name] = agent[key]
    if isinstance(document.get("final_metrics"), dict):
        config["final_metrics"] = document["final_metrics"]
    return config


def _task_id(document: dict[str, Any], row: SourceRow) -> str:
    parts = row.uri.split("/")
    if len(parts) >= 3 and parts[-1] == FILE_NAME and parts[-2] == "agent":
        return parts[-3]
    session = document.get("session_id")
    return session if isinstance(session, str) and session else row.row_id


def _outcome(document: dict[str, Any], unanswered: list[str]) -> Outcome:
    rest = document.get("continued_trajectory_ref")
    if isinstance(rest, str) and rest:
        return Outcome(
            status="truncated",
            error=f"the run goes on in {rest}, which is not followed",
            error_kind="continued",
        )
    if unanswered:
        return Outcome(
            status="truncated",
            error=f"the file ends with {len(unanswered)} call(s) that got no result: {', '.join(unanswered)}",
            error_kind="no_tool_result",
        )
    return Outcome(status="completed")
