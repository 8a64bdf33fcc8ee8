#!/usr/bin/env bash
# soak.sh: an SBC pair for an hour at a steady call rate, a switchover every few minutes.
#
# Usage (from anywhere inside the repo):
#   cargo build --release -p sbc -p sbc-lab && lab/bench/soak.sh        # 1 hour
#   QUICK=1 lab/bench/soak.sh                                           # 6 minutes
#   DURATION=900 INTERVAL=90 lab/bench/soak.sh                          # 15 minutes
#
#   SIPp uac 127.0.0.1:UAC_PORT -> pair (access 127.0.0.1:ACCESS_PORT, core 127.0.0.2:CORE_PORT)
#        -> SIPp uas 127.0.0.1:AGENT_PORT (lab/bench/sipp/uas-ring.xml: rings RING_MS, answers)
#   the pair as tests/src/pair.rs starts it: sbc-a (primary, heartbeat 127.0.0.11:HB_PORT) and
#   sbc-b (secondary, 127.0.0.12:HB_PORT), two `sbc run` processes sharing the service address,
#   with the alarm settings of sbc/tests/e2e/pair_memory_switchover.rs (process memory source
#   against MEM_LIMIT_MB, critical at 80 %, critical-memory-abort=switchover, lab mode).
#
# SIPp places RATE calls/s for DURATION s (each rings RING_MS, then is held CALL_MS); every
# INTERVAL s from the start one switchover, the kinds in turn:
#   kill9:  kill -9 of the active; once the other node is active, the killed one is started
#           again on the same config and rejoins as standby;
#   berpd:  `notify berpd force` on the active's management socket (ACLI);
#   memory: `lab ballast N` on the active (N MB of touched memory: its process memory past
#           the critical threshold), as the memory e2e test does; the alarm takes the node's
#           health to 0 and hands the service over; the former active, ineligible until
#           restarted, is then stopped (SIGTERM) and started again, and rejoins as standby.
# Each switchover waits (bounded) for the pair to be whole again (an active and a synchronized
# standby); one that comes due while the pair is not whole is skipped and reported.
# Every SAMPLE s a sampler reads both nodes (`show redundancy`, `show memory`, `show sip-stats`
# through `sbc acli --json`; CPU from /proc/PID/stat) and the UAC's SIPp statistics.
#
# Environment (defaults in brackets; QUICK=1 changes the first three):
#   DURATION       seconds of offered traffic                       [3600; QUICK: 360]
#   INTERVAL       seconds between switchovers                      [120; QUICK: 60]
#   SAMPLE         seconds between samples                          [5; QUICK: 2]
#   KINDS          the switchover kinds, in turn                    ["kill9 berpd memory"]
#   RATE           calls/s                                          [20]
#   RING_MS        how long the callee rings before its 200 (0: 200 at once, no 180) [1000]
#   CALL_MS        how long a call is held after the 200 (SIPp -d)  [3000]
#   SETTLE         seconds sampled after the last call ended (memory coming back) [60; QUICK: 30]
#   MEM_LIMIT_MB   memory-limit-mb of both nodes (critical alarm at 80 % of it) [64]
#   WORKERS        sip-config workers                               [2]
#   ACCESS_PORT CORE_PORT AGENT_PORT UAC_PORT HB_PORT SYNC_PORT CONFIG_SYNC_PORT
#                  [61060 61062 61080 61090 61100 61188 61187]: above Linux's ephemeral range
#                  (32768-60999) and outside the e2e tests' 10000-32000 and the other benches'
#                  5060-5090, 20000-27999, 26060-26188
#   RUST_LOG       passed to sbc                                    [info]
#   SBC_BIN, SBC_LAB, SIPP, OUT_DIR, KEEP_WORK=1 (keep the scratch dir: node logs, SIPp files)
#
# Output: $OUT_DIR/soak-<UTC>.{csv,md,svg}: the samples, the summary (also on stdout), the
# chart. Progress on stderr. A benchmark, not a test: exit 0 whenever the run completed (lost
# calls included); 2 on bad setup. Only the processes this script started are ever signalled,
# by PID, at the end and on Ctrl-C or an error.
set -euo pipefail
BENCH_NAME=soak

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(git -C "$SCRIPT_DIR" rev-parse --show-toplevel 2>/dev/null || (cd "$SCRIPT_DIR/../.." && pwd))
# shellcheck source=lab/bench/lib.sh
source "$SCRIPT_DIR/lib.sh"

