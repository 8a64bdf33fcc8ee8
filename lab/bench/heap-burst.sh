#!/usr/bin/env bash
# heap-burst.sh: does a node's memory come back after a burst of calls?
#
# Usage (from anywhere inside the repo):
#   cargo build --release -p sbc && lab/bench/heap-burst.sh
#   CALLS=5000 RATE=500 HOLD_MS=2000 lab/bench/heap-burst.sh
#
# One `sbc run` node on loopback (access 127.0.0.1:$PORT, core :$PORT+2, SIPp UAS behind it on
# :$PORT+20); SIPp's built-in uac places CALLS calls at RATE calls/s, each held HOLD_MS. The
# node's jemalloc heap (`show memory --json`, heap_allocated) and its VmRSS are read at idle,
# at the end of the burst, then at 10, 30, 60, 120, 180 and 240 s after it (READ_AT).
#
# Environment (defaults in brackets):
#   CALLS [2000]  RATE [200]  HOLD_MS [1000]  PORT [27460]  READ_AT ["10 30 60 120 180 240"]
#   SBC_BIN [<repo>/target/release/sbc]  SIPP [sipp]  OUT [<repo>/lab/results/heap-burst-<UTC>.md]
#   MALLOC_CONF: passed to jemalloc as _RJEM_MALLOC_CONF (e.g. tcache:false) [unset]
#
# Output: a Markdown table on stdout and in $OUT; progress on stderr. A benchmark, not a test:
# exit 0 whenever the run completed. Only the PIDs this script started are signalled.
set -euo pipefail
BENCH_NAME=heap-burst

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(git -C "$SCRIPT_DIR" rev-parse --show-toplevel 2>/dev/null || (cd "$SCRIPT_DIR/../.." && pwd))
# shellcheck source=lab/bench/lib.sh
source "$SCRIPT_DIR/lib.sh"

CALLS=${CALLS:-2000}
RATE=${RATE:-200}
HOLD_MS=${HOLD_MS:-1000}
PORT=${PORT:-27460}
READ_AT=${READ_AT:-"10 30 60 120 180 240"}
SBC_BIN=${SBC_BIN:-$ROOT/target/release/sbc}
SIPP=${SIPP:-sipp}
STAMP=$(date -u +%Y-%m-%dT%H%M%SZ)
OUT=${OUT:-$ROOT/lab/results/heap-burst-$STAMP.md}
IP=127.0.0.1
for v in CALLS RATE HOLD_MS PORT; do is_uint "${!v}" || die "$v must be an integer"; done
(( RATE > 0 )) || die "RATE must be positive"
[[ -x $SBC_BIN ]] || die "no $SBC_BIN: cargo build --release -p sbc"
command -v "$SIPP" >/dev/null || die "no $SIPP (Debian: sip-tester)"
for p in "$PORT" $((PORT + 2)) $((PORT + 20)) $((PORT + 30)); do need_free "$p"; done

WORK=$(mktemp -d "${TMPDIR:-/tmp}/heap-burst.XXXXXX")
chmod 700 "$WORK"
SBC_PID="" UAS_PID="" UAC_PID=""
cleanup() {
  stop_pid "$UAC_PID" 3; stop_pid "$UAS_PID" 3; stop_pid "$SBC_PID" 5
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

write_sbc_config "$WORK/sbc.toml" "$PORT" $((PORT + 2)) $((PORT + 20)) "workers = 2" "" ""

( cd "$WORK" && exec "$SIPP" -sn uas -i "$IP" -p $((PORT + 20)) -nostdin >"$WORK/uas.out" 2>&1 </dev/null ) &
UAS_PID=$!
if [[ -n ${MALLOC_CONF:-} ]]; then export _RJEM_MALLOC_CONF=$MALLOC_CONF; fi
RUST_LOG=warn "$SBC_BIN" run --config "$WORK/sbc.toml" --mgmt-socket "$WORK/m.sock" >"$WORK/sbc.log" 2>&1 </dev/null &
SBC_PID=$!
unset _RJEM_MALLOC_CONF

heap() {
  "$SBC_BIN" acli --mgmt-socket "$WORK/m.sock" --json -c "show memory" 2>/dev/null \
    | sed -n 's/.*"heap_allocated": *\([0-9][0-9]*\).*/\1/p' | head -1
}
rss_kb() { awk '/^VmRSS/ { print $2 }' "/proc/$SBC_PID/status" 2>/dev/null; }
have_heap() { [[ -n $(heap) ]]; }
wait_until 15 have_heap || die "no heap reading from the node (see $WORK/sbc.log)"

declare -a ROWS=()
row() { ROWS+=("| $1 | $(heap) | $(rss_kb) |"); log "$1: heap $(heap) B, RSS $(rss_kb) kB"; }
row "idle"
( cd "$WORK" && exec "$SIPP" -sn uac -i "$IP" -p $((PORT + 30)) "$IP:$PORT" -nostdin \
    -r "$RATE" -m "$CALLS" -d "$HOLD_MS" -timeout "$(( CALLS / RATE + HOLD_MS / 1000 + 60 ))s" \
    -trace_stat -stf "$WORK/uac.csv" -fd 1 >"$WORK/uac.out" 2>&1 </dev/null ) &
UAC_PID=$!
wait "$UAC_PID" || true
UAC_PID=""
row "end of the burst"
ended=$(date +%s)
for t in $READ_AT; do
  now=$(date +%s)
  (( ended + t > now )) && sleep $(( ended + t - now ))
  row "+$t s"
done
ok=$(csv_last "$WORK/uac.csv" 'SuccessfulCall(C)')
failed=$(csv_last "$WORK/uac.csv" 'FailedCall(C)')

mkdir -p "$(dirname "$OUT")"
{
  echo "# Heap after a burst ($STAMP)"
  echo
  echo "- command: \`CALLS=$CALLS RATE=$RATE HOLD_MS=$HOLD_MS${MALLOC_CONF:+ MALLOC_CONF=$MALLOC_CONF} lab/bench/heap-burst.sh\` at $(repo_rev "$ROOT")"
  echo "- one node, SIPp built-in uac -> sbc -> built-in uas on loopback; calls: $ok successful, $failed failed"
  echo "- heap: jemalloc \`stats.allocated\` (\`show memory --json\` heap_allocated); RSS: VmRSS of the sbc PID"
  echo
  echo "| when | heap (bytes) | RSS (kB) |"
  echo "|---|---:|---:|"
  printf '%s\n' "${ROWS[@]}"
} | tee "$OUT"
log "report written to $OUT"
