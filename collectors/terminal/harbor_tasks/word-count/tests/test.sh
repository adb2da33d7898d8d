#!/bin/bash
# Reward 1 when /app/count.txt holds the poem's word count (10), else 0.
mkdir -p /logs/verifier
if [ "$(tr -d '[:space:]' < /app/count.txt 2>/dev/null)" = "10" ]; then
    echo "count.txt is correct"
    echo 1 > /logs/verifier/reward.txt
else
    echo "count.txt is missing or wrong: $(head -c 80 /app/count.txt 2>/dev/null)"
    echo 0 > /logs/verifier/reward.txt
fi
