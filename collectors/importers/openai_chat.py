"""Generic OpenAI-format chat logs with tool calls into mcp or search trajectories.

Rows (JSON Lines, JSON or Parquet), one conversation each: `{"messages": [...], "tools": [...]}` in
the OpenAI Chat Completions format (https://platform.openai.com/docs/api-reference/chat/create):
assistant `tool_calls` [{id, type: "function", function: {name, arguments (a JSON string)}}],
`role: "tool"` results with `tool_call_id` and `content`, and `tools` as [{type: "function",
function: {name, description, parameters}}] (or under `available_tools`, as Toucan and others name
it). The older `function_call` / `role: "function"` form is read too (see `chat_messages`).
Optional: `id` (the row's id), `model` (the agent's model). tau-bench's run logs (`{task_id, reward,
info, traj, trial}`: the chat under `traj`, with a simulated user) are recognised by their shape;
see `tau_bench` for how their user turns become steps and their reward the outcome's.

Each tool call with its result is one step. A call with no result at the end of the log makes the
trajectory `truncated` (its answered steps are kept), except a last `finish` call (OpenHands' and
SWE-Gym's tool that ends the episode: nothing answers it), which is kept in
`task.metadata["final_call"]`; a missing result before answered calls, or a log with no answered
call, is a bad row. A row with no tool list gets the tools its calls name (no description, any
arguments: `environment.config["tools_from"] == "calls"`). The system prompt goes to
`environment.config["agent_system_prompt"]`.

Domain: `--domain` (mcp or search) when given; otherwise search when every call is one of our search
tools (`web_search`, `web_extractor`) with arguments in our search form, else mcp.
- mcp: the action is our tool-call text `{"name", "arguments"}`; the result is our MCP result JSON
  (content items, `isError`: see `chat_messages.mcp_result`); the tools are the row's tool list.
- search: actions and observations as our search sandbox writes them (sandboxes/search): a result
  that is JSON with a list of {url, title, snippet} is rendered as our numbered result list; other
  text is kept as it is. A page's text gets our `URL:` header line.
A chat log holds no step timings and no MCP `isError`: none are made up (the result text says
`"isError": false` because our form requires the flag; its `data["is_error"]` is None, not recorded).
The assistant's own text is left out: it is the agent's, not the environment's (in a tau-bench run,
its message to the user is the `respond` action, which the user's reply answers).
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

from collectors.importers import tau_bench
from collectors.importers.base import BadRow, Episode, ImportContext, Importer, SourceRow, Turn, require
from collectors.importers.chat_messages import (
    RESPOND,
    Conversation,
    ToolExchange,
    json_value,
    listed_tools,
    mcp_result,
    parse_conversation,
    step_info,
    tool_definitions,
    truncation,
    unnamed_server_initial,
)
from sandboxes.base import InvalidActionError
from sandboxes.mcp.actions import parse_action as mcp_action
from sandboxes.search.actions import DEFAULT_NUM_RESULTS, WEB_EXTRACTOR, WEB_SEARCH
from sandboxes.search.actions import parse_action as search_action
from sandboxes.search.engines import SearchHit, SearchPage
from sandboxes.search.pages import MARKDOWN
from sandboxes.search.render import SEARCH_RESULTS, search_observation
from sandboxes.search.sandbox import INITIAL_TEXT
from schemas.records import Action, Environment, Observation, Outcome, Policy, Task, ToolDefinition

SEARCH_TOOLS = (WEB_SEARCH, WEB_EXTRACTOR)
# The importer's own fact, not the registry's: the domains this module has a converter for
# (`_mcp_turn`, `_search_turn`). Other domains also act by tool calls (swe's read/edit/bash), but a
# chat log's calls to them need their own mapping onto our actions and results, which none has here.
DOMAINS = ("mcp", "search")
FINISH_TOOLS = ("finish",)  # a last call to one of these ends the episode; no result answers it


class OpenAIChatImporter(Importer):
    name = "openai_chat"
    dataset = "openai-chat-logs"  # no single public dataset: pass --dataset with the real name
    license = ""
    summary = "OpenAI-format chat logs with tool calls ({messages, tools}; tau-bench runs) as mcp/search"
    id_field: ClassVar[str | None] = "id"

    def convert(self, row: SourceRow, context: ImportContext) -> Episode:
        data = row.data
        simulated_user = tau_bench.is_tau_bench(data)
        if simulated_user:
            messages = tau_bench.messages(data)
        else:
            messages = json_value(require(data, "messages", (list, str)), "field 'messages'", list)
        conversation = parse_conversation(messages, user_replies=simulated_user)
        if not conversation.exchanges:
            raise _no_step(data, conversation)
        domain = self._domain(conversation, context.domain, simulated_user)
        config: dict[str, Any] = {"source_format": "openai_chat"}
        listed_key, listed = listed_tools(data)
        definitions = tool_definitions(listed, f"field {listed_key!r}")
        if domain == "search":
            turns = [_search_turn(exchange) for exchange in conversation.exchanges]
            initial = Observation(format=SEARCH_RESULTS, text=INITIAL_TEXT, data={"backend": "imported"})
            tools = []
            config["source_tools"] = [t.name for t in definitions]
        else:
            tools = definitions or _tools_of_calls(conversation)
            if not definitions:
                config["tools_from"] = "calls"
            if simulated_user:  # the user, as the tool `respond` (see tau_bench)
                tools = [tool for tool in tools if tool.name != RESPOND] + [tau_bench.RESPOND_TOOL]
            turns = [_mcp_turn(exchange) for exchange in conversation.exchanges]
            initial = unnamed_server_initial([tool.name for tool in tools])
        if conversation.system_messages:
            config["agent_system_prompt"] = "\n\n".join(conversation.system_messages)
        ended = truncation(conversation, FINISH_TOOLS)
        if simulated_user:
            config["source_shape"] = "tau-bench"
            task = tau_bench.task(row.row_id, data, conversation)
            ended = tau_bench.outcome(data, conversation, ended)
        else:
            task = _task(row.row_id, conversation)
        _keep_final_call(task, conversation, ended)
        model = data.get("model")
        return Episode(
            domain=domain,
            task=task,
            initial=initial,
            turns=turns,
            environment=Environment(name=domain, backend="imported", config=config),
            policy=Policy(
                name="imported", config={"model": model} if isinstance(model, str) and model else {}
            ),
            outcome=ended,
            tools=tools,
        )

    def _domain(self, conversation: Conversation, given: str, simulated_user: bool) -> str:
        if simulated_user:
            if given not in ("", "mcp"):
                raise BadRow(
                    f"a tau-bench log (a simulated user and tools) imports into the mcp domain, not "
                    f"{given!r}: rerun with --domain mcp or without --domain"
                )
            return "mcp"
        if given:
            if given not in DOMAINS:
                raise BadRow(
                    f"openai_chat imports into the mcp or search domain, not {given!r}: rerun with "
                    "--domain mcp or --domain search (or without --domain to infer it)"
                )
            return given
        calls = conversation.exchanges + conversation.unanswered
        if all(call.name in SEARCH_TOOLS and _search_fits(call) for call in calls):
            return "search"
        return "mcp"


def _no_step(data: dict[str, Any], conversation: Conversation) -> BadRow:
    """Why a log without an answered call has no step (a failed tau-bench run says why it failed)."""
    info = data.get("info")
    error = info.get("error") if isinstance(info, dict) else None
    if tau_bench.is_tau_bench(data) and not data["traj"] and error:
        return BadRow(f"the run failed before its first step: {str(error)[:500]}")
    if conversation.unanswered:
        return BadRow("no tool call in this log has a result: there is no step to import")
    return BadRow("the log makes no tool call: there is no step for a world model to learn")


def _search_fits(call: ToolExchange) -> bool:
    try:
        search_action(call.name, call.arguments)
    except InvalidActionError:
        return False
    return True


def _tools_of_calls(conversation: Conversation) -> list[ToolDefinition]:
    """The tools a log without a tool list shows: the names its calls use, in the order first used."""
    names = dict.fromkeys(call.name for call in conversation.exchanges + conversation.unanswered)
    return [ToolDefinition(name, "", {"type": "object"}) for name in names]


def _keep_final_call(task: Task, conversation: Conversation, ended: Outcome) -> None:
    """A last `finish` call is no step (nothing answers it) but it is how the agent ended: kept."""
    if ended.status == "completed" and conversation.unanswered:
        call = conversation.unanswered[0]
        task.metadata["final_call"] = {"name": call.name, "arguments": call.arguments}


def _task(row_id: str, conversation: Conversation) -> Task:
    users = conversation.user_messages
    metadata: dict[str, Any] = {}
    if len(users) > 1:
        metadata["later_user_messages"] = users[1:]  # multi-turn logs: each step's info has its user_turn
    return Task(id=row_id, instruction=users[0] if users else "", metadata=metadata)


def _mcp_turn(exchange: ToolExchange) -> Turn:
    try:
        action = mcp_action("tool_call", {"name": exchange.name, "arguments": exchange.arguments})
    except InvalidActionError as exc:
        raise BadRow(f"the call to {exchange.name!r} in message {exchange.message_index}: {exc}") from None
    assert exchange.result is not None
    return Turn(action, mcp_result("", exchange.name, exchange.result), info=step_info(exchange))


def _search_turn(exchange: ToolExchange) -> Turn:
    try:
        action = search_action(exchange.name, exchange.arguments)
    except InvalidActionError as exc:
        raise BadRow(
            f"the call in message {exchange.message_index} is not in our search form ({exc}); "
            "import this log with --domain mcp"
        ) from None
    assert exchange.result is not None
    text = "\n\n".join(exchange.result)
    if action.kind == WEB_SEARCH:
        observation = search_results(action, text)
    else:
        observation = page_text(action.arguments["url"], text)
    return Turn(action, observation, info=step_info(exchange))


def search_results(action: Action, text: str) -> Observation:
    """Our numbered result list when the tool answered JSON results with urls; else its text as is."""
    query = action.arguments["query"]
    hits = _hits(text)
    if hits is None:
        return Observation(format=SEARCH_RESULTS, text=text, data={"query": query, "source_text": True})
    num_results = action.arguments.get("num_results", DEFAULT_NUM_RESULTS)
    page = action.arguments.get("page", 1)
    return search_observation(query, num_results, page, SearchPage(hits=hits))


def _hits(text: str) -> list[SearchHit] | None:
    try:
        value = json.loads(text)
    except ValueError:
        return None
    if isinstance(value, dict):
        value = value.get("results")
    if not isinstance(value, list) or not all(isinstance(item, dict) for item in value):
        return None
    hits = []
    for item in value:
        url = item.get("url") or item.get("link")
        if not isinstance(url, str) or not url:
            return None
        snippet = item.get("snippet") or item.get("content") or item.get("description") or ""
        date = item.get("date") or item.get("published_date") or ""
        hits.append(
            SearchHit(url=url, title=str(item.get("title") or ""), snippet=str(snippet), date=str(date))
        )
    return hits


def page_text(url: str, text: str) -> Observation:
    """A page as our `web_extractor` shows it: a `URL:` header line (the requested URL: a log does not
    say where redirects led), then the text. An error message, or text with our header, is kept as is."""
    if not text.startswith(("Error:", "Title:", "URL:")):
        text = f"URL: {url}\n\n{text}"
    return Observation(format=MARKDOWN, text=text, data={"url": url, "source_text": True})


IMPORTER = OpenAIChatImporter()
