#!/usr/bin/env bash
# overload-prsm.sh: the PRSM overload experiment, our SBC (PRSM and plain FIFO) vs Kamailio.
#
# Usage (from anywhere inside the repo):
#   cargo build --release -p sbc -p sbc-lab && lab/bench/overload-prsm.sh
#   SYSTEMS=kamailio LOADS="1 2" DURATION=5 CAP_DURATION=5 lab/bench/overload-prsm.sh   # quick
#
#   SIPp UAC 127.0.0.1:$UAC_PORT -> relay -> SIPp UAS 127.0.0.1:5080  (lab/bench/sipp/*.xml)
#   kamailio: kamailio -f kamailio-slow.cfg -A ROUTING_COST_US=$ROUTING_COST_US (127.0.0.1:5070,
#             children=2: every new INVITE blocks its worker ROUTING_COST_US after the 100)
#   sbc-prsm: sbc run, workers=$WORKERS per UDP group, routing-cost-us=$ROUTING_COST_US, prsm=true
#   sbc-fifo: the same with prsm=false
#
# For each system in SYSTEMS: measure its capacity (CAP_DURATION-second steps at
# CAP_FRACTIONS of the theoretical WORKERS*1e6/ROUTING_COST_US calls/s, from the top; the
# first step with >= 99 % of its calls answered and UAC retransmissions <= 1 % of its calls
# is the capacity), then offer LOADS x that capacity for DURATION seconds each, the relay and
# the UAS restarted for every step, one system under load at a time.
#
# Environment (defaults in brackets):
#   SYSTEMS        systems, in order                         ["kamailio sbc-prsm sbc-fifo"]
#   ROUTING_COST_US  blocking routing cost per new INVITE    [5000]
#   WORKERS        sbc workers per UDP group (fixed)          [2]
#   LOADS          multiples of the capacity to offer         ["1 2 5"]
#   DURATION       seconds of offered traffic per load step   [20]
#   CAP_DURATION   seconds per capacity step                  [10]
#   CAP_FRACTIONS  fractions of the theoretical capacity      ["1.0 0.95 0.9 0.85 0.8 0.7 0.6 0.5"]
#   CAPACITY       skip the ramps, use this capacity (calls/s) for every system [unset]
#   CAPACITY_KAMAILIO, CAPACITY_SBC_PRSM, CAPACITY_SBC_FIFO   per-system override [unset]
#   QUEUE_SIZE, MAX_QUEUE_DELAY_MS  sbc [sip-config] keys, written only when set (defaults 1024, 200)
#   RECV_TIMEOUT_MS  SIPp -recv_timeout: a call waiting longer for a response fails (timer B) [32000]
#   UAC_PORT       SIPp UAC local port                        [5090]
#   SHARED, KAMAILIO_CFG (kamailio-slow.cfg), KAMAILIO, SBC_BIN, SBC_LAB, SIPP: where things are
#   SBC_SRC        the source tree SBC_BIN was built from, for the report  [<repo>]
#   OUT_DIR        where the results go                       [<repo>/lab/results]
#   KEEP_WORK=1    keep the scratch dir (SIPp CSVs, relay logs) even on success
#
# Output: $OUT_DIR/overload-prsm-<UTC>.{csv,svg,md}; the Markdown also on stdout; progress on
# stderr. A benchmark, not a test: exit 0 whenever the run completed; 2 on bad setup.
set -euo pipefail
BENCH_NAME=overload-prsm

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(git -C "$SCRIPT_DIR" rev-parse --show-toplevel 2>/dev/null || (cd "$SCRIPT_DIR/../.." && pwd))
# shellcheck source=lab/bench/lib.sh
source "$SCRIPT_DIR/lib.sh"

SHARED=${SHARED:-$ROOT/../shared}
if [[ -z ${KAMAILIO_CFG:-} ]]; then
  KAMAILIO_CFG=$SHARED/peers/kamailio-slow.cfg
  [[ -r $KAMAILIO_CFG ]] || KAMAILIO_CFG=$ROOT/lab/peers/kamailio-slow.cfg
