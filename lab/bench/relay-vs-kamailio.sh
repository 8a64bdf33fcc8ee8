#!/usr/bin/env bash
# relay-vs-kamailio.sh: side-by-side relay benchmark, our SBC vs Kamailio.
#
# Usage (from anywhere inside the repo):
#   cargo build --release -p sbc && lab/bench/relay-vs-kamailio.sh
#   RELAYS=kamailio RATES="200 500" DURATION=3 MEM_CALLS=2000 lab/bench/relay-vs-kamailio.sh
#   FAMILY=ipv6 lab/bench/relay-vs-kamailio.sh                  # the same over ::1
#   lab/bench/build-at.sh d22db82 /tmp/sbc-d22db82 &&           # an older binary, against
#     RELAYS="kamailio sbc sbc-old" SBC_OLD_BIN=/tmp/sbc-d22db82/sbc lab/bench/relay-vs-kamailio.sh
#   ROUNDS=3 RELAYS="kamailio sbc sbc-hep sbc-hep-down" lab/bench/relay-vs-kamailio.sh
#                                                               # HEP capture on, off, server down
#   ROUNDS=2 RELAYS="kamailio sbc sbc-acct" lab/bench/relay-vs-kamailio.sh
#                                                               # accounting on (RADIUS + CSV) vs off
#
# For each call rate, each relay in turn (never two under load at once) gets
#   SIPp UAC (127.0.0.1:$UAC_PORT) -> relay -> SIPp UAS (127.0.0.1:5080)
# with SIPp's built-in `uac`/`uas` scenarios; the UAS and the relay are started
# fresh for every step. Then a memory step holds MEM_CALLS established calls
# through each relay and measures resident memory per dialog.
#
#   kamailio: kamailio -f $SHARED/peers/kamailio.cfg -DD -E -m 1024 -M 16
#             (UDP 127.0.0.1:5070; the reference config is used as is)
#   sbc:      target/release/sbc run --config <generated TOML>
#             (access 127.0.0.1:5060, core 127.0.0.1:5062, route to the UAS)
#   sbc-old:  $SBC_OLD_BIN run --config <the same TOML> (same ports; an older build,
#             e.g. from lab/bench/build-at.sh, to compare two commits in one run)
#   sbc-hep:  $SBC_BIN with the same TOML plus [capture-agent] (issue 27's SIP trace):
#             HEPv3 over UDP to a python3 receiver the script starts for the step on
#             a free loopback port (port 0: the kernel picks it); it counts the
#             datagrams (those starting "HEP3" apart), their bytes and its socket's
#             kernel drops, and writes them to a file on SIGTERM (after the relay
#             has stopped, draining its socket first). With HEP_TRANSPORT=tcp, HEPv3
#             over TCP instead: the receiver accepts the connection and counts the
#             HEP packets of the stream by their length fields (no kernel drops on TCP)
#   sbc-hep-down: $SBC_BIN with the same TOML plus [capture-agent] over TCP to a
#             loopback port nobody listens on (chosen at start, checked free before
#             each step): every connection is refused, every packet a counted drop
#   At the end of each step of the hep relays, once the UAC has exited and the UAS
#   is stopped, the script reads `sbc acli --json -c "show sip-trace"` (polling
#   until queued = hep_sent + hep_dropped, at most 5 s) for the report: traced,
#   queue_dropped (> 0: the trace queue overflowed), hep_sent, hep_dropped.
#   Only [capture-agent] is on (sip-monitoring stays disabled): what is measured is
#   the trace queue, the trace thread and the HEP sender, all inside the sbc PID
#   whose CPU is counted. The receiver's CPU is reported apart, not in the relay's.
#   sbc-acct: $SBC_BIN with the same TOML plus [account-config] (issue 31's call detail
#             records): state and file-output enabled, file-path and spool-path in the
#             scratch dir, one [[account-config.account-server]] on the run's address
#             at a free UDP port with a secret, where the script starts a real FreeRADIUS
#             for the step ($FREERADIUS -d DIR -f [-s] -l LOG, a minimal radiusd.conf
#             written into the scratch dir: one acct listen, one client, one detail file,
#             as tests/src/freeradius.rs). After each step, once the UAC has exited and
#             the UAS is stopped, the script reads `sbc acli --json -c "show accounting"`
#             (polling until generated = delivered + refused with nothing queued or in
#             flight, at most ACCT_SETTLE s) and, after the relay and FreeRADIUS are
#             stopped, counts the detail file's Start and Stop entries. FreeRADIUS's CPU
#             is reported apart, never in the relay's.
#   With sbc-acct or sbc-hep in RELAYS the report adds each sbc step's CPU per call by
#   thread name (/proc/PID/task/*: accounting, udp-access-N, udp-core-N, ...).
#
# With FAMILY=ipv6 every address is ::1 instead: SIPp `-i ::1` and remote
# `[::1]:port`, the sbc's interfaces and session agent on "::1", and Kamailio
# on a copy of the reference config generated in the scratch dir, where
# 127.0.0.1 becomes [::1] in listen=, alias= and the $du URIs and nothing
# else changes (the reference file itself is never edited).
#
# Environment (defaults in brackets):
#   RELAYS      relays to run, in order: kamailio, sbc, sbc-old, sbc-hep, sbc-hep-down,
#               sbc-acct
#               ["kamailio sbc"]
#   FAMILY      ipv4 (127.0.0.1) or ipv6 (::1)            [ipv4]
#   SBC_OLD_BIN the sbc-old binary (needed when RELAYS has sbc-old)
#   SBC_COMMIT, SBC_OLD_COMMIT  the commit each binary was built from, for the report
#               [BIN.commit written by build-at.sh next to the binary, else --version]
#   ROUNDS      rounds of all the rate steps, relays in reverse order in even
#               rounds; > 1 adds each relay's mean ± sd per rate (the run's noise)
#               and each ratio's paired median and 95 % bootstrap interval [1]
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
#   SBC_OLD_BIN sbc-old binary       [none]
#   SIPP        sipp binary          [sipp]
#   PYTHON      python3 (the HEP receiver, reading the ACLI's JSON) [python3]
#   HEP_TRANSPORT  sbc-hep's capture-agent transport: udp or tcp [udp]
#   HEP_DOWN_PORT  TCP port of sbc-hep-down's capture server, on which nothing may
#               listen [a free one, picked at start]
#   FREERADIUS  sbc-acct's RADIUS server [/usr/sbin/freeradius] (Debian's freeradius)
#   RADIUS_SINGLE  1: run FreeRADIUS single-threaded (-s); 0: its thread pool [0]
#   ACCT_TRANSPORT sbc-acct's account-server transport: udp (RFC 2866) or tls (RFC 6614,
#               RadSec: FreeRADIUS listens on TLS with the lab PKI that $LAB_BIN
#               tls-certs writes into the scratch dir; needs RADIUS_SINGLE=0), or file:
#               no account-server and no FreeRADIUS, the CSV files are the records'
#               delivery (each batch written and synced) [udp]
#   LAB_BIN     sbc-lab binary, for ACCT_TRANSPORT=tls's certificates
#               [<repo>/target/release/sbc-lab]
#   ACCT_SETTLE seconds to wait after a step for every record to be delivered [30]
#   OUT         Markdown report      [<repo>/lab/results/relay-<UTC date-time>.md]
#   KEEP_WORK=1 keep the scratch dir (SIPp CSVs, relay logs) even on success
#
# Output: a Markdown report on stdout and in $OUT; progress goes to stderr.
# This is a benchmark, not a test: it exits 0 whenever the run completed, even
# if calls failed. Exit 2 on bad setup (busy port, missing binary, no ::1).

# shellcheck disable=SC2015 # "check && check || die" (or "|| continue") is meant: C runs when A or B fails
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
SBC_OLD_BIN=${SBC_OLD_BIN:-}
FAMILY=${FAMILY:-ipv4}
ROUNDS=${ROUNDS:-1}
SIPP=${SIPP:-sipp}
PYTHON=${PYTHON:-python3}
HEP_TRANSPORT=${HEP_TRANSPORT:-udp}
[[ $HEP_TRANSPORT == udp || $HEP_TRANSPORT == tcp ]] || { echo "relay-bench: HEP_TRANSPORT must be udp or tcp" >&2; exit 2; }
HEP_DOWN_PORT=${HEP_DOWN_PORT:-}
HEP_DOWN_PORT_GIVEN=$HEP_DOWN_PORT
FREERADIUS=${FREERADIUS:-/usr/sbin/freeradius}
RADIUS_SINGLE=${RADIUS_SINGLE:-0}
ACCT_TRANSPORT=${ACCT_TRANSPORT:-udp}
[[ $ACCT_TRANSPORT == udp || $ACCT_TRANSPORT == tls || $ACCT_TRANSPORT == file ]] || { echo "relay-bench: ACCT_TRANSPORT must be udp, tls or file" >&2; exit 2; }
LAB_BIN=${LAB_BIN:-$ROOT/target/release/sbc-lab}
ACCT_SETTLE=${ACCT_SETTLE:-30}
ACCT_SECRET=bench-acct-secret
RELAYS=${RELAYS:-"kamailio sbc"}
RATES=${RATES:-"200 500 1000 2000"}
DURATION=${DURATION:-10}
CALL_MS=${CALL_MS:-0}
MEM_CALLS=${MEM_CALLS:-10000}
MEM_RATE=${MEM_RATE:-500}
MEM_SETTLE=${MEM_SETTLE:-40}
UAC_PORT=${UAC_PORT:-5090}
STAMP=$(date -u +%Y-%m-%dT%H%M%SZ)
LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
OUT=${OUT:-$ROOT/lab/results/relay-$STAMP.md}

# Fixed by the reference Kamailio config and the brief (FAMILY=ipv6: the same ports on ::1).
case $FAMILY in
  ipv4) IP=127.0.0.1 ;;
  ipv6) IP=::1 ;;
  *) die "FAMILY must be ipv4 or ipv6 (not '$FAMILY')" ;;
esac
UAS_PORT=5080
KAM_PORT=5070
SBC_PORT=5060
SBC_CORE_PORT=5062

CLK_TCK=$(getconf CLK_TCK)

# hp ADDR PORT: host:port as SIP, SIPp and ss write it (an IPv6 address in brackets).
hp() { if [[ $1 == *:* ]]; then echo "[$1]:$2"; else echo "$1:$2"; fi; }
# has RELAY: RELAY is in RELAYS.
has() { [[ " $RELAYS " == *" $1 "* ]]; }

