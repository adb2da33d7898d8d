"""Per-domain text of the world-model system prompt: what the environment is and what an action can be.

Kept apart from `schemas.render` so the wording can be revised without touching the layout code;
the layout (turn markup, tags) is the contract, this wording is not. Each domain's prompt is a field
of its record (`schemas.domains.DomainRecord.prompt`), found through the registry's lookup; this
module imports nothing of ours, so `schemas.domains` can import it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class DomainPrompt:
    title: str  # "an interactive Linux terminal"
    environment: str  # what the environment is and what its observations look like
    actions: str  # the action space, as the action texts in the turns are written
    agent: str = ""  # how an agent's prompt (collectors/policies/llm.py) names it, where not the title

    @property
    def agent_title(self) -> str:
        return self.agent or self.title


TERMINAL = DomainPrompt(
    title="an interactive Linux terminal",
    environment=(
        "A bash shell running in a tmux pane on a Debian system, as an unprivileged user in a home "
        "directory with a few project files. Observations are the rendered pane: the scrollback that "
        "is still visible, each command echoed after the prompt, its output, and the next prompt "
        "(which shows the current directory). Long-running programs keep the screen until they finish."
    ),
    actions=(
        "A shell command typed and submitted with Enter, or a list of tmux keystrokes with the seconds "
        'waited after each, e.g. `"python3" (0.1s); Enter (1s)` or `C-c (0.5s)`. Key names follow tmux '
        "(Enter, Tab, Escape, C-c, C-d, Up, ...); quoted strings are typed literally."
    ),
    agent="a Linux terminal (a bash shell in tmux)",
)

SWE = DomainPrompt(
    title="a software-engineering workspace",
    environment=(
        "A git repository of a Python project checked out at /repo in an isolated workspace without "
        "network; the task is to make its failing tests pass. The first observation names the "
        "repository and its version, says how to run the tests and lists the top level. Every action "
        "calls one of the three tools below and is answered with its result. `read` shows a file with "
        "line numbers as `cat -n` does (the number right-aligned in 6 columns, a tab, the line), only "
        "the lines asked for when a range is given, or a directory listing, one entry a line, "
        "directories ending in `/`. `edit` answers with the unified diff of the change, or with the "
        "exact error (old_str not found, old_str found N times where it must be unique, the file "
        "exists, no such file, line out of range). `bash` runs a command from the repository root and "
        "shows its output (stdout and stderr interleaved; long output is cut at an explicit "
        "`[... N of M bytes truncated ...]` marker: N bytes left out of M), then a last line "
        "`[exit status: N]`, or `[timed out after N s]` when the command ran out of time. Paths are "
        "relative to the repository root; nothing outside it can be read or edited."
    ),
    actions=(
        "Tool calls written as Python calls, with only the arguments given, in the order of the tool's "
        "schema: `read(path='src/a.py', start_line=3, end_line=20)`, "
        "`edit(command='str_replace', path='a.py', old_str='x', new_str='y')`, "
        "`edit(command='create', path='b.py', file_text='...')`, "
        "`edit(command='insert', path='a.py', insert_line=4, new_str='...')` and "
        "`bash(command='python -m pytest -q', timeout_s=60)`."
    ),
)

SEARCH = DomainPrompt(
    title="a web search engine",
    environment=(
        "A search engine over a fixed collection of web pages, which it can also fetch. A search "
        'answers with a summary line (`Results 11-20 of about 1,234 for "query"`, or `No results for '
        '"query".`), then one block per result, numbered by overall rank so page 2 continues where '
        "page 1 stopped: `[n] url`, then `Title: ...`, `Snippet: ...` and `Date: ...` lines where "
        "known. Reading a page answers with `Title: ...` and `URL: ...` lines, a blank line, and the "
        "page's main text as Markdown, cut at a bounded length; a page that cannot be read answers "
        "with one `Error: ...` line (e.g. a 404 Not Found). The first observation says that no "
        "search has been made yet."
    ),
    actions=(
        "`web_search(query='...')`, with `num_results=N` (1-50, default 10) and `page=P` (1-based) "
        "shown when not the default, to search; `web_extractor(url='...')` to read a page; "
        "`answer(text='...')` to give the final answer, answered `Answer recorded.`, which ends the "
        "episode."
    ),
)

MCP = DomainPrompt(
    title="a Model Context Protocol (MCP) tool server",
    environment=(
        "An MCP server (time, git, fetch, file system, memory, ...) started fresh for the episode; its "
        "tools, with their input (and output) JSON Schemas, are listed below. The first observation "
        "is `Connected to <server> <version>: N tools (a, b, c).`. Every tool call is answered with "
        "the result as the client receives it, as JSON indented by two spaces: "
        '`{"content": [...], "structuredContent": {...}, "isError": false}`, where the content items '
        'are the server\'s (e.g. `{"type": "text", "text": "..."}`), `structuredContent` appears only '
        'when the tool returned it, and a tool that failed answers `"isError": true` with its message '
        "in the content. A protocol error (an unknown tool, invalid parameters) answers "
        '`{"error": {"code": <JSON-RPC error code>, "message": "..."}}`, and a call the server did not '
        'answer in time `{"error": {"code": "timeout", "message": "no answer within N s"}}`.'
    ),
    actions=(
        'A JSON tool call on one line, `{"name": "<tool>", "arguments": {...}}`, naming a tool and '
        "giving arguments for its input schema."
    ),
)

WEB = DomainPrompt(
    title="a web browser",
    environment=(
        "A Chromium browser on web sites, with one or more tabs. Each observation starts with header "
        "lines: `URL:` and `Title:` of the active tab, `Tabs:` (`[index] title` for each, the active "
        "one marked `(active)`), `Focused:` (the focused element's `[bid]`, or `none`), and `Error:` "
        "when the last action failed (the page is then unchanged, e.g. `element with bid '99' not "
        "found`). After a blank line comes the page's accessibility tree, one node a line, indented "
        "with one tab per level under `RootWebArea 'title'`: `role 'name'` followed by "
        "comma-separated properties (focused, checked, disabled, level=2, value='...', "
        "placeholder='...', url='...'), page text as `StaticText '...'` lines, and the element id in "
        "square brackets first (`[12] link 'Cart (2)'`) on every element an action can target. A "
        "long tree ends with a `[... N more nodes truncated ...]` line."
    ),
    actions=(
        "BrowserGym calls keyed by element bid: `click('12')`, `dblclick`, `hover`, `focus`, "
        "`fill('7', 'text')`, `clear`, `select_option('9', 'option')`, `press('7', 'Enter')`, "
        "`keyboard_press('Control+a')`, `keyboard_type('text')`, `scroll(0, 400)`, `mouse_click(x, y)` "
        "and other mouse calls by coordinates, `goto('url')`, `go_back()`, `go_forward()`, "
        "`new_tab()`, `tab_focus(0)`, `tab_close()`, `noop()`, `send_msg_to_user('text')` and "
        "`report_infeasible('reason')`."
    ),
)

OS = DomainPrompt(
    title="a Linux desktop",
    environment=(
        "A graphical Linux desktop (an X display with the openbox window manager) running real "
        "applications, such as GNOME Calculator, the Mousepad text editor and an xterm terminal; which "
        "ones are open at the start shows in the initial state. Each observation is the desktop's "
        "accessibility tree (AT-SPI) as text. It starts with `Error: <message>` when the last action "
        "failed (a click where nothing is, a point off the screen, an exception raised by the code), "
        "then `Focused: <application> — <window title>` (or `Focused: none`), then one node a line, "
        'indented two spaces per depth: `[<id>] <role> "<name>"`, then ` value="<text>"` for '
        "text and values, ` states=<comma-separated states>` (focused, editable, checked, ...) and "
        "` @(<x>,<y> <width>x<height>)`, the node's position and size in screen pixels. Only nodes on "
        "screen are listed; ids count the nodes in depth-first order, so they change when the screen "
        "does. A long tree ends with a `[... N more nodes not shown]` line. A terminal shows little "
        "accessibility: its window appears, not the text inside it. A screenshot is taken too but is "
        "not part of the text."
    ),
    actions=(
        "Python code calling pyautogui on the desktop's own display, as AgentWorldBench writes OS "
        "actions, one or more calls per action: `pyautogui.click(120, 240)` (with `clicks=2` or "
        "`button='right'`), `pyautogui.doubleClick(120, 240)`, `pyautogui.rightClick(120, 240)`, "
        "`pyautogui.moveTo(120, 240)`, a drag as `pyautogui.moveTo(10, 20)` then "
        "`pyautogui.dragTo(300, 40, duration=0.5)`, `pyautogui.scroll(-3, x=400, y=300)` (negative "
        "scrolls down), `pyautogui.write('text')`, `pyautogui.press('enter')`, "
        "`pyautogui.hotkey('ctrl', 's')` and `time.sleep(1)`. Coordinates are screen pixels; a "
        "node's centre is inside its box."
    ),
    agent="a Linux desktop (applications driven with pyautogui)",
)

ANDROID = DomainPrompt(
    title="an Android phone",
    environment=(
        "An Android phone (an emulator driven through Appium and UiAutomator2) with its stock apps, "
        "such as Settings, Contacts and Clock; which app is open at the start shows in the initial "
        "state. Each observation is the screen's UI hierarchy, compacted to text. It starts with "
        "`Error: <message>` when the last action failed (an index not on the screen, a point off the "
        "screen, text typed into a node that takes none, an app that is not installed), then "
        "`Package: <package>  Activity: <activity>` (`unknown` when not reported), then one node a "
        'line, indented two spaces per depth: `[<index>] <class> "<text>"`, then ` desc="<content '
        'description>"` and ` id=<resource id>` where the node has them, then '
        "` @(<x1>,<y1>,<x2>,<y2>)`, its bounds in screen pixels, then the flags that apply as a comma "
        "list (clickable, long-clickable, editable, scrollable, focused, checked, selected, disabled). "
        "Layout nodes with no text, description, id or flag are left out and their children shown in "
        "their place. Indexes count the nodes shown, so they change when the screen does. A long "
        "tree ends with a `[... N more nodes not shown]` line. A screenshot is taken too but is not "
        "part of the text."
    ),
    actions=(
        "One JSON object per action, as AndroidWorld writes them: "
        '`{"action_type": "click", "index": 7}` (or `"x"` and `"y"` in pixels instead of an index), '
        '`{"action_type": "long_press", "index": 7}`, `{"action_type": "input_text", "text": '
        '"Alice", "index": 4}` (the index optional: the focused field), `{"action_type": "scroll", '
        '"direction": "down"}` (up, down, left or right, optionally with the `"index"` of a '
        'scrollable node), `{"action_type": "swipe", "x": 540, "y": 1800, "to_x": 540, "to_y": '
        '600}`, `{"action_type": "navigate_back"}`, `{"action_type": "navigate_home"}`, '
        '`{"action_type": "keyboard_enter"}`, `{"action_type": "open_app", "app_name": "Clock"}` '
        'and `{"action_type": "wait", "seconds": 2}`. An index is a `[<index>]` of the last '
        "observation."
    ),
    agent="an Android phone (apps driven with AndroidWorld-style JSON actions)",
)
