#!/usr/bin/env bash
# relay-vs-kamailio.sh: side-by-side relay benchmark, our SBC vs Kamailio.
#
# Usage (from anywhere inside the repo):
#   cargo build --release -p sbc && lab/bench/relay-vs-kamailio.sh
#   RELAYS=kamailio RATES="200 500" DURATION=3 MEM_CALLS=2000 lab/bench/relay-vs-kamailio.sh
#
# For each call rate, each relay in turn (never both under load at once) gets
#   SIPp UAC (127.0.0.1:$UAC_PORT) -> relay -> SIPp UAS (127.0.0.1:5080)
# with SIPp's built-in `uac`/`uas` scenarios; the UAS and the relay are started
# fresh for every step. Then a memory step holds MEM_CALLS established calls
# through each relay and measures resident memory per dialog.
#
#   kamailio: kamailio -f $SHARED/peers/kamailio.cfg -DD -E -m 1024 -M 16
#             (UDP 127.0.0.1:5070; the reference config is used as is)
#   sbc:      target/release/sbc run --config <generated TOML>
#             (access 127.0.0.1:5060, core 127.0.0.1:5062, route to the UAS)
#
# Environment (defaults in brackets):
#   RELAYS      relays to run, in order                 ["kamailio sbc"]
#   RATES       call rates (calls/s), one step each      ["200 500 1000 2000"]
#   DURATION    seconds of traffic per step               [10]
#   CALL_MS     call hold time of the rate steps (-d)     [0]
#   MEM_CALLS   concurrent calls of the memory step, 0 skips it [10000]
#   MEM_RATE    call rate that sets those calls up        [500]
#   MEM_SETTLE  seconds between the last call set up and the memory reading: the calls'
#               transactions end (RFC 6026 windows: 64*T1 = 32 s), leaving the dialogs [40]
#   UAC_PORT    SIPp UAC local port (not 5060!)           [5090]
#   SHARED      the shared folder                         [<repo>/../shared]
#   KAMAILIO_CFG  reference config   [$SHARED/peers/kamailio.cfg, else lab/peers/kamailio.cfg]
#   KAMAILIO    kamailio binary      [/usr/sbin/kamailio]
#   SBC_BIN     sbc binary           [<repo>/target/release/sbc]
#   SIPP        sipp binary          [sipp]
#   OUT         Markdown report      [<repo>/lab/results/relay-<UTC date-time>.md]
#   KEEP_WORK=1 keep the scratch dir (SIPp CSVs, relay logs) even on success
#
# Output: a Markdown report on stdout and in $OUT; progress goes to stderr.
# This is a benchmark, not a test: it exits 0 whenever the run completed, even
# if calls failed. Exit 2 on bad setup (busy port, missing binary).
set -euo pipefail

die() { echo "relay-bench: $*" >&2; exit 2; }
log() { echo "[$(date +%T)] $*" >&2; }

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(git -C "$SCRIPT_DIR" rev-parse --show-toplevel 2>/dev/null || (cd "$SCRIPT_DIR/../.." && pwd))
SHARED=${SHARED:-$ROOT/../shared}
if [[ -z ${KAMAILIO_CFG:-} ]]; then
  # The shared reference copy when it is there, else the copy kept in lab/peers/.
  KAMAILIO_CFG=$SHARED/peers/kamailio.cfg
  [[ -r $KAMAILIO_CFG ]] || KAMAILIO_CFG=$ROOT/lab/peers/kamailio.cfg
fi
KAMAILIO=${KAMAILIO:-/usr/sbin/kamailio}
SBC_BIN=${SBC_BIN:-$ROOT/target/release/sbc}
SIPP=${SIPP:-sipp}
RELAYS=${RELAYS:-"kamailio sbc"}
RATES=${RATES:-"200 500 1000 2000"}
DURATION=${DURATION:-10}
CALL_MS=${CALL_MS:-0}
MEM_CALLS=${MEM_CALLS:-10000}
MEM_RATE=${MEM_RATE:-500}
MEM_SETTLE=${MEM_SETTLE:-40}
UAC_PORT=${UAC_PORT:-5090}
STAMP=$(date -u +%Y-%m-%dT%H%M%SZ)
OUT=${OUT:-$ROOT/lab/results/relay-$STAMP.md}

# Fixed by the reference Kamailio config and the brief.
IP=127.0.0.1
UAS_PORT=5080
KAM_PORT=5070
SBC_PORT=5060
SBC_CORE_PORT=5062

