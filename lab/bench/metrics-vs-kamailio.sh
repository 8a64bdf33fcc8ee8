#!/usr/bin/env bash
# metrics-vs-kamailio.sh: what a Prometheus scrape costs a relay under call load, our SBC's
# GET /metrics vs Kamailio's xhttp_prom, side by side in one run, on loopback.
#
# Usage (from anywhere inside the repo):
#   cargo build --release -p sbc -p sbc-lab && lab/bench/metrics-vs-kamailio.sh
#   QUICK=1 lab/bench/metrics-vs-kamailio.sh                  # smoke run, under 2 minutes
#   RELAYS=sbc SCRAPE_RATES="10 100" lab/bench/metrics-vs-kamailio.sh
#
# For each relay in turn (never both at once), under one steady SIPp call load through it
#   SIPp uac (127.0.0.1:$UAC_PORT) -> relay -> SIPp uas (127.0.0.1:5080)
# (SIPp's built-in scenarios, as relay-vs-kamailio.sh, -r $RATE -d $CALL_MS), after $WARMUP s
# the relay's CPU is read over consecutive windows of $WINDOW s:
#   baseline   no scrape
#   R/s        a closed-loop scraper at R scrapes/s at most, one per SCRAPE_RATES
#   baseline   no scrape again (the baseline CPU rate of a window is interpolated in time
#              between the two; their difference is the run's noise floor)
#
#   kamailio: kamailio -f lab/bench/kamailio-metrics.cfg -DD -E -m 1024 -M 16 -A HTTP_PORT=..
#             (the reference relay of $SHARED/peers/kamailio.cfg plus xhttp + xhttp_prom,
#             xhttp_prom_stats "all"; with KAM_STATS=1 also kex + tmx, whose statistics
#             (core, shmem, tm) "all" then includes)
#   sbc:      sbc run (access 127.0.0.1:5060, core 127.0.0.1:5062, workers = $SBC_WORKERS,
#             [system-config] metrics-address = "127.0.0.1:$SBC_HTTP_PORT")
#   scraper:  one curl process, serial transfers of the same URL (a config file of N URLs),
#             paced by `curl --rate R/s`: a new scrape starts when the last one is done and
#             not before 1/R s after the last start; HTTP/1.0, so each scrape is a fresh TCP
#             connection on both relays (the sbc serves one request per connection by design;
#             KEEPALIVE=1 lets curl keep Kamailio's connection). One process, no fork per
#             scrape; its CPU is not counted (nor subtracted): only the relay's.
#
# Environment (defaults in brackets; QUICK=1 defaults in braces):
#   RELAYS        relays to run, in order                         ["kamailio sbc"]
#   RATE          SIPp calls/s through the relay                  [200]
#   CALL_MS       call hold time (SIPp -d, ms)                    [1000]
#   SCRAPE_RATES  scrape steps: scrapes/s at most                 ["1 10 50 200"]
#   WINDOW        seconds per window (baselines and scrape steps) [15] {5}
#   WARMUP        seconds of call load before the first window    [35] {10}
#                 (the relays' terminated transactions linger 32 s, RFC 6026 / timer K:
#                 their idle cost grows for that long after the load starts)
#   KEEPALIVE=1   HTTP/1.1 (curl keeps a connection the server keeps) [0: HTTP/1.0]
#   KAM_STATS=0   Kamailio without kex + tmx: "all" is then only its dns, sl, tcp groups [1]
#   SBC_WORKERS   the sbc's [sip-config] workers                  [2]
#   SBC_HTTP_PORT, KAM_HTTP_PORT   the relays' HTTP ports (TCP)   [9464, 9465]
#   UAC_PORT      SIPp UAC local port                             [5090]
#   KAMAILIO, SBC_BIN, SIPP   binaries   [/usr/sbin/kamailio, target/release/sbc, sipp]
#   SBC_LAB       sbc-lab (draws the chart)                       [target/release/sbc-lab]
#   OUT_DIR       results                                         [<repo>/lab/results]
#   KEEP_WORK=1   keep the scratch dir (SIPp CSVs, curl outputs, scraped bodies, logs)
#
# SIP ports are the reference config's (Kamailio 5070, UAS 5080) and relay-vs-kamailio.sh's
# (sbc 5060/5062, UAC 5090): run one of the two benchmarks at a time.
#
# Output: $OUT_DIR/metrics-<UTC>.{md,csv,svg}; the Markdown also on stdout; progress on stderr.
# A benchmark, not a test: exit 0 whenever the run completed (failed calls or scrapes are
# reported); 2 on bad setup (missing binary, busy port).
set -euo pipefail
BENCH_NAME=metrics-bench

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(git -C "$SCRIPT_DIR" rev-parse --show-toplevel 2>/dev/null || (cd "$SCRIPT_DIR/../.." && pwd))
# shellcheck source=lab/bench/lib.sh
source "$SCRIPT_DIR/lib.sh"

