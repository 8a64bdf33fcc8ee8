#!/usr/bin/env bash
# sync-cost.sh: the CPU cost of the encrypted state-sync channel, before and after, in one run.
#
# Usage (from anywhere inside the repo):
#   lab/bench/sync-cost.sh                                   # builds HEAD and $BASE, runs both
#   SBC_OLD_BIN=/path/old/sbc SBC_NEW_BIN=target/release/sbc lab/bench/sync-cost.sh   # no builds
#   CALLS=2000 RATE=200 IDLE_S=3 lab/bench/sync-cost.sh                               # quick
#
# For each binary (old = the baseline commit BASE, plaintext sync; new = the work tree, Noise
# NNpsk0 sync and sealed heartbeats), with the same parameters, one after the other:
#   a pair on loopback as tests/src/pair.rs starts it: sbc-a (primary, heartbeat 127.0.0.11)
#   and sbc-b (secondary, 127.0.0.12) sharing the service address (access 127.0.0.1:ACCESS_PORT,
#   core 127.0.0.2:CORE_PORT, session-agent SIPp UAS 127.0.0.1:AGENT_PORT); then
#   1. idle:   CPU ticks of both nodes over IDLE_S seconds, no calls (heartbeats only);
#   2. stream: SIPp UAC places CALLS calls at RATE calls/s through the active, held HOLD_MS;
#              CPU ticks of both nodes from just before the UAC starts until the standby
#              reports replicated_dialogs >= CALLS;
#   3. resync: with the calls held, kill -9 the standby, wait until the active sees it dead,
#              restart it on the same config; CPU ticks of the active and of the new standby
#              process (all of it, from its start) until it reports standby, synchronized and
#              replicated_dialogs >= CALLS; and the wall time of that.
# CPU = utime+stime ticks of each node's process (/proc/PID/stat, cpu_ticks of lib.sh), with the
# scheduler's ns-precise run time (/proc/PID/task/*/schedstat) beside it as a cross-check.
#
# Environment (defaults in brackets):
#   BASE            baseline commit, built in a git worktree under the scratch dir  [29ad283]
#   SBC_OLD_BIN     use this old binary, skip the baseline build                     [unset]
#   SBC_NEW_BIN     use this new binary, skip `cargo build --release -p sbc`         [unset]
#   SBC_LAB         the chart tool (sbc-lab); built with the new binary when unset   [target/release/sbc-lab]
#   CALLS, RATE     calls to place and hold, calls/s                                 [10000, 500]
#   HOLD_MS         SIPp -d: how long each call is held                              [120000]
#   IDLE_S          seconds of the idle measurement                                  [10]
#   STREAM_TIMEOUT, RESYNC_TIMEOUT, ROLES_TIMEOUT  bounded waits (s)                 [120, 120, 30]
#   ACCESS_PORT CORE_PORT AGENT_PORT UAC_PORT HB_PORT SYNC_PORT CONFIG_SYNC_PORT     [26060 26062 26080 26090 26100 26188 26187]
#   WORKERS         sip-config workers                                               [2]
#   RUST_LOG        passed to sbc                                                    [info]
#   SIPP, OUT_DIR, KEEP_WORK=1 (keep the scratch dir: node logs, SIPp CSVs, acli JSON)
#
# Output: $OUT_DIR/sync-cost-<UTC>.{md,csv,svg}; the Markdown also on stdout; progress on stderr.
# A benchmark, not a test: exit 0 whenever the run completed; 2 on bad setup.
# Only the processes this script started are ever signalled, by PID.
set -euo pipefail
BENCH_NAME=sync-cost

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(git -C "$SCRIPT_DIR" rev-parse --show-toplevel 2>/dev/null || (cd "$SCRIPT_DIR/../.." && pwd))
# shellcheck source=lab/bench/lib.sh
source "$SCRIPT_DIR/lib.sh"