CLK_TCK=$(getconf CLK_TCK)
PAGE_KB=$(( $(getconf PAGESIZE) / 1024 ))

# ---------------------------------------------------------------- checks ---
is_uint() { [[ $1 =~ ^[0-9]+$ ]]; }
is_uint "$DURATION" && (( DURATION > 0 )) || die "DURATION must be a positive integer"
is_uint "$CALL_MS" || die "CALL_MS must be an integer (ms)"
is_uint "$MEM_CALLS" || die "MEM_CALLS must be an integer"
is_uint "$MEM_RATE" && (( MEM_RATE > 0 )) || die "MEM_RATE must be a positive integer"
is_uint "$MEM_SETTLE" || die "MEM_SETTLE must be an integer"
is_uint "$UAC_PORT" || die "UAC_PORT must be a port number"
for r in $RATES; do is_uint "$r" && (( r > 0 )) || die "bad rate in RATES: $r"; done
for relay in $RELAYS; do
  case $relay in
    kamailio)
      [[ -x $KAMAILIO ]] || die "kamailio not found at $KAMAILIO (Debian package kamailio)"
      [[ -r $KAMAILIO_CFG ]] || die "reference config not found: $KAMAILIO_CFG (set SHARED or KAMAILIO_CFG)" ;;
    sbc)
      [[ -x $SBC_BIN ]] || die "$SBC_BIN not found: run cargo build --release -p sbc (or RELAYS=kamailio)" ;;
    *) die "unknown relay '$relay' in RELAYS (kamailio, sbc)" ;;
  esac
done
command -v "$SIPP" >/dev/null || die "sipp not found (Debian package sip-tester)"
command -v ss >/dev/null || die "ss not found (iproute2)"

udp_port_busy() { [[ -n $(ss -Hlun "sport = :$1" 2>/dev/null) ]]; }
# bound_by PORT PID: PORT is bound by PID itself (not by someone else's process).
bound_by() { [[ $(ss -Hlunp "sport = :$1" 2>/dev/null) == *"pid=$2,"* ]]; }
need_free() { ! udp_port_busy "$1" || die "UDP port $1 was taken by another process during the run (ss -lunp 'sport = :$1')"; }
for p in $UAS_PORT $KAM_PORT $SBC_PORT $SBC_CORE_PORT $UAC_PORT; do
  udp_port_busy "$p" && die "UDP port $p on this machine is already bound (ss -lunp 'sport = :$p')"
done

WORK=$(mktemp -d "${TMPDIR:-/tmp}/relay-bench.XXXXXX")
mkdir -p "$(dirname "$OUT")"

# ------------------------------------------------------- process control ---
# Only PIDs started here (and, for Kamailio, the processes it forked) are
# ever signalled; a PID is forgotten once stopped and reaped.
RELAY_PID=""; UAS_PID=""; UAC_PID=""

# All descendants of $1 (itself included), by walking PPIDs.
tree_pids() {
  ps -e -o pid=,ppid= | awk -v root="$1" '
    { kids[$2] = kids[$2] " " $1 }
    END {
      n = 1; q[1] = root; seen[root] = 1
      for (i = 1; i <= n; i++) {
        print q[i]; m = split(kids[q[i]], k, " ")
        for (j = 1; j <= m; j++) if (!(k[j] in seen)) { seen[k[j]] = 1; q[++n] = k[j] }
      }
    }'
}

alive() { [[ -n $1 ]] && kill -0 "$1" 2>/dev/null; }

