#!/bin/bash
set -euo pipefail
wc -w < /app/poem.txt | tr -d ' ' > /app/count.txt
