"""A stdio MCP server in raw JSON-RPC (no SDK, as servers in other languages are) that writes stray
lines on stdout, the protocol channel: a banner, a line before each answer, and a JSON line that is
not JSON-RPC. One tool, `echo`. `python noisy.py`."""

from __future__ import annotations

import json
import sys

ECHO = {
    "name": "echo",
    "description": "Return the text.",
    "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
}


def send(message: dict) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def answer(request: dict) -> dict:
    method, params = request["method"], request.get("params") or {}
    if method == "initialize":
        return {
            "protocolVersion": params["protocolVersion"],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "agentworld-test-noisy", "version": "1"},
        }
    if method == "tools/list":
        return {"tools": [ECHO]}
    if method == "tools/call":
        print(f"calling {params['name']}", flush=True)  # stray: plain text on stdout
        send({"log": "not a JSON-RPC message"})  # stray: JSON, but not JSON-RPC
        return {"content": [{"type": "text", "text": params["arguments"]["text"]}], "isError": False}
    raise KeyError(method)


def main() -> None:
    print("noisy server 1.0 listening on stdio", flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        if "id" not in request:
            continue  # a notification
        try:
            send({"jsonrpc": "2.0", "id": request["id"], "result": answer(request)})
        except KeyError as exc:
            error = {"code": -32601, "message": f"method not found: {exc}"}
            send({"jsonrpc": "2.0", "id": request["id"], "error": error})


if __name__ == "__main__":
    main()
