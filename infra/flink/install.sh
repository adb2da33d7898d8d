#!/usr/bin/env bash
# Install the pieces for running the corpus pipeline on Beam's portable runners. Idempotent: each piece
# is cached and skipped when present. Works from the package registries alone (Go module proxy, PyPI,
# Maven Central); no release page or image registry is contacted.
#   - Prism: Beam's Go runner, built with `go install` at the apache-beam SDK's version
#   - a Flink distribution (bin/, conf/, lib/) from the apache-flink + apache-flink-libraries wheels,
#     installed --no-deps in its own directory (they pin an old apache-beam; never into the venv)
#   - Beam's Flink job server jar via `mvn dependency:get` (best effort: see FLINK_JOB_SERVER below)
#
#   bash infra/flink/install.sh                      # everything; a missing job server is a warning
#   REQUIRE_FLINK_JOB_SERVER=1 bash infra/flink/install.sh   # a missing job server is an error
#
# Prints where each piece is. Environment: AGENTWORLD_CACHE (default /var/cache/agentworld),
# BEAM_VERSION (default: the venv's apache-beam), FLINK_VERSION (default 2.2.1), VENV (default .venv).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

CACHE=${AGENTWORLD_CACHE:-/var/cache/agentworld}
VENV=${VENV:-.venv}
BEAM_VERSION=${BEAM_VERSION:-$("$VENV/bin/python" -c 'from importlib.metadata import version; print(version("apache-beam"))')}
# Flink 2.2 is the newest minor that Beam 2.77's FlinkRunner lists (PUBLISHED_FLINK_VERSIONS)
FLINK_VERSION=${FLINK_VERSION:-2.2.1}
FLINK_MINOR=${FLINK_VERSION%.*}

fail() { echo "infra/flink/install.sh: $*" >&2; exit 1; }

# --- Prism -------------------------------------------------------------------------------------
PRISM="$CACHE/prism/prism-v$BEAM_VERSION"
if [[ ! -x $PRISM ]]; then
    [[ -x /usr/local/go/bin/go ]] && PATH=$PATH:/usr/local/go/bin  # the upstream toolchain's usual home
    command -v go >/dev/null || fail "Go 1.22+ is not installed: install it, or put its bin/ on PATH"
    mkdir -p "$CACHE/prism"
    gobin=$(mktemp -d)
    echo "flink: building Prism v$BEAM_VERSION with go install (a few minutes the first time)"
    GOBIN=$gobin go install "github.com/apache/beam/sdks/v2/go/cmd/prism@v$BEAM_VERSION" ||
        fail "go install of prism@v$BEAM_VERSION failed (is the Go module proxy reachable?)"
    mv "$gobin/prism" "$PRISM.tmp" && mv "$PRISM.tmp" "$PRISM"
    rm -rf "$gobin"
fi
echo "prism: $PRISM"

# --- Flink distribution --------------------------------------------------------------------------
FLINK_TARGET="$CACHE/flink/apache-flink-$FLINK_VERSION"
FLINK_HOME="$FLINK_TARGET/pyflink"
if [[ ! -x $FLINK_HOME/bin/jobmanager.sh || ! -f $FLINK_TARGET/.complete ]]; then
    rm -rf "$FLINK_TARGET"
    mkdir -p "$FLINK_TARGET"
    echo "flink: installing apache-flink $FLINK_VERSION (+ libraries) into $FLINK_TARGET"
    "$VENV/bin/pip" install -q --no-deps --target "$FLINK_TARGET" \
        "apache-flink==$FLINK_VERSION" "apache-flink-libraries==$FLINK_VERSION" ||
        fail "pip could not install apache-flink==$FLINK_VERSION into $FLINK_TARGET"
    [[ -x $FLINK_HOME/bin/jobmanager.sh ]] || chmod +x "$FLINK_HOME"/bin/*.sh 2>/dev/null || true
    [[ -f $FLINK_HOME/bin/jobmanager.sh ]] || fail "the wheels carry no bin/jobmanager.sh under $FLINK_HOME"
    ls "$FLINK_HOME"/lib/flink-dist*.jar >/dev/null 2>&1 || fail "no lib/flink-dist*.jar under $FLINK_HOME"
    touch "$FLINK_TARGET/.complete"
fi
echo "flink home: $FLINK_HOME (Flink $FLINK_VERSION)"

# --- Beam's Flink job server ---------------------------------------------------------------------
ARTIFACT="org.apache.beam:beam-runners-flink-$FLINK_MINOR-job-server:$BEAM_VERSION"
JAR="$HOME/.m2/repository/org/apache/beam/beam-runners-flink-$FLINK_MINOR-job-server/$BEAM_VERSION"
JAR="$JAR/beam-runners-flink-$FLINK_MINOR-job-server-$BEAM_VERSION.jar"
# a refused artifact is asked for again at most once a day, so `make setup` stays quick
MISSING_MARK="$CACHE/flink/missing-beam-runners-flink-$FLINK_MINOR-job-server-$BEAM_VERSION"
if [[ ! -f $JAR && -n $(find "$MISSING_MARK" -mmin -1440 2>/dev/null) ]]; then
    echo "flink job server: MISSING (Maven refused $ARTIFACT within the last day; rm $MISSING_MARK to retry)" >&2
    [[ ${REQUIRE_FLINK_JOB_SERVER:-0} == 1 ]] && fail "$ARTIFACT is not available"
    exit 0
fi
if [[ ! -f $JAR ]]; then
    command -v mvn >/dev/null || fail "Maven is not installed: apt-get install maven"
    echo "flink: fetching $ARTIFACT with mvn dependency:get"
    if ! mvn -q -B -U dependency:get -Dartifact="$ARTIFACT" -Dtransitive=false >/dev/null 2>&1; then
        message="Maven Central (as reached from this machine) does not serve $ARTIFACT, so the \
FlinkRunner cannot run here; Prism and the Flink distribution are installed. Where it is served, \
rerun this script, or pin apache-beam to a version whose job server is served."
        touch "$MISSING_MARK"
        [[ ${REQUIRE_FLINK_JOB_SERVER:-0} == 1 ]] && fail "$message"
        echo "flink job server: MISSING. $message" >&2
        exit 0
    fi
fi
echo "flink job server: $JAR"
