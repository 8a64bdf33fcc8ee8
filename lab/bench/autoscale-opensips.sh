#!/usr/bin/env bash
# autoscale-opensips.sh: the OpenSIPS auto-scaling experiment on our SBC.
#
# Usage (from anywhere inside the repo):
#   cargo build --release -p sbc -p sbc-lab && lab/bench/autoscale-opensips.sh
#   PHASES="10:10 100:15 10:15" lab/bench/autoscale-opensips.sh        # quick (40 s)
#
#   SIPp UAC 127.0.0.1:5090+i (one per phase) -> sbc 127.0.0.1:5060 -> 5062 -> SIPp UAS 127.0.0.1:5080
#
# One sbc with workers = WORKERS on each UDP group, routing-cost-us = ROUTING_COST_US (a
# blocking routing lookup per new INVITE, so one worker saturates near 1e6/ROUTING_COST_US
# calls/s) and the OpenSIPS example profile attached to the access interface:
#   [[auto-scaling-profile]] name = "PROFILE_A", scale-up-to 6, scale-up-on 70, scale-up-for 4,
#   scale-up-within 5, scale-down-to 2, scale-down-on 18, scale-down-for 10
# The offered call rate follows PHASES (rate:seconds ...), one SIPp UAC per phase started on
# the phase's schedule (a late call of one phase never delays the next). Every SAMPLE_S
# seconds the script reads `sbc acli --json -c "show workers"`: the access group's load,
# workers, queue and the scaling decisions.
#
# Environment (defaults in brackets):
#   PHASES          rate:seconds of each phase     ["10:30 100:40 10:30 350:40 10:100"] (4 min;
#                   the last phase is long because no worker is retired within 10 x
#                   scale-down-for = 100 cycles of the last scale-up: OpenSIPS's guard window)
#   ROUTING_COST_US blocking routing cost per new INVITE, µs           [9000]
#   WORKERS         initial workers of each UDP group                   [2]
#   CYCLE_MS        auto-scaling-cycle-ms (written only when set)       [unset: 1000]
#   TAIL            seconds to keep sampling after the last phase ends  [5]
#   SAMPLE_S        sampling period, seconds                            [1]
#   RECV_TIMEOUT_MS SIPp -recv_timeout (a call waiting longer fails)    [32000]
#   UAC_PORT        first SIPp UAC port (phase i uses UAC_PORT+i)       [5090]
#   SBC_BIN, SBC_LAB, SIPP   where things are     [<target>/release/sbc, .../sbc-lab, sipp]
#   SBC_SRC         the source tree SBC_BIN was built from, for the report [<repo>]
#   OUT_DIR         where the results go                                [<repo>/lab/results]
#   KEEP_WORK=1     keep the scratch dir even on success
#
# Output: $OUT_DIR/autoscale-<UTC>.{csv,svg,md}; the Markdown also on stdout; progress on
# stderr. A benchmark, not a test: exit 0 whenever the run completed; 2 on bad setup.
set -euo pipefail
BENCH_NAME=autoscale-opensips

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(git -C "$SCRIPT_DIR" rev-parse --show-toplevel 2>/dev/null || (cd "$SCRIPT_DIR/../.." && pwd))
# shellcheck source=lab/bench/lib.sh
source "$SCRIPT_DIR/lib.sh"

TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
SBC_BIN=${SBC_BIN:-$TARGET/release/sbc}
SBC_LAB=${SBC_LAB:-$TARGET/release/sbc-lab}
SIPP=${SIPP:-sipp}
PHASES=${PHASES:-"10:30 100:40 10:30 350:40 10:100"}
ROUTING_COST_US=${ROUTING_COST_US:-9000}
WORKERS=${WORKERS:-2}
TAIL=${TAIL:-5}
SAMPLE_S=${SAMPLE_S:-1}
RECV_TIMEOUT_MS=${RECV_TIMEOUT_MS:-32000}
UAC_PORT=${UAC_PORT:-5090}
OUT_DIR=${OUT_DIR:-$ROOT/lab/results}
STAMP=$(date -u +%Y-%m-%dT%H%M%SZ)
BASE=$OUT_DIR/autoscale-$STAMP
UAC_XML=$SCRIPT_DIR/sipp/uac-overload.xml
UAS_XML=$SCRIPT_DIR/sipp/uas-200.xml

