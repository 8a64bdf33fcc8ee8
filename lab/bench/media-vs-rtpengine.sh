#!/usr/bin/env bash
# media-vs-rtpengine.sh: RTP relay benchmark, our SBC's media anchoring vs Debian's rtpengine
# (userspace forwarding), side by side in one run.
#
# Usage (from anywhere inside the repo):
#   cargo build --release -p sbc -p sbc-lab && lab/bench/media-vs-rtpengine.sh
#   RELAYS=rtpengine CALLS="50 200" DURATION=5 lab/bench/media-vs-rtpengine.sh   # quick
#
# For each number of concurrent calls, each relay in turn (never both at once) is started
# fresh and carries that many calls of RTP from `sbc-lab rtp-load` (two endpoints a call,
# PCMU 20 ms: 50 packets/s each way, 100 relayed packets/s a call):
#
#   rtpengine: rtpengine --config-file=none --table=-1 --interface=127.0.0.1
#                --listen-ng=127.0.0.1:$NG_PORT --port-min/--port-max $RTPENGINE_PORTS
#                --foreground --log-stderr --log-level=$RTPENGINE_LOG_LEVEL [--num-threads=N]
#              calls set up over NG (offer, answer), ports read from the returned SDPs:
#                sbc-lab rtp-load rtpengine 127.0.0.1:$NG_PORT
#   sbc:       sbc run --config <generated TOML: access 127.0.0.1:5060, core 127.0.0.1:5062,
#                route to 127.0.0.1:5080, [[steering-pool]] per realm, [media-manager]>
#              calls set up with SIP through the SBC (the lab's UAC -> 5060, UAS on 5080, SDP
#              with the endpoints' real ports, relay ports learnt from the 200 and the INVITE):
#                sbc-lab rtp-load sip 127.0.0.1:5060 --uas 127.0.0.1:5080
#
# rtp-load reads the relay's utime+stime (/proc/PID/stat) just before its first RTP packet
# and after its last (signalling excluded) and its VmRSS before the calls and with them.
#
# Environment (defaults in brackets):
#   RELAYS             relays to run, in order                          ["rtpengine sbc"]
#   CALLS              concurrent calls, one step each                  ["50 200 500"]
#   DURATION           seconds of RTP per step                           [10]
#   GEN_THREADS        rtp-load --threads (0: one per 250 calls, <= 4)   [0]
#   SETUP_RATE         sbc: SIP calls/s while setting up                 [100]
#   NG_PORT            rtpengine's NG port on 127.0.0.1                   [22222]
#   RTPENGINE_PORTS    rtpengine's media ports                            [20000-27999]
#   RTPENGINE_THREADS  rtpengine --num-threads (unset: its default, one per CPU) [unset]
#   RTPENGINE_LOG_LEVEL  --log-level (4: warnings and worse)              [4]
#   ACCESS_MEDIA_PORTS, CORE_MEDIA_PORTS  the sbc's steering pools  [20000-23999, 24000-27999]
#   SBC_WORKERS        the sbc's [sip-config] workers                     [2]
#   MEDIA_MANAGER_EXTRA  TOML lines for the sbc's [media-manager] element  [none]
#   SBC_MEDIA=0        write no media elements (steering pools, media manager): a check of the
#                      script's sbc path with an sbc that does not anchor media; the SDP then
#                      passes unchanged, the media bypasses the sbc and the step says so  [1]
#   RTPENGINE, SBC_BIN, SBC_LAB  binaries  [rtpengine, target/release/sbc, target/release/sbc-lab]
#   SBC_SRC            the tree SBC_BIN was built from, for the report   [<repo>]
#   OUT_DIR            where the results go                               [<repo>/lab/results]
#   KEEP_WORK=1        keep the scratch dir (relay logs, rtp-load outputs) even on success
#
# Output: $OUT_DIR/media-<UTC>.{md,csv,svg}; the Markdown also on stdout; progress on stderr.
# A benchmark, not a test: exit 0 whenever the run completed (a relay that failed a step is
# reported as such); 2 on bad setup (missing binary, busy port).
set -euo pipefail
BENCH_NAME=media-bench

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(git -C "$SCRIPT_DIR" rev-parse --show-toplevel 2>/dev/null || (cd "$SCRIPT_DIR/../.." && pwd))
# shellcheck source=lab/bench/lib.sh
source "$SCRIPT_DIR/lib.sh"

TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
RTPENGINE=${RTPENGINE:-rtpengine}
SBC_BIN=${SBC_BIN:-$TARGET/release/sbc}
SBC_LAB=${SBC_LAB:-$TARGET/release/sbc-lab}
RELAYS=${RELAYS:-"rtpengine sbc"}
CALLS=${CALLS:-"50 200 500"}
DURATION=${DURATION:-10}
GEN_THREADS=${GEN_THREADS:-0}
SETUP_RATE=${SETUP_RATE:-100}
NG_PORT=${NG_PORT:-22222}
RTPENGINE_PORTS=${RTPENGINE_PORTS:-20000-27999}
RTPENGINE_THREADS=${RTPENGINE_THREADS:-}
RTPENGINE_LOG_LEVEL=${RTPENGINE_LOG_LEVEL:-4}
ACCESS_MEDIA_PORTS=${ACCESS_MEDIA_PORTS:-20000-23999}
CORE_MEDIA_PORTS=${CORE_MEDIA_PORTS:-24000-27999}
SBC_WORKERS=${SBC_WORKERS:-2}
MEDIA_MANAGER_EXTRA=${MEDIA_MANAGER_EXTRA:-}
SBC_MEDIA=${SBC_MEDIA:-1}
OUT_DIR=${OUT_DIR:-$ROOT/lab/results}
STAMP=$(date -u +%Y-%m-%dT%H%M%SZ)
BASE=$OUT_DIR/media-$STAMP

IP=127.0.0.1
SBC_PORT=5060
SBC_CORE_PORT=5062
UAS_PORT=5080
CLK_TCK=$(getconf CLK_TCK)

# ---------------------------------------------------------------- checks ---
for v in DURATION SETUP_RATE NG_PORT SBC_WORKERS RTPENGINE_LOG_LEVEL; do
  is_uint "${!v}" && (( ${!v} > 0 )) || die "$v must be a positive integer"
done
is_uint "$GEN_THREADS" || die "GEN_THREADS must be an integer"
[[ -z $RTPENGINE_THREADS ]] || is_uint "$RTPENGINE_THREADS" || die "RTPENGINE_THREADS must be an integer"
range_ok() { [[ $1 =~ ^([0-9]+)-([0-9]+)$ ]] && (( BASH_REMATCH[1] > 1023 && BASH_REMATCH[1] < BASH_REMATCH[2] && BASH_REMATCH[2] < 65536 )); }
for v in RTPENGINE_PORTS ACCESS_MEDIA_PORTS CORE_MEDIA_PORTS; do
  range_ok "${!v}" || die "$v must be LOW-HIGH (1024..65535), not '${!v}'"
done
MAX_CALLS=0
for n in $CALLS; do
  is_uint "$n" && (( n > 0 )) || die "bad number in CALLS: $n"
  (( n > MAX_CALLS )) && MAX_CALLS=$n
