"""The plain-data part of the domain registry: each domain's names and the shape of its observations.

Every layer may read this record, the corpus pipeline and the edit scripts included, which may not
import `sandboxes` (DESIGN 4). `sandboxes.domains.DomainSpec` extends each record with the facts and
code of the sandbox layer (backends, verifiers, metrics, the action parser); `sandboxes.domains.SPECS`
holds one `DomainSpec` per record here, in the same order. Adding a domain starts with a record here.
This module imports only `schemas.prompts` (which imports nothing of ours), so `schemas.records` can
take its list of domains from it.
"""

from __future__ import annotations

from dataclasses import dataclass

from schemas import prompts
from schemas.prompts import DomainPrompt

# How schemas.atif writes a domain's actions as ATIF tool calls (DomainRecord.atif_calls), and reads
# them back: one call named by the action's kind with the action's arguments; a keystrokes batch as one
# `bash_command` call per item, as Harbor's own terminal agent (Terminus 2) writes them; a tool call
# under the tool's own name and arguments. The ATIF importer (collectors.importers.atif_harbor) reads an
# as_tool call's results as that tool's result, in our MCP result form, and a first observation the
# file did not record as the list of the agent's tools (which are the server's).
ATIF_CALL_PER_KIND = "per_kind"
ATIF_CALL_PER_KEYSTROKE = "per_keystroke"
ATIF_CALL_AS_TOOL = "as_tool"


@dataclass(frozen=True, kw_only=True)
class DomainRecord:
    name: str  # the trajectory's `domain`
    # `sandboxes.<package>` and `collectors.<package>`; the lookup takes it too.
    package: str
    # The AgentWorldBench task name and public judge prompt folder (prompts/<it>/); the lookup takes it.
    public_task: str
    observation_format: str  # Observation.format of the sandbox's observations
    # The world-model system prompt's wording for the domain (schemas.render) and the name an agent's
    # prompt gives it (collectors.policies.llm).
    prompt: DomainPrompt
    # The observation is a tree written one node a line, a node's line opening with its id `[ID]`
    # (after its indentation): an edit script (schemas.edit_script) names a line by its node's id.
    node_ids: bool = False
    # The node ids are numbers given in document order ([0], [1], ...), so one inserted node renumbers
    # every node after it: an edit script compares lines without their number and numbers them again.
    renumbered_ids: bool = False
    atif_calls: str = ATIF_CALL_PER_KIND  # one of the ATIF_CALL_ ways above
    aliases: tuple[str, ...] = ()  # other names the lookup accepts


# The order of the trajectory schema's domain list (schemas.records.DOMAINS).
RECORDS = (
    DomainRecord(
        name="terminal",
        package="terminal",
        public_task="terminal",
        observation_format="terminal_screen",
        prompt=prompts.TERMINAL,
        atif_calls=ATIF_CALL_PER_KEYSTROKE,
    ),
    DomainRecord(
        name="swe", package="swe", public_task="swe", observation_format="swe_tool_result", prompt=prompts.SWE
    ),
    DomainRecord(
        name="search",
        package="search",
        public_task="search",
        observation_format="search_results",
        prompt=prompts.SEARCH,
    ),
    DomainRecord(
        name="mcp",
        package="mcp",
        public_task="mcp",
        observation_format="mcp_result",
        prompt=prompts.MCP,
        atif_calls=ATIF_CALL_AS_TOOL,
    ),
    # Browser ids (bid) are the page's own: a new node takes a fresh one and the others keep theirs.
    DomainRecord(
        name="web",
        package="web",
        public_task="web",
        observation_format="a11y_tree",
        prompt=prompts.WEB,
        node_ids=True,
    ),
    DomainRecord(
        name="os",
        # `sandboxes.os` would read as the standard module.
        package="desktop",
        public_task="os",
        observation_format="desktop_a11y_tree",
        prompt=prompts.OS,
        node_ids=True,
        renumbered_ids=True,
        aliases=("desktop",),
    ),
    DomainRecord(
        name="android",
        package="android",
        public_task="android",
        observation_format="android_ui_tree",
        prompt=prompts.ANDROID,
        node_ids=True,
        renumbered_ids=True,
    ),
)
KNOWN_DOMAINS = tuple(record.name for record in RECORDS)


def lookup_keys(record: DomainRecord) -> tuple[str, ...]:
    """Every name a record is found by: its own, its package's, its public task's and its aliases."""
    return (record.name, record.package, record.public_task, *record.aliases)


_LOOKUP = {key: record for record in RECORDS for key in lookup_keys(record)}


def find_record(name: str) -> DomainRecord | None:
    """The record `name` finds (its name, package, public task or an alias), or None for a name of no
    domain; sandboxes.domains.find_domain gives the whole DomainSpec."""
    return _LOOKUP.get(name)