BASE=${BASE:-29ad283}
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
SBC_LAB=${SBC_LAB:-}
SIPP=${SIPP:-sipp}
CALLS=${CALLS:-10000}
RATE=${RATE:-500}
HOLD_MS=${HOLD_MS:-120000}
IDLE_S=${IDLE_S:-10}
STREAM_TIMEOUT=${STREAM_TIMEOUT:-120}
RESYNC_TIMEOUT=${RESYNC_TIMEOUT:-120}
ROLES_TIMEOUT=${ROLES_TIMEOUT:-30}
ACCESS_PORT=${ACCESS_PORT:-26060}
CORE_PORT=${CORE_PORT:-26062}
AGENT_PORT=${AGENT_PORT:-26080}
UAC_PORT=${UAC_PORT:-26090}
HB_PORT=${HB_PORT:-26100}
SYNC_PORT=${SYNC_PORT:-26188}
CONFIG_SYNC_PORT=${CONFIG_SYNC_PORT:-26187}
WORKERS=${WORKERS:-2}
export RUST_LOG=${RUST_LOG:-info}
OUT_DIR=${OUT_DIR:-$ROOT/lab/results}
STAMP=$(date -u +%Y-%m-%dT%H%M%SZ)
OUT=$OUT_DIR/sync-cost-$STAMP
CLK_TCK=$(getconf CLK_TCK)
IP=127.0.0.1
CORE_IP=127.0.0.2
HB_IP=(127.0.0.11 127.0.0.12)
NAMES=(sbc-a sbc-b)
SHARED_KEY=lab-secret-0123456789
CMDLINE="$0${*:+ $*}"
ENV_LINE=""
for v in BASE SBC_OLD_BIN SBC_NEW_BIN CALLS RATE HOLD_MS IDLE_S; do
  [[ -n ${!v:-} ]] && ENV_LINE+="$v=${!v} "
done

# ---------------------------------------------------------------- checks ---
for v in CALLS RATE HOLD_MS IDLE_S STREAM_TIMEOUT RESYNC_TIMEOUT ROLES_TIMEOUT ACCESS_PORT CORE_PORT \
         AGENT_PORT UAC_PORT HB_PORT SYNC_PORT CONFIG_SYNC_PORT WORKERS; do
  is_uint "${!v}" && (( ${!v} > 0 )) || die "$v must be a positive integer"
done
command -v "$SIPP" >/dev/null || die "sipp not found (Debian package sip-tester)"
command -v ss >/dev/null || die "ss not found (iproute2)"
command -v jq >/dev/null || die "jq not found (Debian package jq)"
tcp_port_busy() { [[ -n $(ss -Hltn "sport = :$1" 2>/dev/null) ]]; }
for p in $ACCESS_PORT $CORE_PORT $AGENT_PORT $UAC_PORT $HB_PORT; do
  udp_port_busy "$p" && die "UDP port $p is already bound (ss -lunp 'sport = :$p')"
done
for p in $ACCESS_PORT $CORE_PORT $SYNC_PORT $CONFIG_SYNC_PORT; do
  tcp_port_busy "$p" && die "TCP port $p is already listening (ss -ltnp 'sport = :$p')"
done

WORK=$(mktemp -d "${TMPDIR:-/tmp}/sync-cost.XXXXXX")
mkdir -p "$OUT_DIR"

# ------------------------------------------------------- process control ---
NODE_PID=("" "")
UAS_PID=""; UAC_PID=""; WORKTREE=""
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  stop_pid "$UAC_PID" 3; stop_pid "$UAS_PID" 3
  stop_pid "${NODE_PID[0]}" 5; stop_pid "${NODE_PID[1]}" 5
  if [[ -n $WORKTREE ]]; then
    git -C "$ROOT" worktree remove --force "$WORKTREE" 2>/dev/null \
      || log "WARNING: could not remove the worktree $WORKTREE (git worktree prune)"
  fi
  if (( rc == 0 )) && [[ ${KEEP_WORK:-0} != 1 ]]; then rm -rf "$WORK"
  else log "scratch files kept in $WORK"; fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---------------------------------------------------------------- builds ---
NEW_REV=$(git -C "$ROOT" rev-parse --short HEAD)
git -C "$ROOT" diff --quiet HEAD -- . ':(exclude)lab' 2>/dev/null || NEW_REV="$NEW_REV (work tree modified outside lab/)"
OLD_REV=$(git -C "$ROOT" rev-parse --short "$BASE^{commit}" 2>/dev/null) || die "BASE=$BASE is not a commit"
if [[ -n ${SBC_NEW_BIN:-} ]]; then
  NEW_BIN=$SBC_NEW_BIN; NEW_REV="$NEW_REV? (SBC_NEW_BIN given, not built here)"
else
  log "building the new binary (HEAD $NEW_REV): cargo build --release -p sbc -p sbc-lab"
  (cd "$ROOT" && cargo build --release -p sbc -p sbc-lab) >"$WORK/build-new.log" 2>&1 \
    || die "cargo build of HEAD failed (see $WORK/build-new.log)"
  NEW_BIN=$TARGET/release/sbc
fi
[[ -n $SBC_LAB ]] || SBC_LAB=$TARGET/release/sbc-lab
if [[ -n ${SBC_OLD_BIN:-} ]]; then
  OLD_BIN=$SBC_OLD_BIN; OLD_REV="$OLD_REV? (SBC_OLD_BIN given, not built here)"