fi
KAMAILIO=${KAMAILIO:-/usr/sbin/kamailio}
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
SBC_BIN=${SBC_BIN:-$TARGET/release/sbc}
SBC_LAB=${SBC_LAB:-$TARGET/release/sbc-lab}
SIPP=${SIPP:-sipp}
SYSTEMS=${SYSTEMS:-"kamailio sbc-prsm sbc-fifo"}
ROUTING_COST_US=${ROUTING_COST_US:-5000}
WORKERS=${WORKERS:-2}
LOADS=${LOADS:-"1 2 5"}
DURATION=${DURATION:-20}
CAP_DURATION=${CAP_DURATION:-10}
CAP_FRACTIONS=${CAP_FRACTIONS:-"1.0 0.95 0.9 0.85 0.8 0.7 0.6 0.5"}
RECV_TIMEOUT_MS=${RECV_TIMEOUT_MS:-32000}
UAC_PORT=${UAC_PORT:-5090}
OUT_DIR=${OUT_DIR:-$ROOT/lab/results}
STAMP=$(date -u +%Y-%m-%dT%H%M%SZ)
BASE=$OUT_DIR/overload-prsm-$STAMP
UAC_XML=$SCRIPT_DIR/sipp/uac-overload.xml
UAS_XML=$SCRIPT_DIR/sipp/uas-200.xml

IP=127.0.0.1
UAS_PORT=5080
KAM_PORT=5070
SBC_PORT=5060
SBC_CORE_PORT=5062
CLK_TCK=$(getconf CLK_TCK)

# ---------------------------------------------------------------- checks ---
for v in ROUTING_COST_US WORKERS DURATION CAP_DURATION RECV_TIMEOUT_MS UAC_PORT; do
  is_uint "${!v}" && (( ${!v} > 0 )) || die "$v must be a positive integer"
done
for m in $LOADS; do [[ $m =~ ^[0-9]+(\.[0-9]+)?$ ]] || die "bad multiple in LOADS: $m"; done
for f in $CAP_FRACTIONS; do [[ $f =~ ^[0-9]+(\.[0-9]+)?$ ]] || die "bad fraction in CAP_FRACTIONS: $f"; done
for s in $SYSTEMS; do
  case $s in
    kamailio)
      [[ -x $KAMAILIO ]] || die "kamailio not found at $KAMAILIO (Debian package kamailio)"
      [[ -r $KAMAILIO_CFG ]] || die "kamailio-slow.cfg not found: $KAMAILIO_CFG (set SHARED or KAMAILIO_CFG)" ;;
    sbc-prsm|sbc-fifo)
      [[ -x $SBC_BIN ]] || die "$SBC_BIN not found: cargo build --release -p sbc (or set SBC_BIN)" ;;
    *) die "unknown system '$s' in SYSTEMS (kamailio, sbc-prsm, sbc-fifo)" ;;
  esac
done
[[ -x $SBC_LAB ]] || die "$SBC_LAB not found (charts): cargo build --release -p sbc-lab (or set SBC_LAB)"
command -v "$SIPP" >/dev/null || die "sipp not found (Debian package sip-tester)"
command -v ss >/dev/null || die "ss not found (iproute2)"
command -v jq >/dev/null || die "jq not found (Debian package jq)"
for p in $UAS_PORT $KAM_PORT $SBC_PORT $SBC_CORE_PORT $UAC_PORT; do
  udp_port_busy "$p" && die "UDP port $p is already bound (ss -lunp 'sport = :$p')"
done

WORK=$(mktemp -d "${TMPDIR:-/tmp}/overload-prsm.XXXXXX")
mkdir -p "$OUT_DIR"

# ------------------------------------------------------- process control ---
RELAY_PID=""; UAS_PID=""; UAC_PID=""
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