# Start time (field 22 of /proc/PID/stat) of a PID, to tell it from a later
# process that reuses the PID number.
start_time() { local s; s=$(cat "/proc/$1/stat" 2>/dev/null) || return 1; s=${s##*) }; set -- $s; echo "${20}"; }
# still_ours PID STARTTIME
still_ours() { [[ $(start_time "$1" 2>/dev/null) == "$2" ]]; }

# stop PID [seconds]: SIGTERM the PID, wait (bounded), then SIGKILL whatever
# is left of the tree it had (only processes that are provably the same ones).
stop_pid() {
  local pid=$1 secs=${2:-5} i p st left
  local -a tree=()
  [[ -n $pid ]] || return 0
  alive "$pid" || { wait "$pid" 2>/dev/null || true; return 0; }
  for p in $(tree_pids "$pid"); do st=$(start_time "$p") && tree+=("$p:$st"); done
  kill -TERM "$pid" 2>/dev/null || true
  for (( i = 0; i < secs * 10; i++ )); do alive "$pid" || break; sleep 0.1; done
  # Kamailio's children exit with their main process; give them 3 s.
  for (( i = 0; i < 30; i++ )); do
    left=0
    for p in "${tree[@]}"; do still_ours "${p%%:*}" "${p##*:}" && left=1; done
    (( left )) || break
    sleep 0.1
  done
  if (( left )); then
    log "pid $pid: processes left after SIGTERM, sending SIGKILL to them"
    for p in "${tree[@]}"; do still_ours "${p%%:*}" "${p##*:}" && kill -KILL "${p%%:*}" 2>/dev/null; done
  fi
  wait "$pid" 2>/dev/null || true
}

cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  stop_pid "$UAC_PID" 3; stop_pid "$UAS_PID" 3; stop_pid "$RELAY_PID" 5
  if (( rc == 0 )) && [[ ${KEEP_WORK:-0} != 1 ]]; then rm -rf "$WORK"
  else log "scratch files kept in $WORK"; fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# wait_until SECONDS CMD...: poll CMD every 0.1 s, bounded.
wait_until() {
  local secs=$1 i; shift
  for (( i = 0; i < secs * 10; i++ )); do "$@" && return 0; sleep 0.1; done
  return 1
}

# -------------------------------------------------------------- metering ---
# CPU ticks (utime+stime) summed over the process tree of $1. For sbc the
# tree is one PID whose /proc/PID/stat already sums all its threads.
cpu_ticks() {
  local sum=0 p s rest f
  for p in $(tree_pids "$1"); do
    s=$(cat "/proc/$p/stat" 2>/dev/null) || continue
    rest=${s##*) }                      # comm may contain spaces: cut after ')'
    read -r -a f <<<"$rest"             # f[0] = field 3 (state)
    sum=$(( sum + f[11] + f[12] ))      # fields 14 utime, 15 stime
  done
  echo "$sum"
}
# Sum of a kB field over the tree of $1: mem_kb PID smaps_rollup Pss | status VmRSS
mem_kb() {
  local root=$1 file=$2 key=$3 sum=0 p v
  for p in $(tree_pids "$root"); do
    v=$(awk -v k="$key:" '$1 == k { print $2; exit }' "/proc/$p/$file" 2>/dev/null) || true
    sum=$(( sum + ${v:-0} ))
  done
  echo "$sum"
}

# children_cpu VAR: CPU seconds (user+sys) of this shell's reaped children so
# far, into VAR. `times` must run in this shell, not in a $(...) subshell
# (which would report its own, empty, counters).
children_cpu() {
  times >"$WORK/times.txt"
  printf -v "$1" '%s' "$(awk 'NR == 2 {
    t = 0
    for (i = 1; i <= 2; i++) { split($i, a, /[ms]/); t += a[1] * 60 + a[2] }
    printf "%.2f", t }' "$WORK/times.txt")"
}

# Field of the last line of a SIPp semicolon CSV, by header name.
csv_last() {
  local file=$1 col=$2
  [[ -s $file ]] || { echo ""; return; }
  awk -F';' -v c="$col" '
    NR == 1 { for (i = 1; i <= NF; i++) if ($i == c) k = i; next }
    NF > 1  { last = $k }
    END     { print (k ? last : "") }' "$file"
}

# ------------------------------------------------------------ components ---
start_uas() {   # start_uas TAG: fresh UAS for one step
  local tag=$1
  need_free "$UAS_PORT"
  "$SIPP" -sn uas -i "$IP" -p "$UAS_PORT" -nostdin \
    -trace_stat -stf "$WORK/$tag-uas.csv" -fd 1 \
    >"$WORK/$tag-uas.out" 2>&1 </dev/null &
  UAS_PID=$!
  wait_until 10 bound_by "$UAS_PORT" "$UAS_PID" || die "SIPp UAS did not bind $IP:$UAS_PORT (see $WORK/$tag-uas.out)"
}

write_sbc_config() {
  cat >"$WORK/sbc.toml" <<EOF
[sip-config]
workers = 2

[[sip-interface]]
realm = "access"
address = "$IP"
port = $SBC_PORT
transports = ["udp"]

[[sip-interface]]
realm = "core"
address = "$IP"
port = $SBC_CORE_PORT
transports = ["udp"]

[[session-agent]]
name = "core"
realm = "core"
address = "$IP"
port = $UAS_PORT
transport = "udp"

[session-router]
default-route = "core"
EOF
}

sbc_ready() { grep -q 'sbc ready' "$1" 2>/dev/null; }

# start_relay RELAY TAG: sets RELAY_PID and RELAY_TARGET (host:port for the UAC)
start_relay() {
  local relay=$1 tag=$2
  case $relay in
    kamailio)
      need_free "$KAM_PORT"
      "$KAMAILIO" -f "$KAMAILIO_CFG" -DD -E -m 1024 -M 16 >"$WORK/$tag-relay.log" 2>&1 </dev/null &
      RELAY_PID=$!; RELAY_TARGET=$IP:$KAM_PORT
      # Bound, and all children forked (main + 2 UDP workers + timers...).
      wait_until 15 bound_by "$KAM_PORT" "$RELAY_PID" || die "kamailio did not bind $RELAY_TARGET (see $WORK/$tag-relay.log)"
      sleep 0.5 ;;
    sbc)
      need_free "$SBC_PORT"; need_free "$SBC_CORE_PORT"
      mkdir -p -m 0700 "$WORK/mgmt-$tag"
      SBC_MGMT=$WORK/mgmt-$tag/m.sock
      "$SBC_BIN" run --config "$WORK/sbc.toml" --mgmt-socket "$SBC_MGMT" >"$WORK/$tag-relay.log" 2>&1 </dev/null &
      RELAY_PID=$!; RELAY_TARGET=$IP:$SBC_PORT
      wait_until 15 sbc_ready "$WORK/$tag-relay.log" || die "sbc did not print 'sbc ready' (see $WORK/$tag-relay.log)" ;;
  esac
  alive "$RELAY_PID" || die "$relay exited at start (see $WORK/$tag-relay.log)"
}

