"""One web sandbox step inside the browser image: reset on the embedded shop, click the cart link.

Run in the image (tests/infra/test_images.py does):
    docker run --rm --shm-size=512m --entrypoint python -v $PWD/tests/infra/image_smoke:/smoke:ro \
        agentworld/browser /smoke/web_step.py
Prints one JSON line: the URL and title after reset and after the step, and the step's error.
"""

from __future__ import annotations

import json

from sandboxes.web import WebConfig, WebSandbox, parse_action, site_url
from schemas.records import Task


def main() -> None:
    sandbox = WebSandbox(WebConfig())
    try:
        sandbox.start()
        first = sandbox.reset(Task(id="smoke", metadata={"start_url": site_url("shop", "/")}))
        cart = next(e["bid"] for e in first.data["elements"] if e["name"].startswith("Cart"))
        after = sandbox.step(parse_action("click", {"bid": cart})).observation
        print(
            json.dumps(
                {
                    "reset_url": first.data["url"],
                    "reset_title": first.data["title"],
                    "step_url": after.data["url"],
                    "step_error": after.data["last_action_error"],
                }
            )
        )
    finally:
        sandbox.close()


if __name__ == "__main__":
    main()