QUICK=${QUICK:-0}
if [[ $QUICK == 1 ]]; then q_dur=360 q_int=60 q_smp=2 q_set=30
else q_dur=3600 q_int=120 q_smp=5 q_set=60; fi
DURATION=${DURATION:-$q_dur}
INTERVAL=${INTERVAL:-$q_int}
SAMPLE=${SAMPLE:-$q_smp}
SETTLE=${SETTLE:-$q_set}
KINDS=${KINDS:-"kill9 berpd memory"}
RATE=${RATE:-20}
RING_MS=${RING_MS:-1000}
CALL_MS=${CALL_MS:-3000}
MEM_LIMIT_MB=${MEM_LIMIT_MB:-64}
WORKERS=${WORKERS:-2}
ACCESS_PORT=${ACCESS_PORT:-61060}
CORE_PORT=${CORE_PORT:-61062}
AGENT_PORT=${AGENT_PORT:-61080}
UAC_PORT=${UAC_PORT:-61090}
HB_PORT=${HB_PORT:-61100}
SYNC_PORT=${SYNC_PORT:-61188}
CONFIG_SYNC_PORT=${CONFIG_SYNC_PORT:-61187}
export RUST_LOG=${RUST_LOG:-info}
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
SBC_BIN=${SBC_BIN:-$TARGET/release/sbc}
SBC_LAB=${SBC_LAB:-$TARGET/release/sbc-lab}
SIPP=${SIPP:-sipp}
OUT_DIR=${OUT_DIR:-$ROOT/lab/results}
STAMP=$(date -u +%Y-%m-%dT%H%M%SZ)
OUT=$OUT_DIR/soak-$STAMP
CLK_TCK=$(getconf CLK_TCK)
IP=127.0.0.1
CORE_IP=127.0.0.2
HB_IP=(127.0.0.11 127.0.0.12)
NAMES=(sbc-a sbc-b)
SHARED_KEY=lab-secret-0123456789
CMDLINE="$0${*:+ $*}"
ENV_LINE=""
for v in QUICK DURATION INTERVAL SAMPLE SETTLE KINDS RATE RING_MS CALL_MS MEM_LIMIT_MB WORKERS; do
  [[ -n ${!v+x} && -n $(printenv "$v" 2>/dev/null) ]] && ENV_LINE+="$v=${!v} "
done

# ---------------------------------------------------------------- checks ---
for v in DURATION INTERVAL SAMPLE RATE MEM_LIMIT_MB WORKERS ACCESS_PORT CORE_PORT AGENT_PORT \
         UAC_PORT HB_PORT SYNC_PORT CONFIG_SYNC_PORT; do
  is_uint "${!v}" && (( ${!v} > 0 )) || die "$v must be a positive integer"