else
  log "building the old binary ($BASE = $OLD_REV) in a worktree: cargo build --release --locked -p sbc"
  WORKTREE=$WORK/base
  git -C "$ROOT" worktree add --detach "$WORKTREE" "$BASE" >"$WORK/build-old.log" 2>&1 \
    || die "git worktree add $BASE failed (see $WORK/build-old.log)"
  (cd "$WORKTREE" && CARGO_TARGET_DIR=$WORK/base-target cargo build --release --locked -p sbc) \
    >>"$WORK/build-old.log" 2>&1 || die "cargo build of $BASE failed (see $WORK/build-old.log)"
  OLD_BIN=$WORK/base-target/release/sbc
fi
[[ -x $OLD_BIN ]] || die "old binary $OLD_BIN not found"
[[ -x $NEW_BIN ]] || die "new binary $NEW_BIN not found"
OLD_BIN=$(realpath "$OLD_BIN"); NEW_BIN=$(realpath "$NEW_BIN")   # the nodes run in their own dirs
[[ -x $SBC_LAB ]] && SBC_LAB=$(realpath "$SBC_LAB")
[[ -x $SBC_LAB ]] || log "WARNING: $SBC_LAB not found: no chart (cargo build --release -p sbc-lab, or set SBC_LAB)"

# ---------------------------------------------------------------- pair ---
# The config of node i, as tests/src/pair.rs PairConfig::to_toml writes it.
write_node_config() {   # write_node_config I FILE
  local i=$1 j kind dest
  {
    cat <<EOF
[sip-config]
t1-ms = 500
workers = $WORKERS
shutdown-grace-ms = 1000

[[sip-interface]]
realm = "access"
address = "$IP"
port = $ACCESS_PORT
transports = ["udp", "tcp"]

[[sip-interface]]
realm = "core"
address = "$CORE_IP"
port = $CORE_PORT
transports = ["udp", "tcp"]

[[session-agent]]
name = "core"
realm = "core"
address = "$IP"
port = $AGENT_PORT
transport = "udp"

[session-router]
default-route = "core"

[system-config]
hostname = "${NAMES[$i]}"

[redundancy-config]
state = "enabled"
shared-key = "$SHARED_KEY"
sip-sync-port = $SYNC_PORT
config-sync-port = $CONFIG_SYNC_PORT
advertisement-time = 500
EOF
    for j in 0 1; do
      kind=primary; (( j == 1 )) && kind=secondary
      dest=${HB_IP[$j]}:$HB_PORT
      printf '\n[[redundancy-config.peer]]\nname = "%s"\ntype = "%s"\ndestinations = ["%s"]\n' \
        "${NAMES[$j]}" "$kind" "$dest"
    done
  } >"$2"
  chmod 600 "$2"
}

BIN=""; RUN=""
node_dir() { echo "$WORK/$RUN/${NAMES[$1]}"; }
SOCK=("" "")

start_node() {   # start_node I TAG: sets NODE_PID[I]
  local i=$1 tag=$2 d
  d=$(node_dir "$i")
  (cd "$d" && exec "$BIN" run --config "$d/sbc.toml" --mgmt-socket "$d/mgmt.sock" \
     >"$d/$tag.stdout.log" 2>"$d/$tag.stderr.log" </dev/null) &
  NODE_PID[$i]=$!
}

# "state synchronized replicated_dialogs peer_alive" of node i ("" if it does not answer).
red() {
  "$BIN" acli --mgmt-socket "${SOCK[$1]}" --json -c "show redundancy" 2>/dev/null \
    | jq -r '"\(.state) \(.synchronized) \(.replicated_dialogs) \(.peer_alive)"' 2>/dev/null || true
}

# wait_poll SECS INTERVAL CMD...: run CMD every INTERVAL seconds until it succeeds; bounded
# both in iterations and in wall time.
wait_poll() {
  local secs=$1 iv=$2 n i end; shift 2
  n=$(awk -v s="$secs" -v i="$iv" 'BEGIN { printf "%d", s / i + 1 }')
  end=$(( $(date +%s) + secs ))
  for (( i = 0; i < n; i++ )); do
    "$@" && return 0
    (( $(date +%s) < end )) || return 1
    sleep "$iv"
  done
  return 1
}