# Results, keyed "relay,rate,field".
declare -A R=()

run_step() {   # run_step RELAY RATE
  local relay=$1 rate=$2 tag="$1-$2" calls=$(( $2 * DURATION )) rc=0 t0 t1 c0 c1
  log "step: $relay at $rate calls/s for ${DURATION}s ($calls calls)"
  start_uas "$tag"
  start_relay "$relay" "$tag"
  need_free "$UAC_PORT"
  c0=$(cpu_ticks "$RELAY_PID"); t0=$(date +%s.%N)
  local u0 u1; children_cpu u0
  "$SIPP" -sn uac -i "$IP" -p "$UAC_PORT" "$RELAY_TARGET" -nostdin \
    -r "$rate" -m "$calls" -d "$CALL_MS" -timeout "$(( DURATION * 3 + 15 ))s" \
    -trace_stat -stf "$WORK/$tag-uac.csv" -fd 1 \
    >"$WORK/$tag-uac.out" 2>&1 </dev/null &
  UAC_PID=$!
  wait "$UAC_PID" || rc=$?
  UAC_PID=""
  children_cpu u1               # only the UAC was reaped in between
  t1=$(date +%s.%N); c1=$(cpu_ticks "$RELAY_PID")
  alive "$RELAY_PID" || log "WARNING: $relay died during the step (see $WORK/$tag-relay.log)"
  stop_pid "$UAS_PID" 3; UAS_PID=""        # SIGTERM: SIPp writes its last CSV line
  stop_pid "$RELAY_PID" 5; RELAY_PID=""

  local f="$WORK/$tag-uac.csv" u="$WORK/$tag-uas.csv"
  R[$relay,$rate,rc]=$rc
  R[$relay,$rate,ok]=$(csv_last "$f" 'SuccessfulCall(C)')
  R[$relay,$rate,failed]=$(csv_last "$f" 'FailedCall(C)')
  R[$relay,$rate,unexp]=$(csv_last "$f" 'FailedUnexpectedMessage(C)')
  R[$relay,$rate,rtx_uac]=$(csv_last "$f" 'Retransmissions(C)')
  R[$relay,$rate,rtx_uas]=$(csv_last "$u" 'Retransmissions(C)')
  R[$relay,$rate,cps]=$(csv_last "$f" 'CallRate(C)')
  R[$relay,$rate,cpu]=$(awk -v d=$(( c1 - c0 )) -v hz="$CLK_TCK" 'BEGIN { printf "%.2f", d / hz }')
  R[$relay,$rate,uac_cpu]=$(awk -v a="$u0" -v b="$u1" 'BEGIN { printf "%.2f", b - a }')
  R[$relay,$rate,wall]=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
  log "  $relay@$rate: ok=${R[$relay,$rate,ok]:-?} failed=${R[$relay,$rate,failed]:-?} rtx=${R[$relay,$rate,rtx_uac]:-?}/${R[$relay,$rate,rtx_uas]:-?} cpu=${R[$relay,$rate,cpu]}s uac_cpu=${R[$relay,$rate,uac_cpu]}s wall=${R[$relay,$rate,wall]}s sipp_rc=$rc"
}