done
for v in RING_MS CALL_MS SETTLE; do is_uint "${!v}" || die "$v must be a whole number"; done
(( CALL_MS < 55000 )) || die "CALL_MS must be under 55000 (the UAS fails a call whose BYE has not come 60 s after its ACK)"
(( MEM_LIMIT_MB >= 32 )) || die "MEM_LIMIT_MB must be at least 32 (a node's own resident memory is ~15 MB)"
for k in $KINDS; do [[ $k =~ ^(kill9|berpd|memory)$ ]] || die "KINDS: unknown kind $k (kill9 berpd memory)"; done
read -r -a KIND_LIST <<<"$KINDS"
(( ${#KIND_LIST[@]} > 0 )) || die "KINDS is empty"
[[ -x $SBC_BIN ]] || die "$SBC_BIN not found: cargo build --release -p sbc -p sbc-lab (or set SBC_BIN)"
[[ -x $SBC_LAB ]] || log "WARNING: $SBC_LAB not found: no chart (cargo build --release -p sbc-lab, or set SBC_LAB)"
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
SBC_BIN=$(realpath "$SBC_BIN")   # the nodes run in their own dirs
[[ -x $SBC_LAB ]] && SBC_LAB=$(realpath "$SBC_LAB")
if (( RING_MS > 0 )); then UAS_XML=$SCRIPT_DIR/sipp/uas-ring.xml; else UAS_XML=$SCRIPT_DIR/sipp/uas-200.xml; fi

WORK=$(mktemp -d "${TMPDIR:-/tmp}/soak.XXXXXX")
mkdir -p "$OUT_DIR"

# ------------------------------------------------------- process control ---
NODE_PID=("" "")
UAS_PID=""; UAC_PID=""; SAMPLER_PID=""
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  stop_pid "$SAMPLER_PID" 3
  stop_pid "$UAC_PID" 3; stop_pid "$UAS_PID" 3
  stop_pid "${NODE_PID[0]}" 5; stop_pid "${NODE_PID[1]}" 5
  if (( rc == 0 )) && [[ ${KEEP_WORK:-0} != 1 ]]; then rm -rf "$WORK"
  else log "scratch files kept in $WORK"; fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---------------------------------------------------------------- pair ---
# The config of node i, as tests/src/pair.rs writes it with PairConfig::with_memory_switchover.
write_node_config() {   # write_node_config I FILE
  local i=$1 j kind
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
options = ["critical-memory-abort=switchover"]
memory-source = "process"
memory-limit-mb = $MEM_LIMIT_MB
alarm-iteration-ms = 1000
alarm-subsamples = 5
spike-subsamples = 3
lab-mode = true

[redundancy-config]
state = "enabled"
shared-key = "$SHARED_KEY"
sip-sync-port = $SYNC_PORT
config-sync-port = $CONFIG_SYNC_PORT
EOF
    for j in 0 1; do
      kind=primary; (( j == 1 )) && kind=secondary
      printf '\n[[redundancy-config.peer]]\nname = "%s"\ntype = "%s"\ndestinations = ["%s:%s"]\n' \
        "${NAMES[$j]}" "$kind" "${HB_IP[$j]}" "$HB_PORT"
    done
    printf '\n[[system-config.alarm-threshold]]\ntype = "memory"\nseverity = "critical"\nvalue = 80\n'
  } >"$2"
  chmod 600 "$2"
}

node_dir() { echo "$WORK/${NAMES[$1]}"; }
SOCK=("$(node_dir 0)/mgmt.sock" "$(node_dir 1)/mgmt.sock")
STARTS=(0 0)   # how many times each node was started

# The PIDs the sampler watches, written whole (rename) so that it never reads half a file.
publish_pids() { echo "${NODE_PID[0]:--} ${NODE_PID[1]:--}" >"$WORK/pids.tmp"; mv "$WORK/pids.tmp" "$WORK/pids"; }

start_node() {   # start_node I: sets NODE_PID[I], waits (bounded) for `sbc ready`
  local i=$1 d n
  d=$(node_dir "$i"); n=$(( ++STARTS[i] ))
  (cd "$d" && exec "$SBC_BIN" run --config "$d/sbc.toml" --mgmt-socket "${SOCK[$i]}" \
     >"$d/run$n.stdout.log" 2>"$d/run$n.stderr.log" </dev/null) &
  NODE_PID[$i]=$!
  publish_pids
  wait_until 15 sbc_ready "$d/run$n.stdout.log" || die "${NAMES[$i]} did not print 'sbc ready' (see $d/run$n.stderr.log)"
}

acli() { timeout 5 "$SBC_BIN" acli --mgmt-socket "${SOCK[$1]}" --json "${@:2}" 2>/dev/null; }
# "state synchronized epoch ineligible" of node i ("? ? ? ?" if it does not answer).
red() {
  local r
  r=$(acli "$1" -c "show redundancy" | jq -r '"\(.state) \(.synchronized) \(.epoch) \(.ineligible_until_restart)"' 2>/dev/null) || r=""
  echo "${r:-? ? ? ?}"
}
state_of() { local s; read -r s _ <<<"$(red "$1")"; echo "$s"; }
is_state() { [[ $(state_of "$1") == "$2" ]]; }
not_active() { local s; s=$(state_of "$1"); [[ $s != active && $s != becoming-active* && $s != '?' ]]; }

# wait_poll SECS INTERVAL CMD...: run CMD every INTERVAL seconds until it succeeds; bounded in
# iterations and in wall time.
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
roles_ok() {   # an active and a synchronized standby; sets ACT and STB
  local s0 y0 s1 y1
  read -r s0 y0 _ <<<"$(red 0)"; read -r s1 y1 _ <<<"$(red 1)"
  if [[ $s0 == active && $s1 == standby && $y1 == true ]]; then ACT=0; STB=1; return 0; fi
  if [[ $s1 == active && $s0 == standby && $y0 == true ]]; then ACT=1; STB=0; return 0; fi
  return 1
}

now() { date +%s.%N; }
T0=""   # when the UAC started: the time origin of the samples and events
since() { awk -v a="$T0" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }
ms_since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.0f", (b - a) * 1000 }'; }

# "heap_mb rss_mb" of node i (jemalloc allocated, process resident), "- -" if it does not answer.
# A reading not taken yet (a node restarted less than an alarm iteration ago) is "-".
mem_of() {
  local m
  m=$(acli "$1" -c "show memory" | jq -r '
    def mb: if . == null then "-" else (. / 1048576 * 100 | round / 100 | tostring) end;
    "\(.readings.heap_allocated | mb) \(.process_resident_bytes | mb)"' 2>/dev/null) || m=""
  echo "${m:-- -}"
}

# ------------------------------------------------------------- sampler ---
UAC_STATS=$WORK/uac.csv; UAS_STATS=$WORK/uas.csv; UAC_COUNTS=""
CSV=$OUT.csv
HEADER="t_s"
for n in a b; do
  HEADER+=",${n}_pid,${n}_role,${n}_epoch,${n}_health,${n}_synchronized,${n}_replicated,${n}_heap_mb,${n}_heap_resident_mb,${n}_rss_mb,${n}_cpu_pct,${n}_calls,${n}_answered"
done
HEADER+=",uac_attempted,uac_answered,uac_successful,uac_failed,uac_current,uac_retransmissions,uas_successful,uas_failed"
# One node's part of a row, in ROW (not echoed: the CPU needs PREV_* to outlive the call):
# pid,role,epoch,health,synchronized,replicated,heap,heap_res,rss,cpu,calls,answered.
# CPU = utime+stime ticks since the previous sample of the same process (PID and start time).
declare -A PREV_TICKS=() PREV_T=()
ROW=""
node_row() {   # node_row I PID
  local i=$1 pid=$2 st s rest f ticks t cpu="" j role
  if [[ $pid == - ]] || ! alive "$pid"; then
    ROW="$pid,down,,,,,,,,,,"; return
  fi
  if s=$(cat "/proc/$pid/stat" 2>/dev/null); then
    rest=${s##*) }; read -r -a f <<<"$rest"
    st=${f[19]}; ticks=$(( f[11] + f[12] )); t=$(now)
    if [[ ${PREV_T[$i]:-} == "$pid:$st:"* ]]; then
      cpu=$(awk -v a="${PREV_T[$i]##*:}" -v b="$t" -v d="$(( ticks - PREV_TICKS[$i] ))" -v hz="$CLK_TCK" \
        'BEGIN { if (b > a) printf "%.1f", d * 100 / hz / (b - a) }')
    fi
    PREV_TICKS[$i]=$ticks; PREV_T[$i]=$pid:$st:$t
  fi
  j=$(acli "$i" -c "show redundancy" -c "show memory" -c "show sip-stats" | jq -s -r '
    def mb: if . == null then "" else (. / 1048576 * 100 | round / 100 | tostring) end;
    def s: if . == null then "" else tostring end;
    [(.[0].state | s), (.[0].epoch | s), (.[0].health | s), (.[0].synchronized | s),
     (.[0].replicated_dialogs | s), (.[1].readings.heap_allocated | mb),
     (.[1].readings.heap_resident | mb), (.[1].process_resident_bytes | mb),
     (.[2].calls_active | s), (.[2].counters.calls_answered | s)] | join(",")' 2>/dev/null) || j=""
  if [[ -z $j || $j == ,* ]]; then
    ROW="$pid,no-answer,,,,,,,,$cpu,,"; return
  fi
  role=${j%%,*}
  ROW="$pid,$role,$(cut -d, -f2-8 <<<"$j"),$cpu,$(cut -d, -f9-10 <<<"$j")"
}
sipp_row() {
  local a="" ans="" ok="" fl="" cur="" rtx="" uok="" ufl=""
  if [[ -s $UAC_STATS ]]; then
    read -r a ok fl cur rtx < <(awk -F';' '
      NR == 1 { for (i = 1; i <= NF; i++) k[$i] = i; next }
      NF > 1  { l = $k["OutgoingCall(C)"] " " $k["SuccessfulCall(C)"] " " $k["FailedCall(C)"] " " $k["CurrentCall"] " " $k["Retransmissions(C)"] }
      END     { print l }' "$UAC_STATS") || true
  fi
  [[ -n $UAC_COUNTS ]] && ans=$(csv_last "$UAC_COUNTS" '4_200_Recv' | awk '{ print $1 + 0 }')
  [[ -s $UAS_STATS ]] && read -r uok ufl < <(awk -F';' '
      NR == 1 { for (i = 1; i <= NF; i++) k[$i] = i; next }
      NF > 1  { l = $k["SuccessfulCall(C)"] " " $k["FailedCall(C)"] }
      END     { print l }' "$UAS_STATS")
  echo "$a,$ans,$ok,$fl,$cur,$rtx,$uok,$ufl"
}
sampler() {   # runs in the background until stopped; bounded by the script's own end
  local p0 p1 next t r0
  trap - EXIT INT TERM   # the parent cleans up; a signal just ends this loop
  trap 'exit 0' TERM
  next=$(date +%s)
  while :; do
    read -r p0 p1 <"$WORK/pids" || { p0=-; p1=-; }
    t=$(since)
    node_row 0 "$p0"; r0=$ROW
    node_row 1 "$p1"
    echo "$t,$r0,$ROW,$(sipp_row)" >>"$CSV"
    next=$(( next + SAMPLE ))
    while (( $(date +%s) < next )); do sleep 0.2; done
  done
}

# -------------------------------------------------------------- events ---
# One line per switchover, for the summary: index kind t from to detect_ms whole_s epoch
# failed_at (the UAC's FailedCall(C) when it began) a_heap a_rss b_heap b_rss (once whole) note
EVENTS=$WORK/events.txt; : >"$EVENTS"
MARKERS=()
uac_failed_now() { local f; f=$(csv_last "$UAC_STATS" 'FailedCall(C)' | awk '{ print $1 + 0 }'); echo "${f:-0}"; }

# switchover KIND: one switchover of KIND from the current active; appends to EVENTS.
NSW=0; declare -A DONE=() SKIPPED=()
switchover() {
  local kind=$1 t ts from to dms="" whole="" ep note="" failed m0 m1 rss mb stb_state
  from=$ACT; to=$STB
  t=$(since); failed=$(uac_failed_now); ts=$(now)
  NSW=$(( NSW + 1 ))
  case $kind in
    kill9)
      log "switchover $NSW at ${t}s: kill -9 ${NAMES[$from]} (pid ${NODE_PID[$from]}, active)"
      kill -KILL "${NODE_PID[$from]}" 2>/dev/null || true
      wait "${NODE_PID[$from]}" 2>/dev/null || true
      NODE_PID[$from]=""; publish_pids
      ;;
    berpd)
      log "switchover $NSW at ${t}s: notify berpd force on ${NAMES[$from]} (active)"
      acli "$from" -c "notify berpd force" >"$WORK/berpd-$NSW.json" || note="notify berpd force: no ok reply ($(tr -d '\n' <"$WORK/berpd-$NSW.json" | head -c 200))"
      ;;
    memory)
      read -r _ rss <<<"$(mem_of "$from")"
      [[ $rss =~ ^[0-9.]+$ ]] || rss=20
      mb=$(awk -v l="$MEM_LIMIT_MB" -v r="$rss" 'BEGIN { b = int(l * 0.9 - r + 0.999); print (b < 8 ? 8 : b) }')
      log "switchover $NSW at ${t}s: lab ballast $mb on ${NAMES[$from]} (active, ${rss} MB resident, limit $MEM_LIMIT_MB MB, critical at 80 %)"
      acli "$from" -c "lab ballast $mb" >"$WORK/ballast-$NSW.json" || note="lab ballast $mb: no ok reply ($(tr -d '\n' <"$WORK/ballast-$NSW.json" | head -c 200))"
      note=${note:-"lab ballast $mb MB"}
      ;;
  esac
  MARKERS+=(--marker "$t:$NSW $kind ${NAMES[$from]}")
  if wait_poll 30 0.1 is_state "$to" active; then
    dms=$(ms_since "$ts")
    log "  ${NAMES[$to]} active after $dms ms"
  else
    note="${note:+$note; }${NAMES[$to]} not active within 30 s ($(red "$to"))"
    log "  WARNING: $note"
  fi
  if [[ $kind == memory ]]; then
    wait_poll 15 0.2 not_active "$from" || log "  WARNING: ${NAMES[$from]} still $(state_of "$from") 15 s after its critical memory"
    local ine; read -r _ _ _ ine <<<"$(red "$from")"
    [[ $ine == true ]] && note+=", ${NAMES[$from]} ineligible until restart" || note+=", ${NAMES[$from]} ineligible=$ine"
    log "  restarting ${NAMES[$from]} (SIGTERM, then start)"
    stop_pid "${NODE_PID[$from]}" 10; NODE_PID[$from]=""; publish_pids
  fi
  if [[ $kind != berpd ]]; then
    start_node "$from"
    log "  ${NAMES[$from]} restarted (pid ${NODE_PID[$from]})"
  fi
  if wait_poll 60 0.5 roles_ok; then
    whole=$(awk -v a="$ts" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }')
    log "  pair whole again after ${whole} s: ${NAMES[$ACT]} active, ${NAMES[$STB]} standby (synchronized)"
  else
    note="${note:+$note; }pair not whole within 60 s (a: $(red 0); b: $(red 1))"
    log "  WARNING: pair not whole within 60 s (a: $(red 0); b: $(red 1))"
  fi
  read -r _ _ ep _ <<<"$(red "$to")"
  m0=$(mem_of 0); m1=$(mem_of 1)
  DONE[$kind]=$(( ${DONE[$kind]:-0} + 1 ))
  echo "$NSW|$kind|$t|${NAMES[$from]}|${NAMES[$to]}|${dms:-n/a}|${whole:-n/a}|$ep|$failed|$m0|$m1|$note" >>"$EVENTS"
}

# ------------------------------------------------------------------ run ---
for i in 0 1; do
  mkdir -p -m 700 "$(node_dir "$i")"
  write_node_config "$i" "$(node_dir "$i")/sbc.toml"
done
publish_pids
log "scratch dir $WORK; $DURATION s at $RATE calls/s (ring $RING_MS ms, hold $CALL_MS ms), a switchover every $INTERVAL s ($KINDS), samples every $SAMPLE s"

"$SIPP" -sf "$UAS_XML" -i "$IP" -p "$AGENT_PORT" -nostdin -d "$RING_MS" \
  -trace_stat -stf "$UAS_STATS" -fd 1 -trace_err -error_file "$WORK/uas-errors.log" \
  >"$WORK/uas.out" 2>&1 </dev/null &
UAS_PID=$!
wait_until 10 bound_by "$AGENT_PORT" "$UAS_PID" || die "SIPp UAS did not bind $IP:$AGENT_PORT (see $WORK/uas.out)"

start_node 0
start_node 1
wait_poll 30 0.5 roles_ok || die "no active + synchronized standby within 30 s (a: $(red 0); b: $(red 1))"
log "${NAMES[$ACT]} active (pid ${NODE_PID[$ACT]}), ${NAMES[$STB]} standby (pid ${NODE_PID[$STB]})"
sleep 2
MEM_START=("$(mem_of 0)" "$(mem_of 1)")
EPOCH_START=$(red "$ACT" | awk '{ print $3 }')

echo "$HEADER" >"$CSV"
need_free "$UAC_PORT"
CALLS=$(( RATE * DURATION ))
# A call that waits longer than this for a response fails (timer B's 64·T1 after the ring):
# a call whose 200 went to a node that did not know it would otherwise wait forever.
RECV_TIMEOUT_MS=$(( RING_MS + 32000 ))
UAC_TIMEOUT=$(( DURATION + (RING_MS + CALL_MS + RECV_TIMEOUT_MS) / 1000 + 60 ))
T0=$(now)
( cd "$WORK" && exec "$SIPP" -sn uac -i "$IP" -p "$UAC_PORT" "$IP:$ACCESS_PORT" -nostdin \
    -r "$RATE" -m "$CALLS" -d "$CALL_MS" -timeout "${UAC_TIMEOUT}s" -recv_timeout "$RECV_TIMEOUT_MS" \
    -trace_stat -stf "$UAC_STATS" -fd 1 -trace_counts \
    -trace_err -error_file "$WORK/uac-errors.log" \
    >"$WORK/uac.out" 2>&1 </dev/null ) &
UAC_PID=$!
UAC_COUNTS=$WORK/uac_${UAC_PID}_counts.csv   # the subshell exec'ed SIPp: same PID
sampler &
SAMPLER_PID=$!
log "SIPp UAC (pid $UAC_PID): $CALLS calls; sampler pid $SAMPLER_PID"

k=0; next_at=$INTERVAL
while (( next_at < DURATION )); do
  while awk -v s="$(since)" -v n="$next_at" 'BEGIN { exit !(s < n) }'; do sleep 0.2; done
  alive "$UAC_PID" || { log "WARNING: the SIPp UAC exited early (see $WORK/uac.out)"; break; }
  kind=${KIND_LIST[$(( k % ${#KIND_LIST[@]} ))]}
  if wait_poll 5 0.5 roles_ok; then
    switchover "$kind"
  else
    log "switchover at ${next_at}s ($kind) skipped: the pair is not whole (a: $(red 0); b: $(red 1))"
    SKIPPED[$kind]=$(( ${SKIPPED[$kind]:-0} + 1 ))
    MARKERS+=(--marker "$(since):skipped $kind")
  fi
  k=$(( k + 1 ))
  next_at=$(( next_at + INTERVAL ))
done

log "waiting for the UAC to place its last calls and end (at most ${UAC_TIMEOUT} s from its start)"
for (( i = 0; i < (UAC_TIMEOUT + 10) * 5; i++ )); do alive "$UAC_PID" || break; sleep 0.2; done
T_END_TRAFFIC=$(since)
if alive "$UAC_PID"; then log "WARNING: the UAC is still running; stopping it"; fi
stop_pid "$UAC_PID" 3; wait "$UAC_PID" 2>/dev/null || true; UAC_PID_DONE=$UAC_PID; UAC_PID=""
sleep 2   # the nodes' alarm iteration (1 s) refreshes the heap reading
MEM_END=("$(mem_of 0)" "$(mem_of 1)")
MARKERS+=(--marker "$T_END_TRAFFIC:last call ended")
log "traffic over at ${T_END_TRAFFIC}s; sampling $SETTLE s more (memory coming back)"
sleep "$SETTLE"
MEM_SETTLED=("$(mem_of 0)" "$(mem_of 1)")
T_FINAL=$(since)
roles_ok || true
FINAL_RED=("$(red 0)" "$(red 1)")
stop_pid "$SAMPLER_PID" 3; SAMPLER_PID=""
stop_pid "$UAS_PID" 3; UAS_PID=""
for i in 0 1; do stop_pid "${NODE_PID[$i]}" 5; NODE_PID[$i]=""; done

# ---------------------------------------------------------------- report ---
# The UAC's final counters (it writes a last line when it exits).
uac() { csv_last "$UAC_STATS" "$1" | awk '{ print $1 + 0 }'; }
ATTEMPTED=$(uac 'OutgoingCall(C)'); SUCCESSFUL=$(uac 'SuccessfulCall(C)'); FAILED=$(uac 'FailedCall(C)')
RETRANS=$(uac 'Retransmissions(C)'); UNEXPECTED=$(uac 'FailedUnexpectedMessage(C)')
MAXRETRANS=$(uac 'FailedMaxUDPRetrans(C)'); TIMEOUTS=$(uac 'FailedTimeoutOnRecv(C)')
ANSWERED=$(csv_last "$UAC_COUNTS" '4_200_Recv' | awk '{ print $1 + 0 }')
LOST=$(( ATTEMPTED - SUCCESSFUL ))
UAS_OK=$(csv_last "$UAS_STATS" 'SuccessfulCall(C)' | awk '{ print $1 + 0 }')
UAS_FAILED=$(csv_last "$UAS_STATS" 'FailedCall(C)' | awk '{ print $1 + 0 }')
# Changes of the active node seen by the sampler (a switchover the script did not ask for
# shows as one more than the switchovers done).
CHANGES=$(awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) k[$i] = i; next }
  { a = ($k["a_role"] == "active") ? "a" : (($k["b_role"] == "active") ? "b" : "")
    if (a != "" && last != "" && a != last) n++; if (a != "") last = a }
  END { print n + 0 }' "$CSV")
# Mean CPU of each node over the samples (percent of one core, while it answered).
cpu_mean() { awk -F, -v c="$1" 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == c) k = i; next }
  $k != "" { s += $k; n++ } END { if (n) printf "%.1f", s / n; else print "n/a" }' "$CSV"; }

# The UAC's failed calls, one line each, from its error log: "call_number reason" (SIPp names a
# call "N-PID@IP" in every entry; the first entry of a call gives the reason).
FAILS=$WORK/failed-calls.txt
awk -v q="'" '
  # One entry of the log (SIPp may write the next entry on the same line).
  function entry(msg,    n, w, r) {
    if (!match(msg, cid)) return
    n = substr(msg, RSTART, RLENGTH); sub(/^Call-I[dD]:? /, "", n); gsub(/[^0-9]/, "", n); n += 0
    if (n in seen) return
    seen[n] = 1
    if (msg ~ /unexpected message/) {
      w = msg; sub(/.*while expecting /, "", w); sub(/ \(index.*/, "", w)
      r = msg; sub(".*received " q, "", r)
      r = "unexpected " q r q " while expecting " w
    } else {
      r = msg; gsub(cid "[0-9]+@[0-9.]+" q "?,? ?", "", r); sub(/ without label.*/, "", r)
    }
    print n, r
  }
  BEGIN { cid = "Call-I[dD]:? " q "?[0-9]+-"; ts = "[0-9]+-[0-9]+-[0-9]+\t[0-9:.]+\t[0-9.]+: " }
  {
    line = $0
    while (match(line, ts)) {
      rest = substr(line, RSTART + RLENGTH)
      if (match(rest, ts)) { entry(substr(rest, 1, RSTART - 1)); line = substr(rest, RSTART) }
      else { entry(rest); line = "" }
    }
  }' "$WORK/uac-errors.log" 2>/dev/null | sort -n >"$FAILS" || true
LOGGED_FAILS=$(wc -l <"$FAILS")
# attribute N: which switchover (its number; 0 = none) lost each failed call. Call N starts at
# about (N - 1) / RATE s; it is put on the last switchover that came before it ended (its start
# plus ring and hold, plus 1 s). Prints "switchover call_number reason".
CALL_LIFE=$(awk -v r="$RING_MS" -v c="$CALL_MS" 'BEGIN { print (r + c) / 1000 + 1 }')
attribute() {
  awk -v rate="$RATE" -v life="$CALL_LIFE" '
    FILENAME == ARGV[1] { split($0, f, "|"); sw[++m] = f[3] + 0; next }
    { s = ($1 - 1) / rate; k = 0
      for (i = 1; i <= m; i++) if (sw[i] <= s + life) k = i
      print k, $0 }' "$EVENTS" "$FAILS"
}
ATTR=$WORK/attributed.txt
attribute >"$ATTR"
lost_to() { awk -v k="$1" '$1 == k { n++ } END { print n + 0 }' "$ATTR"; }
# The causes of the calls lost to switchover K ("" = all): "N× reason; ...", most first.
causes_of() {
  awk -v k="$1" 'k == "" || $1 == k { $1 = ""; $2 = ""; sub(/^  /, ""); c[$0]++ }
    END { for (r in c) print c[r] "\t" r }' "$ATTR" | sort -rn | head -4 \
    | awk -F'\t' '{ printf "%s%s× %s", (NR > 1 ? "; " : ""), $1, $2 }' | sed 's/|/\\|/g'
}

SVG=$OUT.svg
summary_line="$ATTEMPTED calls attempted, $ANSWERED answered, $SUCCESSFUL completed, $FAILED failed, $LOST lost; $NSW switchovers"
if [[ -x $SBC_LAB ]]; then
  "$SBC_LAB" chart lines "$CSV" -o "$SVG" --x t_s --x-label "seconds since the first call" \
    --title "Soak: an SBC pair at $RATE calls/s for $DURATION s, a switchover every $INTERVAL s ($KINDS)" \
    --subtitle "$summary_line. a = sbc-a, b = sbc-b; calls ring $RING_MS ms, held $CALL_MS ms; samples every $SAMPLE s ($STAMP)\nheap = jemalloc allocated, rss = process resident (show memory); cpu = utime+stime per second of wall time (/proc/PID/stat); a node that is down has no points" \
    --panel "jemalloc heap allocated (MB)=a_heap_mb,b_heap_mb;height=130" \
    --panel "Resident memory (MB)=a_rss_mb,b_rss_mb;ref=$(( MEM_LIMIT_MB * 80 / 100 ));height=130" \
    --panel "CPU (% of one core)=a_cpu_pct,b_cpu_pct;unit=%;height=120" \
    --panel "Calls held (each node's calls_active, SIPp's current calls)=a_calls,b_calls,uac_current;height=120" \
    --panel "SIPp UAC failed calls (cumulative)=uac_failed;step;height=90" \
    --panel "sbc-a redundancy state=a_role;spans;height=26" \
    --panel "sbc-b redundancy state=b_role;spans;height=26" \
    "${MARKERS[@]}" || log "WARNING: chart failed"
fi

MD=$OUT.md
GIT_REV=$(repo_rev "$ROOT")
SIPP_VERSION=$( { "$SIPP" -v 2>&1 || true; } | grep -m1 -o 'SIPp v[^ ]*[^ .]' || echo 'SIPp (unknown version)')
mem_cell() { local h r; read -r h r <<<"$1"; echo "$h / $r"; }
kinds_done() { local k s=""; for k in kill9 berpd memory; do s+="$k ${DONE[$k]:-0}, "; done; echo "${s%, }"; }
kinds_skipped() { local k s=""; for k in kill9 berpd memory; do (( ${SKIPPED[$k]:-0} )) && s+="$k ${SKIPPED[$k]}, "; done; echo "${s:-none}" | sed 's/, $//'; }
{
  echo "# Soak: an SBC pair, $DURATION s at $RATE calls/s, a switchover every $INTERVAL s ($STAMP)"
  echo
  echo "- command: \`${ENV_LINE}${CMDLINE#"$ROOT/"}\`"
  echo "- sbc: \`$SBC_BIN\`, source $GIT_REV; $SIPP_VERSION"
  echo "- machine: $(nproc) cores ($(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo), $(uname -sr)), shared with other tenants; load average at the report: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "- pair: sbc-a (primary) and sbc-b (secondary) on loopback, service address access $IP:$ACCESS_PORT, core $CORE_IP:$CORE_PORT, heartbeats ${HB_IP[0]}/${HB_IP[1]}:$HB_PORT, redundancy timers at the shipped defaults, workers $WORKERS; memory-source process, memory-limit-mb $MEM_LIMIT_MB, critical at 80 %, critical-memory-abort=switchover, lab mode; RUST_LOG=$RUST_LOG"
  echo "- traffic: SIPp built-in \`uac\` ($IP:$UAC_PORT, \`-r $RATE -m $CALLS -d $CALL_MS\`) -> pair -> \`$(basename "$UAS_XML")\` ($IP:$AGENT_PORT, rings $RING_MS ms then answers)"
  echo "- switchovers every $INTERVAL s, in turn: $KINDS; done: $(kinds_done); skipped (pair not whole when due): $(kinds_skipped)"
  echo "- files: \`$(basename "$CSV")\` (a row every $SAMPLE s), \`$(basename "$SVG")\`"
  echo
  echo "## Calls"
  echo
  echo "| attempted | answered (200 received) | completed (BYE answered) | failed | lost (attempted − completed) | UAC retransmissions | UAS completed | UAS failed |"
  echo "|---:|---:|---:|---:|---:|---:|---:|---:|"
  echo "| $ATTEMPTED | $ANSWERED | $SUCCESSFUL | $FAILED | **$LOST** | $RETRANS | $UAS_OK | $UAS_FAILED |"
  echo
  echo "UAC failures by SIPp's counters: unexpected message $UNEXPECTED, max UDP retransmissions $MAXRETRANS, no response within $RECV_TIMEOUT_MS ms (\`-recv_timeout\`) $TIMEOUTS. In the built-in \`uac\`, message index 1 is the 100, 2 the 180, 3 and 4 the 183 and the 200: a receive timeout at index 3 is a call that rang and never got its 200. \"lost\" counts calls that never completed: failed, or still unfinished when the UAC ended."
  echo
  echo "## Switchovers"
  echo
  echo "| # | t (s) | kind | from → to | new active after (ms) | pair whole after (s) | epoch | calls lost | how they failed (SIPp UAC) | heap / RSS after, sbc-a (MB) | heap / RSS after, sbc-b (MB) | note |"
  echo "|---:|---:|---|---|---:|---:|---:|---:|---|---|---|---|"
  mapfile -t EV <"$EVENTS"
  for (( e = 0; e < ${#EV[@]}; e++ )); do
    IFS='|' read -r n kind t from to dms whole ep _ m0 m1 note <<<"${EV[$e]}"
    echo "| $n | $t | $kind | $from → $to | $dms | $whole | $ep | **$(lost_to "$n")** | $(causes_of "$n") | $(mem_cell "$m0") | $(mem_cell "$m1") | $note |"
  done
  echo
  echo "- new active after: from the kill, the command or the ballast to the other node's \`show redundancy\` saying \`active\` (polled every 0.1 s; for memory it includes the alarm's detection, 2 readings at 1 s). Pair whole: until an active and a synchronized standby again (polled every 0.5 s), the restart included."
  echo "- calls lost: the UAC's failed calls, each put on the last switchover before it ended (call N starts at (N − 1)/$RATE s, lasts ring + hold + 1 s), by the Call-ID in SIPp's error log ($LOGGED_FAILS calls there, FailedCall(C) = $FAILED). Before the first switchover: $(lost_to 0)$( (( $(lost_to 0) )) && echo " ($(causes_of 0))")."
  echo "- active node changes seen by the sampler: $CHANGES (switchovers done: $NSW); epoch at the start: $EPOCH_START."
  echo
  echo "## Memory (jemalloc heap allocated / process resident, MB)"
  echo
  echo "| when | sbc-a | sbc-b |"
  echo "|---|---|---|"
  echo "| start (pair whole, idle) | $(mem_cell "${MEM_START[0]}") | $(mem_cell "${MEM_START[1]}") |"
  for (( e = 0; e < ${#EV[@]}; e++ )); do
    IFS='|' read -r n kind t _ _ _ _ _ _ m0 m1 _ <<<"${EV[$e]}"
    echo "| after switchover $n ($kind, t ${t} s; a restarted node is new) | $(mem_cell "$m0") | $(mem_cell "$m1") |"
  done
  echo "| end of traffic (t ${T_END_TRAFFIC} s) | $(mem_cell "${MEM_END[0]}") | $(mem_cell "${MEM_END[1]}") |"
  echo "| ${SETTLE} s later (t ${T_FINAL} s) | $(mem_cell "${MEM_SETTLED[0]}") | $(mem_cell "${MEM_SETTLED[1]}") |"
  echo
  echo "Nodes started: sbc-a ${STARTS[0]} times, sbc-b ${STARTS[1]} times. Final state: sbc-a ${FINAL_RED[0]%% *}, sbc-b ${FINAL_RED[1]%% *}. Mean CPU over the samples (% of one core): sbc-a $(cpu_mean a_cpu_pct), sbc-b $(cpu_mean b_cpu_pct)."
} >"$MD"
cat "$MD"
log "wrote $MD, $CSV${SBC_LAB:+, $SVG}"
