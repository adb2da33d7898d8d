#!/bin/bash
set -euo pipefail
sed -i -e 's/^port = .*/port = 8080/' -e 's/^debug = .*/debug = false/' \
    -e 's|^path = .*|path = /var/lib/service|' /app/service.ini