IP=127.0.0.1
UAS_PORT=5080
SBC_PORT=5060
SBC_CORE_PORT=5062

# ---------------------------------------------------------------- checks ---
for v in ROUTING_COST_US WORKERS SAMPLE_S RECV_TIMEOUT_MS UAC_PORT; do
  is_uint "${!v}" && (( ${!v} > 0 )) || die "$v must be a positive integer"
done
is_uint "$TAIL" || die "TAIL must be an integer"
[[ -z ${CYCLE_MS:-} ]] || is_uint "$CYCLE_MS" || die "CYCLE_MS must be an integer (ms)"
declare -a P_RATE=() P_SECS=() P_START=()
total=0
for ph in $PHASES; do
  [[ $ph =~ ^([0-9]+):([0-9]+)$ ]] || die "bad phase '$ph' in PHASES (rate:seconds)"
  (( BASH_REMATCH[1] > 0 && BASH_REMATCH[2] > 0 )) || die "bad phase '$ph': rate and seconds must be > 0"
  P_RATE+=("${BASH_REMATCH[1]}"); P_SECS+=("${BASH_REMATCH[2]}"); P_START+=("$total")
  total=$(( total + BASH_REMATCH[2] ))
done
NPH=${#P_RATE[@]}
(( NPH > 0 )) || die "PHASES is empty"
[[ -x $SBC_BIN ]] || die "$SBC_BIN not found: cargo build --release -p sbc (or set SBC_BIN)"
[[ -x $SBC_LAB ]] || die "$SBC_LAB not found (charts): cargo build --release -p sbc-lab (or set SBC_LAB)"
command -v "$SIPP" >/dev/null || die "sipp not found (Debian package sip-tester)"
command -v ss >/dev/null || die "ss not found (iproute2)"
command -v jq >/dev/null || die "jq not found (Debian package jq)"
for p in $UAS_PORT $SBC_PORT $SBC_CORE_PORT $(seq "$UAC_PORT" $(( UAC_PORT + NPH - 1 ))); do
  udp_port_busy "$p" && die "UDP port $p is already bound (ss -lunp 'sport = :$p')"
done

WORK=$(mktemp -d "${TMPDIR:-/tmp}/autoscale.XXXXXX")
mkdir -p "$OUT_DIR"

# ------------------------------------------------------- process control ---
SBC_PID=""; UAS_PID=""
declare -a UAC_PIDS=()
cleanup() {
  local rc=$? p
  trap - EXIT INT TERM
  for p in "${UAC_PIDS[@]}"; do stop_pid "$p" 3; done
  stop_pid "$UAS_PID" 3; stop_pid "$SBC_PID" 5
  if (( rc == 0 )) && [[ ${KEEP_WORK:-0} != 1 ]]; then rm -rf "$WORK"
  else log "scratch files kept in $WORK"; fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ------------------------------------------------------------------ start ---
write_sbc_config "$WORK/sbc.toml" "$SBC_PORT" "$SBC_CORE_PORT" "$UAS_PORT" \
  "workers = $WORKERS
routing-cost-us = $ROUTING_COST_US${CYCLE_MS:+
auto-scaling-cycle-ms = $CYCLE_MS}" \
  'auto-scaling-profile = "PROFILE_A"' \
  '
[[auto-scaling-profile]]
name = "PROFILE_A"
scale-up-to = 6
scale-up-on = 70
scale-up-for = 4
scale-up-within = 5
scale-down-to = 2
scale-down-on = 18
scale-down-for = 10'

need_free "$UAS_PORT"
"$SIPP" -sf "$UAS_XML" -i "$IP" -p "$UAS_PORT" -nostdin -trace_stat -stf "$WORK/uas.csv" -fd 1 \
  >"$WORK/uas.out" 2>&1 </dev/null &
UAS_PID=$!
wait_until 10 bound_by "$UAS_PORT" "$UAS_PID" || die "SIPp UAS did not bind $IP:$UAS_PORT (see $WORK/uas.out)"

need_free "$SBC_PORT"; need_free "$SBC_CORE_PORT"
"$SBC_BIN" run --config "$WORK/sbc.toml" --mgmt-socket "$WORK/sbc.sock" >"$WORK/sbc.log" 2>&1 </dev/null &
SBC_PID=$!
wait_until 15 sbc_ready "$WORK/sbc.log" || die "sbc did not print 'sbc ready' (see $WORK/sbc.log)"
show_workers() { "$SBC_BIN" acli --mgmt-socket "$WORK/sbc.sock" --json -c "show workers" 2>/dev/null; }
show_workers | jq -e '.groups[] | select(.name == "udp:access") | .profile != null' >/dev/null \
  || die "the access group has no auto-scaling profile in show workers (see $WORK/sbc.log)"
log "sbc ready (pid $SBC_PID); phases: $PHASES (${total}s)"

# ----------------------------------------------------------------- sample ---
start_phase() {   # start_phase I
  local i=$1 dir=$WORK/phase-$1 calls=$(( P_RATE[$1] * P_SECS[$1] ))
  mkdir -p "$dir"
  need_free $(( UAC_PORT + i ))
  ( cd "$dir" && exec "$SIPP" -sf "$UAC_XML" -i "$IP" -p $(( UAC_PORT + i )) "$IP:$SBC_PORT" -nostdin \
      -r "${P_RATE[$i]}" -m "$calls" -l "$calls" -recv_timeout "$RECV_TIMEOUT_MS" \
      -timeout "$(( P_SECS[$i] + 2 * RECV_TIMEOUT_MS / 1000 + 30 ))s" \
      -trace_stat -stf "$dir/uac.csv" -fd 1 -trace_rtt -rtt_freq 1 \
      >"$dir/uac.out" 2>&1 </dev/null ) &
  UAC_PIDS[$i]=$!
  log "phase $i: ${P_RATE[$i]} calls/s for ${P_SECS[$i]}s (SIPp pid ${UAC_PIDS[$i]}, port $(( UAC_PORT + i )))"
}
uacs_running() { local p; for p in "${UAC_PIDS[@]}"; do alive "$p" && return 0; done; return 1; }
uacs_done() { ! uacs_running; }

SAMPLES=$WORK/samples.jsonl
T0=$(date +%s.%N)
next_phase=0
max_samples=$(( (total + TAIL + 2 * RECV_TIMEOUT_MS / 1000 + 60) / SAMPLE_S ))
for (( k = 0; k <= max_samples; k++ )); do
  target=$(awk -v t0="$T0" -v k="$k" -v s="$SAMPLE_S" 'BEGIN { printf "%.3f", t0 + k * s }')
  now=$(date +%s.%N)
  d=$(awk -v a="$target" -v b="$now" 'BEGIN { d = a - b; printf "%.3f", (d > 0 ? d : 0) }')
  sleep "$d"
  t=$(( k * SAMPLE_S ))
  while (( next_phase < NPH && P_START[next_phase] <= t )); do start_phase "$next_phase"; next_phase=$(( next_phase + 1 )); done
  now=$(date +%s.%N)
  json=$(show_workers | jq -c --arg t "$now" '{t: ($t | tonumber), g: [.groups[] | select(.name == "udp:access")][0]}' 2>/dev/null || echo "")
  [[ -n $json ]] && echo "$json" >>"$SAMPLES"
  alive "$SBC_PID" || { log "WARNING: the sbc exited during the run (see $WORK/sbc.log)"; break; }
  if (( t >= total + TAIL && next_phase >= NPH )) && ! uacs_running; then break; fi
  (( k % 10 == 0 )) && [[ -n $json ]] && log "t=${t}s $(jq -r '.g | "workers \(.workers) load \(.load_percent)% queued \(.queued)"' <<<"$json")"
done
# Wait (bounded) for the phases' UACs, then stop everything.
wait_until $(( 2 * RECV_TIMEOUT_MS / 1000 + 35 )) uacs_done || log "some SIPp UACs still running: stopping them"
for p in "${UAC_PIDS[@]}"; do stop_pid "$p" 3; done
UAC_PIDS=()
FINAL=$(show_workers || echo '{}')
stop_pid "$UAS_PID" 3; UAS_PID=""
stop_pid "$SBC_PID" 5; SBC_PID=""

# ----------------------------------------------------------------- report ---
# Per-second SIPp counters of every phase, bucketed by second since T0:
# "sec answered failed rejected".
for (( i = 0; i < NPH; i++ )); do
  f=$WORK/phase-$i/uac.csv
  [[ -s $f ]] || continue
  awk -F';' -v t0="$T0" '
    NR == 1 { for (j = 1; j <= NF; j++) { if ($j == "CurrentTime") c = j; if ($j == "SuccessfulCall(P)") s = j; if ($j == "FailedCall(P)") fl = j; if ($j == "GenericCounter1(P)") g = j }; next }
    NF > 1 { n = split($c, a, "\t"); sec = int(a[n] - t0); print sec, $s - $g, $fl, $g }' "$f"
done >"$WORK/persec.txt"

CSV=$BASE.csv
echo "t,offered_cps,answered_cps,failed_cps,rejected_503_cps,answered_total,load_percent,workers,queued,max_member_load_percent,sbc_rejected_queue_delay,sbc_rejected_queue_full" >"$CSV"
jq -r '[.t, .g.load_percent, .g.workers, .g.queued, ([.g.members[].load_percent] | max), .g.rejected_queue_delay, .g.rejected_queue_full] | @tsv' "$SAMPLES" \
  | awk -v t0="$T0" -v starts="${P_START[*]}" -v rates="${P_RATE[*]}" -v total="$total" '
    BEGIN {
      n = split(starts, st, " "); split(rates, rt, " ")
      while ((getline line < "'"$WORK/persec.txt"'") > 0) { split(line, f, " "); ans[f[1]] += f[2]; fl[f[1]] += f[3]; rj[f[1]] += f[4] }
    }
    {
      t = $1 - t0; sec = int(t + 0.5)
      off = 0; for (i = 1; i <= n; i++) if (t >= st[i]) off = rt[i]; if (t >= total) off = 0
      # SIPp writes one line per second covering the second before it, bucketed by the
      # second it was written in: the bucket of this sample second is the second just ended.
      b = sec
      while (done_to < b) { done_to++; cum += ans[done_to] }
      printf "%.1f,%d,%d,%d,%d,%d,%.1f,%d,%d,%.1f,%d,%d\n", t, off, ans[b] + 0, fl[b] + 0, rj[b] + 0, cum, $2, $3, $4, $5, $6, $7
    }' >>"$CSV"

# Scaling decisions: every distinct one seen in the samples, with the sample time it first
# appeared at.
jq -r --arg t0 "$T0" '. as $s | .g.decisions[]? | [(($s.t - ($t0 | tonumber)) * 10 | round / 10), .cycle, .from, .to, .text] | @tsv' "$SAMPLES" \
  | awk -F'\t' '!seen[$2]++' >"$WORK/decisions.tsv"

# Per-phase figures.
declare -A PH=()
answered_all=0; failed_all=0; rejected_all=0
for (( i = 0; i < NPH; i++ )); do
  f=$WORK/phase-$i/uac.csv
  ok=$(csv_last "$f" 'SuccessfulCall(C)'); ok=${ok:-0}
  rj=$(csv_last "$f" 'GenericCounter1(C)'); rj=${rj:-0}
  fl=$(csv_last "$f" 'FailedCall(C)'); fl=${fl:-0}
  cr=$(csv_last "$f" 'OutgoingCall(C)'); cr=${cr:-0}
  PH[$i,calls]=$cr; PH[$i,answered]=$(( ok - rj )); PH[$i,failed]=$fl; PH[$i,rejected]=$rj
  PH[$i,rtx]=$(csv_last "$f" 'Retransmissions(C)')
  pid=$(ls "$WORK/phase-$i"/uac-overload_*_rtt.csv 2>/dev/null | head -n1)
  read -r PH[$i,rtt_n] PH[$i,rtt_mean] PH[$i,rtt_p99] PH[$i,rtt_max] < <(rtt_stats "${pid:-/nonexistent}" 1)
  # Workers and load over the phase's window (from the CSV).
  read -r PH[$i,wmin] PH[$i,wmax] PH[$i,wend] PH[$i,load] < <(awk -F, -v a="${P_START[$i]}" -v b=$(( P_START[i] + P_SECS[i] )) '
    NR > 1 && $1 >= a && $1 < b { if (!n || $8 < mn) mn = $8; if ($8 > mx) mx = $8; last = $8; s += $7; n++ }
    END { if (n) printf "%d %d %d %.1f\n", mn, mx, last, s / n; else print "n/a n/a n/a n/a" }' "$CSV")
  answered_all=$(( answered_all + PH[$i,answered] )); failed_all=$(( failed_all + fl )); rejected_all=$(( rejected_all + rj ))
done
RTX_UAS=$(csv_last "$WORK/uas.csv" 'Retransmissions(C)')

# Chart: CPS, load, workers over time, phases and decisions marked.
markers=()
for (( i = 0; i < NPH; i++ )); do markers+=(--marker "${P_START[$i]}:${P_RATE[$i]} cps"); done
# One marker per run of decisions in the same direction less than 3 cycles apart (2→3→4→5
# in four cycles is one "2→5" marker).
while IFS=$'\t' read -r t label; do
  [[ -n ${t:-} ]] && markers+=(--marker "$t:$label")
done < <(awk -F'\t' '
  function flush() { if (n) printf "%s\t%s→%s\n", t0, from0, to1; n = 0 }
  {
    up = ($4 > $3)
    if (n && up == up0 && $2 - cyc1 < 3) { to1 = $4; cyc1 = $2; next }
    flush(); n = 1; t0 = $1; from0 = $3; to1 = $4; cyc1 = $2; up0 = up
  }
  END { flush() }' "$WORK/decisions.tsv")
SVG=$BASE.svg
"$SBC_LAB" chart lines "$CSV" -o "$SVG" --x t --x-label "seconds since the start" \
  --title "Auto-scaling of the sbc's access worker group (OpenSIPS PROFILE_A)" \
  --subtitle "sbc workers = $WORKERS, routing-cost-us = $ROUTING_COST_US (one worker ≈ $(( 1000000 / ROUTING_COST_US )) calls/s); profile: up to 6 on 70% for 4 cycles within 5, down to 2 on 18% for 10 cycles\nphases: $PHASES; failed calls $failed_all, 503-rejected $rejected_all; SIPp on loopback ($STAMP)" \
  --panel "Calls per second=offered_cps,answered_cps,failed_cps,rejected_503_cps;height=170" \
  --panel "Access group load (%)=load_percent,max_member_load_percent;unit=%;ref=70;ref=18;max=100;height=150" \
  --panel "Access group workers=workers;step;ref=6;ref=2;max=7;height=110" \
  --panel "Queued messages (access group)=queued;height=90" \
  "${markers[@]}" || log "WARNING: chart failed"

MD=$BASE.md
GIT_REV=$(repo_rev "${SBC_SRC:-$ROOT}")
SIPP_VERSION=$( { "$SIPP" -v 2>&1 || true; } | grep -m1 -o 'SIPp v[^ ]*[^ .]' || echo 'SIPp (unknown version)')
{
  echo "# Auto-scaling benchmark (the OpenSIPS experiment) ($STAMP)"
  echo
  echo "- command: \`PHASES=\"$PHASES\" ROUTING_COST_US=$ROUTING_COST_US WORKERS=$WORKERS${CYCLE_MS:+ CYCLE_MS=$CYCLE_MS} lab/bench/autoscale-opensips.sh\`"
  echo "- machine: $(nproc) cores, $(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo), $(uname -sr), load average before the report: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "- versions: $SIPP_VERSION; sbc \`$SBC_BIN\`, repo $GIT_REV"
  mqd=$("$SBC_BIN" default-config 2>/dev/null | awk -F' = ' '$1 == "max-queue-delay-ms" { print $2; exit }' || true)
  echo "- sbc: \`[sip-config] workers = $WORKERS, routing-cost-us = $ROUTING_COST_US${CYCLE_MS:+, auto-scaling-cycle-ms = $CYCLE_MS}\` (max-queue-delay-ms: the default, ${mqd:-n/a}), access interface \`auto-scaling-profile = \"PROFILE_A\"\` (scale-up-to 6, scale-up-on 70, scale-up-for 4, scale-up-within 5, scale-down-to 2, scale-down-on 18, scale-down-for 10); the core group stays at $WORKERS workers"
  echo "- traffic: one SIPp \`lab/bench/sipp/uac-overload.xml\` per phase, started on schedule (ports $UAC_PORT…), calls not held, \`-recv_timeout $RECV_TIMEOUT_MS\` -> sbc -> \`uas-200.xml\`; \`show workers\` sampled every ${SAMPLE_S}s"
  echo "- files: \`$(basename "$CSV")\` (one row per sample), \`$(basename "$SVG")\` (chart)"
  echo
  echo "## Phases"
  echo
  echo "| phase | offered calls/s | window (s) | calls | answered | failed | 503 rejected | retrans UAC | 100 Trying mean / p99 / max (ms) | workers min → max (at end) | mean group load |"
  echo "|---:|---:|---|---:|---:|---:|---:|---:|---|---|---:|"
  for (( i = 0; i < NPH; i++ )); do
    echo "| $i | ${P_RATE[$i]} | ${P_START[$i]}–$(( P_START[i] + P_SECS[i] )) | ${PH[$i,calls]} | ${PH[$i,answered]} | ${PH[$i,failed]} | ${PH[$i,rejected]} | ${PH[$i,rtx]:-n/a} | ${PH[$i,rtt_mean]} / ${PH[$i,rtt_p99]} / ${PH[$i,rtt_max]} | ${PH[$i,wmin]} → ${PH[$i,wmax]} (${PH[$i,wend]}) | ${PH[$i,load]} % |"
  done
  echo
  echo "Total: $answered_all answered, **$failed_all failed**, $rejected_all rejected with 503; UAS retransmissions ${RTX_UAS:-n/a}."
  echo
  echo "## Scaling decisions (access group)"
  echo
  if [[ -s $WORK/decisions.tsv ]]; then
    echo "| first seen at (s) | cycle | workers | decision |"
    echo "|---:|---:|---|---|"
    while IFS=$'\t' read -r t cyc from to text; do echo "| $t | $cyc | $from → $to | $text |"; done <"$WORK/decisions.tsv"
  else
    echo "None seen."
  fi
  echo
  echo "Final \`show workers\` of the access group:"
  echo
  echo '```json'
  jq '[.groups[]? | select(.name == "udp:access")][0] | del(.decisions)' <<<"$FINAL" 2>/dev/null || echo "$FINAL"
  echo '```'
  echo
  echo "How the figures are computed: *offered* = the phase's SIPp rate; *answered/failed/503 per second* = SIPp's per-second \`SuccessfulCall(P)\` − \`GenericCounter1(P)\` (503s, which the scenario ACKs and ends cleanly), \`FailedCall(P)\`, \`GenericCounter1(P)\` summed over the phases' UACs and put in the second just ended; *load*, *workers*, *queued* = the \`udp:access\` group of \`show workers\` (load is the group's mean busy time over the last cycle; max member load is its busiest worker); decisions are deduplicated by cycle across samples. See lab/bench/README.md."
} >"$MD"
cat "$MD"
log "results: $CSV, $SVG, $MD"
