#!/bin/sh
# Install the caller's public key for `agent`, then run sshd in the foreground (logs on stderr).
set -eu
keys=/home/agent/.ssh/authorized_keys
install -d -m 700 -o agent -g agent /home/agent/.ssh
if [ -n "${AUTHORIZED_KEY:-}" ]; then
    printf '%s\n' "$AUTHORIZED_KEY" >"$keys"
elif [ -s /run/agentworld/authorized_keys ]; then
    cp /run/agentworld/authorized_keys "$keys"
else
    echo "agentworld-desktop: no key for user agent: pass -e AUTHORIZED_KEY=\"\$(cat key.pub)\"" \
        "or mount it at /run/agentworld/authorized_keys" >&2
    exit 2
fi
chown agent:agent "$keys"
chmod 600 "$keys"
exec /usr/sbin/sshd -D -e