QUICK=${QUICK:-0}
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
KAMAILIO=${KAMAILIO:-/usr/sbin/kamailio}
KAMAILIO_CFG=$SCRIPT_DIR/kamailio-metrics.cfg
SBC_BIN=${SBC_BIN:-$TARGET/release/sbc}
SBC_LAB=${SBC_LAB:-$TARGET/release/sbc-lab}
SIPP=${SIPP:-sipp}
RELAYS=${RELAYS:-"kamailio sbc"}
if [[ $QUICK == 1 ]]; then
  WINDOW=${WINDOW:-5}; WARMUP=${WARMUP:-10}
fi
RATE=${RATE:-200}
CALL_MS=${CALL_MS:-1000}
SCRAPE_RATES=${SCRAPE_RATES:-"1 10 50 200"}
WINDOW=${WINDOW:-15}
WARMUP=${WARMUP:-35}
KEEPALIVE=${KEEPALIVE:-0}
KAM_STATS=${KAM_STATS:-1}
SBC_WORKERS=${SBC_WORKERS:-2}
SBC_HTTP_PORT=${SBC_HTTP_PORT:-9464}
KAM_HTTP_PORT=${KAM_HTTP_PORT:-9465}
UAC_PORT=${UAC_PORT:-5090}
OUT_DIR=${OUT_DIR:-$ROOT/lab/results}
STAMP=$(date -u +%Y-%m-%dT%H%M%SZ)
BASE=$OUT_DIR/metrics-$STAMP

IP=127.0.0.1
UAS_PORT=5080          # fixed by the reference Kamailio config
KAM_PORT=5070
SBC_PORT=5060
SBC_CORE_PORT=5062
CLK_TCK=$(getconf CLK_TCK)

# ---------------------------------------------------------------- checks ---
for v in RATE WINDOW SBC_WORKERS SBC_HTTP_PORT KAM_HTTP_PORT UAC_PORT; do
  is_uint "${!v}" && (( ${!v} > 0 )) || die "$v must be a positive integer"
done
for v in CALL_MS WARMUP; do is_uint "${!v}" || die "$v must be an integer"; done
for s in $SCRAPE_RATES; do is_uint "$s" && (( s > 0 )) || die "bad rate in SCRAPE_RATES: $s"; done
[[ $QUICK == [01] && $KEEPALIVE == [01] && $KAM_STATS == [01] ]] || die "QUICK, KEEPALIVE and KAM_STATS are 0 or 1"
for relay in $RELAYS; do
  case $relay in
    kamailio)
      [[ -x $KAMAILIO ]] || die "kamailio not found at $KAMAILIO (Debian package kamailio)"
      for m in xhttp xhttp_prom kex tmx; do
        [[ -r /usr/lib/x86_64-linux-gnu/kamailio/modules/$m.so ]] || die "Kamailio module $m.so missing (Debian package kamailio)"
      done ;;
    sbc) [[ -x $SBC_BIN ]] || die "$SBC_BIN not found: cargo build --release -p sbc (or RELAYS=kamailio)" ;;
    *) die "unknown relay '$relay' in RELAYS (kamailio, sbc)" ;;
  esac
done
[[ -x $SBC_LAB ]] || die "$SBC_LAB not found: cargo build --release -p sbc-lab (or set SBC_LAB)"
for t in "$SIPP" ss curl awk; do command -v "$t" >/dev/null || die "$t not found"; done
PROMTOOL=$(command -v promtool || true)

tcp_port_busy() { [[ -n $(ss -Hltn "sport = :$1" 2>/dev/null) ]]; }
for p in $UAS_PORT $KAM_PORT $SBC_PORT $SBC_CORE_PORT $UAC_PORT; do
  udp_port_busy "$p" && die "UDP port $p is already bound (ss -lunp 'sport = :$p')"
done
for p in $SBC_HTTP_PORT $KAM_HTTP_PORT; do
  tcp_port_busy "$p" && die "TCP port $p is already listened on (ss -ltnp 'sport = :$p'); set SBC_HTTP_PORT / KAM_HTTP_PORT"
done
# tcp_listened_by PORT PID: PORT is listened on by PID or one of its descendants.
tcp_listened_by() {
  local line p; line=$(ss -Hltnp "sport = :$1" 2>/dev/null)
  [[ -n $line ]] || return 1
  for p in $(tree_pids "$2"); do [[ $line == *"pid=$p,"* ]] && return 0; done
  return 1
}

WORK=$(mktemp -d "${TMPDIR:-/tmp}/metrics-bench.XXXXXX")
mkdir -p "$OUT_DIR"

# ------------------------------------------------------- process control ---
RELAY_PID=""; UAS_PID=""; UAC_PID=""; SCRAPER_PID=""
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  stop_pid "$SCRAPER_PID" 3; stop_pid "$UAC_PID" 3; stop_pid "$UAS_PID" 3; stop_pid "$RELAY_PID" 5
  if (( rc == 0 )) && [[ ${KEEP_WORK:-0} != 1 ]]; then rm -rf "$WORK"
  else log "scratch files kept in $WORK"; fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ------------------------------------------------------------ components ---
