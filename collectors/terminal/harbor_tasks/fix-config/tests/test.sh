#!/bin/bash
# One point per value fixed, a third of the reward each; nothing if other lines were changed.
mkdir -p /logs/verifier
python3 - <<'PY'
import configparser, json

parser = configparser.ConfigParser()
checks = {"port": 0.0, "debug": 0.0, "path": 0.0}
try:
    parser.read("/app/service.ini")
    checks["port"] = float(parser.get("server", "port") == "8080")
    checks["debug"] = float(parser.get("server", "debug") == "false")
    checks["path"] = float(parser.get("storage", "path") == "/var/lib/service")
    kept = (parser.get("server", "host"), parser.get("server", "workers"), parser.get("storage", "retention_days"))
    untouched = float(kept == ("127.0.0.1", "4", "7"))
except (configparser.Error, OSError) as exc:
    print(f"service.ini unreadable: {exc}")
    untouched = 0.0
reward = round(sum(checks.values()) / 3, 4) * untouched
print(json.dumps({"checks": checks, "untouched": untouched}))
with open("/logs/verifier/reward.json", "w") as f:
    json.dump({"reward": reward, **checks, "untouched": untouched}, f)
PY