# ---------------------------------------------------------------- checks ---
is_uint() { [[ $1 =~ ^[0-9]+$ ]]; }
is_uint "$DURATION" && (( DURATION > 0 )) || die "DURATION must be a positive integer"
is_uint "$CALL_MS" || die "CALL_MS must be an integer (ms)"
is_uint "$MEM_CALLS" || die "MEM_CALLS must be an integer"
is_uint "$MEM_RATE" && (( MEM_RATE > 0 )) || die "MEM_RATE must be a positive integer"
is_uint "$MEM_SETTLE" || die "MEM_SETTLE must be an integer"
is_uint "$UAC_PORT" || die "UAC_PORT must be a port number"
is_uint "$ACCT_SETTLE" && (( ACCT_SETTLE > 0 )) || die "ACCT_SETTLE must be a positive integer (seconds)"
[[ $RADIUS_SINGLE == 0 || $RADIUS_SINGLE == 1 ]] || die "RADIUS_SINGLE must be 0 or 1"
[[ $ACCT_TRANSPORT != tls ]] || (( ! RADIUS_SINGLE )) || die "ACCT_TRANSPORT=tls needs RADIUS_SINGLE=0 (FreeRADIUS refuses TLS sockets without threads)"
is_uint "$ROUNDS" && (( ROUNDS > 0 && ROUNDS <= 100 )) || die "ROUNDS must be an integer from 1 to 100"
for r in $RATES; do is_uint "$r" && (( r > 0 )) || die "bad rate in RATES: $r"; done
declare -A SEEN=()
for relay in $RELAYS; do
  [[ -z ${SEEN[$relay]:-} ]] || die "relay '$relay' is twice in RELAYS"
  SEEN[$relay]=1
  case $relay in
    kamailio)
      [[ -x $KAMAILIO ]] || die "kamailio not found at $KAMAILIO (Debian package kamailio)"
      [[ -r $KAMAILIO_CFG ]] || die "reference config not found: $KAMAILIO_CFG (set SHARED or KAMAILIO_CFG)" ;;
    sbc)
      [[ -x $SBC_BIN ]] || die "$SBC_BIN not found: run cargo build --release -p sbc (or RELAYS=kamailio)" ;;
    sbc-old)
      [[ -n $SBC_OLD_BIN ]] || die "RELAYS has sbc-old: set SBC_OLD_BIN to the older sbc binary (lab/bench/build-at.sh COMMIT OUTDIR builds one)"
      [[ -x $SBC_OLD_BIN ]] || die "SBC_OLD_BIN: $SBC_OLD_BIN is not an executable" ;;
    sbc-hep|sbc-hep-down)
      [[ -x $SBC_BIN ]] || die "$SBC_BIN not found: run cargo build --release -p sbc"
      command -v "$PYTHON" >/dev/null || die "RELAYS has $relay: $PYTHON not found (the HEP receiver and the ACLI's JSON need python3; set PYTHON)" ;;
    sbc-acct)
      [[ -x $SBC_BIN ]] || die "$SBC_BIN not found: run cargo build --release -p sbc"
      [[ $ACCT_TRANSPORT == file || -x $FREERADIUS ]] || die "RELAYS has sbc-acct: FreeRADIUS not found at $FREERADIUS (Debian package freeradius; set FREERADIUS)"
      [[ $ACCT_TRANSPORT == file || -r /usr/share/freeradius/dictionary ]] || die "RELAYS has sbc-acct: /usr/share/freeradius/dictionary not found (Debian package freeradius-common)"
      command -v "$PYTHON" >/dev/null || die "RELAYS has sbc-acct: $PYTHON not found (picking FreeRADIUS's port and reading the ACLI's JSON need python3; set PYTHON)"
      [[ $ACCT_TRANSPORT != tls || -x $LAB_BIN ]] || die "ACCT_TRANSPORT=tls: $LAB_BIN not found (cargo build --release -p sbc-lab; set LAB_BIN)" ;;
    *) die "unknown relay '$relay' in RELAYS (kamailio, sbc, sbc-old, sbc-hep, sbc-hep-down, sbc-acct)" ;;
  esac
done
if [[ $FAMILY == ipv6 ]]; then
  # ::1 on lo: /proc/net/if_inet6 has it as 000...001 (absent when IPv6 is off).
  grep -q '^00000000000000000000000000000001 ' /proc/net/if_inet6 2>/dev/null \
    || die "FAMILY=ipv6 but this machine has no ::1 (IPv6 disabled? see /proc/net/if_inet6)"
fi
command -v "$SIPP" >/dev/null || die "sipp not found (Debian package sip-tester)"
command -v ss >/dev/null || die "ss not found (iproute2)"

# ss with no family option lists IPv4 and IPv6 sockets alike: a port counts as
# busy whatever address or family holds it (127.0.0.1, ::1, 0.0.0.0, ::).
udp_port_busy() { [[ -n $(ss -Hlun "sport = :$1" 2>/dev/null) ]]; }
# bound_by PORT PID: PORT is bound by PID itself (not by someone else's process),
# on $IP in the run's family (ss prints [::1]:PORT for IPv6, column 4 with -H).
bound_by() {
  ss -Hlunp "sport = :$1" 2>/dev/null \
    | awk -v a="$(hp "$IP" "$1")" -v p="pid=$2," '$4 == a && index($0, p) { f = 1 } END { exit !f }'
}
# tcp_bound_by PORT PID: as bound_by, a TCP listener.
tcp_bound_by() {
  ss -Hltnp "sport = :$1" 2>/dev/null \
    | awk -v a="$(hp "$IP" "$1")" -v p="pid=$2," '$4 == a && index($0, p) { f = 1 } END { exit !f }'
}
# udp_sockets PID: the UDP addresses PID has bound, as ss prints them.
udp_sockets() {
  ss -Hlunp 2>/dev/null | awk -v p="pid=$1," 'index($0, p) { print $4 }' | sort -u | paste -sd' ' -
}
need_free() { ! udp_port_busy "$1" || die "UDP port $1 was taken by another process during the run (ss -lunp 'sport = :$1')"; }
for p in $UAS_PORT $KAM_PORT $SBC_PORT $SBC_CORE_PORT $UAC_PORT; do
  udp_port_busy "$p" && die "UDP port $p on this machine is already bound (ss -lunp 'sport = :$p')"