ACT=""; STB=""
roles_ok() {
  local r0 r1 s0 y0 s1 y1
  r0=$(red 0); r1=$(red 1)
  read -r s0 y0 _ _ <<<"${r0:-? ? ? ?}"; read -r s1 y1 _ _ <<<"${r1:-? ? ? ?}"
  if [[ $s0 == active && $s1 == standby && $y1 == true ]]; then ACT=0; STB=1; return 0; fi
  if [[ $s1 == active && $s0 == standby && $y0 == true ]]; then ACT=1; STB=0; return 0; fi
  return 1
}
LAST_RED=""
standby_has_all() {   # standby_has_all I: standby, synchronized, >= CALLS dialogs
  LAST_RED=$(red "$1")
  local s y n
  read -r s y n _ <<<"${LAST_RED:-? ? 0 ?}"
  [[ $s == standby && $y == true && $n =~ ^[0-9]+$ ]] && (( n >= CALLS ))
}
dialogs_of() { local s y n; read -r s y n _ <<<"${LAST_RED:-? ? 0 ?}"; [[ $n =~ ^[0-9]+$ ]] && echo "$n" || echo 0; }
peer_dead() { local s y n a; read -r s y n a <<<"$(red "$ACT")"; [[ $a == false ]]; }
now() { date +%s.%N; }
# The scheduler's ns-precise run time of each live thread of process $1 ("tid ns" lines: the
# first field of /proc/PID/task/TID/schedstat, sum_exec_runtime), unlike the 10 ms ticks.
sched_snap() {
  local f v
  for f in /proc/"$1"/task/*/schedstat; do
    read -r v _ <"$f" 2>/dev/null || continue
    f=${f%/schedstat}; echo "${f##*/} $v"
  done
}
# sched_delta FILE0 FILE1: "ms gone": the run time between two snapshots, in ms, over the
# threads alive at the second one (a thread born in between counts whole), and how many threads
# of the first one had exited (their share in the window is lost: then the figure is low).
sched_delta() {
  awk 'FILENAME == ARGV[1] { t0[$1] = $2; next } { seen[$1] = 1; d += $2 - ($1 in t0 ? t0[$1] : 0) }
       END { for (t in t0) if (!(t in seen)) gone++; printf "%.1f %d\n", d / 1e6, gone }' "$1" "$2"
}
# Epoch seconds (the node's own log timestamp, µs) of the first line of a node's stderr log
# that matches the awk regex PATTERN and, if given, has "dialogs=N" with N >= MIN; "" if none.
log_time() {   # log_time FILE PATTERN [MIN]
  sed 's/\x1b\[[0-9;]*m//g' "$1" 2>/dev/null | awk -v pat="$2" -v want="${3:-}" '
    $0 ~ pat {
      if (want == "") { print $1; exit }
      if (match($0, /dialogs=[0-9]+/) && substr($0, RSTART + 8, RLENGTH - 8) + 0 >= want) { print $1; exit }
    }' | { read -r ts || true; [[ -n ${ts:-} ]] && date -u -d "$ts" +%s.%N || true; }
}
secs_between() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", b - a }'; }

# Results, keyed "run,field".
declare -A R=()

UAC_COUNTS=""; UAC_STATS=""
uac_field() { csv_last "$UAC_STATS" "$1" | awk '{ print $1 + 0 }'; }
uac_held() { csv_last "$UAC_COUNTS" '6_Pause_Sessions' | awk '{ print $1 + 0 }'; }

# snap PHASE 0|1 [NODES]: CPU counters of the nodes (default: active and standby) at the start
# (0) or end (1) of PHASE; at the end, R[run,PHASE,node] = ticks, R[run,PHASE,node,sch] = ms
# by schedstat, R[run,PHASE,wall] = seconds. t0 is set at the start for the caller.
declare -A T0=()
snap() {
  local phase=$1 end=$2 nodes=${3:-active standby} node pid f ticks gone
  for node in $nodes; do
    [[ $node == active ]] && pid=${NODE_PID[$ACT]} || pid=${NODE_PID[$STB]}
    f=$WORK/$RUN-$phase-$node-$end.sched
    sched_snap "$pid" >"$f"
    ticks=$(cpu_ticks "$pid")
    if (( end == 0 )); then T0[$node]=$ticks
    else
      R[$RUN,$phase,$node]=$(( ticks - T0[$node] ))
      read -r "R[$RUN,$phase,$node,sch]" gone < <(sched_delta "$WORK/$RUN-$phase-$node-0.sched" "$f")
      (( gone == 0 )) || { R[$RUN,$phase,$node,gone]=$gone; log "  note: $gone thread(s) of the $node exited during $phase: its schedstat figure is low"; }
    fi
  done
  if (( end == 0 )); then t0=$(now); T0[t]=$t0
  else R[$RUN,$phase,wall]=$(secs_between "${T0[t]}" "$(now)"); fi
}

