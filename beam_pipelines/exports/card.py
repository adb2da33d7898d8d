"""The README.md dataset card of a Hub export: YAML front matter the Hub and `datasets` read, then prose.

Front-matter keys follow the Hub's dataset card spec (https://huggingface.co/docs/hub/datasets-cards
and the template https://github.com/huggingface/hub-docs/blob/main/datasetcard.md): `pretty_name`,
`license` (an id from https://huggingface.co/docs/hub/repositories-licenses, or a list of them),
`task_categories`, `tags`, `size_categories`, `configs` (each `config_name` with `data_files` per split,
https://huggingface.co/docs/hub/datasets-manual-configuration) and `dataset_info` (features and split
sizes, the form `datasets.DatasetInfo._to_yaml_dict` writes).

Licences come from provenance: the validate stage counts every valid trajectory under
`sources/license.<id>` (imported from a public dataset) or `sources/captured` (recorded by our own
collectors), and report.json carries those counters.
"""

from __future__ import annotations

from typing import Any

import yaml

# Licence ids the Hub's metadata accepts that an SPDX id maps onto by lower-casing (a subset of the list
# at https://huggingface.co/docs/hub/repositories-licenses); anything else is published as "other".
HUB_LICENSES = frozenset(
    """apache-2.0 mit afl-3.0 artistic-2.0 bsl-1.0 bsd bsd-2-clause bsd-3-clause bsd-3-clause-clear cc
    cc0-1.0 cc-by-2.0 cc-by-2.5 cc-by-3.0 cc-by-4.0 cc-by-sa-3.0 cc-by-sa-4.0 cc-by-nc-2.0 cc-by-nc-3.0
    cc-by-nc-4.0 cc-by-nd-4.0 cc-by-nc-nd-3.0 cc-by-nc-nd-4.0 cc-by-nc-sa-2.0 cc-by-nc-sa-3.0
    cc-by-nc-sa-4.0 cdla-sharing-1.0 cdla-permissive-1.0 cdla-permissive-2.0 wtfpl ecl-2.0 epl-1.0
    epl-2.0 eupl-1.1 eupl-1.2 agpl-3.0 gfdl gpl gpl-2.0 gpl-3.0 lgpl lgpl-2.1 lgpl-3.0 isc mpl-2.0 odc-by
    odbl openrail postgresql ofl-1.1 ncsa unlicense zlib pddl llama2 llama3 gemma""".split()
)
OTHER = "other"
SOURCES = "sources"  # the report's stage of provenance counters (beam_pipelines.stages.validate)


def provenance(report: dict[str, Any] | None) -> dict[str, Any] | None:
    """{licenses: {id: trajectories}, datasets: {name: trajectories}, captured: n} from report.json's
    source counters; None when the corpus was built before they existed."""
    if report is None or SOURCES not in report.get("stages", {}):
        return None
    counters = report["stages"][SOURCES]
    pick = lambda prefix: {k.removeprefix(prefix): v for k, v in counters.items() if k.startswith(prefix)}  # noqa: E731
    return {
        "licenses": pick("license."),
        "datasets": pick("dataset."),
        "captured": counters.get("captured", 0),
    }


def hub_license(found: dict[str, Any] | None, captured_license: str | None) -> str | list[str]:
    """The card's `license`: one id when every trajectory shares it, a sorted list when they differ,
    "other" for licences the Hub does not list, unknown ones, and captured data without a given licence."""
    if found is None:
        return OTHER
    ids = {_hub_id(name) for name in found["licenses"]}
    if found["captured"]:
        ids.add(_hub_id(captured_license) if captured_license else OTHER)
    ids = ids or {OTHER}
    return ids.pop() if len(ids) == 1 else sorted(ids)


def _hub_id(license: str) -> str:
    lowered = license.strip().lower()
    return lowered if lowered in HUB_LICENSES else OTHER


SIZE_BUCKETS = ("1K", "10K", "100K", "1M", "10M", "100M", "1B", "10B", "100B", "1T")


def size_category(n: int) -> str:
    """The Hub's size bucket for `n` rows ("n<1K", "1K<n<10K", ..., "n>1T")."""
    if n < 1_000:
        return "n<1K"
    for i, upper in enumerate(SIZE_BUCKETS[1:], start=1):
        if n < 10 ** (3 + i):
            return f"{SIZE_BUCKETS[i - 1]}<n<{upper}"
    return "n>1T"


def front_matter(
    name: str, license: str | list[str], configs: list[dict[str, Any]], total_rows: int
) -> dict[str, Any]:
    """`configs`: [{name, schema features, splits: [{name, path, rows, bytes}]}]."""
    return {
        "pretty_name": name,
        "license": license,
        "task_categories": ["text-generation"],
        "language": ["en"],
        "tags": ["world-model", "agents", "agent-environments", "trajectories", "agentworldbench"],
        "size_categories": [size_category(total_rows)],
        "configs": [
            {
                "config_name": c["name"],
                "data_files": [{"split": s["name"], "path": s["path"]} for s in c["splits"]],
            }
            for c in configs
        ],
        "dataset_info": [
            {
                "config_name": c["name"],
                "features": c["features"],
                "splits": [
                    {"name": s["name"], "num_bytes": s["bytes"], "num_examples": s["rows"]}
                    for s in c["splits"]
                ],
            }
            for c in configs
        ],
    }


