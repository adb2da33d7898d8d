#!/bin/bash
set -euo pipefail
cat > /app/greet.sh <<'SCRIPT'
#!/bin/bash
name="$1"
echo "Hello, $name!"
SCRIPT
chmod +x /app/greet.sh
