#!/usr/bin/env bash
# Runs every fuzz target for SECONDS each (default 60) from the seed corpus, on nightly with
# cargo-fuzz (installed if missing), and prints one line per target: executions, corpus size,
# crashes. New inputs go to a scratch directory, never into the committed seeds. A crash fails
# the run and leaves its input in fuzz/artifacts/<target>/ (turn it into a regression test).
#
#   fuzz/run.sh 30         # 30 s each (what CI runs)
#   fuzz/run.sh 3600       # an hour each (the README's figures)
#   TARGETS=heartbeat fuzz/run.sh 600
set -euo pipefail
cd "$(dirname "$0")"
seconds="${1:-60}"
targets="${TARGETS:-heartbeat witness sync_channel sip_message tcp_framer acli sdp media trace registration accounting}"

if ! rustup toolchain list | grep -q '^nightly'; then
    echo "fuzzing needs the nightly toolchain: rustup toolchain install nightly" >&2
    exit 1
fi
if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
    echo "installing cargo-fuzz"
    cargo install --locked cargo-fuzz
fi
cargo +nightly fuzz build >/dev/null

scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
status=0
for t in $targets; do
    mkdir -p "$scratch/$t"
    log="$scratch/$t.log"
    # -max_total_time bounds the run; timeout is a backstop if libFuzzer ever hangs.
    if timeout $((seconds + 120)) cargo +nightly fuzz run "$t" "$scratch/$t" "corpus/$t" -- \
        -max_total_time="$seconds" -print_final_stats=1 >"$log" 2>&1; then
        result=ok
    else
        result=FAILED
        status=1
    fi
    runs=$(grep -oE 'stat::number_of_executed_units: *[0-9]+' "$log" | grep -oE '[0-9]+$' || echo '?')
    corpus=$(find "$scratch/$t" -type f | wc -l)
    crashes=$(find "artifacts/$t" -type f 2>/dev/null | wc -l)
    echo "fuzz $t: ${seconds}s, $runs executions, corpus $corpus new inputs, $crashes crashes: $result"
    if [ "$result" != ok ]; then
        tail -40 "$log" >&2
    fi
done
exit $status