# ------------------------------------------------------------ components ---
start_uas() {
  local tag=$1
  need_free "$UAS_PORT"
  "$SIPP" -sf "$UAS_XML" -i "$IP" -p "$UAS_PORT" -nostdin \
    -trace_stat -stf "$WORK/$tag-uas.csv" -fd 1 \
    >"$WORK/$tag-uas.out" 2>&1 </dev/null &
  UAS_PID=$!
  wait_until 10 bound_by "$UAS_PORT" "$UAS_PID" || die "SIPp UAS did not bind $IP:$UAS_PORT (see $WORK/$tag-uas.out)"
}

sbc_config() {   # sbc_config prsm|fifo FILE
  local prsm=true extra=""
  [[ $1 == fifo ]] && prsm=false
  [[ -n ${QUEUE_SIZE:-} ]] && extra+=$'\n'"queue-size = $QUEUE_SIZE"
  [[ -n ${MAX_QUEUE_DELAY_MS:-} ]] && extra+=$'\n'"max-queue-delay-ms = $MAX_QUEUE_DELAY_MS"
  write_sbc_config "$2" "$SBC_PORT" "$SBC_CORE_PORT" "$UAS_PORT" \
    "workers = $WORKERS
routing-cost-us = $ROUTING_COST_US
prsm = $prsm$extra" "" ""
}

start_relay() {   # start_relay SYSTEM TAG: sets RELAY_PID, RELAY_TARGET
  local sys=$1 tag=$2
  case $sys in
    kamailio)
      need_free "$KAM_PORT"
      "$KAMAILIO" -f "$KAMAILIO_CFG" -DD -E -m 1024 -M 16 -A "ROUTING_COST_US=$ROUTING_COST_US" \
        >"$WORK/$tag-relay.log" 2>&1 </dev/null &
      RELAY_PID=$!; RELAY_TARGET=$IP:$KAM_PORT
      wait_until 15 bound_by "$KAM_PORT" "$RELAY_PID" || die "kamailio did not bind $RELAY_TARGET (see $WORK/$tag-relay.log)"
      sleep 0.5 ;;
    sbc-*)
      need_free "$SBC_PORT"; need_free "$SBC_CORE_PORT"
      sbc_config "${sys#sbc-}" "$WORK/$sys.toml"
      "$SBC_BIN" run --config "$WORK/$sys.toml" --mgmt-socket "$WORK/sbc.sock" \
        >"$WORK/$tag-relay.log" 2>&1 </dev/null &
      RELAY_PID=$!; RELAY_TARGET=$IP:$SBC_PORT
      wait_until 15 sbc_ready "$WORK/$tag-relay.log" || die "sbc did not print 'sbc ready' (see $WORK/$tag-relay.log)" ;;
  esac
  alive "$RELAY_PID" || die "$sys exited at start (see $WORK/$tag-relay.log)"
}

# Results, keyed "tag,field" (tag = system-kind-rate).
declare -A R=()