run_binary() {   # run_binary old|new
  RUN=$1
  case $RUN in old) BIN=$OLD_BIN ;; new) BIN=$NEW_BIN ;; esac
  local i d t0
  log "== $RUN: $BIN"
  for i in 0 1; do
    d=$(node_dir "$i"); mkdir -p -m 700 "$d"
    write_node_config "$i" "$d/sbc.toml"
    SOCK[$i]=$d/mgmt.sock
  done
  need_free "$AGENT_PORT"
  "$SIPP" -sn uas -i "$IP" -p "$AGENT_PORT" -nostdin \
    -trace_stat -stf "$WORK/$RUN-uas.csv" -fd 1 \
    >"$WORK/$RUN-uas.out" 2>&1 </dev/null &
  UAS_PID=$!
  wait_until 10 bound_by "$AGENT_PORT" "$UAS_PID" || die "SIPp UAS did not bind $IP:$AGENT_PORT (see $WORK/$RUN-uas.out)"

  start_node 0 sbc
  wait_until 15 sbc_ready "$(node_dir 0)/sbc.stdout.log" || die "$RUN sbc-a did not print 'sbc ready' (see $(node_dir 0))"
  start_node 1 sbc
  wait_until 15 sbc_ready "$(node_dir 1)/sbc.stdout.log" || die "$RUN sbc-b did not print 'sbc ready' (see $(node_dir 1))"
  wait_poll "$ROLES_TIMEOUT" 0.5 roles_ok || die "$RUN: no active + synchronized standby within ${ROLES_TIMEOUT}s (a: $(red 0); b: $(red 1))"
  R[$RUN,active]=${NAMES[$ACT]}; R[$RUN,standby]=${NAMES[$STB]}
  log "  active ${NAMES[$ACT]} (pid ${NODE_PID[$ACT]}), standby ${NAMES[$STB]} (pid ${NODE_PID[$STB]})"

  # 1. idle
  sleep 3
  snap idle 0
  sleep "$IDLE_S"
  snap idle 1
  log "  idle ${R[$RUN,idle,wall]}s: active ${R[$RUN,idle,active]} ticks (${R[$RUN,idle,active,sch]} ms), standby ${R[$RUN,idle,standby]} ticks (${R[$RUN,idle,standby,sch]} ms)"

  # 2. stream
  need_free "$UAC_PORT"
  UAC_STATS=$WORK/$RUN-uac.csv
  local tmo=$(( HOLD_MS / 1000 + STREAM_TIMEOUT + RESYNC_TIMEOUT + 120 ))
  snap stream 0
  ( cd "$WORK" && exec "$SIPP" -sn uac -i "$IP" -p "$UAC_PORT" "$IP:$ACCESS_PORT" -nostdin \
      -r "$RATE" -m "$CALLS" -l "$CALLS" -d "$HOLD_MS" -timeout "${tmo}s" \
      -trace_stat -stf "$UAC_STATS" -fd 1 -trace_counts \
      >"$WORK/$RUN-uac.out" 2>&1 </dev/null ) &
  UAC_PID=$!
  UAC_COUNTS=$WORK/uac_${UAC_PID}_counts.csv   # the subshell exec'ed SIPp: same PID
  R[$RUN,stream,ok]=1
  if ! wait_poll "$STREAM_TIMEOUT" 0.5 standby_has_all "$STB"; then
    R[$RUN,stream,ok]=0
    log "  WARNING: the standby has $(dialogs_of) dialogs after ${STREAM_TIMEOUT}s, not $CALLS; measuring anyway"
  fi
  snap stream 1
  R[$RUN,stream,dialogs]=$(dialogs_of)
  log "  stream ${R[$RUN,stream,wall]}s: active ${R[$RUN,stream,active]} ticks (${R[$RUN,stream,active,sch]} ms), standby ${R[$RUN,stream,standby]} ticks (${R[$RUN,stream,standby,sch]} ms), ${R[$RUN,stream,dialogs]} dialogs replicated"
  sleep 1.5   # SIPp's 1 s statistics catch up
  R[$RUN,uac,held]=$(uac_held); R[$RUN,uac,failed]=$(uac_field 'FailedCall(C)')
  R[$RUN,uac,calls]=$(uac_field 'OutgoingCall(C)'); R[$RUN,uac,rtx]=$(uac_field 'Retransmissions(C)')
  R[$RUN,uac,unexp]=$(uac_field 'FailedUnexpectedMessage(C)')
  log "  SIPp: ${R[$RUN,uac,calls]} calls placed, ${R[$RUN,uac,held]} held, ${R[$RUN,uac,failed]} failed, ${R[$RUN,uac,rtx]} retransmissions"

  # 3. resync
  local old_stb=${NODE_PID[$STB]}
  kill -KILL "$old_stb" 2>/dev/null || true
  wait "$old_stb" 2>/dev/null || true
  NODE_PID[$STB]=""
  wait_poll 15 0.2 peer_dead || log "  WARNING: the active still sees its peer alive 15 s after kill -9"
  : >"$WORK/$RUN-resync-standby-0.sched"   # the new process: from nothing
  snap resync 0 active
  start_node "$STB" sbc-restarted
  R[$RUN,resync,ok]=1
  if ! wait_poll "$RESYNC_TIMEOUT" 0.2 standby_has_all "$STB"; then
    R[$RUN,resync,ok]=0
    log "  WARNING: the restarted standby is '$LAST_RED' after ${RESYNC_TIMEOUT}s, not standby+synchronized with $CALLS dialogs"
  fi
  T0[standby]=0                     # the new process: all its ticks, since its start
  snap resync 1
  R[$RUN,resync,dialogs]=$(dialogs_of)
  local slog done_at joined_at; slog=$(node_dir "$STB")/sbc-restarted.stderr.log
  done_at=$(log_time "$slog" "state sync complete" "$CALLS")
  joined_at=$(log_time "$slog" "to=becoming-standby")
  R[$RUN,resync,log_wall]=n/a; R[$RUN,resync,transfer]=n/a
  [[ -n $done_at ]] && R[$RUN,resync,log_wall]=$(awk -v a="$t0" -v b="$done_at" 'BEGIN { printf "%.3f", b - a }')
  [[ -n $done_at && -n $joined_at ]] && R[$RUN,resync,transfer]=$(awk -v a="$joined_at" -v b="$done_at" 'BEGIN { printf "%.3f", b - a }')
  log "  resync ${R[$RUN,resync,log_wall]}s by the log (transfer ${R[$RUN,resync,transfer]}s, ${R[$RUN,resync,wall]}s polled): active ${R[$RUN,resync,active]} ticks (${R[$RUN,resync,active,sch]} ms), new standby ${R[$RUN,resync,standby]} ticks (${R[$RUN,resync,standby,sch]} ms) since its start, ${R[$RUN,resync,dialogs]} dialogs"
  local fin; fin=$(red "$ACT"); R[$RUN,end,active_state]=${fin%% *}
  R[$RUN,uac,held_end]=$(uac_held); R[$RUN,uac,failed_end]=$(uac_field 'FailedCall(C)')

  # 4. stop everything we started, by PID
  stop_pid "$UAC_PID" 3; UAC_PID=""
  stop_pid "$UAS_PID" 3; UAS_PID=""
  for i in 0 1; do stop_pid "${NODE_PID[$i]}" 5; NODE_PID[$i]=""; done
  sleep 1
}

