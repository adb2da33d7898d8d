"""Record search trajectories: `python -m collectors.search --workers N --episodes M --out DIR`."""

from __future__ import annotations

import sys

from collectors import cli
from collectors.search import options

EXAMPLES = """examples:
  # 2 workers, 20 explorer episodes on the embedded corpus (Python manual + manual pages);
  # the first run builds the default index into $AGENTWORLD_CACHE_DIR/search-index (seconds)
  python -m collectors.search --workers 2 --episodes 20 --out data/search

  # a bigger corpus: build it once, then use it
  python -m sandboxes.search build-index --out data/search-index --limit 0
  python -m collectors.search --index data/search-index --episodes 200 --out data/search-big

  # a SearXNG instance (json enabled in its settings.yml); pages fetched from the real web
  python -m collectors.search --backend searxng --searxng-url http://localhost:8888 \\
      --rate-limit 1 --episodes 50 --out data/search-web

  # any JSON search API, described by a file with the json_api backend's fields
  #   {"url_template": "https://api.example/search?q={query}&count={count}&offset={offset}",
  #    "results_path": "data.items", "url_key": "link", "title_key": "name", "snippet_key": "summary"}
  python -m collectors.search --backend json_api --json-api api.json --episodes 50 --out data/api

  # an LLM agent behind an OpenAI-compatible server (vLLM, llama.cpp)
  python -m collectors.search --policy llm --llm-base-url http://localhost:8000/v1 \\
      --llm-model Qwen/Qwen3-8B --episodes 100 --workers 4 --out data/search-llm

  # a world model in place of the search engine and the pages: recorded as simulated
  python -m collectors.search --backend simulator --model-endpoint http://localhost:8000/v1 \\
      --episodes 20 --out data/search-sim

With the embedded index, pages are served on 127.0.0.1 by each sandbox and recorded under stable
http://*.agentworld.test/ URLs; web_extractor reaches no other host unless --allow-fetch says so.
Rerunning the same command resumes: committed episodes are skipped. One collector per --out.
"""

SPEC = cli.CollectorSpec.declare(options, EXAMPLES)
main = SPEC.main  # main(argv) -> exit code


if __name__ == "__main__":
    sys.exit(main())