done
# sbc-hep-down's capture server: a TCP port on $IP where nothing listens, so that
# every connection the sbc tries is refused. Picked by binding port 0 and closing
# (never listening), unless given; checked again before each step.
tcp_listening() { [[ -n $(ss -Hltn "sport = :$1" 2>/dev/null) ]]; }
if has sbc-hep-down; then
  if [[ -z $HEP_DOWN_PORT ]]; then
    HEP_DOWN_PORT=$("$PYTHON" -c 'import socket, sys
s = socket.socket(socket.AF_INET6 if ":" in sys.argv[1] else socket.AF_INET)
s.bind((sys.argv[1], 0)); print(s.getsockname()[1])' "$IP") || die "could not pick a free TCP port on $IP with $PYTHON"
  fi
  if ! is_uint "$HEP_DOWN_PORT" || (( HEP_DOWN_PORT == 0 || HEP_DOWN_PORT > 65535 )); then die "HEP_DOWN_PORT must be a port number"; fi
  tcp_listening "$HEP_DOWN_PORT" && die "HEP_DOWN_PORT $HEP_DOWN_PORT: something listens on it (ss -ltnp 'sport = :$HEP_DOWN_PORT'); sbc-hep-down needs a port nobody listens on"
fi

WORK=$(mktemp -d "${TMPDIR:-/tmp}/relay-bench.XXXXXX")
mkdir -p "$(dirname "$OUT")"

# ------------------------------------------------------- process control ---
# Only PIDs started here (and, for Kamailio, the processes it forked) are
# ever signalled; a PID is forgotten once stopped and reaped.
RELAY_PID=""; UAS_PID=""; UAC_PID=""; HEP_RX_PID=""; RADIUS_PID=""

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
# shellcheck disable=SC2086 # the fields after ')' split into $1.. on purpose
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
  stop_pid "$UAC_PID" 3; stop_pid "$UAS_PID" 3; stop_pid "$RELAY_PID" 5; stop_pid "$HEP_RX_PID" 3; stop_pid "$RADIUS_PID" 5
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
# thread_ticks PID: "name ticks" per thread of PID (/proc/PID/task/TID: comm, and
# utime+stime of its stat), one line each, threads of one name summed.
thread_ticks() {
  local t s rest n
  for t in /proc/"$1"/task/*; do
    n=$(tr ' ' '_' <"$t/comm" 2>/dev/null) || continue
    s=$(cat "$t/stat" 2>/dev/null) || continue
    rest=${s##*) }
    read -r -a f <<<"$rest"
    echo "$n $(( f[11] + f[12] ))"
  done | awk '{ t[$1] += $2 } END { for (n in t) print n, t[n] }'
}
# thread_cpu BEFORE AFTER: "name=seconds" of each thread name's CPU between two
# thread_ticks readings, largest first, threads under 0.01 s left out.
thread_cpu() {
  awk -v hz="$CLK_TCK" 'FNR == NR { a[$1] = $2; next } { d = ($2 - a[$1]) / hz; if (d >= 0.01) printf "%s %.2f\n", $1, d }' \
    <(printf '%s\n' "$1") <(printf '%s\n' "$2") | sort -k2,2nr | awk '{ printf "%s%s=%s", (NR > 1 ? " " : ""), $1, $2 }'
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
  wait_until 10 bound_by "$UAS_PORT" "$UAS_PID" || die "SIPp UAS did not bind $(hp "$IP" "$UAS_PORT") (see $WORK/$tag-uas.out)"
  [[ -n ${R[uas,sockets]:-} ]] || R[uas,sockets]=$(udp_sockets "$UAS_PID")
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
  # sbc-hep-down: the same plus HEP over TCP to a port nobody listens on.
  if has sbc-hep-down; then write_hep_config "$WORK/sbc-hep-down.toml" tcp "$(hp "$IP" "$HEP_DOWN_PORT")"; fi
}

# write_hep_config FILE TRANSPORT HOST:PORT: sbc.toml plus [capture-agent] (only
# that: sip-monitoring stays disabled, every other key as in sbc.toml).
write_hep_config() {
  { cat "$WORK/sbc.toml"
    cat <<EOF

[capture-agent]
state = "enabled"
address = "$3"
transport = "$2"
capture-id = 2001
EOF
  } >"$1"
}

# The HEP receiver of sbc-hep: python3 RECEIVER IP PORTFILE COUNTSFILE binds a UDP
# socket on IP, port 0, writes the port the kernel gave it to PORTFILE, and counts
# datagrams, those that start with "HEP3" (HEPv3) and bytes. On SIGTERM it drains
# what is queued in its socket, reads its socket's kernel drops (last column of
# /proc/net/udp or udp6, the line of its socket's inode) and writes
# "datagrams hep3 bytes drops" to COUNTSFILE, then exits.
HEP_RX_PY='import os, signal, socket, sys
ip, port_file, counts_file = sys.argv[1:4]
v6 = ":" in ip
if len(sys.argv) > 4 and sys.argv[4] == "tcp":
    # HEP over TCP: one connection at a time, packets counted by their length fields.
    srv = socket.socket(socket.AF_INET6 if v6 else socket.AF_INET, socket.SOCK_STREAM)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind((ip, 0)); srv.listen(4)
    n = [0, 0, 0]                                             # packets, HEP3, bytes
    def tcp_done(*_):
        with open(counts_file + ".tmp", "w") as f: f.write("%d %d %d n/a\n" % tuple(n))
        os.rename(counts_file + ".tmp", counts_file)
        os._exit(0)
    signal.signal(signal.SIGTERM, tcp_done)
    with open(port_file + ".tmp", "w") as f: f.write("%d\n" % srv.getsockname()[1])
    os.rename(port_file + ".tmp", port_file)
    while True:
        c, _ = srv.accept()
        pending = b""
        while True:
            chunk = c.recv(1 << 20)
            if not chunk: break
            n[2] += len(chunk); pending += chunk
            while len(pending) >= 6:
                size = int.from_bytes(pending[4:6], "big")
                if size < 6 or len(pending) < size: break
                n[0] += 1
                if pending.startswith(b"HEP3"): n[1] += 1
                pending = pending[size:]
s = socket.socket(socket.AF_INET6 if v6 else socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)   # capped by net.core.rmem_max
s.bind((ip, 0))
n = [0, 0, 0]                                                 # datagrams, HEP3, bytes
buf = bytearray(65536)
def count(k):
    n[0] += 1; n[2] += k
    if buf.startswith(b"HEP3"): n[1] += 1
def done(*_):
    s.setblocking(False)
    try:
        while True: count(s.recv_into(buf))
    except BlockingIOError:
        pass
    drops, inode = "n/a", str(os.fstat(s.fileno()).st_ino)
    with open("/proc/net/udp6" if v6 else "/proc/net/udp") as f:
        for line in f:
            x = line.split()
            if len(x) > 12 and x[9] == inode: drops = x[-1]
    with open(counts_file + ".tmp", "w") as f: f.write("%d %d %d %s\n" % (n[0], n[1], n[2], drops))
    os.rename(counts_file + ".tmp", counts_file)
    os._exit(0)
signal.signal(signal.SIGTERM, done)
with open(port_file + ".tmp", "w") as f: f.write("%d\n" % s.getsockname()[1])
os.rename(port_file + ".tmp", port_file)
while True: count(s.recv_into(buf))
'
HEP_RX_PORT=""; HEP_RX_TAG=""
# start_hep_rx TAG: a fresh receiver for one step (HEP_RX_PID, HEP_RX_PORT).
start_hep_rx() {
  local tag=$1
  HEP_RX_TAG=$tag
  rm -f "$WORK/$tag-hep.port" "$WORK/$tag-hep.counts"
  "$PYTHON" -c "$HEP_RX_PY" "$IP" "$WORK/$tag-hep.port" "$WORK/$tag-hep.counts" "$HEP_TRANSPORT" >"$WORK/$tag-hep.log" 2>&1 </dev/null &
  HEP_RX_PID=$!
  wait_until 10 test -s "$WORK/$tag-hep.port" || die "the HEP receiver wrote no port (see $WORK/$tag-hep.log)"
  read -r HEP_RX_PORT <"$WORK/$tag-hep.port"
  if [[ $HEP_TRANSPORT == tcp ]]; then
    wait_until 5 tcp_listening "$HEP_RX_PORT" || die "the HEP receiver does not listen on TCP $(hp "$IP" "$HEP_RX_PORT") (see $WORK/$tag-hep.log)"
  else
    wait_until 5 bound_by "$HEP_RX_PORT" "$HEP_RX_PID" || die "the HEP receiver has not bound $(hp "$IP" "$HEP_RX_PORT") (see $WORK/$tag-hep.log)"
  fi
}
# stop_hep_rx: SIGTERM the receiver (it drains, writes its counts, exits) and
# read its counts into HEP_RX_COUNTS ("datagrams hep3 bytes drops", empty if none).
HEP_RX_COUNTS=""
stop_hep_rx() {
  HEP_RX_COUNTS=""
  [[ -n $HEP_RX_PID ]] || return 0
  stop_pid "$HEP_RX_PID" 3; HEP_RX_PID=""
  [[ -s $WORK/$HEP_RX_TAG-hep.counts ]] && read -r HEP_RX_COUNTS <"$WORK/$HEP_RX_TAG-hep.counts"
  [[ -n $HEP_RX_COUNTS ]] || log "  the HEP receiver wrote no counts (see $WORK/$HEP_RX_TAG-hep.log)"
}

# trace_counters: "queued queue_dropped hep_sent hep_dropped" of the running sbc's
# `show sip-trace` (its ACLI, JSON), empty if it cannot be read.
trace_counters() {
  [[ -S ${SBC_MGMT:-} ]] || return 0
  "$SBC_BIN" acli --mgmt-socket "$SBC_MGMT" --json -c "show sip-trace" 2>/dev/null | "$PYTHON" -c 'import json, sys
c = json.load(sys.stdin)["counters"]
print(c["queued"], c["queue_dropped"], c["hep_sent"], c["hep_dropped"])' 2>/dev/null || true
}
# settled_trace_counters: TRACE_COUNTERS once every traced message has been sent or
# dropped (queued = hep_sent + hep_dropped) and two readings agree, polled for at most
# 5 s; TRACE_SETTLED=0 if they never did (the last reading is kept).
TRACE_COUNTERS=""; TRACE_SETTLED=0
settled_trace_counters() {
  local i prev="" q s d
  TRACE_COUNTERS=""; TRACE_SETTLED=0
  for (( i = 0; i < 25; i++ )); do
    TRACE_COUNTERS=$(trace_counters)
    if [[ -n $TRACE_COUNTERS ]]; then
      read -r q _ s d <<<"$TRACE_COUNTERS"
      if (( q == s + d )) && [[ $TRACE_COUNTERS == "$prev" ]]; then TRACE_SETTLED=1; return 0; fi
    fi
    prev=$TRACE_COUNTERS
    sleep 0.2
  done
}

# ------------------------------------------------- sbc-acct: accounting ---
# write_acct_config FILE TAG RADIUS_PORT: sbc.toml plus [account-config] enabled, CSV
# files and spool in the step's scratch dirs (TAG-cdr, TAG-spool: fresh, so nothing is
# replayed from an earlier step), one account-server: FreeRADIUS on $IP:RADIUS_PORT
# (none with ACCT_TRANSPORT=file).
write_acct_config() {
  { cat "$WORK/sbc.toml"
    cat <<EOF

[account-config]
state = "enabled"
file-output = "enabled"
file-path = "$WORK/$2-cdr"
spool-path = "$WORK/$2-spool"
EOF
    [[ $ACCT_TRANSPORT == file ]] || cat <<EOF

[[account-config.account-server]]
hostname = "$IP"
port = $3
secret = "$ACCT_SECRET"
EOF
    if [[ $ACCT_TRANSPORT == tls ]]; then
      cat <<EOF
transport = "tls"
tls-profile = "radsec"
tls-server-name = "uas.lab"

[[tls-profile]]
name = "radsec"
end-entity-certificate = "$WORK/pki/sbc.pem"
private-key = "$WORK/pki/sbc-key.pem"
trusted-ca-certificates = ["$WORK/pki/ca.pem"]
EOF
    fi
  } >"$1"
}

# write_radius_config DIR PORT: a minimal FreeRADIUS 3.2 configuration in DIR (as
# tests/src/freeradius.rs writes it): nothing read from /etc/freeradius, nothing written
# to /var; one listen (type acct, $IP:PORT), one client ($IP, the secret), one detail
# module writing every Accounting-Request it accepts to DIR/detail. max_requests is
# raised from the tests' 1024: at 2,000 calls/s that is 4,000 requests a second, each
# kept cleanup_delay (5 s) for duplicate detection.
write_radius_config() {
  local dir=$1 port=$2 addr_key=ipaddr clients listen_tls=""
  [[ $IP == *:* ]] && addr_key=ipv6addr
  clients="client local {
	$addr_key = $IP
	secret = \"$ACCT_SECRET\"
}"
  if [[ $ACCT_TRANSPORT == tls ]]; then
    # RADIUS over TLS (RFC 6614), as tests/src/freeradius.rs writes it.
    # FreeRADIUS refuses TLS sockets without a thread pool section ("Threading must be
    # enabled for TLS sockets"). One worker thread: with 2-4, FreeRADIUS's hand-offs between
    # its threads took 1.9 s of CPU per 10 s step at 2,000 calls/s (1.0 s with one) on the
    # cores the sbc shares with it, and the sbc's workers paid for it.
    clients="thread pool {
	start_servers = 1
	max_servers = 1
	min_spare_servers = 1
	max_spare_servers = 1
	max_requests_per_server = 0
}

clients radsec {
	client local {
		$addr_key = $IP
		proto = tls
		secret = \"$ACCT_SECRET\"
	}
}"
    listen_tls="
		proto = tcp
		clients = radsec
		tls {
			private_key_file = \"$WORK/pki/uas-key.pem\"
			certificate_file = \"$WORK/pki/uas.pem\"
			ca_file = \"$WORK/pki/ca.pem\"
			require_client_cert = yes
			tls_min_version = \"1.2\"
			tls_max_version = \"1.2\"
		}
		limit {
			max_connections = 16
			lifetime = 0
			idle_timeout = 0
		}"
  fi
  echo "\$INCLUDE /usr/share/freeradius/dictionary" >"$dir/dictionary"
  cat >"$dir/radiusd.conf" <<EOF
# Written by lab/bench/relay-vs-kamailio.sh (sbc-acct): accounting only, one detail file.
prefix = "$dir"
exec_prefix = \${prefix}
sysconfdir = \${prefix}
localstatedir = \${prefix}
sbindir = /usr/sbin
logdir = \${prefix}
raddbdir = \${prefix}
radacctdir = \${prefix}
name = freeradius
confdir = \${raddbdir}
modconfdir = \${confdir}
certdir = \${confdir}
cadir = \${confdir}
run_dir = \${prefix}
db_dir = \${prefix}
libdir = /usr/lib/freeradius
pidfile = \${run_dir}/radiusd.pid
max_request_time = 30
cleanup_delay = 5
max_requests = 65536
hostname_lookups = no

log {
	destination = files
	file = \${logdir}/freeradius.log
	stripped_names = no
	auth = no
}

security {
	allow_core_dumps = no
	max_attributes = 200
	reject_delay = 0
	status_server = yes
}

$clients

modules {
	detail {
		filename = \${radacctdir}/detail
		escape_filenames = no
		permissions = 0600
		header = "%t"
		locking = no
		log_packet_header = yes
	}
}

server default {
	listen {
		type = acct
		$addr_key = $IP
		port = $port$listen_tls
	}
	accounting {
		detail
	}
}
EOF
}

# free_udp_port: a UDP port on $IP that the kernel gives to a bind to port 0 (closed
# again at once: FreeRADIUS binds it next, checked by its PID).
free_udp_port() {
  "$PYTHON" -c 'import socket, sys
s = socket.socket(socket.AF_INET6 if ":" in sys.argv[1] else socket.AF_INET, socket.SOCK_STREAM if sys.argv[2] == "tls" else socket.SOCK_DGRAM)
s.bind((sys.argv[1], 0)); print(s.getsockname()[1])' "$IP" "$ACCT_TRANSPORT"
}

RADIUS_PORT=""; RADIUS_DIR=""
# start_radius TAG: a fresh FreeRADIUS for one step (RADIUS_PID, RADIUS_PORT, RADIUS_DIR),
# started once its port is bound by its PID on $IP (3 tries, each on a new port).
start_radius() {
  local tag=$1 try
  local -a opts
  RADIUS_DIR=$WORK/$tag-radius
  mkdir -p "$RADIUS_DIR"
  for try in 1 2 3; do
    RADIUS_PORT=$(free_udp_port) || die "could not pick a free UDP port on $IP with $PYTHON"
    udp_port_busy "$RADIUS_PORT" && continue
    write_radius_config "$RADIUS_DIR" "$RADIUS_PORT"
    opts=(-d "$RADIUS_DIR" -f -l "$RADIUS_DIR/freeradius.log")
    (( RADIUS_SINGLE )) && opts+=(-s)
    "$FREERADIUS" "${opts[@]}" >"$RADIUS_DIR/stdout.log" 2>&1 </dev/null &
    RADIUS_PID=$!
    if [[ $ACCT_TRANSPORT == tls ]]; then
      wait_until 10 tcp_bound_by "$RADIUS_PORT" "$RADIUS_PID" && return 0
    else
      wait_until 10 bound_by "$RADIUS_PORT" "$RADIUS_PID" && return 0
    fi
    log "  FreeRADIUS did not bind $(hp "$IP" "$RADIUS_PORT") (try $try; see $RADIUS_DIR/freeradius.log)"
    stop_pid "$RADIUS_PID" 3; RADIUS_PID=""
  done
  die "FreeRADIUS did not start (see $RADIUS_DIR/freeradius.log and stdout.log)"
}
# stop_radius: SIGTERM FreeRADIUS (after the relay: every request the sbc sent has been
# answered or given up) and count its detail file's entries into RADIUS_COUNTS
# ("entries starts stops"; empty if none was running).
RADIUS_COUNTS=""
stop_radius() {
  RADIUS_COUNTS=""
  [[ -n $RADIUS_PID ]] || return 0
  stop_pid "$RADIUS_PID" 5; RADIUS_PID=""
  if [[ -s $RADIUS_DIR/detail ]]; then
    # An entry: a header line (the date, not indented), then tab-indented attributes.
    RADIUS_COUNTS=$(awk '/^[^ \t]/ { n++ } /^[ \t]+Acct-Status-Type = Start$/ { s++ } /^[ \t]+Acct-Status-Type = Stop$/ { t++ }
      END { print n + 0, s + 0, t + 0 }' "$RADIUS_DIR/detail")
  else
    RADIUS_COUNTS="0 0 0"
  fi
}

# acct_counters: "generated spooled delivered refused file_records sent resent
# acknowledged queued in_flight spool_pending write_errors" of the running sbc's
# `show accounting` (its ACLI, JSON; the server's figures are the first server's),
# empty if it cannot be read.
acct_counters() {
  [[ -S ${SBC_MGMT:-} ]] || return 0
  "$SBC_BIN" acli --mgmt-socket "$SBC_MGMT" --json -c "show accounting" 2>/dev/null | "$PYTHON" -c 'import json, sys
a = json.load(sys.stdin)
s = a["servers"][0] if a.get("servers") else {}
print(a["records_generated"], a["records_spooled"], a["records_delivered"], a["records_refused"], a["file_records"],
      s.get("sent", 0), s.get("resent", 0), s.get("acknowledged", 0), a["queued"], a["in_flight"], a["spool_pending"], a["write_errors"])' 2>/dev/null || true
}
# settled_acct_counters: ACCT_COUNTERS once every record generated is delivered or
# refused, none queued or in flight, and two readings 0.2 s apart agree; polled for at
# most ACCT_SETTLE s; ACCT_SETTLED=0 if they never did (the last reading is kept).
ACCT_COUNTERS=""; ACCT_SETTLED=0
settled_acct_counters() {
  local i prev="" g d r q f
  ACCT_COUNTERS=""; ACCT_SETTLED=0
  for (( i = 0; i < ACCT_SETTLE * 5; i++ )); do
    ACCT_COUNTERS=$(acct_counters)
    if [[ -n $ACCT_COUNTERS ]]; then
      read -r g _ d r _ _ _ _ q f _ <<<"$ACCT_COUNTERS"
      if (( g == d + r && q == 0 && f == 0 )) && [[ $ACCT_COUNTERS == "$prev" ]]; then ACCT_SETTLED=1; return 0; fi
    fi
    prev=$ACCT_COUNTERS
    sleep 0.2
  done
}

sbc_ready() { grep -q 'sbc ready' "$1" 2>/dev/null; }

# The config Kamailio runs: the reference as is (ipv4), or (ipv6) a copy in the
# scratch dir with 127.0.0.1 -> [::1] in its listen=, alias= and $du lines, and
# nothing else changed. Refuses a reference that names 127.0.0.1 elsewhere
# (outside comments): the copy would be half IPv4.
KAM_CFG_RUN=$KAMAILIO_CFG
KAM_CFG_CHANGED=""
write_kamailio_config() {
  [[ $FAMILY == ipv6 ]] && has kamailio || return 0
  KAM_CFG_RUN=$WORK/kamailio-ipv6.cfg
  # shellcheck disable=SC2016 # $du is Kamailio's, matched literally
  sed -E -e '/^[[:space:]]*listen[[:space:]]*=/s/127\.0\.0\.1/[::1]/g' \
         -e '/^[[:space:]]*alias[[:space:]]*=/s/127\.0\.0\.1/[::1]/g' \
         -e '/\$du[[:space:]]*=/s/sip:127\.0\.0\.1/sip:[::1]/g' \
         "$KAMAILIO_CFG" >"$KAM_CFG_RUN"
  grep -Eq "^[[:space:]]*listen[[:space:]]*=[[:space:]]*udp:\[::1\]:$KAM_PORT([^0-9]|\$)" "$KAM_CFG_RUN" \
    || die "$KAMAILIO_CFG: no listen=udp:127.0.0.1:$KAM_PORT to move to [::1]"
  # Comments aside (a "#" line or tail, but not the "#!" directives: #!define, #!ifdef...).
  if sed -E '/^[[:space:]]*#($|[^!])/d; s/[[:space:]]#([^!].*)?$//' "$KAM_CFG_RUN" | grep -q '127\.0\.0\.1'; then
    die "$KAMAILIO_CFG names 127.0.0.1 outside listen=, alias= and \$du: not rewritten for IPv6 (see $KAM_CFG_RUN)"
  fi
  # The lines that differ (each once), for the report.
  local line
  while IFS= read -r line; do
    KAM_CFG_CHANGED+="${KAM_CFG_CHANGED:+, }\`$line\`"
  done < <(diff "$KAMAILIO_CFG" "$KAM_CFG_RUN" | sed -n 's/^> *//p' | awk '!seen[$0]++')
}

# start_relay RELAY TAG: sets RELAY_PID and RELAY_TARGET (host:port for the UAC)
start_relay() {
  local relay=$1 tag=$2
  case $relay in
    kamailio)
      need_free "$KAM_PORT"
      "$KAMAILIO" -f "$KAM_CFG_RUN" -DD -E -m 1024 -M 16 >"$WORK/$tag-relay.log" 2>&1 </dev/null &
      RELAY_PID=$!; RELAY_TARGET=$(hp "$IP" "$KAM_PORT")
      # Bound, and all children forked (main + 2 UDP workers + timers...).
      wait_until 15 bound_by "$KAM_PORT" "$RELAY_PID" || die "kamailio did not bind $RELAY_TARGET (see $WORK/$tag-relay.log)"
      sleep 0.5 ;;
    sbc|sbc-old|sbc-hep|sbc-hep-down|sbc-acct)
      local bin=$SBC_BIN config=$WORK/sbc.toml
      [[ $relay == sbc-old ]] && bin=$SBC_OLD_BIN
      need_free "$SBC_PORT"; need_free "$SBC_CORE_PORT"
      case $relay in
        sbc-hep)        # a fresh receiver, and the TOML that names its port
          start_hep_rx "$tag"
          config=$WORK/sbc-hep.toml
          write_hep_config "$config" "$HEP_TRANSPORT" "$(hp "$IP" "$HEP_RX_PORT")" ;;
        sbc-hep-down)
          ! tcp_listening "$HEP_DOWN_PORT" || die "something now listens on TCP $(hp "$IP" "$HEP_DOWN_PORT"), sbc-hep-down's 'down' capture server (ss -ltnp 'sport = :$HEP_DOWN_PORT')"
          config=$WORK/sbc-hep-down.toml ;;
        sbc-acct)       # a fresh FreeRADIUS, and the TOML that names its port
          [[ $ACCT_TRANSPORT == file ]] || start_radius "$tag"
          config=$WORK/$tag.toml
          write_acct_config "$config" "$tag" "$RADIUS_PORT" ;;
      esac
      # shellcheck disable=SC2174 # $WORK exists: only mgmt-TAG is made, and it gets the 0700
      mkdir -p -m 0700 "$WORK/mgmt-$tag"
      SBC_MGMT=$WORK/mgmt-$tag/m.sock
      "$bin" run --config "$config" --mgmt-socket "$SBC_MGMT" >"$WORK/$tag-relay.log" 2>&1 </dev/null &
      RELAY_PID=$!; RELAY_TARGET=$(hp "$IP" "$SBC_PORT")
      wait_until 15 sbc_ready "$WORK/$tag-relay.log" || die "$relay did not print 'sbc ready' (see $WORK/$tag-relay.log)"
      # It binds the interfaces before it says ready; check they are on $IP.
      wait_until 5 bound_by "$SBC_PORT" "$RELAY_PID" && wait_until 5 bound_by "$SBC_CORE_PORT" "$RELAY_PID" \
        || die "$relay is ready but has not bound $(hp "$IP" "$SBC_PORT") and $(hp "$IP" "$SBC_CORE_PORT") (ss -lunp; $WORK/$tag-relay.log)" ;;
  esac
  alive "$RELAY_PID" || die "$relay exited at start (see $WORK/$tag-relay.log)"
  [[ -n ${R[$relay,sockets]:-} ]] || R[$relay,sockets]=$(udp_sockets "$RELAY_PID")
}

