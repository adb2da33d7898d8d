"""Per-domain text of the world-model system prompt: what the environment is and what an action can be.

Kept apart from `schemas.render` so the wording can be revised without touching the layout code;
the layout (turn markup, tags) is the contract, this wording is not.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class DomainPrompt:
    title: str  # "an interactive Linux terminal"
    environment: str  # what the environment is and what its observations look like
    actions: str  # the action space, as the action texts in the turns are written


DOMAIN_PROMPTS: dict[str, DomainPrompt] = {
    "terminal": DomainPrompt(
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
    ),
    "swe": DomainPrompt(
        title="a software-engineering workspace",
        environment=(
            "A git repository checked out in an isolated workspace. Observations are tool results: file "
            "contents with line numbers, unified diffs for edits, and the output and exit status of shell "
            "commands run from the repository root."
        ),
        actions=(
            "Tool calls: `read(path, ...)`, `edit` (str_replace, create or insert on a file) and "
            "`bash(command)`."
        ),
    ),
    "search": DomainPrompt(
        title="a web search engine",
        environment=(
            "A search engine over a fixed collection of web pages. Observations are numbered result lists "
            "(title, URL, snippet) or the text of an extracted page rendered as Markdown."
        ),
        actions="`web_search(query, ...)` to search, `web_extractor(url)` to read a page.",
    ),
    "mcp": DomainPrompt(
        title="a Model Context Protocol tool server",
        environment=(
            "One or more MCP servers exposing tools (time, git, file system, memory, fetch, ...). "
            "Observations are the tool results exactly as the server returns them, JSON or text, "
            "including error results."
        ),
        actions='A JSON tool call `{"name": ..., "arguments": {...}}`.',
    ),
    "web": DomainPrompt(
        title="a web browser",
        environment=(
            "A Chromium browser showing one page. Observations are the page's accessibility tree, each "
            "interactive element tagged with its `bid`, plus the current URL and title."
        ),
        actions=(
            "BrowserGym actions keyed by element bid: click, fill, hover, select_option, goto, go_back, "
            "scroll, keyboard_type, ..."
        ),
    ),
    "os": DomainPrompt(
        title="a desktop operating system",
        environment=(
            "A graphical desktop with real applications. Observations are the accessibility tree of the "
            "visible windows as text (roles, names, states, positions)."
        ),
        actions="pyautogui-style Python calls or computer actions (click, type, hotkey, scroll, ...).",
    ),
    "android": DomainPrompt(
        title="an Android phone",
        environment=(
            "An Android device with its apps. Observations are the compacted UI hierarchy of the screen "
            "(class, resource id, text, content description, bounds)."
        ),
        actions="tap, long_press, swipe, type, key and open_app.",
    ),
}