# Established calls right now: calls sitting in the hold pause of the built-in
# uac scenario (6_Pause_Sessions in SIPp's -trace_counts CSV, which SIPp names
# <scenario>_<pid>_counts.csv in its working directory). Calls aborted after
# their ACK (e.g. a late 180) leave the pause, so they are not counted.
MEM_COUNTS=""; MEM_STATS=""
established() { csv_last "$MEM_COUNTS" '6_Pause_Sessions' | awk '{ print $1 + 0 }'; }
mem_failed() { csv_last "$MEM_STATS" 'FailedCall(C)' | awk '{ print $1 + 0 }'; }
mem_reached() { (( $(established) + $(mem_failed) >= MEM_CALLS )); }
counts_exist() { [[ -s $MEM_COUNTS ]]; }

# sbc_heap RELAY: the sbc's jemalloc heap in bytes (show memory), empty for another relay.
sbc_heap() {
  [[ $1 == sbc && -S ${SBC_MGMT:-} ]] || return 0
  "$SBC_BIN" acli --mgmt-socket "$SBC_MGMT" --json -c "show memory" 2>/dev/null \
    | sed -n 's/.*"heap_allocated": *\([0-9][0-9]*\).*/\1/p' | head -1
}

run_mem() {   # run_mem RELAY
  local relay=$1 tag="mem-$1" secs=$(( MEM_CALLS / MEM_RATE * 2 + 30 ))
  log "memory: $relay, $MEM_CALLS concurrent calls set up at $MEM_RATE calls/s"
  start_uas "$tag"
  start_relay "$relay" "$tag"
  sleep 1
  MEM_STATS=$WORK/$tag-uac.csv
  need_free "$UAC_PORT"
  R[$relay,mem,heap0]=$(sbc_heap "$relay")
  R[$relay,mem,pss0]=$(mem_kb "$RELAY_PID" smaps_rollup Pss)
  R[$relay,mem,rss0]=$(mem_kb "$RELAY_PID" status VmRSS)
  # Hold every call far longer than the step; -l caps concurrency; the
  # -timeout only bounds a hung run (we stop SIPp ourselves).
  ( cd "$WORK" && exec "$SIPP" -sn uac -i "$IP" -p "$UAC_PORT" "$RELAY_TARGET" -nostdin \
      -r "$MEM_RATE" -m "$MEM_CALLS" -l "$MEM_CALLS" -d 600000 -timeout "$(( secs + 30 ))s" \
      -trace_stat -stf "$WORK/$tag-uac.csv" -fd 1 -trace_counts \
      >"$WORK/$tag-uac.out" 2>&1 </dev/null ) &
  UAC_PID=$!
  MEM_COUNTS=$WORK/uac_${UAC_PID}_counts.csv    # the subshell exec'ed SIPp: same PID
  wait_until 10 counts_exist || log "  no $MEM_COUNTS yet"
  if ! wait_until "$secs" mem_reached; then
    log "  only $(established) of $MEM_CALLS calls established after ${secs}s; measuring anyway"
  fi
  # The calls' transactions end (their RFC 6026 windows), leaving only the dialogs.
  log "  $(established) calls up; reading memory in ${MEM_SETTLE}s"
  sleep "$MEM_SETTLE"
  R[$relay,mem,calls]=$(established)
  R[$relay,mem,heap1]=$(sbc_heap "$relay")
  R[$relay,mem,pss1]=$(mem_kb "$RELAY_PID" smaps_rollup Pss)
  R[$relay,mem,rss1]=$(mem_kb "$RELAY_PID" status VmRSS)
  R[$relay,mem,failed]=$(mem_failed)
  alive "$RELAY_PID" || log "WARNING: $relay died during the memory step"
  stop_pid "$UAC_PID" 3; UAC_PID=""
  stop_pid "$UAS_PID" 3; UAS_PID=""
  stop_pid "$RELAY_PID" 5; RELAY_PID=""
  log "  $relay: ${R[$relay,mem,calls]} calls, Pss ${R[$relay,mem,pss0]} -> ${R[$relay,mem,pss1]} kB, RSS ${R[$relay,mem,rss0]} -> ${R[$relay,mem,rss1]} kB"
}