# Results, keyed "relay,rate,field".
declare -A R=()

# Step keys: the rate, or with ROUNDS > 1 "RATE/ROUND" (the rate again as
# "RATE/1" etc.), keying R and naming the scratch files.
step_key() { if (( ROUNDS > 1 )); then echo "$1/$2"; else echo "$1"; fi; }
step_label() { if (( ROUNDS > 1 )); then echo "$1 (round $2)"; else echo "$1"; fi; }

run_step() {   # run_step RELAY RATE [ROUND]
  local relay=$1 rate=$2 key tag calls=$(( $2 * DURATION )) rc=0 t0 t1 c0 c1
  key=$(step_key "$rate" "${3:-1}")
  tag="$relay-${key/\//-r}"
  log "step: $relay at $rate calls/s for ${DURATION}s ($calls calls)${3:+, round $3 of $ROUNDS}"
  start_uas "$tag"
  start_relay "$relay" "$tag"
  need_free "$UAC_PORT"
  local th0="" th1=""
  [[ $relay == sbc* ]] && th0=$(thread_ticks "$RELAY_PID")
  c0=$(cpu_ticks "$RELAY_PID"); t0=$(date +%s.%N)
  local u0 u1 h0="" h1="" a0="" a1="" c2
  children_cpu u0
  [[ -n $HEP_RX_PID ]] && h0=$(cpu_ticks "$HEP_RX_PID")
  [[ -n $RADIUS_PID ]] && a0=$(cpu_ticks "$RADIUS_PID")
  "$SIPP" -sn uac -i "$IP" -p "$UAC_PORT" "$RELAY_TARGET" -nostdin \
    -r "$rate" -m "$calls" -d "$CALL_MS" -timeout "$(( DURATION * 3 + 15 ))s" \
    -trace_stat -stf "$WORK/$tag-uac.csv" -fd 1 \
    >"$WORK/$tag-uac.out" 2>&1 </dev/null &
  UAC_PID=$!
  wait "$UAC_PID" || rc=$?
  UAC_PID=""
  children_cpu u1               # only the UAC was reaped in between
  t1=$(date +%s.%N); c1=$(cpu_ticks "$RELAY_PID")
  [[ $relay == sbc* ]] && th1=$(thread_ticks "$RELAY_PID")
  [[ -n $th0 && -n $th1 ]] && R[$relay,$key,threads]=$(thread_cpu "$th0" "$th1")
  [[ -n $HEP_RX_PID ]] && h1=$(cpu_ticks "$HEP_RX_PID")
  [[ -n $RADIUS_PID ]] && a1=$(cpu_ticks "$RADIUS_PID")
  alive "$RELAY_PID" || log "WARNING: $relay died during the step (see $WORK/$tag-relay.log)"
  stop_pid "$UAS_PID" 3; UAS_PID=""        # SIGTERM: SIPp writes its last CSV line
  if [[ $relay == sbc-hep* ]]; then
    # The trace's counters once the traffic is over (outside the CPU window).
    settled_trace_counters
    (( TRACE_SETTLED )) || log "  show sip-trace: counters not settled after 5 s (queued = hep_sent + hep_dropped): '${TRACE_COUNTERS:-unreadable}'"
    read -r "R[$relay,$key,traced]" "R[$relay,$key,qdrop]" "R[$relay,$key,hep_sent]" "R[$relay,$key,hep_dropped]" <<<"$TRACE_COUNTERS"
    R[$relay,$key,settled]=$TRACE_SETTLED
  fi
  if [[ $relay == sbc-acct ]]; then
    # Accounting's counters once every record is delivered (outside the CPU window);
    # the sbc's CPU from the window's end to then (delivering the last records) apart.
    settled_acct_counters
    c2=$(cpu_ticks "$RELAY_PID")
    (( ACCT_SETTLED )) || log "  show accounting: not settled after ${ACCT_SETTLE} s (generated = delivered + refused, none queued or in flight): '${ACCT_COUNTERS:-unreadable}'"
    read -r "R[$relay,$key,a_gen]" "R[$relay,$key,a_spooled]" "R[$relay,$key,a_deliv]" "R[$relay,$key,a_refused]" \
      "R[$relay,$key,a_file]" "R[$relay,$key,a_sent]" "R[$relay,$key,a_resent]" "R[$relay,$key,a_acked]" \
      "R[$relay,$key,a_queued]" "R[$relay,$key,a_inflight]" "R[$relay,$key,a_pending]" "R[$relay,$key,a_werr]" <<<"$ACCT_COUNTERS"
    R[$relay,$key,a_settled]=$ACCT_SETTLED
    R[$relay,$key,a_tail_cpu]=$(awk -v a="$c1" -v b="$c2" -v hz="$CLK_TCK" 'BEGIN { if (b == "") print "n/a"; else printf "%.2f", (b - a) / hz }')
  fi
  stop_pid "$RELAY_PID" 5; RELAY_PID=""
  if [[ $relay == sbc-acct ]]; then
    local a2=""
    [[ -n $RADIUS_PID ]] && a2=$(cpu_ticks "$RADIUS_PID")
    stop_radius                # after the relay: every request it sent was answered or given up
    read -r "R[$relay,$key,rad_entries]" "R[$relay,$key,rad_starts]" "R[$relay,$key,rad_stops]" <<<"$RADIUS_COUNTS"
    R[$relay,$key,rad_cpu]=$(awk -v a="$a0" -v b="$a1" -v hz="$CLK_TCK" 'BEGIN { if (a == "" || b == "") print "n/a"; else printf "%.2f", (b - a) / hz }')
    R[$relay,$key,rad_cpu_all]=$(awk -v a="$a0" -v b="$a2" -v hz="$CLK_TCK" 'BEGIN { if (a == "" || b == "") print "n/a"; else printf "%.2f", (b - a) / hz }')
  fi
  if [[ $relay == sbc-hep ]]; then
    stop_hep_rx                # after the relay: everything it sent has arrived
    read -r "R[$relay,$key,rx]" "R[$relay,$key,rx_hep3]" "R[$relay,$key,rx_bytes]" "R[$relay,$key,rx_kdrops]" <<<"$HEP_RX_COUNTS"
    R[$relay,$key,rx_cpu]=$(awk -v a="$h0" -v b="$h1" -v hz="$CLK_TCK" 'BEGIN { if (a == "" || b == "") print "n/a"; else printf "%.2f", (b - a) / hz }')
  fi

  local uacf="$WORK/$tag-uac.csv" uasf="$WORK/$tag-uas.csv"
  R[$relay,$key,rc]=$rc
  R[$relay,$key,ok]=$(csv_last "$uacf" 'SuccessfulCall(C)')
  R[$relay,$key,failed]=$(csv_last "$uacf" 'FailedCall(C)')
  R[$relay,$key,unexp]=$(csv_last "$uacf" 'FailedUnexpectedMessage(C)')
  R[$relay,$key,rtx_uac]=$(csv_last "$uacf" 'Retransmissions(C)')
  R[$relay,$key,rtx_uas]=$(csv_last "$uasf" 'Retransmissions(C)')
  R[$relay,$key,cps]=$(csv_last "$uacf" 'CallRate(C)')
  R[$relay,$key,cpu]=$(awk -v d=$(( c1 - c0 )) -v hz="$CLK_TCK" 'BEGIN { printf "%.2f", d / hz }')
  R[$relay,$key,uac_cpu]=$(awk -v a="$u0" -v b="$u1" 'BEGIN { printf "%.2f", b - a }')
  R[$relay,$key,wall]=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
  log "  $relay@$key: ok=${R[$relay,$key,ok]:-?} failed=${R[$relay,$key,failed]:-?} rtx=${R[$relay,$key,rtx_uac]:-?}/${R[$relay,$key,rtx_uas]:-?} cpu=${R[$relay,$key,cpu]}s uac_cpu=${R[$relay,$key,uac_cpu]}s wall=${R[$relay,$key,wall]}s sipp_rc=$rc"
  if [[ $relay == sbc-hep* ]]; then
    local rxlog=""
    [[ $relay == sbc-hep ]] && rxlog="; receiver: datagrams=${R[$relay,$key,rx]:-?} HEP3=${R[$relay,$key,rx_hep3]:-?} bytes=${R[$relay,$key,rx_bytes]:-?} kernel_drops=${R[$relay,$key,rx_kdrops]:-?} cpu=${R[$relay,$key,rx_cpu]:-?}s"
    log "  $relay@$key: show sip-trace: traced=${R[$relay,$key,traced]:-?} queue_dropped=${R[$relay,$key,qdrop]:-?} hep_sent=${R[$relay,$key,hep_sent]:-?} hep_dropped=${R[$relay,$key,hep_dropped]:-?}$rxlog"
  fi
  [[ -n ${R[$relay,$key,threads]:-} ]] && log "  $relay@$key: CPU by thread (s): ${R[$relay,$key,threads]}"
  if [[ $relay == sbc-acct ]]; then
    log "  $relay@$key: show accounting: generated=${R[$relay,$key,a_gen]:-?} spooled=${R[$relay,$key,a_spooled]:-?} delivered=${R[$relay,$key,a_deliv]:-?} refused=${R[$relay,$key,a_refused]:-?} file_lines=${R[$relay,$key,a_file]:-?} sent=${R[$relay,$key,a_sent]:-?} resent=${R[$relay,$key,a_resent]:-?} settled=${R[$relay,$key,a_settled]:-?} tail_cpu=${R[$relay,$key,a_tail_cpu]:-?}s; FreeRADIUS detail: entries=${R[$relay,$key,rad_entries]:-?} (Start ${R[$relay,$key,rad_starts]:-?}, Stop ${R[$relay,$key,rad_stops]:-?}) cpu=${R[$relay,$key,rad_cpu]:-?}s (${R[$relay,$key,rad_cpu_all]:-?}s to its stop)"
  fi
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

# sbc_heap RELAY: the sbc's jemalloc heap in bytes (show memory), empty for Kamailio.
sbc_heap() {
  local bin=$SBC_BIN
  [[ $1 == sbc-old ]] && bin=$SBC_OLD_BIN
  [[ $1 == sbc* && -S ${SBC_MGMT:-} ]] || return 0
  "$bin" acli --mgmt-socket "$SBC_MGMT" --json -c "show memory" 2>/dev/null \
    | sed -n 's/.*"heap_allocated": *\([0-9][0-9]*\).*/\1/p' | head -1
}

run_mem() {   # run_mem RELAY
  # shellcheck disable=SC2017 # whole seconds of setup, doubled: precision is not the point
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
  stop_hep_rx
  stop_radius
  log "  $relay: ${R[$relay,mem,calls]} calls, Pss ${R[$relay,mem,pss0]} -> ${R[$relay,mem,pss1]} kB, RSS ${R[$relay,mem,rss0]} -> ${R[$relay,mem,rss1]} kB"
}

# -------------------------------------------------------------------- run ---
write_sbc_config
write_kamailio_config
if has sbc-acct && [[ $ACCT_TRANSPORT == tls ]]; then
  # The lab PKI: FreeRADIUS presents uas.pem (uas.lab), the sbc sbc.pem, both of ca.pem.
  "$LAB_BIN" tls-certs --out "$WORK/pki" >/dev/null || die "$LAB_BIN tls-certs --out $WORK/pki failed"
fi
# Relays in RELAYS order, reversed in even rounds (so that no relay always runs
# first after the pause, or right after the same other relay).
# shellcheck disable=SC2086 # one relay name a word
REVERSED=$(printf '%s\n' $RELAYS | tac | paste -sd' ' -)
for (( round = 1; round <= ROUNDS; round++ )); do
  order=$RELAYS
  (( round % 2 == 0 )) && order=$REVERSED
  for rate in $RATES; do
    for relay in $order; do
      if (( ROUNDS > 1 )); then run_step "$relay" "$rate" "$round"; else run_step "$relay" "$rate"; fi
      sleep 1
    done
  done
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
# mean_sd V...: "mean ± sd" (sample sd) of the numeric values, n/a ignored.
mean_sd() {
  printf '%s\n' "$@" | awk -v dp="${DP:-0}" '
    $1 != "n/a" && $1 != "" { v[++n] = $1; s += $1 }
    END {
      if (n == 0) { print "n/a"; exit }
      m = s / n; q = 0; for (i = 1; i <= n; i++) q += (v[i] - m) ^ 2
      if (n > 1) printf "%.*f ± %.*f", dp, m, dp, sqrt(q / (n - 1)); else printf "%.*f", dp, m
    }'
}

GIT_REV=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)
git -C "$ROOT" diff --quiet HEAD 2>/dev/null || GIT_REV="$GIT_REV (dirty work tree)"
# sipp -v exits 99; kamailio -v's first line is "version: kamailio 5.6.3 (...) ".
SIPP_VERSION=$( { "$SIPP" -v 2>&1 || true; } | grep -m1 -o 'SIPp v[^ ]*[^ .]' || echo 'SIPp (unknown version)')
KAM_VERSION=$( { "$KAMAILIO" -v 2>&1 || true; } | head -n1 | sed 's/^version: //; s/ *$//')
CMDLINE="RELAYS=\"$RELAYS\" RATES=\"$RATES\" DURATION=$DURATION CALL_MS=$CALL_MS MEM_CALLS=$MEM_CALLS MEM_RATE=$MEM_RATE"
if [[ $FAMILY != ipv4 ]]; then CMDLINE+=" FAMILY=$FAMILY"; fi
if (( ROUNDS > 1 )); then CMDLINE+=" ROUNDS=$ROUNDS"; fi
if (( MEM_SETTLE != 40 )); then CMDLINE+=" MEM_SETTLE=$MEM_SETTLE"; fi
if has sbc-old; then CMDLINE+=" SBC_OLD_BIN=$SBC_OLD_BIN"; fi
if has sbc-hep && [[ $HEP_TRANSPORT != udp ]]; then CMDLINE+=" HEP_TRANSPORT=$HEP_TRANSPORT"; fi
if [[ -n ${SBC_COMMIT:-} ]]; then CMDLINE+=" SBC_COMMIT=$SBC_COMMIT"; fi
if has sbc-old && [[ -n ${SBC_OLD_COMMIT:-} ]]; then CMDLINE+=" SBC_OLD_COMMIT=$SBC_OLD_COMMIT"; fi
if has sbc-hep-down && [[ -n $HEP_DOWN_PORT_GIVEN ]]; then CMDLINE+=" HEP_DOWN_PORT=$HEP_DOWN_PORT_GIVEN"; fi
if has sbc-acct && (( RADIUS_SINGLE )); then CMDLINE+=" RADIUS_SINGLE=1"; fi
if has sbc-acct && [[ $ACCT_TRANSPORT != udp ]]; then CMDLINE+=" ACCT_TRANSPORT=$ACCT_TRANSPORT"; fi
if has sbc-acct && (( ACCT_SETTLE != 30 )); then CMDLINE+=" ACCT_SETTLE=$ACCT_SETTLE"; fi
CMDLINE+=" $0${*:+ $*}"