def render(front: dict[str, Any], prose: str) -> str:
    text = yaml.safe_dump(front, sort_keys=False, allow_unicode=True, width=1000)
    return f"---\n{text}---\n\n{prose}"


def _size_table(configs: list[dict[str, Any]]) -> list[str]:
    lines = [
        "| config | split | files | rows | documents | tokens | Parquet bytes |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for c in configs:
        for s in c["splits"]:
            tokens = f"{s['tokens']:,}" if "tokens" in s else "-"
            lines.append(
                f"| {c['name']} | {s['name']} | {s['files']} | {s['rows']:,} | {s['documents']:,} | "
                f"{tokens} | {s['bytes']:,} |"
            )
    return lines


def _license_lines(found: dict[str, Any] | None, captured_license: str | None) -> list[str]:
    if found is None:
        return [
            "The corpus was built before trajectories were counted by origin, so their licences are unknown: "
            "check the raw data's provenance before publishing.",
        ]
    lines = [
        "Counted over the trajectories the pipeline read and validated (before filtering, deduplication "
        "and splitting), from each trajectory's `provenance.source`:",
        "",
        "| origin | licence | trajectories |",
        "|---|---|---:|",
    ]
    lines += [f"| imported | {name} | {n:,} |" for name, n in sorted(found["licenses"].items())]
    if found["captured"]:
        lines.append(
            f"| captured by our collectors | {captured_license or 'set by the publisher'} | "
            f"{found['captured']:,} |"
        )
    if found["datasets"]:
        lines += [
            "",
            "Public datasets imported: "
            + ", ".join(f"`{d}` ({n:,})" for d, n in sorted(found["datasets"].items()))
            + ".",
        ]
    return lines


def _build_lines(config: dict[str, Any]) -> list[str]:
    ratios = config.get("split_ratios")
    synthesis = config.get("synthesis")
    lines = [
        f"- tokenizer.json SHA-256: `{config.get('tokenizer_sha256', 'unknown')}`",
        f"- chat template SHA-256: `{config.get('chat_template_sha256') or 'none'}`",
        f"- packed row length (`seq_len`): {config.get('seq_len', 'unknown')} tokens",
        f"- near-duplicate threshold (MinHash Jaccard): {config.get('dedup_threshold', 'unknown')}",
        f"- split ratios train/validation/test: {'/'.join(str(r) for r in ratios) if ratios else 'unknown'}",
        f"- decontaminated against an evaluation file: {'yes' if config.get('decontaminated') else 'no'}",
        f"- trajectories longer than {config.get('max_steps', '?')} steps filtered out",
        f"- reasoning synthesis: {'yes, teacher ' + str(synthesis.get('model', '')) if synthesis else 'no'}",
    ]
    return lines


def prose(
    title: str,
    configs: list[dict[str, Any]],
    found: dict[str, Any] | None,
    captured_license: str | None,
    config: dict[str, Any],
    command: list[str],
) -> str:
    names = [c["name"] for c in configs]
    example = names[0] if names else "cpt"
    lines = [
        f"# {title}",
        "",
        "Interaction data for training and evaluating language world models of agent environments: models "
        "that predict an environment's next observation (a terminal screen, a tool result, an accessibility "
        "tree) from the history and the agent's action. Real sandboxes recorded the trajectories; "
        "`beam_pipelines.build_corpus` validated, normalised, redacted, deduplicated and split them.",
        "",
        "## Configs",
        "",
    ]
    about = {
        "cpt": "`cpt`: continued-pretraining documents, tokenised and packed: each row holds several "
        "documents back to back (`input_ids`, `loss_mask`), cut apart by `doc_lengths` (attend within a "
        "document: `cu_seqlens` = cumulative `doc_lengths`), named by `doc_ids`; `domain`: the environment.",
        "sft": "`sft`: supervised samples (history and action -> reasoning and predicted observation), "
        "packed like `cpt`; `loss_mask` is 1 on the target tokens (and, when the manifest's `history_loss` "
        "is on, on the earlier observations in the history). `doc_echo` marks a turn whose "
        "target repeats an earlier observation.",
        "rl": "`rl`: one RL prompt per row: chat `messages`, the real `reference` observation with its "
        "`reference_format`, and as JSON text `reference_data` and the `action`; `task_reward` and "
        "`task_verifier` are the episode's task outcome.",
        "agentworldbench": "`agentworldbench`: the test split in the AgentWorldBench sample format (`task`, "
        "`id`, `prompt`, `response`, `current_prompt`, `system_str`, `turn_idx`, `total_turns`).",
    }
    lines += [f"- {about[n]}" for n in names if n in about]
    lines += [
        "",
        "Token ids belong to the tokenizer named below by SHA-256: train with that tokenizer and its "
        "chat template.",
        "",
        "```python",
        "from datasets import load_dataset",
        f'ds = load_dataset("PATH_OR_REPO", "{example}")',
        "```",
        "",
        "## Splits and sizes",
        "",
        *_size_table(configs),
        "",
        "## Licences",
        "",
        *_license_lines(found, captured_license),
        "",
        "## How it was made",
        "",
        *_build_lines(config),
        "",
        "Exported with:",
        "",
        "```",
        " ".join(command) if command else "python -m beam_pipelines.exports hub",
        "```",
        "",
    ]
    return "\n".join(lines)