# run_step SYSTEM RATE SECONDS TAG: one step; fills R[TAG,*].
run_step() {
  local sys=$1 rate=$2 secs=$3 tag=$4 calls rc=0 c0 c1 t0 t1 dir
  calls=$(( rate * secs ))
  log "step $tag: $sys at $rate calls/s for ${secs}s ($calls calls)"
  start_uas "$tag"
  start_relay "$sys" "$tag"
  need_free "$UAC_PORT"
  dir=$WORK/$tag; mkdir -p "$dir"
  c0=$(cpu_ticks "$RELAY_PID"); t0=$(date +%s.%N)
  # Open loop: -l as high as the number of calls, so SIPp never slows down for calls in
  # progress; -recv_timeout fails a call that waits longer than timer B for a response;
  # -timeout bounds the whole step. Run from $dir so -trace_rtt's file is found by PID.
  ( cd "$dir" && exec "$SIPP" -sf "$UAC_XML" -i "$IP" -p "$UAC_PORT" "$RELAY_TARGET" -nostdin \
      -r "$rate" -m "$calls" -l "$calls" -recv_timeout "$RECV_TIMEOUT_MS" \
      -timeout "$(( secs + 2 * RECV_TIMEOUT_MS / 1000 + 30 ))s" \
      -trace_stat -stf "$dir/uac.csv" -fd 1 -trace_rtt -rtt_freq 1 \
      >"$dir/uac.out" 2>&1 </dev/null ) &
  UAC_PID=$!
  local pid=$UAC_PID
  wait "$UAC_PID" || rc=$?
  UAC_PID=""
  t1=$(date +%s.%N); c1=$(cpu_ticks "$RELAY_PID")
  alive "$RELAY_PID" || log "WARNING: $sys died during the step (see $WORK/$tag-relay.log)"
  if [[ $sys == sbc-* ]]; then
    "$SBC_BIN" acli --mgmt-socket "$WORK/sbc.sock" --json -c "show workers" >"$dir/workers.json" 2>/dev/null || true
  fi
  stop_pid "$UAS_PID" 3; UAS_PID=""
  stop_pid "$RELAY_PID" 5; RELAY_PID=""

  local f=$dir/uac.csv ok failed rejected created
  ok=$(csv_last "$f" 'SuccessfulCall(C)'); ok=${ok:-0}
  failed=$(csv_last "$f" 'FailedCall(C)'); failed=${failed:-0}
  rejected=$(csv_last "$f" 'GenericCounter1(C)'); rejected=${rejected:-0}
  created=$(csv_last "$f" 'OutgoingCall(C)'); created=${created:-0}
  R[$tag,rc]=$rc
  R[$tag,rate]=$rate
  R[$tag,calls]=$created
  R[$tag,answered]=$(( ok - rejected ))
  R[$tag,failed]=$failed
  R[$tag,rejected]=$rejected
  R[$tag,unfinished]=$(( created - ok - failed ))
  R[$tag,unexp]=$(csv_last "$f" 'FailedUnexpectedMessage(C)')
  R[$tag,tmo]=$(csv_last "$f" 'FailedTimeoutOnRecv(C)')
  R[$tag,maxrtx]=$(csv_last "$f" 'FailedMaxUDPRetrans(C)')
  R[$tag,rtx_uac]=$(csv_last "$f" 'Retransmissions(C)')
  R[$tag,rtx_uas]=$(csv_last "$WORK/$tag-uas.csv" 'Retransmissions(C)')
  # Goodput: answered calls over the time they took, from the first INVITE to the last
  # answered call (SIPp's 1 s statistics line where the answered count last grew), at least
  # the offered period: a relay that answers calls late is not credited with the late ones
  # as if they had been answered within the offered period.
  R[$tag,busy]=$(busy_secs "$f" "$secs")
  R[$tag,goodput]=$(awk -v a="${R[$tag,answered]}" -v s="${R[$tag,busy]}" 'BEGIN { printf "%.1f", a / s }')
  read -r R[$tag,rtt_n] R[$tag,rtt_mean] R[$tag,rtt_p99] R[$tag,rtt_max] < <(rtt_stats "$dir/uac-overload_${pid}_rtt.csv" 1)
  R[$tag,cpu]=$(awk -v d=$(( c1 - c0 )) -v hz="$CLK_TCK" 'BEGIN { printf "%.2f", d / hz }')
  R[$tag,wall]=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
  R[$tag,sbc]=""
  if [[ -s $dir/workers.json ]]; then
    # The access group's PRSM counters: 503s for queue delay / full queue, retransmissions
    # removed from the secondary queue, retransmissions answered from transaction state.
    R[$tag,sbc]=$(jq -r '[.groups[] | select(.name == "udp:access")][0]
      | "\(.rejected_queue_delay)/\(.rejected_queue_full)/\(.removed_retransmissions)/\(.answered_from_state)/\(.dropped_queue_full)"' \
      "$dir/workers.json" 2>/dev/null || echo "")
  fi
  log "  $tag: answered=${R[$tag,answered]}/$created failed=$failed rejected503=$rejected unfinished=${R[$tag,unfinished]} rtx=${R[$tag,rtx_uac]:-?}/${R[$tag,rtx_uas]:-?} 100Trying n=${R[$tag,rtt_n]} mean=${R[$tag,rtt_mean]}ms p99=${R[$tag,rtt_p99]}ms cpu=${R[$tag,cpu]}s wall=${R[$tag,wall]}s sbc(qdelay/qfull/removed/fromstate/dropped)=${R[$tag,sbc]:-} sipp_rc=$rc"
}

# busy_secs UAC_CSV SECS: max(SECS, ElapsedTime(C) of the last statistics line where
# SuccessfulCall(C) - GenericCounter1(C) (answered calls) grew).
busy_secs() {
  [[ -s $1 ]] || { echo "$2"; return; }
  awk -F';' -v min="$2" '
    NR == 1 { for (i = 1; i <= NF; i++) { if ($i == "ElapsedTime(C)") e = i; if ($i == "SuccessfulCall(C)") s = i; if ($i == "GenericCounter1(C)") g = i }; next }
    NF > 1 {
      a = $s - (g ? $g : 0)
      if (a > prev) { split($e, t, ":"); last = t[1] * 3600 + t[2] * 60 + t[3] + t[4] / 1e6; prev = a }
    }
    END { printf "%.1f\n", (last > min ? last : min) }' "$1"
}

# Capacity of SYSTEM: override, or the ramp. Sets CAP[SYSTEM] and the ramp rows.
declare -A CAP=()
declare -a RAMP_ROWS=()
THEORY=$(( WORKERS * 1000000 / ROUTING_COST_US ))
measure_capacity() {
  local sys=$1 var rate f tag ok=0
  var=CAPACITY_$(echo "$sys" | tr 'a-z-' 'A-Z_')
  if [[ -n ${!var:-} ]]; then CAP[$sys]=${!var}; RAMP_ROWS+=("$sys|${!var}|given by $var|||"); return; fi
  if [[ -n ${CAPACITY:-} ]]; then CAP[$sys]=$CAPACITY; RAMP_ROWS+=("$sys|$CAPACITY|given by CAPACITY|||"); return; fi
  for f in $CAP_FRACTIONS; do
    rate=$(awk -v t="$THEORY" -v f="$f" 'BEGIN { printf "%d", t * f + 0.5 }')
    (( rate > 0 )) || continue
    tag=$sys-cap-$rate
    run_step "$sys" "$rate" "$CAP_DURATION" "$tag"; sleep 1
    local verdict
    if awk -v a="${R[$tag,answered]}" -v n="${R[$tag,calls]}" -v x="${R[$tag,rtx_uac]:-0}" \
        'BEGIN { exit !(n > 0 && a >= 0.99 * n && x <= 0.01 * n) }'; then
      verdict=pass; ok=1
    else verdict=fail; fi
    RAMP_ROWS+=("$sys|$rate|$verdict|${R[$tag,answered]}/${R[$tag,calls]}|${R[$tag,rtx_uac]:-?}|${R[$tag,rtt_mean]}")
    if (( ok )); then CAP[$sys]=$rate; log "capacity of $sys: $rate calls/s"; return; fi
  done
  CAP[$sys]=$rate
  log "WARNING: no capacity step of $sys passed; using the lowest tried, $rate calls/s"
}

# -------------------------------------------------------------------- run ---
for sys in $SYSTEMS; do
  measure_capacity "$sys"
  for m in $LOADS; do
    rate=$(awk -v c="${CAP[$sys]}" -v m="$m" 'BEGIN { printf "%d", c * m + 0.5 }')
    run_step "$sys" "$rate" "$DURATION" "$sys-load-$m"
    R[$sys-load-$m,cap]=${CAP[$sys]}
    sleep 1
  done
done

# ----------------------------------------------------------------- report ---
pct() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.1f", 100 * a / b; else print "n/a" }'; }
CSV=$BASE.csv
echo "system,load,offered_cps,capacity_cps,calls,answered,busy_s,goodput_cps,goodput_pct,failed_admitted,failed_pct_admitted,rejected_503,unfinished,retrans_uac,retrans_uas,trying_n,trying_mean_ms,trying_p99_ms,trying_max_ms,relay_cpu_s,sbc_rejected_queue_delay,sbc_rejected_queue_full,sbc_removed_retrans,sbc_answered_from_state,sipp_rc" >"$CSV"
for sys in $SYSTEMS; do
  for m in $LOADS; do
    t=$sys-load-$m
    admitted=$(( ${R[$t,calls]} - ${R[$t,rejected]} ))
    R[$t,gpct]=$(pct "${R[$t,goodput]}" "${R[$t,cap]}")
    R[$t,fpct]=$(pct "${R[$t,failed]}" "$admitted")
    IFS=/ read -r qd qf rm fs _ <<<"${R[$t,sbc]:-////}"
    echo "$sys,${m}x,${R[$t,rate]},${R[$t,cap]},${R[$t,calls]},${R[$t,answered]},${R[$t,busy]},${R[$t,goodput]},${R[$t,gpct]},${R[$t,failed]},${R[$t,fpct]},${R[$t,rejected]},${R[$t,unfinished]},${R[$t,rtx_uac]},${R[$t,rtx_uas]},${R[$t,rtt_n]},${R[$t,rtt_mean]},${R[$t,rtt_p99]},${R[$t,rtt_max]},${R[$t,cpu]},$qd,$qf,$rm,$fs,${R[$t,rc]}" >>"$CSV"
  done
done
sed -i 's/,n\/a/,/g' "$CSV"

SVG=$BASE.svg
"$SBC_LAB" chart bars "$CSV" -o "$SVG" --x load --group system \
  --title "Overload at 1x, 2x, 5x capacity: sbc (PRSM, FIFO) vs Kamailio" \
  --subtitle "routing cost ${ROUTING_COST_US} µs per new INVITE, 2 workers (sbc: workers = $WORKERS per UDP group; Kamailio: children = 2), ${DURATION}s per step, SIPp on loopback ($STAMP)" \
  --panel "Goodput, % of the system's capacity=goodput_pct;unit=%;ref=95;ref=90;height=170" \
  --panel "Failed calls among admitted ones (not 503)=failed_admitted;height=120" \
  --panel "503-rejected calls=rejected_503;height=120" \
  --panel "Retransmissions seen by the SIPp UAC=retrans_uac;height=120" \
  --panel "Mean INVITE -> 100 Trying (ms)=trying_mean_ms;ref=175;height=140" \
  --panel "p99 INVITE -> 100 Trying (ms)=trying_p99_ms;height=140" \
  || log "WARNING: chart failed"

MD=$BASE.md
GIT_REV=$(repo_rev "${SBC_SRC:-$ROOT}")
SIPP_VERSION=$( { "$SIPP" -v 2>&1 || true; } | grep -m1 -o 'SIPp v[^ ]*[^ .]' || echo 'SIPp (unknown version)')
KAM_VERSION=$( { "$KAMAILIO" -v 2>&1 || true; } | head -n1 | sed 's/^version: //; s/ *$//')
v() { local x=${1:-}; [[ -n $x ]] && echo "$x" || echo "n/a"; }
# A [sip-config] default of the sbc binary (sbc default-config), n/a without one.
sbc_default() {
  local x=""
  [[ -x $SBC_BIN ]] && x=$("$SBC_BIN" default-config 2>/dev/null | awk -F' = ' -v k="$1" '$1 == k { print $2; exit }')
  v "$x"
}
{
  echo "# Overload (PRSM) benchmark: sbc vs Kamailio ($STAMP)"
  echo
  echo "- command: \`SYSTEMS=\"$SYSTEMS\" ROUTING_COST_US=$ROUTING_COST_US WORKERS=$WORKERS LOADS=\"$LOADS\" DURATION=$DURATION CAP_DURATION=$CAP_DURATION${CAPACITY:+ CAPACITY=$CAPACITY}${QUEUE_SIZE:+ QUEUE_SIZE=$QUEUE_SIZE}${MAX_QUEUE_DELAY_MS:+ MAX_QUEUE_DELAY_MS=$MAX_QUEUE_DELAY_MS} lab/bench/overload-prsm.sh\`"
  echo "- machine: $(nproc) cores, $(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo), $(uname -sr), load average before the report: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "- versions: $SIPP_VERSION; $KAM_VERSION; sbc \`$SBC_BIN\`, repo $GIT_REV"
  echo "- kamailio: \`kamailio -f $(basename "$KAMAILIO_CFG") -DD -E -m 1024 -M 16 -A ROUTING_COST_US=$ROUTING_COST_US\` (children = 2, the 100 Trying is sent by \`t_newtran\` before the blocking cost)"
  echo "- sbc: \`[sip-config] workers = $WORKERS, routing-cost-us = $ROUTING_COST_US, prsm = true|false${QUEUE_SIZE:+, queue-size = $QUEUE_SIZE}${MAX_QUEUE_DELAY_MS:+, max-queue-delay-ms = $MAX_QUEUE_DELAY_MS}\` (defaults of this sbc: queue-size $(sbc_default queue-size), max-queue-delay-ms $(sbc_default max-queue-delay-ms))"
  echo "- traffic: SIPp \`lab/bench/sipp/uac-overload.xml\` ($IP:$UAC_PORT, open loop: \`-l\` = calls, \`-recv_timeout $RECV_TIMEOUT_MS\`) -> relay -> \`uas-200.xml\` ($IP:$UAS_PORT, 200 at once, no 180); calls are not held (\`-d 0\`); relay and UAS restarted per step"
  echo "- files: \`$(basename "$CSV")\` (the table below), \`$(basename "$SVG")\` (chart)"
  echo
  echo "## Capacity"
  echo
  echo "Theoretical: $WORKERS workers × 1e6 / $ROUTING_COST_US µs = $THEORY calls/s. A ${CAP_DURATION}s step passes when ≥ 99 % of its calls are answered and the UAC retransmitted ≤ 1 % of its calls; the first passing step from the top is the capacity."
  echo
  echo "| system | offered (calls/s) | verdict | answered / calls | retrans UAC | mean 100 Trying (ms) |"
  echo "|---|---:|---|---:|---:|---:|"
  for row in "${RAMP_ROWS[@]}"; do IFS='|' read -r a b c d e f <<<"$row"; echo "| $a | $b | $c | $d | $e | $f |"; done
  echo
  echo "Capacity used: $(for s in $SYSTEMS; do printf '%s %s calls/s; ' "$s" "${CAP[$s]}"; done)"
  echo
  echo "## Load steps (${DURATION}s of offered traffic each)"
  echo
  echo "| system | load | offered calls/s | calls | answered | busy (s) | goodput calls/s | goodput % of capacity | failed among admitted | 503 rejected | unfinished | retrans UAC / UAS | 100 Trying n | mean (ms) | p99 (ms) | max (ms) | relay CPU (s) | sbc: 503 queue-delay / queue-full, retrans removed, answered from state |"
  echo "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---|"
  for sys in $SYSTEMS; do
    for m in $LOADS; do
      t=$sys-load-$m
      IFS=/ read -r qd qf rm fs _ <<<"${R[$t,sbc]:-////}"
      sbc_cell="–"; [[ -n ${R[$t,sbc]:-} ]] && sbc_cell="$qd / $qf, $rm, $fs"
      echo "| $sys | ${m}× | ${R[$t,rate]} | ${R[$t,calls]} | ${R[$t,answered]} | ${R[$t,busy]} | ${R[$t,goodput]} | ${R[$t,gpct]} % | ${R[$t,failed]} (${R[$t,fpct]} %) | ${R[$t,rejected]} | ${R[$t,unfinished]} | $(v "${R[$t,rtx_uac]}") / $(v "${R[$t,rtx_uas]}") | ${R[$t,rtt_n]} | ${R[$t,rtt_mean]} | ${R[$t,rtt_p99]} | ${R[$t,rtt_max]} | ${R[$t,cpu]} | $sbc_cell |"
    done
  done
  echo
  echo "Failures among admitted calls, by SIPp reason (timeout waiting for a response / unexpected message, e.g. a 408 or 500 / max UDP retransmissions):"
  echo
  for sys in $SYSTEMS; do
    for m in $LOADS; do t=$sys-load-$m; echo "- $sys ${m}×: $(v "${R[$t,tmo]}") / $(v "${R[$t,unexp]}") / $(v "${R[$t,maxrtx]}")"; done
  done
  if [[ " $SYSTEMS " == *" kamailio "* ]]; then
    echo
    echo "## Ratios vs Kamailio (same multiple of each one's own capacity)"
    echo
    echo "| load | system | goodput % ÷ Kamailio's | failed among admitted, system − Kamailio | mean 100 Trying ÷ Kamailio's |"
    echo "|---|---|---:|---:|---:|"
    for m in $LOADS; do
      k=kamailio-load-$m
      for sys in $SYSTEMS; do
        [[ $sys == kamailio ]] && continue
        t=$sys-load-$m
        echo "| ${m}× | $sys | $(awk -v a="${R[$t,gpct]}" -v b="${R[$k,gpct]}" 'BEGIN { if (a != "n/a" && b != "n/a" && b > 0) printf "%.2f", a / b; else print "n/a" }') | $(( ${R[$t,failed]} - ${R[$k,failed]} )) | $(awk -v a="${R[$t,rtt_mean]}" -v b="${R[$k,rtt_mean]}" 'BEGIN { if (a != "n/a" && b != "n/a" && b > 0) printf "%.2f", a / b; else print "n/a" }') |"
      done
    done
  fi
  if [[ " $SYSTEMS " == *" sbc-prsm "* ]]; then
    echo
    echo "## The issue's targets for the sbc with PRSM"
    echo
    echo "| target | measured | met |"
    echo "|---|---:|---|"
    yes_no() { awk "BEGIN { exit !($1) }" && echo yes || echo "**no**"; }
    for m in $LOADS; do
      t=sbc-prsm-load-$m; g=${R[$t,gpct]}
      case $m in
        2) echo "| goodput ≥ 95 % of capacity at 2× | $g % | $(yes_no "\"$g\" != \"n/a\" && $g >= 95") |" ;;
        5) echo "| goodput ≥ 90 % of capacity at 5× | $g % | $(yes_no "\"$g\" != \"n/a\" && $g >= 90") |" ;;
      esac
      echo "| ~0 failed among admitted at ${m}× | ${R[$t,failed]} of $(( ${R[$t,calls]} - ${R[$t,rejected]} )) | $(yes_no "${R[$t,failed]} <= 0.001 * $(( ${R[$t,calls]} - ${R[$t,rejected]} + 1 ))") |"
      echo "| mean 100 Trying ≤ 175 ms at ${m}× | ${R[$t,rtt_mean]} ms | $(yes_no "\"${R[$t,rtt_mean]}\" != \"n/a\" && ${R[$t,rtt_mean]:-0} <= 175") |"
    done
  fi
  echo
  echo "How the figures are computed: *calls* = SIPp \`OutgoingCall(C)\`; *503 rejected* = SIPp \`GenericCounter1(C)\` (the scenario counts every 503 to the INVITE, ACKs it and ends the call cleanly); *answered* = \`SuccessfulCall(C)\` − 503 rejected; *goodput* = answered ÷ the time they took (first INVITE → the SIPp 1 s statistics line where the answered count last grew; at least ${DURATION} s; the "busy" column); *failed among admitted* = \`FailedCall(C)\` (any failure other than a 503: timeout after ${RECV_TIMEOUT_MS} ms without a response, 408/500, unexpected message); *unfinished* = calls still in progress when SIPp's \`-timeout\` stopped it (normally 0); *retrans* = \`Retransmissions(C)\` of the UAC (INVITE, BYE) and of the UAS (200 OK until the ACK); *100 Trying* = SIPp response time 1, first INVITE transmission → 100 Trying, every value from \`-trace_rtt\` (ms resolution; calls that never got a 100 are not in it, n says how many did); *relay CPU* = utime+stime of the relay's processes during the UAC run. See lab/bench/README.md."
} >"$MD"
cat "$MD"
log "results: $CSV, $SVG, $MD"