run_binary old
run_binary new

# ----------------------------------------------------------------- report ---
ms() { awk -v t="$1" -v hz="$CLK_TCK" 'BEGIN { printf "%.0f", t * 1000 / hz }'; }
ratio() {   # new ÷ old; n/a unless both are numbers ≥ 0 and old > 0 (a net figure can come out negative)
  awk -v a="$1" -v b="$2" 'BEGIN {
    if (a ~ /^[0-9.]+$/ && b ~ /^[0-9.]+$/ && b + 0 > 0) printf "%.2f", a / b; else print "n/a" }'
}
# CPU ms of PHASE/NODE net of the node's idle rate over the phase's wall time.
net_ms() {   # net_ms RUN PHASE NODE
  awk -v t="${R[$1,$2,$3]}" -v it="${R[$1,idle,$3]}" -v iw="${R[$1,idle,wall]}" -v w="${R[$1,$2,wall]}" -v hz="$CLK_TCK" \
    'BEGIN { printf "%.0f", (t - it * w / iw) * 1000 / hz }'
}
us_per() { awk -v m="$1" -v n="$2" 'BEGIN { if (n > 0) printf "%.1f", m * 1000 / n; else print "n/a" }'; }

CSV=$OUT.csv
LABEL_OLD="old ${OLD_REV%%[ ?]*} (plaintext)"
LABEL_NEW="new ${NEW_REV%%[ ?]*} (Noise)"
echo "binary,phase_node,ticks,cpu_ms,wall_s,cpu_net_ms,dialogs,us_per_dialog,us_per_dialog_net,sched_ms,sched_us_per_dialog" >"$CSV"
for run in old new; do
  label=$LABEL_OLD; [[ $run == new ]] && label=$LABEL_NEW
  for phase in idle stream resync; do
    for node in active standby; do
      t=${R[$run,$phase,$node]}; m=$(ms "$t")
      sch=${R[$run,$phase,$node,sch]}
      if [[ $phase == idle ]]; then net=""; dl=""; up=""; upn=""; ups=""
      else
        net=$(net_ms "$run" "$phase" "$node"); dl=${R[$run,$phase,dialogs]}
        if [[ $phase == stream && $node == active ]]; then up=""; upn=""; ups=""   # SIP work dominates
        else up=$(us_per "$m" "$dl"); upn=$(us_per "$net" "$dl"); ups=$(us_per "$sch" "$dl"); fi
      fi
      R[$run,$phase,$node,ms]=$m; R[$run,$phase,$node,net]=$net
      R[$run,$phase,$node,up]=$up; R[$run,$phase,$node,upn]=$upn; R[$run,$phase,$node,ups]=$ups
      echo "$label,$phase/$node,$t,$m,${R[$run,$phase,wall]},$net,$dl,$up,$upn,$sch,$ups" >>"$CSV"
    done
  done
