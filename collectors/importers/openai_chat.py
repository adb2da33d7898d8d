"""Generic OpenAI-format chat logs with tool calls into mcp or search trajectories.

Rows (JSON Lines, JSON or Parquet), one conversation each: `{"messages": [...], "tools": [...]}` in
the OpenAI Chat Completions format (https://platform.openai.com/docs/api-reference/chat/create):
assistant `tool_calls` [{id, type: "function", function: {name, arguments (a JSON string)}}],
`role: "tool"` results with `tool_call_id` and `content`, and `tools` as [{type: "function",
function: {name, description, parameters}}]. The older `function_call` / `role: "function"` form is
read too (see `chat_messages`). Optional: `id` (the row's id), `model` (the agent's model).

Each tool call with its result is one step. A call with no result at the end of the log makes the
trajectory `truncated` (its answered steps are kept); a missing result before answered calls, or a
log with no answered call, is a bad row.

Domain: `--domain` (mcp or search) when given; otherwise search when every call is one of our search
tools (`web_search`, `web_extractor`) with arguments in our search form, else mcp.
- mcp: the action is our tool-call text `{"name", "arguments"}`; the result is our MCP result JSON
  (content items, `isError`: see `chat_messages.mcp_result`); the tools are the row's `tools`.
- search: actions and observations as our search sandbox writes them (sandboxes/search): a result
  that is JSON with a list of {url, title, snippet} is rendered as our numbered result list; other
  text is kept as it is. A page's text gets our `URL:` header line.
A chat log holds no step timings and no MCP `isError`: none are made up (the result text says
`"isError": false` because our form requires the flag; its `data["is_error"]` is None, not recorded).
The assistant's own text is left out: it is the agent's, not the environment's.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

from collectors.importers.base import BadRow, Episode, ImportContext, Importer, SourceRow, Turn, require
from collectors.importers.chat_messages import (
    Conversation,
    ToolExchange,
    json_value,
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
from schemas.records import Action, Environment, Observation, Policy, Task

SEARCH_TOOLS = (WEB_SEARCH, WEB_EXTRACTOR)
DOMAINS = ("mcp", "search")


class OpenAIChatImporter(Importer):
    name = "openai_chat"
    dataset = "openai-chat-logs"  # no single public dataset: pass --dataset with the real name
    license = ""
    summary = "OpenAI-format chat logs with tool calls ({messages, tools}) as mcp or search steps"
    id_field: ClassVar[str | None] = "id"

    def convert(self, row: SourceRow, context: ImportContext) -> Episode:
        data = row.data
        messages = json_value(require(data, "messages", (list, str)), "field 'messages'", list)
        conversation = parse_conversation(messages)
        if not conversation.exchanges:
            if conversation.unanswered:
                raise BadRow("no tool call in this log has a result: there is no step to import")
            raise BadRow("the log makes no tool call: there is no step for a world model to learn")
        domain = self._domain(conversation, context.domain)
        if domain == "search":
            turns = [_search_turn(exchange) for exchange in conversation.exchanges]
            initial = Observation(format=SEARCH_RESULTS, text=INITIAL_TEXT, data={"backend": "imported"})
            tools = []
        else:
            tools = tool_definitions(data.get("tools"), "field 'tools'")
            turns = [_mcp_turn(exchange) for exchange in conversation.exchanges]
            initial = unnamed_server_initial([tool.name for tool in tools])
        config: dict[str, Any] = {"source_format": "openai_chat"}
        if domain == "search":
            config["source_tools"] = [t.name for t in tool_definitions(data.get("tools"), "field 'tools'")]
        model = data.get("model")
        return Episode(
            domain=domain,
            task=_task(row.row_id, conversation),
            initial=initial,
            turns=turns,
            environment=Environment(name=domain, backend="imported", config=config),
            policy=Policy(
                name="imported", config={"model": model} if isinstance(model, str) and model else {}
            ),
            outcome=truncation(conversation),
            tools=tools,
        )

    def _domain(self, conversation: Conversation, given: str) -> str:
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


def _search_fits(call: ToolExchange) -> bool:
    try:
        search_action(call.name, call.arguments)
    except InvalidActionError:
        return False
    return True


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