done
for relay in $RELAYS; do
  case $relay in
    rtpengine)
      command -v "$RTPENGINE" >/dev/null || die "rtpengine not found (apt-get install -y rtpengine-daemon, or ./run-tests.sh as root)"
      udp_port_busy "$NG_PORT" && die "UDP port $NG_PORT (NG_PORT) is already bound (ss -lunp 'sport = :$NG_PORT')"
      # 4 ports a call (RTP and RTCP on each leg).
      (( ${RTPENGINE_PORTS#*-} - ${RTPENGINE_PORTS%-*} + 1 >= 4 * MAX_CALLS )) \
        || die "RTPENGINE_PORTS $RTPENGINE_PORTS is too small for $MAX_CALLS calls (4 ports a call)" ;;
    sbc)
      [[ -x $SBC_BIN ]] || die "$SBC_BIN not found: cargo build --release -p sbc (or RELAYS=rtpengine)"
      for p in $SBC_PORT $SBC_CORE_PORT $UAS_PORT; do
        udp_port_busy "$p" && die "UDP port $p is already bound (ss -lunp 'sport = :$p')"
      done ;;
    *) die "unknown relay '$relay' in RELAYS (rtpengine, sbc)" ;;
  esac
done
[[ $SBC_MEDIA == [01] ]] || die "SBC_MEDIA must be 0 or 1"
[[ -x $SBC_LAB ]] || die "$SBC_LAB not found: cargo build --release -p sbc-lab (or set SBC_LAB)"
command -v ss >/dev/null || die "ss not found (iproute2)"
command -v timeout >/dev/null || die "timeout not found (coreutils)"

# Two sockets a call in rtp-load, four in rtpengine: raise the soft descriptor limit.
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
(( $(ulimit -n) > 4 * MAX_CALLS + 256 )) || die "ulimit -n is $(ulimit -n): too low for $MAX_CALLS calls"

WORK=$(mktemp -d "${TMPDIR:-/tmp}/media-bench.XXXXXX")
mkdir -p "$OUT_DIR"

# ------------------------------------------------------- process control ---
RELAY_PID=""; LOAD_PID=""
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  stop_pid "$LOAD_PID" 3; stop_pid "$RELAY_PID" 5
  if (( rc == 0 )) && [[ ${KEEP_WORK:-0} != 1 ]]; then rm -rf "$WORK"
  else log "scratch files kept in $WORK"; fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ------------------------------------------------------------ components ---
RTPENGINE_ARGS=(--config-file=none --table=-1 --interface="$IP" --listen-ng="$IP:$NG_PORT"
  --port-min="${RTPENGINE_PORTS%-*}" --port-max="${RTPENGINE_PORTS#*-}"
  --foreground --log-stderr --log-level="$RTPENGINE_LOG_LEVEL")
[[ -n $RTPENGINE_THREADS ]] && RTPENGINE_ARGS+=(--num-threads="$RTPENGINE_THREADS")

# The sbc's media configuration: one steering pool per realm, and the media manager. The
# sbc on a branch without media anchoring refuses these keys (unknown key) and exits: the
# step is then reported as "did not start".
sbc_config() {
  local file=$1 mm="" media=""
  [[ -n $MEDIA_MANAGER_EXTRA ]] && mm=$'\n'"$MEDIA_MANAGER_EXTRA"
  [[ $SBC_MEDIA == 1 ]] && media="
[media-manager]$mm

[[steering-pool]]
ip-address = \"$IP\"
start-port = ${ACCESS_MEDIA_PORTS%-*}
end-port = ${ACCESS_MEDIA_PORTS#*-}
realm-id = \"access\"

[[steering-pool]]
ip-address = \"$IP\"
start-port = ${CORE_MEDIA_PORTS%-*}
end-port = ${CORE_MEDIA_PORTS#*-}
realm-id = \"core\""
  write_sbc_config "$file" "$SBC_PORT" "$SBC_CORE_PORT" "$UAS_PORT" "workers = $SBC_WORKERS" "" "
# The lab's UAC sets calls up faster than the default source-rate (15 new requests/s).
[[access-control]]
source-address = \"$IP/32\"
action = \"allow\"
$media"
}

# Ready, or gone (then start_relay says so at once rather than after 15 s).
sbc_up() { sbc_ready "$1" || ! alive "$RELAY_PID"; }

# start_relay RELAY TAG: sets RELAY_PID; returns 1 (logged) if it did not come up.
start_relay() {
  local relay=$1 tag=$2 log=$WORK/$2-relay.log
  case $relay in
    rtpengine)
      need_free "$NG_PORT"
      "$RTPENGINE" "${RTPENGINE_ARGS[@]}" >"$log" 2>&1 </dev/null &
      RELAY_PID=$!
      wait_until 15 bound_by "$NG_PORT" "$RELAY_PID" || { log "WARNING: rtpengine did not bind $IP:$NG_PORT: $(head -c 600 "$log")"; return 1; } ;;
    sbc)
      need_free "$SBC_PORT"; need_free "$SBC_CORE_PORT"; need_free "$UAS_PORT"
      "$SBC_BIN" run --config "$WORK/sbc.toml" --mgmt-socket "$WORK/sbc.sock" >"$log" 2>&1 </dev/null &
      RELAY_PID=$!
      wait_until 15 sbc_up "$log" || { log "WARNING: sbc did not print 'sbc ready': $(head -c 600 "$log")"; return 1; } ;;
  esac
  alive "$RELAY_PID" || { log "WARNING: $relay exited at start: $(head -c 600 "$log")"; return 1; }
}

# Results, keyed "relay,calls,field" (the fields of rtp-load --kv, plus status and rc).
declare -A R=()

run_step() {   # run_step RELAY CALLS
  local relay=$1 n=$2 tag="$1-$2" rc=0 limit out=$WORK/$1-$2.kv
  log "step: $relay, $n calls, ${DURATION}s of RTP"
  R[$relay,$n,status]=ok
  if ! start_relay "$relay" "$tag"; then
    R[$relay,$n,status]="did not start"
    stop_pid "$RELAY_PID" 5; RELAY_PID=""
    return
  fi
  sleep 0.5
  local -a cmd=("$SBC_LAB" rtp-load)
  case $relay in
    rtpengine) cmd+=(rtpengine "$IP:$NG_PORT") ;;
    sbc) cmd+=(sip "$IP:$SBC_PORT" --uas "$IP:$UAS_PORT" --rate "$SETUP_RATE" --setup-timeout "$(( n / SETUP_RATE + 20 ))s") ;;
  esac
  cmd+=(--calls "$n" --duration "${DURATION}s" --threads "$GEN_THREADS" --ip "$IP"
    --watch-pid "$RELAY_PID" --clk-tck "$CLK_TCK" --kv)
  # Setup, RTP, teardown (BYE or delete), all bounded.
  limit=$(( DURATION + n / SETUP_RATE + 120 ))
  timeout --kill-after=5 "$limit" "${cmd[@]}" >"$out" 2>"$WORK/$tag-load.err" </dev/null &
  LOAD_PID=$!
  wait "$LOAD_PID" || rc=$?
  LOAD_PID=""
  alive "$RELAY_PID" || { log "WARNING: $relay died during the step: $(tail -c 600 "$WORK/$tag-relay.log")"; R[$relay,$n,status]="died"; }
  stop_pid "$RELAY_PID" 5; RELAY_PID=""
  R[$relay,$n,rc]=$rc
  local k v
  while IFS='=' read -r k v; do [[ -n $k ]] && R[$relay,$n,$k]=$v; done <"$out"
  if [[ -z ${R[$relay,$n,received]:-} ]]; then
    R[$relay,$n,status]="rtp-load failed (rc $rc)"
    log "WARNING: rtp-load failed: $(tail -c 600 "$WORK/$tag-load.err")"
  elif (( ${R[$relay,$n,bypassed]:-0} > 0 )); then
    R[$relay,$n,status]="not anchored: ${R[$relay,$n,bypassed]} calls' SDP named the other endpoint"
  elif (( ${R[$relay,$n,calls_ready]} < n )); then
    R[$relay,$n,status]="${R[$relay,$n,calls_ready]} of $n calls set up"
  fi
  log "  $relay@$n: ${R[$relay,$n,status]}; received ${R[$relay,$n,received]:-?}/${R[$relay,$n,sent]:-?} (${R[$relay,$n,received_per_s]:-?}/s), loss ${R[$relay,$n,loss_percent]:-?} %, delay p50/p99 ${R[$relay,$n,delay_p50_ms]:-?}/${R[$relay,$n,delay_p99_ms]:-?} ms, relay CPU ${R[$relay,$n,relay_cpu_s]:-?} s (${R[$relay,$n,relay_cpu_us_per_packet]:-?} µs/packet), RSS ${R[$relay,$n,relay_rss_kb]:-?} kB"
}