# -------------------------------------------------------------------- run ---
write_sbc_config
for rate in $RATES; do
  for relay in $RELAYS; do run_step "$relay" "$rate"; sleep 1; done
done
if (( MEM_CALLS > 0 )); then
  for relay in $RELAYS; do run_mem "$relay"; sleep 1; done
fi

# ----------------------------------------------------------------- report ---
num() { [[ -n ${1:-} ]] && echo "$1" || echo "n/a"; }
# CPU microseconds per successful call.
cpu_per_call() {
  awk -v c="$1" -v n="${2:-0}" 'BEGIN { if (n > 0) printf "%.0f", c * 1e6 / n; else print "n/a" }'
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a != "n/a" && b != "n/a" && b > 0) printf "%.2f", a / b; else print "n/a" }'; }

GIT_REV=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)
git -C "$ROOT" diff --quiet HEAD 2>/dev/null || GIT_REV="$GIT_REV (dirty work tree)"
# sipp -v exits 99; kamailio -v's first line is "version: kamailio 5.6.3 (...) ".
SIPP_VERSION=$( { "$SIPP" -v 2>&1 || true; } | grep -m1 -o 'SIPp v[^ ]*[^ .]' || echo 'SIPp (unknown version)')
KAM_VERSION=$( { "$KAMAILIO" -v 2>&1 || true; } | head -n1 | sed 's/^version: //; s/ *$//')
CMDLINE="RELAYS=\"$RELAYS\" RATES=\"$RATES\" DURATION=$DURATION CALL_MS=$CALL_MS MEM_CALLS=$MEM_CALLS MEM_RATE=$MEM_RATE $0${*:+ $*}"