# bin_commit BIN GIVEN: the commit BIN was built from, as far as can be told:
# GIVEN (SBC_COMMIT / SBC_OLD_COMMIT), else BIN.commit (written by build-at.sh),
# else what `BIN --version` prints (the crate version only).
bin_commit() {
  local bin=$1 given=$2 c v
  if [[ -n $given ]]; then echo "commit $given"; return; fi
  if [[ -r $bin.commit ]]; then read -r c _ <"$bin.commit"; echo "commit $c (from $bin.commit)"; return; fi
  v=$( { "$bin" --version 2>/dev/null || true; } | head -n1)
  if [[ $bin -ef $ROOT/target/release/sbc ]]; then
    echo "the work tree's build, binary of $(date -u -r "$bin" +%FT%TZ), tree at $GIT_REV (set SBC_COMMIT to name it), \`--version\`: ${v:-none}"
  else
    echo "commit unknown (set SBC_COMMIT / SBC_OLD_COMMIT), \`--version\`: ${v:-none}"
  fi
}
NAME_COMMITS=0
if has sbc-old || [[ -n ${SBC_COMMIT:-} ]]; then NAME_COMMITS=1; fi

TITLE="sbc vs Kamailio"
if has sbc-old || has sbc-hep || has sbc-hep-down || has sbc-acct; then
  TITLE=""
  for n in sbc sbc-hep sbc-hep-down sbc-acct sbc-old kamailio; do
    has "$n" || continue
    [[ $n == kamailio ]] && n=Kamailio
    TITLE+="${TITLE:+ vs }$n"
  done