done
sed -i 's/,n\/a/,/g' "$CSV"

SVG=$OUT.svg
if [[ -x $SBC_LAB ]]; then
  "$SBC_LAB" chart bars "$CSV" -o "$SVG" --x phase_node --group binary \
    --title "State-sync CPU cost, plaintext ($OLD_REV) vs Noise NNpsk0 (${NEW_REV%% *}): $CALLS dialogs" \
    --subtitle "CPU time (utime+stime, ${CLK_TCK} Hz ticks) per phase and node; idle = ${IDLE_S}s heartbeats only; stream = $CALLS calls at $RATE calls/s until the standby holds them all;\nresync = standby kill -9 and restarted, until it is synchronized with $CALLS dialogs (new standby: all its CPU since start). 2-core shared VM, $STAMP" \
    --panel "CPU time (ms)=cpu_ms;height=170" \
    --panel "CPU time net of the node's idle rate (ms)=cpu_net_ms;height=170" \
    --panel "CPU time by schedstat, ns-precise, live threads only (ms)=sched_ms;height=170" \
    --panel "CPU per replicated dialog (µs): standby in stream, both nodes in resync=us_per_dialog;height=150" \
    || log "WARNING: chart failed"
fi

MD=$OUT.md
SIPP_VERSION=$( { "$SIPP" -v 2>&1 || true; } | grep -m1 -o 'SIPp v[^ ]*[^ .]' || echo 'SIPp (unknown version)')
flag() { [[ ${R[$1,$2,ok]} == 1 ]] && echo "" || echo " ⚠"; }
{
  echo "# State-sync CPU cost: plaintext vs Noise ($STAMP)"
  echo
  echo "- command: \`${ENV_LINE}${CMDLINE#"$ROOT/"}\`"
  echo "- old: \`$BASE\` = $OLD_REV (plaintext sync, HMAC heartbeats), \`$OLD_BIN\`"
  echo "- new: $NEW_REV (Noise NNpsk0 sync, ChaCha20-Poly1305, ≤ 64 KiB messages; XChaCha20-Poly1305 heartbeats), \`$NEW_BIN\`"
  echo "- machine: 2-core shared VM ($(nproc) cores, $(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo), $(uname -sr)); other tenants' processes (fuzzers at nice 19) were running; load average at the report: $(cut -d' ' -f1-3 /proc/loadavg). CPU *time* is compared, not wall time"
  echo "- pair: as tests/src/pair.rs writes it: sbc-a (primary, heartbeat ${HB_IP[0]}:$HB_PORT) and sbc-b (secondary, ${HB_IP[1]}:$HB_PORT), service address access $IP:$ACCESS_PORT, core $CORE_IP:$CORE_PORT, session-agent $IP:$AGENT_PORT, sip-sync-port $SYNC_PORT, config-sync-port $CONFIG_SYNC_PORT, advertisement-time 500, workers $WORKERS, RUST_LOG=$RUST_LOG"
  echo "- traffic: $SIPP_VERSION built-in \`uac\` ($IP:$UAC_PORT, \`-r $RATE -m $CALLS -l $CALLS -d $HOLD_MS\`) -> active -> built-in \`uas\` ($IP:$AGENT_PORT)"
  echo "- CPU: utime+stime of each node's process (/proc/PID/stat, all threads), ${CLK_TCK} ticks/s, so 1 tick = $(( 1000 / CLK_TCK )) ms"
  echo "- files: \`$(basename "$CSV")\`, \`$(basename "$SVG")\`"
  echo
  echo "## The runs"
  echo
  echo "| | old | new |"
  echo "|---|---|---|"
  echo "| active / standby | ${R[old,active]} / ${R[old,standby]} | ${R[new,active]} / ${R[new,standby]} |"
  echo "| SIPp calls placed, held, failed (at end of stream) | ${R[old,uac,calls]}, ${R[old,uac,held]}, ${R[old,uac,failed]} | ${R[new,uac,calls]}, ${R[new,uac,held]}, ${R[new,uac,failed]} |"
  echo "| SIPp held, failed (after the resync) | ${R[old,uac,held_end]}, ${R[old,uac,failed_end]} | ${R[new,uac,held_end]}, ${R[new,uac,failed_end]} |"
  echo "| SIPp UAC retransmissions, unexpected messages | ${R[old,uac,rtx]}, ${R[old,uac,unexp]} | ${R[new,uac,rtx]}, ${R[new,uac,unexp]} |"
  echo "| dialogs on the standby, end of stream | ${R[old,stream,dialogs]}$(flag old stream) | ${R[new,stream,dialogs]}$(flag new stream) |"
  echo "| dialogs on the restarted standby, synchronized | ${R[old,resync,dialogs]}$(flag old resync) | ${R[new,resync,dialogs]}$(flag new resync) |"
  echo "| stream wall time (s) | ${R[old,stream,wall]} | ${R[new,stream,wall]} |"
  echo "| **resync wall time (s)**: spawn → the restarted node's \`state sync complete dialogs=N ≥ $CALLS\` log line | ${R[old,resync,log_wall]} | ${R[new,resync,log_wall]} |"
  echo "| resync transfer (s): the restarted node's \`to=becoming-standby\` (it heard the active) → that line | ${R[old,resync,transfer]} | ${R[new,resync,transfer]} |"
  echo "| resync as polled: spawn → \`show redundancy\` says standby, synchronized, ≥ $CALLS dialogs (0.2 s polls; the CPU window) | ${R[old,resync,wall]} | ${R[new,resync,wall]} |"
  echo "| active's state after the resync | ${R[old,end,active_state]} | ${R[new,end,active_state]} |"
  echo
  if [[ "${R[old,stream,ok]}${R[old,resync,ok]}${R[new,stream,ok]}${R[new,resync,ok]}" != 1111 ]]; then
    echo "⚠: the wait ran out before the standby held all $CALLS dialogs (the figures cover the whole wait)."
    echo
  fi
  echo "## CPU per phase and node"
  echo
  echo "| phase | node | old ticks | old ms | new ticks | new ms | new ÷ old | old net ms | new net ms | net new ÷ old | old schedstat ms | new schedstat ms | schedstat new ÷ old |"
  echo "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
  for phase in idle stream resync; do
    for node in active standby; do
      o=${R[old,$phase,$node]}; n=${R[new,$phase,$node]}
      on=${R[old,$phase,$node,net]}; nn=${R[new,$phase,$node,net]}
      os=${R[old,$phase,$node,sch]}; ns=${R[new,$phase,$node,sch]}
      lbl=$node; [[ $phase == resync && $node == standby ]] && lbl="standby (restarted, since start)"
      if [[ $phase == idle ]]; then
        echo "| idle (${IDLE_S} s) | $lbl | $o | ${R[old,$phase,$node,ms]} | $n | ${R[new,$phase,$node,ms]} | $(ratio "$n" "$o") | | | | $os | $ns | $(ratio "$ns" "$os") |"
      else
        echo "| $phase | $lbl | $o | ${R[old,$phase,$node,ms]} | $n | ${R[new,$phase,$node,ms]} | $(ratio "$n" "$o") | $on | $nn | $(ratio "$nn" "$on") | $os | $ns | $(ratio "$ns" "$os") |"
      fi
    done
  done
  echo
  echo "ms = ticks × $(( 1000 / CLK_TCK )) (the headline). schedstat ms = the scheduler's ns-precise run time of the process's live threads (/proc/PID/task/*/schedstat), a cross-check for the phases that last only a few ticks."
  echo
  echo "net = CPU ms minus the node's idle rate (idle ticks ÷ idle seconds) × the phase's wall time: what the phase cost above heartbeats and timers."
  echo
  echo "## CPU per replicated dialog"
  echo
  echo "| figure | old µs | new µs | new ÷ old | old net µs | new net µs | net new ÷ old | old schedstat µs | new schedstat µs | schedstat new ÷ old |"
  echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
  for pn in stream,standby resync,active resync,standby; do
    phase=${pn%,*}; node=${pn#*,}
    case $pn in
      stream,standby) what="stream: standby (receive + apply + heartbeats)" ;;
      resync,active) what="resync: active (snapshot of the table, send)" ;;
      resync,standby) what="resync: restarted standby (start-up + receive + apply)" ;;
    esac
    ou=${R[old,$phase,$node,up]}; nu=${R[new,$phase,$node,up]}
    oun=${R[old,$phase,$node,upn]}; nun=${R[new,$phase,$node,upn]}
    ous=${R[old,$phase,$node,ups]}; nus=${R[new,$phase,$node,ups]}
    echo "| $what | $ou | $nu | $(ratio "$nu" "$ou") | $oun | $nun | $(ratio "$nun" "$oun") | $ous | $nus | $(ratio "$nus" "$ous") |"
  done
  echo
  echo "µs per dialog = CPU ms × 1000 ÷ the dialogs the standby reported at the end of the phase. The active's stream CPU is mostly SIP (B2BUA) work, so it gets no per-dialog figure."
  echo "Ticks are 10 ms: a figure of a few ticks (idle, the active's resync) is within ±1 tick of noise; compare old and new only within one run (see lab/bench/README.md)."
} >"$MD"
cat "$MD"
log "wrote $MD, $CSV${SBC_LAB:+, $SVG}"