SATURATED=0
{
  echo "# Relay benchmark: sbc vs Kamailio ($STAMP)"
  echo
  echo "- command: \`$CMDLINE\`"
  echo "- machine: $(nproc) cores, $(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo), $(uname -sr), load before run: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "- versions: $SIPP_VERSION; $KAM_VERSION; repo $GIT_REV"
  echo "- kamailio: \`$KAMAILIO -f $KAMAILIO_CFG -DD -E -m 1024 -M 16\` (UDP $IP:$KAM_PORT)"
  [[ " $RELAYS " == *" sbc "* ]] && echo "- sbc: \`$SBC_BIN run --config sbc.toml\` (access $IP:$SBC_PORT, core $IP:$SBC_CORE_PORT, workers = 2)"
  echo "- traffic: SIPp built-in \`uac\` ($IP:$UAC_PORT) -> relay -> built-in \`uas\` ($IP:$UAS_PORT), \`-d $CALL_MS\`, ${DURATION}s per step, relay and UAS restarted per step, relays run one after the other"
  echo
  echo "## Call-rate steps"
  echo
  echo "| rate (calls/s) | relay | ok calls | failed | of which unexpected msg | retrans UAC | retrans UAS | achieved calls/s | wall (s) | SIPp UAC CPU (s) | relay CPU (s) | CPU per call (µs) |"
  echo "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
  for rate in $RATES; do
    for relay in $RELAYS; do
      R[$relay,$rate,cpc]=$(cpu_per_call "${R[$relay,$rate,cpu]}" "${R[$relay,$rate,ok]:-0}")
      cps=$(awk -v c="${R[$relay,$rate,cps]:-}" 'BEGIN { if (c == "") print "n/a"; else printf "%.0f", c }')
      # SIPp could not offer the rate (or the run timed out): say so.
      awk -v c="${R[$relay,$rate,cps]:-0}" -v r="$rate" 'BEGIN { exit !(c < 0.9 * r) }' && { cps="$cps ⚠"; SATURATED=1; }
      printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' "$rate" "$relay" \
        "$(num "${R[$relay,$rate,ok]:-}")" "$(num "${R[$relay,$rate,failed]:-}")" "$(num "${R[$relay,$rate,unexp]:-}")" \
        "$(num "${R[$relay,$rate,rtx_uac]:-}")" "$(num "${R[$relay,$rate,rtx_uas]:-}")" \
        "$cps" "${R[$relay,$rate,wall]}" "${R[$relay,$rate,uac_cpu]}" "${R[$relay,$rate,cpu]}" "${R[$relay,$rate,cpc]}"
    done
  done
  if (( SATURATED )); then
    echo
    echo "⚠ achieved rate below 90 % of the offered rate: the step ran longer than ${DURATION}s because SIPp (UAC CPU near the wall time) or the relay could not keep up; compare such steps with care."
  fi
  if [[ " $RELAYS " == *" sbc "* && " $RELAYS " == *" kamailio "* ]]; then
    echo
    echo "## sbc / Kamailio"
    echo
    echo "| rate (calls/s) | CPU per call, sbc ÷ kamailio | failed calls, sbc − kamailio | retransmissions (UAC+UAS), sbc − kamailio |"
    echo "|---:|---:|---:|---:|"
    for rate in $RATES; do
      fd=$(awk -v a="${R[sbc,$rate,failed]:-}" -v b="${R[kamailio,$rate,failed]:-}" 'BEGIN { if (a == "" || b == "") print "n/a"; else printf "%+d", a - b }')
      rd=$(awk -v a="${R[sbc,$rate,rtx_uac]:-}" -v b="${R[sbc,$rate,rtx_uas]:-}" -v c="${R[kamailio,$rate,rtx_uac]:-}" -v d="${R[kamailio,$rate,rtx_uas]:-}" \
        'BEGIN { if (a == "" || c == "") print "n/a"; else printf "%+d", (a + b) - (c + d) }')
      printf '| %s | %s | %s | %s |\n' "$rate" "$(ratio "${R[sbc,$rate,cpc]}" "${R[kamailio,$rate,cpc]}")" "$fd" "$rd"
    done
  fi
  if (( MEM_CALLS > 0 )); then
    echo
    echo "## Memory: $MEM_CALLS concurrent established calls (set up at $MEM_RATE calls/s, held with \`-d 600000\`, read ${MEM_SETTLE} s after the last was set up)"
    echo
    echo "| relay | established | failed | ΣPss before → after (kB) | ΣVmRSS before → after (kB) | bytes per dialog | measured as |"
    echo "|---|---:|---:|---|---|---:|---|"
    for relay in $RELAYS; do
      if [[ $relay == kamailio ]]; then k0=${R[$relay,mem,pss0]}; k1=${R[$relay,mem,pss1]}; how="ΣPss over all its processes"
      else k0=${R[$relay,mem,rss0]}; k1=${R[$relay,mem,rss1]}; how="VmRSS of the sbc PID"; fi
      bpd=$(awk -v a="$k0" -v b="$k1" -v n="${R[$relay,mem,calls]:-0}" 'BEGIN { if (n > 0) printf "%.0f", (b - a) * 1024 / n; else print "n/a" }')
      printf '| %s | %s | %s | %s → %s | %s → %s | %s | %s |\n' "$relay" "${R[$relay,mem,calls]}" "$(num "${R[$relay,mem,failed]:-}")" \
        "${R[$relay,mem,pss0]}" "${R[$relay,mem,pss1]}" "${R[$relay,mem,rss0]}" "${R[$relay,mem,rss1]}" "$bpd" "$how"
    done
    if [[ -n ${R[sbc,mem,heap1]:-} && -n ${R[sbc,mem,heap0]:-} ]]; then
      hpd=$(awk -v a="${R[sbc,mem,heap0]}" -v b="${R[sbc,mem,heap1]}" -v n="${R[sbc,mem,calls]:-0}" 'BEGIN { if (n > 0) printf "%.0f", (b - a) / n; else print "n/a" }')
      echo
      echo "sbc heap (jemalloc \`stats.allocated\`, \`show memory\`): ${R[sbc,mem,heap0]} → ${R[sbc,mem,heap1]} bytes, **$hpd bytes per established call** (both legs; the process's RSS above also holds the allocator's free pages)."
    fi
  fi
  echo
  echo "CPU per call = relay utime+stime (all its processes/threads, /proc/PID/stat) from just before the UAC starts to just after it exits, divided by the successful calls. Failed calls and retransmissions are SIPp's cumulative counters (last line of its \`-trace_stat\` CSV). See lab/bench/README.md."
} | tee "$OUT"
log "report written to $OUT"