write_sbc_config "$WORK/sbc.toml" "$SBC_PORT" "$SBC_CORE_PORT" "$UAS_PORT" "workers = $SBC_WORKERS" "" \
  "$(printf '\n[system-config]\nmetrics-address = "%s:%s"\n' "$IP" "$SBC_HTTP_PORT")"

start_uas() {   # TAG
  need_free "$UAS_PORT"
  "$SIPP" -sn uas -i "$IP" -p "$UAS_PORT" -nostdin -trace_stat -stf "$WORK/$1-uas.csv" -fd 1 \
    >"$WORK/$1-uas.out" 2>&1 </dev/null &
  UAS_PID=$!
  wait_until 10 bound_by "$UAS_PORT" "$UAS_PID" || die "SIPp UAS did not bind $IP:$UAS_PORT (see $WORK/$1-uas.out)"
}

# start_relay RELAY TAG: RELAY_PID, RELAY_TARGET (SIP), METRICS_URL.
start_relay() {
  local relay=$1 tag=$2
  case $relay in
    kamailio)
      need_free "$KAM_PORT"
      local -a defs=(-A "HTTP_PORT=$KAM_HTTP_PORT")
      (( KAM_STATS )) && defs+=(-A WITH_STATS)
      "$KAMAILIO" -f "$KAMAILIO_CFG" -DD -E -m 1024 -M 16 "${defs[@]}" \
        >"$WORK/$tag-relay.log" 2>&1 </dev/null &
      RELAY_PID=$!; RELAY_TARGET=$IP:$KAM_PORT; METRICS_URL=http://$IP:$KAM_HTTP_PORT/metrics
      wait_until 15 bound_by "$KAM_PORT" "$RELAY_PID" || die "kamailio did not bind $RELAY_TARGET (see $WORK/$tag-relay.log)"
      # The HTTP socket is listened on by Kamailio's TCP main process, a child.
      wait_until 15 tcp_listened_by "$KAM_HTTP_PORT" "$RELAY_PID" || die "kamailio does not listen on $IP:$KAM_HTTP_PORT (see $WORK/$tag-relay.log)"
      sleep 0.5 ;;
    sbc)
      need_free "$SBC_PORT"; need_free "$SBC_CORE_PORT"
      mkdir -p -m 0700 "$WORK/mgmt-$tag"
      RUST_LOG=${RUST_LOG:-warn} "$SBC_BIN" run --config "$WORK/sbc.toml" --mgmt-socket "$WORK/mgmt-$tag/m.sock" \
        >"$WORK/$tag-relay.log" 2>&1 </dev/null &
      RELAY_PID=$!; RELAY_TARGET=$IP:$SBC_PORT; METRICS_URL=http://$IP:$SBC_HTTP_PORT/metrics
      wait_until 15 sbc_ready "$WORK/$tag-relay.log" || die "sbc did not print 'sbc ready' (see $WORK/$tag-relay.log)"
      wait_until 10 tcp_listened_by "$SBC_HTTP_PORT" "$RELAY_PID" || die "sbc does not listen on $IP:$SBC_HTTP_PORT (see $WORK/$tag-relay.log)" ;;
  esac
  alive "$RELAY_PID" || die "$relay exited at start (see $WORK/$tag-relay.log)"
}

CURL_HTTP=(--http1.0)
(( KEEPALIVE )) && CURL_HTTP=(--http1.1)
# One scrape into a file (the body, for the series count; the headers, for the content type).
scrape_once() {   # URL STEM
  curl -s "${CURL_HTTP[@]}" --max-time 10 -D "$2.headers" -o "$2.body" "$1" || true
}

declare -A R=()
rel_cpu_s() { awk -v d="$1" -v hz="$CLK_TCK" 'BEGIN { printf "%.3f", d / hz }'; }