# -------------------------------------------------------------------- run ---
[[ " $RELAYS " == *" sbc "* ]] && sbc_config "$WORK/sbc.toml"
for n in $CALLS; do
  for relay in $RELAYS; do run_step "$relay" "$n"; sleep 1; done
done

# ----------------------------------------------------------------- report ---
v() { local x=${1:-}; [[ -n $x ]] && echo "$x" || echo "n/a"; }
# A step's field, or n/a when the step did not produce figures.
f() { if [[ ${R[$1,$2,status]:-} == ok || ${R[$1,$2,status]:-} == *"calls set up" ]]; then v "${R[$1,$2,$3]:-}"; else echo "n/a"; fi; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a != "n/a" && b != "n/a" && b > 0) printf "%.2f", a / b; else print "n/a" }'; }
mb() { awk -v k="$1" 'BEGIN { if (k == "n/a" || k == "") print "n/a"; else printf "%.1f", k / 1024 }'; }
per_call_kb() { awk -v a="$1" -v b="$2" -v n="$3" 'BEGIN { if (a == "n/a" || b == "n/a" || n <= 0) print "n/a"; else printf "%.1f", (b - a) / n }'; }

CSV=$BASE.csv
echo "calls,relay,status,calls_ready,sent,received,received_per_s,loss_percent,duplicates,foreign,delay_p50_ms,delay_p99_ms,delay_max_ms,start_gap_max_ms,max_gap_ms,relay_cpu_s,cpu_us_per_packet,rss_mb_before,rss_mb,rss_kb_per_call" >"$CSV"
for n in $CALLS; do
  for relay in $RELAYS; do
    R[$relay,$n,rss_per_call]=$(per_call_kb "$(f "$relay" "$n" relay_rss_kb_before)" "$(f "$relay" "$n" relay_rss_kb)" "$(f "$relay" "$n" calls_ready)")
    echo "$n,$relay,${R[$relay,$n,status]},$(f "$relay" "$n" calls_ready),$(f "$relay" "$n" sent),$(f "$relay" "$n" received),$(f "$relay" "$n" received_per_s),$(f "$relay" "$n" loss_percent),$(f "$relay" "$n" duplicates),$(f "$relay" "$n" foreign),$(f "$relay" "$n" delay_p50_ms),$(f "$relay" "$n" delay_p99_ms),$(f "$relay" "$n" delay_max_ms),$(f "$relay" "$n" start_gap_max_ms),$(f "$relay" "$n" max_gap_ms),$(f "$relay" "$n" relay_cpu_s),$(f "$relay" "$n" relay_cpu_us_per_packet),$(mb "$(f "$relay" "$n" relay_rss_kb_before)"),$(mb "$(f "$relay" "$n" relay_rss_kb)"),${R[$relay,$n,rss_per_call]}" >>"$CSV"
  done
