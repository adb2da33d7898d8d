#!/bin/bash
# Half the reward for an executable script, the other half for the right greetings.
mkdir -p /logs/verifier
executable=0
greets=0
[ -x /app/greet.sh ] && executable=1
if [ "$executable" = 1 ] && [ "$(timeout 10 /app/greet.sh Ada 2>&1)" = "Hello, Ada!" ] \
    && [ "$(timeout 10 /app/greet.sh 'Grace Hopper' 2>&1)" = "Hello, Grace Hopper!" ]; then
    greets=1
fi
case "$executable$greets" in
    11) reward=1.0 ;;
    10) reward=0.5 ;;
    *) reward=0.0 ;;
esac
echo "executable=$executable greets=$greets"
printf '{"reward": %s, "executable": %s, "greets": %s}\n' "$reward" "$executable" "$greets" \
    > /logs/verifier/reward.json