# run_window RELAY TAG STEP SCRAPES_PER_S (0: no scraper): one window; R[relay,step,*].
run_window() {
  local relay=$1 tag=$2 step=$3 sps=$4 c0 c1 t0 t1 ok0 ok1 f0 f1 n out cfg i
  local uac=$WORK/$tag-uac.csv
  out=$WORK/$tag-$step.scrapes
  if (( sps > 0 )); then
    n=$(( sps * WINDOW ))
    cfg=$WORK/$tag-$step.curlrc
    for (( i = 0; i < n; i++ )); do printf 'url = "%s"\noutput = "/dev/null"\n' "$METRICS_URL"; done >"$cfg"
  fi
  ok0=$(csv_last "$uac" 'SuccessfulCall(C)'); f0=$(csv_last "$uac" 'FailedCall(C)')
  c0=$(cpu_ticks "$RELAY_PID"); t0=$(date +%s.%N)
  if (( sps > 0 )); then
    # -w after each transfer: total time, bytes, connections made, status, content type.
    curl -s "${CURL_HTTP[@]}" --max-time 10 --rate "$sps/s" -K "$cfg" \
      -w '%{time_total} %{size_download} %{num_connects} %{http_code} %{content_type}\n' \
      >"$out" 2>"$out.err" </dev/null &
    SCRAPER_PID=$!
    # N transfers paced at sps/s take about WINDOW s; a relay too slow for the rate makes the
    # window longer (bounded: each transfer has --max-time 10).
    wait "$SCRAPER_PID" || true
    SCRAPER_PID=""
    # N paced transfers end about 1/R s before the window does: the window lasts WINDOW s.
    sleep "$(awk -v a="$t0" -v b="$(date +%s.%N)" -v w="$WINDOW" 'BEGIN { d = a + w - b; printf "%.2f", (d > 0 ? d : 0) }')"
  else
    sleep "$WINDOW"
  fi
  t1=$(date +%s.%N); c1=$(cpu_ticks "$RELAY_PID")
  ok1=$(csv_last "$uac" 'SuccessfulCall(C)'); f1=$(csv_last "$uac" 'FailedCall(C)')
  R[$relay,$step,secs]=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }')
  R[$relay,$step,mid]=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", (a + b) / 2 }')
  R[$relay,$step,ticks]=$(( c1 - c0 ))
  R[$relay,$step,cpu]=$(rel_cpu_s $(( c1 - c0 )))
  R[$relay,$step,ok]=$(( ${ok1:-0} - ${ok0:-0} ))
  R[$relay,$step,failed]=$(( ${f1:-0} - ${f0:-0} ))
  R[$relay,$step,alive]=$(alive "$RELAY_PID" && echo yes || echo "no (died)")
  if (( sps > 0 )); then
    # Scrapes answered 200; latency p50 / p99 (nearest rank) / max in ms; mean bytes.
    read -r R[$relay,$step,scrapes] R[$relay,$step,bad] R[$relay,$step,p50] R[$relay,$step,p99] \
      R[$relay,$step,max] R[$relay,$step,bytes] R[$relay,$step,conns] < <(
        bad=$(awk '$4 != 200 { n++ } END { print n + 0 }' "$out")
        awk '$4 == 200' "$out" | sort -g -k1,1 | awk -v bad="$bad" '
          { v[++n] = $1 * 1000; b += $2; c += $3 }
          END {
            if (n == 0) { printf "0 %d n/a n/a n/a n/a n/a\n", bad; exit }
            k = int(0.99 * n); if (k < 0.99 * n) k++; if (k < 1) k = 1
            m = int(0.5 * n); if (m < 0.5 * n) m++; if (m < 1) m = 1
            printf "%d %d %.2f %.2f %.2f %.0f %d\n", n, bad, v[m], v[k], v[n], b / n, c
          }')
    R[$relay,$step,ctype]=$(awk '$4 == 200 { $1 = $2 = $3 = $4 = ""; sub(/^ +/, ""); print; exit }' "$out")
  fi
  # Series of one scrape at the end of the window (after the CPU reading).
  scrape_once "$METRICS_URL" "$WORK/$tag-$step"
  R[$relay,$step,series]=$(grep -c -v -E '^(#|$)' "$WORK/$tag-$step.body" 2>/dev/null || true)
  log "  $relay $step: ${R[$relay,$step,secs]} s, relay CPU ${R[$relay,$step,cpu]} s, calls ok ${R[$relay,$step,ok]} failed ${R[$relay,$step,failed]}$( (( sps > 0 )) && echo ", ${R[$relay,$step,scrapes]} scrapes (${R[$relay,$step,bad]} bad), p50/p99/max ${R[$relay,$step,p50]}/${R[$relay,$step,p99]}/${R[$relay,$step,max]} ms, ${R[$relay,$step,bytes]} B, ${R[$relay,$step,series]} series")"
}

STEPS="base1"
for s in $SCRAPE_RATES; do STEPS="$STEPS s$s"; done
STEPS="$STEPS base2"
step_rate() { [[ $1 == s* ]] && echo "${1#s}" || echo 0; }
step_name() { case $1 in base1) echo "baseline";; base2) echo "baseline (end)";; *) echo "${1#s}/s";; esac; }
NWIN=$(( $(wc -w <<<"$STEPS") ))