done
sed -i 's/,n\/a/,/g' "$CSV"

SVG=$BASE.svg
"$SBC_LAB" chart bars "$CSV" -o "$SVG" --x calls --group relay \
  --title "RTP relay: $(echo "$RELAYS" | sed 's/ / vs /g')" \
  --subtitle "PCMU 20 ms (100 relayed packets/s a call), ${DURATION}s per step, sbc-lab rtp-load on loopback, relay restarted per step ($STAMP)" \
  --panel "Packets/s relayed=received_per_s;height=140" \
  --panel "Relay CPU per relayed packet (µs)=cpu_us_per_packet;height=140" \
  --panel "One-way delay p50 (ms)=delay_p50_ms;height=120" \
  --panel "One-way delay p99 (ms)=delay_p99_ms;height=120" \
  --panel "Loss (%)=loss_percent;unit=%;height=110" \
  --panel "Relay RSS with the calls (MB)=rss_mb;height=120" \
  || log "WARNING: chart failed"

MD=$BASE.md
GIT_REV=$(repo_rev "${SBC_SRC:-$ROOT}")
RTPE_VERSION=$( { "$RTPENGINE" --version 2>&1 || true; } | head -n1 | sed 's/^Version: //')
MEDIA_NOTE=""
[[ $SBC_MEDIA == 0 ]] && MEDIA_NOTE=" SBC_MEDIA=0"
CMDLINE="RELAYS=\"$RELAYS\" CALLS=\"$CALLS\" DURATION=$DURATION GEN_THREADS=$GEN_THREADS${RTPENGINE_THREADS:+ RTPENGINE_THREADS=$RTPENGINE_THREADS}$MEDIA_NOTE lab/bench/media-vs-rtpengine.sh"
{
  echo "# Media relay benchmark: $(echo "$RELAYS" | sed 's/ / vs /g') ($STAMP)"
  echo
  echo "- command: \`$CMDLINE\`"
  echo "- machine: $(nproc) cores, $(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo), $(uname -sr), load average at the report: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "- versions: rtpengine $(v "$RTPE_VERSION"); sbc \`$SBC_BIN\`, repo $GIT_REV; generator \`$SBC_LAB rtp-load\`"
  [[ " $RELAYS " == *" rtpengine "* ]] && echo "- rtpengine: \`rtpengine ${RTPENGINE_ARGS[*]}\` (userspace forwarding, no kernel table); calls set up over NG (offer with \`replace: [origin, session-connection]\`, \`ICE: remove\`, then answer), one per call"
  [[ " $RELAYS " == *" sbc "* ]] && echo "- sbc: \`sbc run --config sbc.toml\` (access $IP:$SBC_PORT, core $IP:$SBC_CORE_PORT, workers = $SBC_WORKERS; $( [[ $SBC_MEDIA == 1 ]] && echo "steering pools access $ACCESS_MEDIA_PORTS, core $CORE_MEDIA_PORTS" || echo "SBC_MEDIA=0: no media elements, SIP only")); calls set up with SIP through it at $SETUP_RATE calls/s (lab UAC → sbc → lab UAS on $IP:$UAS_PORT), relay ports read from the 200's and the INVITE's SDP"
  echo "- traffic: per call two endpoints on $IP (ephemeral ports), PCMU 172-byte packets every 20 ms each way (100 packets/s a call through the relay), send time in the payload; generator threads: ${GEN_THREADS/#0/auto (one per 250 calls)}; relay restarted per step, relays one after the other"
  echo "- files: \`$(basename "$CSV")\` (the table below), \`$(basename "$SVG")\` (chart)"
  echo
  echo "## Steps"
  echo
  echo "| calls | relay | status | packets/s relayed | loss % | delay p50 (ms) | delay p99 (ms) | delay max (ms) | start gap max (ms) | relay CPU (s) | CPU per packet (µs) | RSS before → with calls (MB) | RSS per call (kB) |"
  echo "|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|"
  for n in $CALLS; do
    for relay in $RELAYS; do
      printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s → %s | %s |\n' "$n" "$relay" "${R[$relay,$n,status]}" \
        "$(f "$relay" "$n" received_per_s)" "$(f "$relay" "$n" loss_percent)" \
        "$(f "$relay" "$n" delay_p50_ms)" "$(f "$relay" "$n" delay_p99_ms)" "$(f "$relay" "$n" delay_max_ms)" \
        "$(f "$relay" "$n" start_gap_max_ms)" "$(f "$relay" "$n" relay_cpu_s)" "$(f "$relay" "$n" relay_cpu_us_per_packet)" \
        "$(mb "$(f "$relay" "$n" relay_rss_kb_before)")" "$(mb "$(f "$relay" "$n" relay_rss_kb)")" "${R[$relay,$n,rss_per_call]}"
    done
  done
  if [[ " $RELAYS " == *" sbc "* && " $RELAYS " == *" rtpengine "* ]]; then
    echo
    echo "## sbc / rtpengine"
    echo
    echo "| calls | packets/s relayed | CPU per packet | delay p50 | delay p99 | RSS with calls | loss %, sbc − rtpengine |"
    echo "|---:|---:|---:|---:|---:|---:|---:|"
    for n in $CALLS; do
      ld=$(awk -v a="$(f sbc "$n" loss_percent)" -v b="$(f rtpengine "$n" loss_percent)" 'BEGIN { if (a == "n/a" || b == "n/a") print "n/a"; else printf "%+.3f", a - b }')
      printf '| %s | %s | %s | %s | %s | %s | %s |\n' "$n" \
        "$(ratio "$(f sbc "$n" received_per_s)" "$(f rtpengine "$n" received_per_s)")" \
        "$(ratio "$(f sbc "$n" relay_cpu_us_per_packet)" "$(f rtpengine "$n" relay_cpu_us_per_packet)")" \
        "$(ratio "$(f sbc "$n" delay_p50_ms)" "$(f rtpengine "$n" delay_p50_ms)")" \
        "$(ratio "$(f sbc "$n" delay_p99_ms)" "$(f rtpengine "$n" delay_p99_ms)")" \
        "$(ratio "$(f sbc "$n" relay_rss_kb)" "$(f rtpengine "$n" relay_rss_kb)")" "$ld"
    done
    echo
    echo "A ratio below 1 means the sbc spends less (CPU, delay, memory) than rtpengine; packets/s relayed should be 1.00 (both forward everything they are sent)."
  fi
  echo
  echo "Packets/s relayed = distinct packets the endpoints received ÷ ${DURATION}s. Loss = sent and never received (by RTP sequence number) ÷ sent. Delay = one-way, send time in the payload to receipt, same clock. CPU per packet = the relay's utime+stime (/proc/PID/stat, every thread, ${CLK_TCK} ticks/s) from just before the first RTP packet to just after the last one (drain included, signalling excluded) ÷ packets relayed. RSS = VmRSS before the calls were set up and after the RTP phase. See lab/bench/README.md."
} | tee "$MD"
log "report written to $MD"
