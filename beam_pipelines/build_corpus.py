"""Entry point: raw trajectories -> corpora, token shards, AgentWorldBench files and a report.

    python -m beam_pipelines.build_corpus --input DIR_OR_GLOB --output OUT [options] [Beam options]

Read -> Validate -> Normalise -> Redact -> Filter -> Split -> (Decontaminate, with --decontaminate) ->
Park -> Deduplicate -> [Format -> (Synthesis, with --synthesize-reasoning) -> Tokenise -> Pack -> Write,
fused per output shard], every rejected record in OUT/dead_letter/<stage>.jsonl.
`--help` lists the options and shows local, Dataflow and Flink command lines.

Memory: everything up to Park streams record by record in one fused step; from there on only small
references cross a shuffle (see `beam_pipelines.stages.park`), so no runner ever holds the corpus, and
the two groupings with an element per trajectory (LSH band entries, shard references) go through files
(`beam_pipelines.stages.spill`), so the runner's memory does not grow with it either.
Filter, Split and Decontaminate run before Deduplicate, so a trajectory that is itself filtered out or
contaminated never stands for (and drops) a duplicate that would have been kept.
"""

from __future__ import annotations

import sys
import time
from dataclasses import replace

import apache_beam as beam
from fsspec.core import url_to_fs

from beam_pipelines.dead_letter import DEAD_LETTER, OK
from beam_pipelines.memory import few_malloc_arenas
from beam_pipelines.options import CorpusConfig, parse_args
from beam_pipelines.stages.common import CORPORA
from beam_pipelines.stages.decontaminate import MATCHES, DecontaminateTrajectories, remove_index
from beam_pipelines.stages.dedup import DROPS, Deduplicate
from beam_pipelines.stages.filter import FilterTrajectories
from beam_pipelines.stages.normalise import NormaliseTrajectories
from beam_pipelines.stages.park import ParkTrajectories, remove_parked
from beam_pipelines.stages.read import ReadTrajectories
from beam_pipelines.stages.redact import RedactSecrets
from beam_pipelines.stages.report import write_report
from beam_pipelines.stages.shards import BuildShards
from beam_pipelines.stages.split import SplitTrajectories
from beam_pipelines.stages.validate import ValidateTrajectories
from beam_pipelines.stages.write import WriteJsonLines, WriteManifest
from beam_pipelines.synthesis.teacher import resolve_model
from schemas.chat_tokens import shared_tokenizer

OUTPUT_DIRS = (*CORPORA, DEAD_LETTER)


def build(p: beam.Pipeline, config: CorpusConfig, manifest_config: dict) -> None:
    """Add the whole corpus pipeline to `p`."""
    dead: list[beam.PCollection] = []

    def stage(pcoll, label: str, transform: beam.PTransform) -> beam.PCollection:
        out = pcoll | label >> transform
        if not isinstance(out, dict):  # a stage that rejects nothing returns its PCollection
            return out
        dead.append(out[DEAD_LETTER])
        return out[OK]

    trajectories = stage(p, "Read", ReadTrajectories(config.input))
    trajectories = stage(trajectories, "Validate", ValidateTrajectories())
    trajectories = stage(trajectories, "Normalise", NormaliseTrajectories())
    trajectories = stage(trajectories, "Redact", RedactSecrets())
    trajectories = stage(trajectories, "Filter", FilterTrajectories(max_steps=config.max_steps))
    pairs = stage(
        trajectories,
        "Split",
        SplitTrajectories(config.split_ratios, min_test_per_domain=config.min_test_per_domain),
    )
    written: list[beam.PCollection] = []
    if config.decontaminate is not None:
        # builds the benchmark index here, in the driver, once (see beam_pipelines.stages.decontaminate)
        checked = pairs | "Decontaminate" >> DecontaminateTrajectories(config.decontaminate, config.output)
        dead.append(checked[DEAD_LETTER])
        written.append(checked[MATCHES])
        pairs = checked[OK]
    parked = stage(pairs, "Park", ParkTrajectories(config.output))
    deduplicated = parked | "Deduplicate" >> Deduplicate(config.output, threshold=config.dedup_threshold)
    dead.append(deduplicated[DEAD_LETTER])

    # Format, Tokenise, Pack and Write fused per output shard: see beam_pipelines.stages.shards
    files = stage(
        deduplicated[OK],
        "BuildShards",
        BuildShards(
            config.output,
            config.emit,
            config.tokenizer,
            config.seq_len,
            config.shards,
            drops=deduplicated[DROPS],
            synthesis=config.synthesis,
            target=config.target,
            verification_turns=config.verification_turns,
            history_loss=config.history_loss,
        ),
    )
    dead_files = (
        dead
        | "DeadLetters" >> beam.Flatten()
        | "DeadLetterPaths" >> beam.Map(lambda d: (f"{DEAD_LETTER}/{d.stage}.jsonl", d.to_json()))
        | "WriteDeadLetters" >> WriteJsonLines(config.output)
    )
    (
        (files, dead_files, *written)
        | "AllFiles" >> beam.Flatten()
        | "Manifest" >> WriteManifest(config.output, manifest_config)
    )


def main(argv: list[str] | None = None) -> int:
    config, options = parse_args(argv)
    few_malloc_arenas()
    # fail before the run on a missing or broken tokenizer; the stages' workers in this process reuse it
    tokenizer = shared_tokenizer(config.tokenizer)
    if config.synthesis is not None:
        config = replace(config, synthesis=resolve_model(config.synthesis))
    fs, root = url_to_fs(config.output)
    for name in OUTPUT_DIRS:
        # object stores have no directories; locally the layout exists even for an empty corpus
        fs.makedirs(f"{root}/{name}", exist_ok=True)
    remove_parked(config.output)  # what a killed run left
    started = time.monotonic()
    p = beam.Pipeline(options=options)
    try:
        build(p, config, config.manifest_view(tokenizer.fingerprint))
        result = p.run()
        result.wait_until_finish()
    finally:
        remove_parked(config.output)
        remove_index(config.output)
    report, markdown = write_report(config.output, result)
    print(markdown)
    tokens = sum(t.get("tokens", 0) for groups in report["outputs"].values() for t in groups.values())
    seconds = time.monotonic() - started
    print(
        f"{tokens:,} tokens written in {seconds:.1f} s ({tokens / max(seconds, 1e-9):,.0f} tokens/s); "
        f"output: {config.output}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