fi
if [[ $FAMILY == ipv6 ]]; then TITLE+=" over IPv6"; fi
ORDER_NOTE="relays run one after the other"
if (( ROUNDS > 1 )); then ORDER_NOTE+=", $ROUNDS rounds of all the steps (the relays in reverse order in even rounds)"; fi

# against TARGET: "≤ TARGET (within)" or "(above)" for a CPU-per-call ratio.
against() { awk -v r="$1" -v t="$2" 'BEGIN { if (r == "n/a") print "n/a"; else printf "≤ %s (%s)", t, (r <= t ? "within" : "above") }'; }

# pair_table A B HEADER [TARGET [ISSUE]]: the ratios of relay A to relay B at each
# step; with TARGET (the issue's bound on the CPU-per-call ratio: issue 27 for HEP,
# 31 for accounting) a column says whether each step's ratio is within it.
pair_table() {
  local a=$1 b=$2 target=${4:-} issue=${5:-27} rate round key fd rd cpr
  has "$a" && has "$b" && [[ -n ${RATES// /} ]] || return 0
  echo
  echo "## $3"
  echo
  if [[ -n $target ]]; then
    echo "| rate (calls/s) | CPU per call, $a ÷ $b | issue $issue target | failed calls, $a − $b | retransmissions (UAC+UAS), $a − $b |"
    echo "|---:|---:|---|---:|---:|"
  else
    echo "| rate (calls/s) | CPU per call, $a ÷ $b | failed calls, $a − $b | retransmissions (UAC+UAS), $a − $b |"
    echo "|---:|---:|---:|---:|"
  fi
  for rate in $RATES; do
    for (( round = 1; round <= ROUNDS; round++ )); do
      key=$(step_key "$rate" "$round")
      fd=$(awk -v a="${R[$a,$key,failed]:-}" -v b="${R[$b,$key,failed]:-}" 'BEGIN { if (a == "" || b == "") print "n/a"; else printf "%+d", a - b }')
      rd=$(awk -v a="${R[$a,$key,rtx_uac]:-}" -v b="${R[$a,$key,rtx_uas]:-}" -v c="${R[$b,$key,rtx_uac]:-}" -v d="${R[$b,$key,rtx_uas]:-}" \
        'BEGIN { if (a == "" || c == "") print "n/a"; else printf "%+d", (a + b) - (c + d) }')
      cpr=$(ratio "${R[$a,$key,cpc]}" "${R[$b,$key,cpc]}")
      if [[ -n $target ]]; then
        printf '| %s | %s | %s | %s | %s |\n' "$(step_label "$rate" "$round")" "$cpr" "$(against "$cpr" "$target")" "$fd" "$rd"
      else
        printf '| %s | %s | %s | %s |\n' "$(step_label "$rate" "$round")" "$cpr" "$fd" "$rd"
      fi
    done
  done
  if [[ -n $target ]] && (( ROUNDS == 1 )); then
    echo
    echo "One step per rate: a single ratio moves by the run's noise (10–20 % on a shared machine); judge the target with ROUNDS ≥ 3 (mean ± sd under \"Across the rounds\")."
  fi
}

join_comma() { local j; printf -v j '%s, ' "$@"; echo "${j%, }"; }
# paired_ratio "A1 A2 ..." "B1 B2 ...": relay A's CPU per call over relay B's, paired
# by round: "median M; of the means R [L, U]", M the median of the per-round ratios,
# R the ratio of the two means, [L, U] its 95 % bootstrap interval (4,000 resamples
# of the rounds, pairs kept, a fixed seed: the same values give the same interval).
# A shared machine's noise moves whole rounds; the interval says how far it can move R.
paired_ratio() {
  python3 - "$1" "$2" <<'PY'
import random, statistics, sys
pairs = [(float(a), float(b)) for a, b in zip(sys.argv[1].split(), sys.argv[2].split())
         if a != "n/a" and b != "n/a" and float(b) > 0]
if len(pairs) < 2:
    print("n/a")
    sys.exit()
med = statistics.median(a / b for a, b in pairs)
mean = sum(a for a, _ in pairs) / sum(b for _, b in pairs)
rng = random.Random(31)
boot = []
for _ in range(4000):
    pick = [rng.choice(pairs) for _ in pairs]
    boot.append(sum(a for a, _ in pick) / sum(b for _, b in pick))
boot.sort()
print("median %.2f; of the means %.2f [%.2f, %.2f]" % (med, mean, boot[100], boot[3899]))
PY
}
# rounds_table: with ROUNDS > 1, each relay's CPU per call and each pair's
# ratio per rate, as mean ± sd over the rounds: the run's own noise.
rounds_table() {
  local rate round key relay a b target issue
  local -a v va vb
  (( ROUNDS > 1 )) || return 0
  echo
  echo "## Across the $ROUNDS rounds"
  echo
  echo "| rate (calls/s) | relay or ratio | per round | mean ± sd | paired: median; ratio of the means [95 % bootstrap interval] |"
  echo "|---:|---|---|---:|---|"
  for rate in $RATES; do
    for relay in $RELAYS; do
      v=()
      for (( round = 1; round <= ROUNDS; round++ )); do v+=("${R[$relay,$(step_key "$rate" "$round"),cpc]}"); done
      printf '| %s | %s CPU per call (µs) | %s | %s | |\n' "$rate" "$relay" "$(join_comma "${v[@]}")" "$(DP=0 mean_sd "${v[@]}")"
    done
    for pair in "sbc kamailio" "sbc-old kamailio" "sbc sbc-old" "sbc-hep sbc 1.15 27" "sbc-hep-down sbc 1.05 27" "sbc-acct sbc 1.10 31"; do
      read -r a b target issue <<<"$pair"
      has "$a" && has "$b" || continue
      v=(); va=(); vb=()
      for (( round = 1; round <= ROUNDS; round++ )); do
        key=$(step_key "$rate" "$round")
        v+=("$(ratio "${R[$a,$key,cpc]}" "${R[$b,$key,cpc]}")")
        va+=("${R[$a,$key,cpc]:-n/a}"); vb+=("${R[$b,$key,cpc]:-n/a}")
      done
      printf '| %s | %s ÷ %s%s | %s | %s | %s |\n' "$rate" "$a" "$b" "${target:+ (issue $issue target ≤ $target)}" "$(join_comma "${v[@]}")" "$(DP=2 mean_sd "${v[@]}")" "$(paired_ratio "${va[*]}" "${vb[*]}")"
    done
  done
}

# hep_table: per step of sbc-hep and sbc-hep-down, the trace's counters (`show
# sip-trace` once the traffic is over) and what the receiver got, then what they say.
hep_table() {
  local rate round key relay label tpc rpc rx
  local -a qover=() unread=() unsettled=() sdrop=() short=() kdrop=() notsent=()
  has sbc-hep || has sbc-hep-down || return 0
  [[ -n ${RATES// /} ]] || return 0
  echo
  echo "## SIP trace: HEP capture counters at the end of each step"
  echo
  echo "| rate (calls/s) | relay | ok calls | traced | queue_dropped | hep_sent | hep_dropped | traced per ok call | receiver: datagrams (of which HEPv3) | receiver: bytes | receiver: kernel drops | received per ok call | receiver CPU (s) |"
  echo "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
  for rate in $RATES; do
    for (( round = 1; round <= ROUNDS; round++ )); do
      key=$(step_key "$rate" "$round")
      label=$(step_label "$rate" "$round")
      for relay in $RELAYS; do
        [[ $relay == sbc-hep || $relay == sbc-hep-down ]] || continue
        local -A c=()
        for f in ok traced qdrop hep_sent hep_dropped rx rx_hep3 rx_bytes rx_kdrops rx_cpu; do c[$f]=${R[$relay,$key,$f]:-}; done
        tpc=$(awk -v t="${c[traced]}" -v n="${c[ok]:-0}" 'BEGIN { if (t != "" && n > 0) printf "%.1f", t / n; else print "n/a" }')
        if [[ $relay == sbc-hep ]]; then
          rpc=$(awk -v t="${c[rx_hep3]}" -v n="${c[ok]:-0}" 'BEGIN { if (t != "" && n > 0) printf "%.1f", t / n; else print "n/a" }')
          rx="$(num "${c[rx]}") ($(num "${c[rx_hep3]}"))"
          printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' "$label" "$relay" "$(num "${c[ok]}")" \
            "$(num "${c[traced]}")" "$(num "${c[qdrop]}")" "$(num "${c[hep_sent]}")" "$(num "${c[hep_dropped]}")" "$tpc" \
            "$rx" "$(num "${c[rx_bytes]}")" "$(num "${c[rx_kdrops]}")" "$rpc" "$(num "${c[rx_cpu]}")"
        else
          printf '| %s | %s | %s | %s | %s | %s | %s | %s | — | — | — | — | — |\n' "$label" "$relay" "$(num "${c[ok]}")" \
            "$(num "${c[traced]}")" "$(num "${c[qdrop]}")" "$(num "${c[hep_sent]}")" "$(num "${c[hep_dropped]}")" "$tpc"
        fi
        if [[ -z ${c[traced]} ]]; then unread+=("$relay@$label"); continue; fi
        [[ ${R[$relay,$key,settled]:-0} == 1 ]] || unsettled+=("$relay@$label")
        (( c[qdrop] > 0 )) && qover+=("$relay@$label: ${c[qdrop]}")
        if [[ $relay == sbc-hep ]]; then
          (( c[hep_dropped] > 0 )) && sdrop+=("$label: ${c[hep_dropped]}")
          if [[ -n ${c[rx_hep3]} ]]; then
            (( c[rx_hep3] < c[hep_sent] )) && short+=("$label: $(( c[hep_sent] - c[rx_hep3] )) of ${c[hep_sent]}")
            [[ ${c[rx_kdrops]} =~ ^[0-9]+$ ]] && (( c[rx_kdrops] > 0 )) && kdrop+=("$label: ${c[rx_kdrops]}")
          else
            unread+=("the receiver's counts, $label")
          fi
        else
          (( c[hep_sent] > 0 )) && notsent+=("$label: ${c[hep_sent]}")
        fi
      done
    done
  done
  echo
  echo "traced, queue_dropped, hep_sent, hep_dropped: \`counters\` of \`sbc acli --json -c \"show sip-trace\"\` read once the UAC has exited and the UAS is stopped (queued = hep_sent + hep_dropped, polled for at most 5 s), from the relay's start: every message the sbc received or sent that reached the trace queue (traced), each one HEP packet, sent or dropped. Receiver: datagrams, bytes and its socket's kernel drops (\`/proc/net/udp\` drops column), counted by the python3 receiver until it is stopped after the relay."
  echo
  if (( ${#qover[@]} )); then
    echo "⚠ **The trace queue overflowed** (queue_dropped > 0) at $(join_comma "${qover[@]}") messages: the SIP path did not wait for the trace thread, but those messages were never traced (the capture misses them and did not cost their encoding)."
  elif (( ${#unread[@]} == 0 )); then
    echo "queue_dropped = 0 at every step: the trace queue never overflowed."
  fi
  if (( ${#unread[@]} )); then echo; echo "⚠ not read (n/a): $(join_comma "${unread[@]}") (see the relay logs in the scratch dir, KEEP_WORK=1)."; fi
  if (( ${#unsettled[@]} )); then echo; echo "⚠ counters not settled 5 s after the traffic (queued ≠ hep_sent + hep_dropped) at $(join_comma "${unsettled[@]}"): the last reading is shown."; fi
  if (( ${#sdrop[@]} )); then echo; echo "⚠ sbc-hep dropped HEP packets (send errors, or the TCP queue full) at $(join_comma "${sdrop[@]}")."; fi
  if (( ${#short[@]} )); then echo; echo "⚠ the receiver got fewer HEPv3 datagrams than sbc-hep sent at $(join_comma "${short[@]}")."; fi
  if (( ${#kdrop[@]} )); then echo; echo "⚠ the receiver's socket dropped datagrams (it did not keep up; the sbc had sent them) at $(join_comma "${kdrop[@]}")."; fi
  if (( ${#notsent[@]} )); then echo; echo "⚠ sbc-hep-down *sent* HEP packets at $(join_comma "${notsent[@]}"): something accepted its TCP connection on $(hp "$IP" "$HEP_DOWN_PORT"), so those steps did not measure a capture server that is down."; fi
  return 0
}

# acct_table: per step of sbc-acct, accounting's counters (`show accounting` once
# every record is delivered) and what FreeRADIUS wrote, then what they say.
acct_table() {
  local rate round key label relay=sbc-acct exp
  local -a unread=() unsettled=() missing=() refused=() rad_short=() resent=() werr=()
  has sbc-acct || return 0
  [[ -n ${RATES// /} ]] || return 0
  echo
  echo "## Accounting: records at the end of each step (sbc-acct)"
  echo
  echo "| rate (calls/s) | ok calls | failed | records generated | 2 × ok calls | spooled | delivered | refused | CSV lines | RADIUS requests sent (resent) | acknowledged | FreeRADIUS detail entries (Start / Stop) | sbc CPU after the window until delivered (s) | FreeRADIUS CPU in the window (s) |"
  echo "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
  for rate in $RATES; do
    for (( round = 1; round <= ROUNDS; round++ )); do
      key=$(step_key "$rate" "$round")
      label=$(step_label "$rate" "$round")
      local -A c=()
      for f in ok failed a_gen a_spooled a_deliv a_refused a_file a_sent a_resent a_acked a_werr a_tail_cpu a_settled rad_entries rad_starts rad_stops rad_cpu; do
        c[$f]=${R[$relay,$key,$f]:-}
      done
      exp=$( [[ -n ${c[ok]} ]] && echo $(( 2 * c[ok] )) || echo "n/a")
      printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s (%s) | %s | %s (%s / %s) | %s | %s |\n' "$label" \
        "$(num "${c[ok]}")" "$(num "${c[failed]}")" "$(num "${c[a_gen]}")" "$exp" "$(num "${c[a_spooled]}")" \
        "$(num "${c[a_deliv]}")" "$(num "${c[a_refused]}")" "$(num "${c[a_file]}")" "$(num "${c[a_sent]}")" "$(num "${c[a_resent]}")" \
        "$(num "${c[a_acked]}")" "$(num "${c[rad_entries]}")" "$(num "${c[rad_starts]}")" "$(num "${c[rad_stops]}")" \
        "$(num "${c[a_tail_cpu]}")" "$(num "${c[rad_cpu]}")"
      if [[ -z ${c[a_gen]} ]]; then unread+=("$label"); continue; fi
      [[ ${c[a_settled]} == 1 ]] || unsettled+=("$label")
      [[ $exp != n/a ]] && (( c[a_gen] != exp || c[a_deliv] != exp )) && missing+=("$label: generated ${c[a_gen]}, delivered ${c[a_deliv]} for ${c[ok]} ok calls (${c[failed]:-?} failed)")
      (( c[a_refused] > 0 )) && refused+=("$label: ${c[a_refused]}")
      (( c[a_resent] > 0 )) && resent+=("$label: ${c[a_resent]}")
      (( c[a_werr] > 0 )) && werr+=("$label: ${c[a_werr]}")
      [[ -n ${c[rad_entries]} ]] && (( c[rad_entries] < c[a_deliv] )) && rad_short+=("$label: ${c[rad_entries]} entries for ${c[a_deliv]} delivered")
    done
  done
  echo
  echo "Counters: \`sbc acli --json -c \"show accounting\"\` (records_generated, records_spooled, records_delivered, records_refused, file_records, and the server's sent, resent, acknowledged), read once the UAC has exited and the UAS is stopped, polled every 0.2 s until generated = delivered + refused with nothing queued or in flight (at most ${ACCT_SETTLE} s). FreeRADIUS detail entries: the Accounting-Requests it accepted and wrote, counted after it was stopped (a resend is an entry too). The sbc CPU after the window (from the UAC's exit until the counters settled, the UAS's stop included) is not in the CPU per call; FreeRADIUS's CPU is never in the relay's."
  echo
  if (( ${#unread[@]} == 0 && ${#missing[@]} == 0 )); then
    if [[ $ACCT_TRANSPORT == file ]]; then
      echo "At every step records_generated = records_delivered = CSV lines = 2 × ok calls: each call's Start and Stop was generated, written to the CSV file and synced."
    else
      echo "At every step records_generated = records_delivered = 2 × ok calls: each call's Start and Stop was generated and acknowledged by FreeRADIUS."
    fi
  fi
  if (( ${#missing[@]} )); then echo; echo "⚠ generated or delivered ≠ 2 × ok calls at $(join_comma "${missing[@]}") (a failed call may leave a Start and a Stop, or a Stop only)."; fi
  if (( ${#unread[@]} )); then echo; echo "⚠ not read (n/a): $(join_comma "${unread[@]}") (see the relay logs in the scratch dir, KEEP_WORK=1)."; fi
  if (( ${#unsettled[@]} )); then echo; echo "⚠ not all delivered ${ACCT_SETTLE} s after the traffic at $(join_comma "${unsettled[@]}"): the last reading is shown."; fi
  if (( ${#refused[@]} )); then echo; echo "⚠ records refused (queue to the accounting thread or spool full) at $(join_comma "${refused[@]}")."; fi
  if (( ${#resent[@]} )); then echo; echo "RADIUS requests sent again (no answer within 4 × min-round-trip) at $(join_comma "${resent[@]}")."; fi
  if (( ${#werr[@]} )); then echo; echo "⚠ spool or file write errors at $(join_comma "${werr[@]}")."; fi
  if (( ${#rad_short[@]} )); then echo; echo "⚠ FreeRADIUS wrote fewer entries than the sbc counted delivered at $(join_comma "${rad_short[@]}")."; fi
  return 0
}

# threads_table: where each sbc relay's CPU went in each step, by thread name
# (/proc/PID/task/*), in µs per ok call.
threads_table() {
  local rate round key relay ok line out
  [[ -n ${RATES// /} ]] || return 0
  has sbc-acct || has sbc-hep || return 0
  echo
  echo "## CPU per call by thread (µs; the sbc relays)"
  echo
  echo "| rate (calls/s) | relay | CPU per call (µs) | by thread name: µs per ok call |"
  echo "|---:|---|---:|---|"
  for rate in $RATES; do
    for (( round = 1; round <= ROUNDS; round++ )); do
      key=$(step_key "$rate" "$round")
      for relay in $RELAYS; do
        [[ $relay == sbc* && -n ${R[$relay,$key,threads]:-} ]] || continue
        ok=${R[$relay,$key,ok]:-0}
        out=$(printf '%s\n' ${R[$relay,$key,threads]} | awk -F= -v n="$ok" '{ printf "%s%s %.0f", (NR > 1 ? ", " : ""), $1, (n > 0 ? $2 * 1e6 / n : 0) }')
        printf '| %s | %s | %s | %s |\n' "$(step_label "$rate" "$round")" "$relay" "${R[$relay,$key,cpc]}" "$out"
      done
    done
  done
  echo
  echo "utime+stime of each thread of the sbc PID (\`/proc/PID/task/TID/stat\`, by its \`comm\`, threads of one name summed) over the same window as the CPU per call, ÷ ok calls; threads under 10 ms in the step are left out, so a row may sum to a little less than the CPU per call (and the 10 ms tick granularity applies)."
}

SATURATED=0
{
  echo "# Relay benchmark: $TITLE ($STAMP)"
  echo
  echo "- command: \`$CMDLINE\`"
  echo "- machine: $(nproc) cores, $(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo), $(uname -sr), load before run: $LOAD_BEFORE"
  echo "- versions: $SIPP_VERSION; $KAM_VERSION; repo $GIT_REV"
  if [[ $FAMILY == ipv6 && $KAM_CFG_RUN != "$KAMAILIO_CFG" ]]; then
    echo "- kamailio: \`$KAMAILIO -f kamailio-ipv6.cfg -DD -E -m 1024 -M 16\` (UDP $(hp "$IP" "$KAM_PORT")); kamailio-ipv6.cfg is the reference $KAMAILIO_CFG with only the addresses changed, 127.0.0.1 → [::1] in \`listen=\`, \`alias=\` and the \`\$du\` URIs (a copy generated in the scratch dir); its changed lines: $KAM_CFG_CHANGED"
  else
    echo "- kamailio: \`$KAMAILIO -f $KAMAILIO_CFG -DD -E -m 1024 -M 16\` (UDP $(hp "$IP" "$KAM_PORT"))"
  fi
  if has sbc; then
    if (( NAME_COMMITS )); then SBC_NOTE="; $(bin_commit "$SBC_BIN" "${SBC_COMMIT:-}")"; else SBC_NOTE=""; fi
    echo "- sbc: \`$SBC_BIN run --config sbc.toml\` (access $(hp "$IP" "$SBC_PORT"), core $(hp "$IP" "$SBC_CORE_PORT"), workers = 2$SBC_NOTE)"
  fi
  if has sbc-old; then
    echo "- sbc-old: \`$SBC_OLD_BIN run --config sbc.toml\` (the same configuration, ports and workers; $(bin_commit "$SBC_OLD_BIN" "${SBC_OLD_COMMIT:-}"))"
  fi
  if has sbc-hep; then
    echo "- sbc-hep: \`$SBC_BIN run --config sbc-hep.toml\`: sbc.toml (the same ports and workers) plus \`[capture-agent]\` state = \"enabled\", transport = \"$HEP_TRANSPORT\", capture-id = 2001, address = a python3 ${HEP_TRANSPORT^^} receiver started for each step on a free port of $IP (sip-monitoring disabled: the trace runs for HEP alone)"
  fi
  if has sbc-hep-down; then
    echo "- sbc-hep-down: \`$SBC_BIN run --config sbc-hep-down.toml\`: sbc.toml plus \`[capture-agent]\` state = \"enabled\", transport = \"tcp\", capture-id = 2001, address = \"$(hp "$IP" "$HEP_DOWN_PORT")\", where nothing listens (connection refused: every packet a counted drop)"
  fi
  if has sbc-acct; then
    RADIUS_VERSION=$( { "$FREERADIUS" -v 2>&1 || true; } | grep -m1 -o 'FreeRADIUS Version [^,]*' || echo 'FreeRADIUS (unknown version)')
    echo "- sbc-acct: \`$SBC_BIN run --config sbc-acct-STEP.toml\`: sbc.toml plus \`[account-config]\` state = \"enabled\", file-output = \"enabled\", file-path and spool-path fresh directories in the scratch dir ($(df -T "$WORK" 2>/dev/null | awk 'NR == 2 { print $2 " on " $1 }'): the spool's fdatasync is real), every other key its default, and one \`[[account-config.account-server]]\` hostname = \"$IP\", a free UDP port, a secret, where $RADIUS_VERSION runs for the step (\`$FREERADIUS -d DIR -f$( (( RADIUS_SINGLE )) && echo ' -s') -l LOG\`, a minimal radiusd.conf: one acct listen, one client, one detail file)"
    if [[ $ACCT_TRANSPORT == file ]]; then
      echo "- sbc-acct with ACCT_TRANSPORT=file: no account-server and no FreeRADIUS (the lines above about them do not apply); the CSV files are the records' delivery: each 250 ms batch is written to the spool and the CSV file, both are synced, and its records count as delivered"
    elif [[ $ACCT_TRANSPORT == tls ]]; then
      echo "- sbc-acct over RADIUS/TLS (ACCT_TRANSPORT=tls, RFC 6614): the account-server has transport = \"tls\", tls-profile with the lab PKI (\`$LAB_BIN tls-certs\`: the sbc presents sbc.pem, verifies FreeRADIUS's uas.pem as uas.lab), the port a free TCP one; FreeRADIUS's listen has proto = tcp and a tls section (require_client_cert = yes, TLS 1.2), its client proto = tls"
    fi
  fi
  echo "- traffic: SIPp built-in \`uac\` ($(hp "$IP" "$UAC_PORT")) -> relay -> built-in \`uas\` ($(hp "$IP" "$UAS_PORT")), \`-d $CALL_MS\`, ${DURATION}s per step, relay and UAS restarted per step, $ORDER_NOTE"
  if [[ $FAMILY == ipv6 ]]; then
    SOCKS="SIPp uas ${R[uas,sockets]:-none}"
    for relay in $RELAYS; do SOCKS+="; $relay ${R[$relay,sockets]:-none}"; done
    echo "- IPv6: UDP sockets each process had bound when it was ready (\`ss -Hlunp\`, first start): $SOCKS"
  fi
  echo
  echo "## Call-rate steps"
  echo
  echo "| rate (calls/s) | relay | ok calls | failed | of which unexpected msg | retrans UAC | retrans UAS | achieved calls/s | wall (s) | SIPp UAC CPU (s) | relay CPU (s) | CPU per call (µs) |"
  echo "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
  for rate in $RATES; do
    for (( round = 1; round <= ROUNDS; round++ )); do
      key=$(step_key "$rate" "$round")
      for relay in $RELAYS; do
        R[$relay,$key,cpc]=$(cpu_per_call "${R[$relay,$key,cpu]}" "${R[$relay,$key,ok]:-0}")
        cps=$(awk -v c="${R[$relay,$key,cps]:-}" 'BEGIN { if (c == "") print "n/a"; else printf "%.0f", c }')
        # SIPp could not offer the rate (or the run timed out): say so.
        awk -v c="${R[$relay,$key,cps]:-0}" -v r="$rate" 'BEGIN { exit !(c < 0.9 * r) }' && { cps="$cps ⚠"; SATURATED=1; }
        printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' "$(step_label "$rate" "$round")" "$relay" \
          "$(num "${R[$relay,$key,ok]:-}")" "$(num "${R[$relay,$key,failed]:-}")" "$(num "${R[$relay,$key,unexp]:-}")" \
          "$(num "${R[$relay,$key,rtx_uac]:-}")" "$(num "${R[$relay,$key,rtx_uas]:-}")" \
          "$cps" "${R[$relay,$key,wall]}" "${R[$relay,$key,uac_cpu]}" "${R[$relay,$key,cpu]}" "${R[$relay,$key,cpc]}"
      done
    done
  done
  if (( SATURATED )); then
    echo
    echo "⚠ achieved rate below 90 % of the offered rate: the step ran longer than ${DURATION}s because SIPp (UAC CPU near the wall time) or the relay could not keep up; compare such steps with care."
  fi
  pair_table sbc kamailio "sbc / Kamailio"
  pair_table sbc-old kamailio "sbc-old / Kamailio"
  pair_table sbc sbc-old "sbc / sbc-old (new binary ÷ old binary)"
  pair_table sbc-hep sbc "sbc-hep / sbc (HEP capture on ÷ off; issue 27: ≤ 1.15)" 1.15
  pair_table sbc-hep-down sbc "sbc-hep-down / sbc (capture server down ÷ capture off; issue 27: ≤ 1.05)" 1.05
  pair_table sbc-acct sbc "sbc-acct / sbc (accounting on ÷ off; issue 31: ≤ 1.10)" 1.10 31
  hep_table
  acct_table
  threads_table
  rounds_table
  if (( MEM_CALLS > 0 )); then
    echo
    echo "## Memory: $MEM_CALLS concurrent established calls (set up at $MEM_RATE calls/s, held with \`-d 600000\`, read ${MEM_SETTLE} s after the last was set up)"
    echo
    echo "| relay | established | failed | ΣPss before → after (kB) | ΣVmRSS before → after (kB) | bytes per dialog | measured as |"
    echo "|---|---:|---:|---|---|---:|---|"
    for relay in $RELAYS; do
      if [[ $relay == kamailio ]]; then k0=${R[$relay,mem,pss0]}; k1=${R[$relay,mem,pss1]}; how="ΣPss over all its processes"
      else k0=${R[$relay,mem,rss0]}; k1=${R[$relay,mem,rss1]}; how="VmRSS of the $relay PID"; fi
      bpd=$(awk -v a="$k0" -v b="$k1" -v n="${R[$relay,mem,calls]:-0}" 'BEGIN { if (n > 0) printf "%.0f", (b - a) * 1024 / n; else print "n/a" }')
      printf '| %s | %s | %s | %s → %s | %s → %s | %s | %s |\n' "$relay" "${R[$relay,mem,calls]}" "$(num "${R[$relay,mem,failed]:-}")" \
        "${R[$relay,mem,pss0]}" "${R[$relay,mem,pss1]}" "${R[$relay,mem,rss0]}" "${R[$relay,mem,rss1]}" "$bpd" "$how"
    done
    for relay in sbc sbc-old sbc-hep sbc-hep-down sbc-acct; do
      [[ -n ${R[$relay,mem,heap1]:-} && -n ${R[$relay,mem,heap0]:-} ]] || continue
      hpd=$(awk -v a="${R[$relay,mem,heap0]}" -v b="${R[$relay,mem,heap1]}" -v n="${R[$relay,mem,calls]:-0}" 'BEGIN { if (n > 0) printf "%.0f", (b - a) / n; else print "n/a" }')
      echo
      echo "$relay heap (jemalloc \`stats.allocated\`, \`show memory\`): ${R[$relay,mem,heap0]} → ${R[$relay,mem,heap1]} bytes, **$hpd bytes per established call** (both legs; the process's RSS above also holds the allocator's free pages)."
    done
  fi
  echo
  echo "CPU per call = relay utime+stime (all its processes/threads, /proc/PID/stat) from just before the UAC starts to just after it exits, divided by the successful calls. Failed calls and retransmissions are SIPp's cumulative counters (last line of its \`-trace_stat\` CSV). See lab/bench/README.md."
} | tee "$OUT"
log "report written to $OUT"