run_relay() {   # RELAY
  local relay=$1 tag=$1 calls rc=0 st
  # Enough calls for every window even if scrape windows run long: SIPp is told to stop
  # (SIGUSR1: no new calls, the ongoing ones finish) after the last window.
  calls=$(( RATE * (WARMUP + NWIN * WINDOW * 3 + 60) ))
  log "$relay: $RATE calls/s held ${CALL_MS} ms, ${WARMUP}s warm-up, then windows of ${WINDOW}s: $STEPS"
  start_uas "$tag"
  start_relay "$relay" "$tag"
  need_free "$UAC_PORT"
  "$SIPP" -sn uac -i "$IP" -p "$UAC_PORT" "$RELAY_TARGET" -nostdin \
    -r "$RATE" -m "$calls" -d "$CALL_MS" -timeout "$(( WARMUP + NWIN * WINDOW * 3 + 60 ))s" \
    -trace_stat -stf "$WORK/$tag-uac.csv" -fd 1 \
    >"$WORK/$tag-uac.out" 2>&1 </dev/null &
  UAC_PID=$!
  sleep "$WARMUP"
  for st in $STEPS; do
    alive "$UAC_PID" || { log "WARNING: SIPp UAC ended before window $st (see $WORK/$tag-uac.out)"; }
    run_window "$relay" "$tag" "$st" "$(step_rate "$st")"
  done
  # No new calls; the ongoing ones finish (BYE after CALL_MS, its transaction), then SIPp exits.
  kill -USR1 "$UAC_PID" 2>/dev/null || true
  wait_until $(( CALL_MS / 1000 + 40 )) eval '! alive "$UAC_PID"' || log "  SIPp UAC still running: stopping it"
  stop_pid "$UAC_PID" 3; wait "$UAC_PID" 2>/dev/null || rc=$?; UAC_PID=""
  R[$relay,alive]=$(alive "$RELAY_PID" && echo yes || echo "no (died)")
  stop_pid "$UAS_PID" 3; UAS_PID=""
  stop_pid "$RELAY_PID" 5; RELAY_PID=""
  R[$relay,calls_ok]=$(csv_last "$WORK/$tag-uac.csv" 'SuccessfulCall(C)')
  R[$relay,calls_failed]=$(csv_last "$WORK/$tag-uac.csv" 'FailedCall(C)')
  R[$relay,unexp]=$(csv_last "$WORK/$tag-uac.csv" 'FailedUnexpectedMessage(C)')
  R[$relay,rtx]=$(csv_last "$WORK/$tag-uac.csv" 'Retransmissions(C)')
  for st in $STEPS; do
    R[$relay,$st,pct]=$(awk -v t="${R[$relay,$st,ticks]}" -v s="${R[$relay,$st,secs]}" -v hz="$CLK_TCK" \
      'BEGIN { printf "%.1f", t / hz / s * 100 }')
    [[ $st == s* ]] || continue
    # The baseline CPU rate (ticks/s) at this window: interpolated in time between the two
    # baselines (the first and last windows), for a relay whose idle cost drifts.
    R[$relay,$st,base_rate]=$(awk -v a="${R[$relay,base1,ticks]}" -v sa="${R[$relay,base1,secs]}" -v ma="${R[$relay,base1,mid]}" \
      -v b="${R[$relay,base2,ticks]}" -v sb="${R[$relay,base2,secs]}" -v mb="${R[$relay,base2,mid]}" -v m="${R[$relay,$st,mid]}" \
      'BEGIN { ra = a / sa; rb = b / sb; printf "%.4f", ra + (rb - ra) * (m - ma) / (mb - ma) }')
    # Extra relay CPU per scrape: (window's ticks - baseline rate × window's seconds) ÷ scrapes.
    R[$relay,$st,extra_us]=$(awk -v t="${R[$relay,$st,ticks]}" -v s="${R[$relay,$st,secs]}" -v r="${R[$relay,$st,base_rate]}" \
      -v n="${R[$relay,$st,scrapes]:-0}" -v hz="$CLK_TCK" -v ok="${R[$relay,$st,alive]}" \
      'BEGIN { if (n > 0 && ok == "yes") printf "%.0f", (t - r * s) / hz * 1e6 / n; else print "n/a" }')
  done
  # The noise floor: the two baselines' difference (% of a core), and per scrape window what it
  # amounts to over that window's scrapes, plus one clock tick (the counters' resolution).
  # An extra CPU per scrape below twice its noise is left out of the chart.
  R[$relay,noise_pct]=$(awk -v a="${R[$relay,base1,pct]}" -v b="${R[$relay,base2,pct]}" 'BEGIN { d = a - b; if (d < 0) d = -d; printf "%.1f", d }')
  for st in $STEPS; do
    [[ $st == s* ]] || continue
    R[$relay,$st,noise_us]=$(awk -v p="${R[$relay,noise_pct]}" -v s="${R[$relay,$st,secs]}" -v n="${R[$relay,$st,scrapes]:-0}" -v hz="$CLK_TCK" \
      'BEGIN { if (n > 0) printf "%.0f", (p / 100 * s + 1 / hz) * 1e6 / n; else print "n/a" }')
    R[$relay,$st,extra_chart]=$(awk -v u="${R[$relay,$st,extra_us]}" -v e="${R[$relay,$st,noise_us]}" \
      'BEGIN { if (u != "n/a" && e != "n/a" && u > 2 * e) print u; else print "" }')
  done
  # The last scrape body: content type, families, timestamps, promtool's verdict.
  local last=$WORK/$tag-s${SCRAPE_RATES##* }.body
  R[$relay,ctype]=$(tr -d '\r' <"${last%.body}.headers" 2>/dev/null | awk -F': ' 'tolower($1) == "content-type" && !f { print $2; f = 1 }')
  R[$relay,types]=$(grep -c '^# TYPE' "$last" 2>/dev/null || true)
  R[$relay,helps]=$(grep -c '^# HELP' "$last" 2>/dev/null || true)
  R[$relay,eof]=$(grep -q '^# EOF' "$last" 2>/dev/null && echo yes || echo no)
  # Samples with a trailing timestamp: name{labels} value timestamp (three fields once the
  # label set, which may hold spaces, is removed).
  R[$relay,stamped]=$(grep -v -E '^(#|$)' "$last" | sed 's/{.*}//' | awk 'NF >= 3 { n++ } END { print n + 0 }')
  R[$relay,sample]=$(awk '/^(#|$)/ { next } { s = s (n++ ? " · " : "") $0 } n == 3 { exit } END { print s }' "$last" 2>/dev/null || true)
  cp "$last" "$WORK/$relay-last-scrape.txt"
  if [[ -n $PROMTOOL ]]; then
    "$PROMTOOL" check metrics <"$last" >"$WORK/$relay-promtool.txt" 2>&1 || true
    R[$relay,promtool]=$(awk 'NF { n++; if (n == 1) first = $0 } END {
      if (n == 0) print "no problem reported"; else printf "%d line(s), the first: %s\n", n, first }' "$WORK/$relay-promtool.txt")
  fi
  log "  $relay: calls ok ${R[$relay,calls_ok]:-?} failed ${R[$relay,calls_failed]:-?}, baseline CPU ${R[$relay,base1,pct]} % / ${R[$relay,base2,pct]} % of a core"
}

# -------------------------------------------------------------------- run ---
for relay in $RELAYS; do run_relay "$relay"; sleep 1; done

# ----------------------------------------------------------------- report ---
num() { [[ -n ${1:-} ]] && echo "$1" || echo "n/a"; }
ratio() { awk -v a="${1:-n/a}" -v b="${2:-n/a}" 'BEGIN { if (a != "n/a" && b != "n/a" && a != "" && b != "" && b + 0 > 0) printf "%.2f", a / b; else print "n/a" }'; }
both() { [[ " $RELAYS " == *" sbc "* && " $RELAYS " == *" kamailio "* ]]; }

CSV=$BASE.csv
echo "step,relay,scrapes_per_s_max,window_s,scrapes,bad_scrapes,scrapes_per_s,series,bytes,p50_ms,p99_ms,max_ms,relay_cpu_s,relay_cpu_pct,extra_cpu_us_per_scrape,noise_us_per_scrape,extra_cpu_us_above_noise,calls_ok,calls_failed" >"$CSV"
for st in $STEPS; do
  for relay in $RELAYS; do
    sps=$(step_rate "$st")
    got=$(awk -v n="${R[$relay,$st,scrapes]:-0}" -v s="${R[$relay,$st,secs]}" 'BEGIN { printf "%.1f", n / s }')
    echo "$(step_name "$st"),$relay,$sps,${R[$relay,$st,secs]},${R[$relay,$st,scrapes]:-},${R[$relay,$st,bad]:-},$( (( sps > 0 )) && echo "$got"),${R[$relay,$st,series]:-},${R[$relay,$st,bytes]:-},${R[$relay,$st,p50]:-},${R[$relay,$st,p99]:-},${R[$relay,$st,max]:-},${R[$relay,$st,cpu]},${R[$relay,$st,pct]},${R[$relay,$st,extra_us]:-},${R[$relay,$st,noise_us]:-},${R[$relay,$st,extra_chart]:-},${R[$relay,$st,ok]},${R[$relay,$st,failed]}" >>"$CSV"
  done
done
sed -i 's/,n\/a/,/g' "$CSV"

SVG=$BASE.svg
"$SBC_LAB" chart bars "$CSV" -o "$SVG" --x step --group relay \
  --title "Prometheus scrapes under call load: $(echo "$RELAYS" | sed 's/ / vs /g')" \
  --subtitle "SIPp $RATE calls/s held ${CALL_MS} ms through the relay, windows of ${WINDOW}s, closed-loop curl scraper, loopback, 2 cores shared ($STAMP)" \
  --panel "Relay CPU (% of one core)=relay_cpu_pct;height=140" \
  --panel "Extra relay CPU per scrape over the baseline (µs, n/a: under twice the noise floor)=extra_cpu_us_above_noise;height=140" \
  --panel "Scrape latency p99 (ms)=p99_ms;height=120" \
  --panel "Failed calls in the window=calls_failed;height=100" \
  || log "WARNING: chart failed"

MD=$BASE.md
GIT_REV=$(repo_rev "$ROOT")
SIPP_VERSION=$( { "$SIPP" -v 2>&1 || true; } | grep -m1 -o 'SIPp v[^ ]*[^ .]' || echo 'SIPp (unknown version)')
KAM_VERSION=$( { "$KAMAILIO" -v 2>&1 || true; } | awk "NR == 1" | sed 's/^version: //; s/ *$//')
CURL_VERSION=$(curl --version | awk "NR == 1" | cut -d' ' -f1-2)
CMDLINE="RELAYS=\"$RELAYS\" RATE=$RATE CALL_MS=$CALL_MS SCRAPE_RATES=\"$SCRAPE_RATES\" WINDOW=$WINDOW WARMUP=$WARMUP KEEPALIVE=$KEEPALIVE KAM_STATS=$KAM_STATS SBC_WORKERS=$SBC_WORKERS lab/bench/metrics-vs-kamailio.sh"
{
  echo "# Prometheus scrapes under call load: $(echo "$RELAYS" | sed 's/ / vs /g') ($STAMP)"
  echo
  echo "- command: \`$CMDLINE\`"
  echo "- machine: $(nproc) cores, $(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo), $(uname -sr), load average at the report: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "- versions: $SIPP_VERSION; $KAM_VERSION; $CURL_VERSION; sbc repo $GIT_REV"
  [[ " $RELAYS " == *" kamailio "* ]] && echo "- kamailio: \`kamailio -f lab/bench/kamailio-metrics.cfg -DD -E -m 1024 -M 16 -A HTTP_PORT=$KAM_HTTP_PORT$( (( KAM_STATS )) && echo " -A WITH_STATS")\` (the reference relay, UDP $IP:$KAM_PORT, 2 UDP workers; xhttp + xhttp_prom on TCP $IP:$KAM_HTTP_PORT, 2 TCP workers, \`xhttp_prom_stats \"all\"\`$( (( KAM_STATS )) && echo "; kex + tmx loaded so that \"all\" holds core, shmem and tm statistics"))"
  [[ " $RELAYS " == *" sbc "* ]] && echo "- sbc: \`sbc run\` (workers = $SBC_WORKERS; access $IP:$SBC_PORT, core $IP:$SBC_CORE_PORT; \`[system-config] metrics-address = \"$IP:$SBC_HTTP_PORT\"\`)"
  echo "- calls: SIPp built-in \`uac\` ($IP:$UAC_PORT) → relay → built-in \`uas\` ($IP:$UAS_PORT), \`-r $RATE -d $CALL_MS\`, one run per relay across all its windows; ${WARMUP} s warm-up, then windows of ${WINDOW} s: $(for st in $STEPS; do printf '%s; ' "$(step_name "$st")"; done | sed 's/; $//')"
  echo "- scraper: one \`curl $( (( KEEPALIVE )) && echo --http1.1 || echo --http1.0) --rate R/s -K urls\` process per window, serial transfers (closed loop, at most R/s), \`-w '%{time_total} %{size_download} %{num_connects} %{http_code} %{content_type}'\`; its CPU is not counted"
  echo "- files: \`$(basename "$CSV")\`, \`$(basename "$SVG")\` (chart)"
  echo
  echo "## Per window"
  echo
  echo "| window | relay | seconds | scrapes (200) | scrapes/s | series | bytes/scrape | latency p50 / p99 / max (ms) | TCP connections | relay CPU (s) | relay CPU (% of a core) | extra relay CPU per scrape (µs) ± noise | calls ok | calls failed |"
  echo "|---|---|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|"
  for st in $STEPS; do
    for relay in $RELAYS; do
      if [[ $st == s* ]]; then
        got=$(awk -v n="${R[$relay,$st,scrapes]:-0}" -v s="${R[$relay,$st,secs]}" 'BEGIN { printf "%.1f", n / s }')
        bad=""; (( ${R[$relay,$st,bad]:-0} > 0 )) && bad=" (+${R[$relay,$st,bad]} failed)"
        printf '| %s | %s | %s | %s%s | %s | %s | %s | %s / %s / %s | %s | %s | %s | %s | %s | %s |\n' "$(step_name "$st")" "$relay" "${R[$relay,$st,secs]}" \
          "$(num "${R[$relay,$st,scrapes]:-}")" "$bad" "$got" "$(num "${R[$relay,$st,series]:-}")" "$(num "${R[$relay,$st,bytes]:-}")" \
          "$(num "${R[$relay,$st,p50]:-}")" "$(num "${R[$relay,$st,p99]:-}")" "$(num "${R[$relay,$st,max]:-}")" "$(num "${R[$relay,$st,conns]:-}")" \
          "${R[$relay,$st,cpu]}" "${R[$relay,$st,pct]}" "$(num "${R[$relay,$st,extra_us]:-}") ± $(num "${R[$relay,$st,noise_us]:-}")" "${R[$relay,$st,ok]}" "${R[$relay,$st,failed]}"
      else
        printf '| %s | %s | %s | – | – | %s | – | – | – | %s | %s | – | %s | %s |\n' "$(step_name "$st")" "$relay" "${R[$relay,$st,secs]}" \
          "$(num "${R[$relay,$st,series]:-}")" "${R[$relay,$st,cpu]}" "${R[$relay,$st,pct]}" "${R[$relay,$st,ok]}" "${R[$relay,$st,failed]}"
      fi
    done
  done
  echo
  echo "| relay | calls ok (whole run) | calls failed (whole run) | of which unexpected message | calls failed: baselines | calls failed: scrape windows | retransmissions (UAC) | baseline CPU (% of a core), start / end | relay alive after |"
  echo "|---|---:|---:|---:|---:|---:|---:|---|---|"
  for relay in $RELAYS; do
    fb=$(( ${R[$relay,base1,failed]} + ${R[$relay,base2,failed]} )); fs=0
    for s in $SCRAPE_RATES; do fs=$(( fs + ${R[$relay,s$s,failed]} )); done
    printf '| %s | %s | %s | %s | %s | %s | %s | %s / %s | %s |\n' "$relay" "$(num "${R[$relay,calls_ok]:-}")" "$(num "${R[$relay,calls_failed]:-}")" \
      "$(num "${R[$relay,unexp]:-}")" "$fb" "$fs" "$(num "${R[$relay,rtx]:-}")" \
      "${R[$relay,base1,pct]}" "${R[$relay,base2,pct]}" "${R[$relay,alive]}"
  done
  if both; then
    echo
    echo "## sbc ÷ Kamailio"
    echo
    echo "| scrapes/s | series | bytes/scrape | latency p50 | latency p99 | extra relay CPU per scrape (n/a: under twice the noise) | extra CPU per series |"
    echo "|---:|---:|---:|---:|---:|---:|---:|"
    for s in $SCRAPE_RATES; do
      st=s$s
      # CPU figures under twice their noise are left out (n/a), as in the chart.
      per_series() { awk -v u="${R[$1,$st,extra_chart]:-}" -v n="${R[$1,$st,series]:-0}" 'BEGIN { if (u != "" && n > 0) printf "%.3f", u / n; else print "n/a" }'; }
      printf '| %s | %s | %s | %s | %s | %s | %s |\n' "$s" "$(ratio "${R[sbc,$st,series]:-}" "${R[kamailio,$st,series]:-}")" \
        "$(ratio "${R[sbc,$st,bytes]:-}" "${R[kamailio,$st,bytes]:-}")" "$(ratio "${R[sbc,$st,p50]:-}" "${R[kamailio,$st,p50]:-}")" \
        "$(ratio "${R[sbc,$st,p99]:-}" "${R[kamailio,$st,p99]:-}")" "$(ratio "${R[sbc,$st,extra_chart]:-}" "${R[kamailio,$st,extra_chart]:-}")" \
        "$(ratio "$(per_series sbc)" "$(per_series kamailio)")"
    done
  fi
  echo
  echo "## What each exports"
  echo
  echo "| relay | Content-Type | series | # TYPE lines | # HELP lines | samples with a timestamp | ends with # EOF | \`promtool check metrics\` | first samples |"
  echo "|---|---|---:|---:|---:|---:|---|---|---|"
  for relay in $RELAYS; do
    last_st=s${SCRAPE_RATES##* }
    printf '| %s | `%s` | %s | %s | %s | %s | %s | %s | `%s` |\n' "$relay" "$(num "${R[$relay,ctype]:-}")" "$(num "${R[$relay,$last_st,series]:-}")" \
      "${R[$relay,types]:-0}" "${R[$relay,helps]:-0}" "${R[$relay,stamped]:-0}" "${R[$relay,eof]}" \
      "$(num "${R[$relay,promtool]:-}" | sed 's/|/\\|/g')" "${R[$relay,sample]:-}"
  done
  if [[ -n $PROMTOOL ]]; then
    echo
    echo "\`promtool check metrics\` lints the Prometheus text format 0.0.4: it wants a \`# HELP\` for each sample's own name. Kamailio 5.6's xhttp_prom writes neither \`# HELP\` nor \`# TYPE\` (every sample is untyped, with a millisecond timestamp), hence a line per series. The sbc serves OpenMetrics, where a counter family \`x\` has its HELP and TYPE under \`x\` and its sample is \`x_total\`: promtool's 0.0.4 linter then reports \`x_total no help text\` once per counter family ($(for relay in $RELAYS; do printf '%s: %s counter families; ' "$relay" "$(grep -c '^# TYPE .* counter$' "$WORK/$relay-last-scrape.txt" 2>/dev/null || true)"; done | sed 's/; $//')), which is not a problem of the exposition."
  fi
  echo
  echo "Extra relay CPU per scrape = (the relay's utime+stime over the window, all its processes and threads, /proc) − (the baseline CPU rate × the window's seconds), ÷ the scrapes answered 200. The baseline rate at a window is interpolated in time between the two no-scrape windows (first and last), which takes out a steady drift; the difference between them (here $(for relay in $RELAYS; do printf '%s %s points; ' "$relay" "${R[$relay,noise_pct]}"; done | sed 's/; $//') of a core) is the noise floor; ± noise is that difference over the window's seconds plus one clock tick ($(( 1000000 / CLK_TCK )) µs, the counters' resolution), ÷ the window's scrapes: a figure under twice its noise (typically at 1 scrape/s) says only that a scrape costs less than that, and the chart leaves it out. Latency: curl's time_total (connect, request, response), the scraper on the same 2 cores. Calls ok/failed per window: SIPp's cumulative counters (\`-trace_stat\`, written every second) read at the window's edges. Series: the non-comment lines of one scrape taken right after the window. See lab/bench/README.md."
} | tee "$MD"
log "report written to $MD"
