#!/usr/bin/env bash
# register-storm.sh: a registration storm, through the sbc's registration cache and straight
# to the same Kamailio registrar, in one run, side by side.
#
#   SIPp phones 127.0.1.1..SOURCES (PHONES in all, each on its own socket: -t un)
#        ──► path ──► Kamailio registrar 127.0.0.1:5070
#     kamailio: straight to the registrar
#     sbc:      sbc access 127.0.0.1:5060 (registration-caching, registration-interval
#               INTERVAL) ─ core 127.0.0.1:5062 ──► registrar
#
# Each phone registers asking EXPIRES s (the phones ramp up at RATE REGISTERs/s in all), then
# refreshes REFRESHES times, REFRESH_MS apart, on the same Call-ID with the next CSeq, as a
# phone does. Every 60 s of the refresh phase: the REGISTERs the registrar accepted (its own
# `registrar:accepted_regs`, read with kamcmd) and, through the sbc, the phones' REGISTERs it
# forwarded and answered from its cache. Per path: the CPU of the sbc and of Kamailio per
# phone REGISTER (utime + stime of each process tree), failures, the registrar's bindings at
# the end; and the sbc's heap per phone (jemalloc `stats.allocated`, `show memory`).
#
# The phones come from SOURCES loopback addresses, none of them a session-agent's, so the
# sbc's per-source limits apply to them: `source-rate` is raised to SOURCE_RATE (from 15) and
# `source-burst` to match, so that PHONES/SOURCES phones behind one address refresh through it.
#
# Usage:  cargo build --release -p sbc && lab/bench/register-storm.sh
# Knobs:  PHONES [10000], SOURCES [10], RATE [500], EXPIRES [30], REFRESH_MS [29000],
#         REFRESHES [7], INTERVAL [60], SOURCE_RATE [100], SBC_BIN [target/release/sbc],
#         SIPP [sipp], KAMAILIO [kamailio], KAMCMD [kamcmd],
#         OUT [lab/results/register-storm-<UTC>.md], KEEP_WORK=1 keeps the scratch dir.
# Needs UDP ports 5060, 5062 and 5070 free; signals only the processes it started.
set -euo pipefail
BENCH_NAME=register-storm
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
# shellcheck source=lib.sh
source "$HERE/lib.sh"

IP=127.0.0.1
PHONES=${PHONES:-10000}
SOURCES=${SOURCES:-10}
RATE=${RATE:-500}
EXPIRES=${EXPIRES:-30}
REFRESH_MS=${REFRESH_MS:-29000}
REFRESHES=${REFRESHES:-7}
INTERVAL=${INTERVAL:-60}
SOURCE_RATE=${SOURCE_RATE:-100}
SBC_BIN=${SBC_BIN:-$ROOT/target/release/sbc}
SIPP=${SIPP:-sipp}
KAMAILIO=${KAMAILIO:-kamailio}
KAMCMD=${KAMCMD:-kamcmd}
STAMP=$(date -u +%Y-%m-%dT%H%M%SZ)
OUT=${OUT:-$ROOT/lab/results/register-storm-$STAMP.md}
for v in PHONES SOURCES RATE EXPIRES REFRESH_MS REFRESHES INTERVAL SOURCE_RATE; do
  is_uint "${!v}" || die "$v must be a whole number"
done
(( SOURCES >= 1 && SOURCES <= 250 && PHONES >= SOURCES )) || die "SOURCES must be 1..250 and at most PHONES"
[[ -x $SBC_BIN ]] || die "no sbc binary at $SBC_BIN (cargo build --release -p sbc)"
for p in 5060 5062 5070; do need_free "$p"; done

WORK=$(mktemp -d /tmp/register-storm.XXXXXX)
PIDS=()
cleanup() {
  local p
  for p in "${PIDS[@]}"; do stop_pid "$p"; done
  if [[ ${KEEP_WORK:-} == 1 ]]; then log "scratch kept: $WORK"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT
TICK=$(getconf CLK_TCK)
PER_SOURCE=$(( PHONES / SOURCES ))
PHONES=$(( PER_SOURCE * SOURCES ))

# The phones: one user each, PER_SOURCE per source address.
for (( k = 1; k <= SOURCES; k++ )); do
  { echo SEQUENTIAL
    for (( i = 1; i <= PER_SOURCE; i++ )); do printf 'phone%03d%05d;\n' "$k" "$i"; done
  } >"$WORK/phones-$k.csv"
done
sed -e "s/REFRESH_MS/$REFRESH_MS/" -e "s/REFRESHES/$REFRESHES/" -e "s/EXPIRES/$EXPIRES/g" \
  "$HERE/sipp/uac-register.xml" >"$WORK/uac-register.xml"

start_kamailio() {   # a fresh registrar for each path, its usrloc empty
  cat >"$WORK/kamailio.cfg" <<KAM
#!KAMAILIO
debug=1
log_stderror=yes
children=2
listen=udp:$IP:5070
disable_tcp=yes
auto_aliases=no
alias="example.test"
dns=no
rev_dns=no
mpath="/usr/lib/x86_64-linux-gnu/kamailio/modules/"
loadmodule "tm.so"
loadmodule "sl.so"
loadmodule "pv.so"
loadmodule "textops.so"
loadmodule "usrloc.so"
loadmodule "registrar.so"
loadmodule "ctl.so"
loadmodule "kex.so"
modparam("usrloc", "db_mode", 0)
modparam("usrloc", "use_domain", 1)
modparam("usrloc", "hash_size", 14)
modparam("registrar", "min_expires", 10)
modparam("ctl", "binrpc", "unix:$WORK/kamailio.ctl")
request_route {
    if (is_method("REGISTER")) { save("location"); exit; }
    sl_send_reply("404", "Not Found");
}
KAM
  "$KAMAILIO" -f "$WORK/kamailio.cfg" -DD -E -m 256 -M 16 -Y "$WORK" -P "$WORK/kamailio.pid" \
    2>"$WORK/kamailio-$1.log" &
  KAM_PID=$!
  PIDS+=("$KAM_PID")
  wait_until 10 bound_by 5070 "$KAM_PID" || wait_until 10 udp_port_busy 5070 \
    || die "kamailio did not bind 5070 (see $WORK/kamailio-$1.log)"
  wait_until 10 test -S "$WORK/kamailio.ctl" || die "kamailio's ctl socket did not appear"
}
kam_stat() {   # kam_stat group:name
  "$KAMCMD" -s "unix:$WORK/kamailio.ctl" stats.get_statistics "${1%%:*}:" 2>/dev/null \
    | sed -n "s/.*${1#*:} *= *\([0-9][0-9]*\).*/\1/p" | head -1
}
accepted_regs() { kam_stat registrar:accepted_regs; }
stop_kamailio() { stop_pid "$KAM_PID" 5; }
phones_accepted() { local n; n=$(accepted_regs); (( ${n:-0} >= PHONES )); }
sipps_done() { local p; for p in "${SIPP_PIDS[@]}"; do kill -0 "$p" 2>/dev/null && return 1; done; return 0; }

start_sbc() {
  write_sbc_config "$WORK/sbc.toml" 5060 5062 5070 \
    $'workers = 2\n'"source-rate = $SOURCE_RATE"$'\n'"source-burst = $(( SOURCE_RATE * 2 ))" \
    $'registration-caching = true\n'"registration-interval = $INTERVAL"$'\n'"min-reg-expire = $EXPIRES" \
    $'\n[system-config]\nhostname = "storm"'
  "$SBC_BIN" run --config "$WORK/sbc.toml" --mgmt-socket "$WORK/mgmt.sock" \
    >"$WORK/sbc.out" 2>"$WORK/sbc.err" &
  SBC_PID=$!
  PIDS+=("$SBC_PID")
  wait_until 15 sbc_ready "$WORK/sbc.out" || die "sbc did not start (see $WORK/sbc.err)"
}
sbc_json() { "$SBC_BIN" acli --mgmt-socket "$WORK/mgmt.sock" --json -c "$1" 2>/dev/null; }
sbc_heap() { sbc_json "show memory" | sed -n 's/.*"heap_allocated": *\([0-9][0-9]*\).*/\1/p' | head -1; }
sbc_count() { sbc_json "show registrations" | sed -n "s/.*\"$1\": *\([0-9][0-9]*\).*/\1/p" | head -1; }
phone_registers() {   # the REGISTERs the phones sent that reached an answer
  if [[ $1 == sbc ]]; then echo $(( $(sbc_count forwarded) + $(sbc_count absorbed) )); else accepted_regs; fi
}

declare -A R
run_path() {   # run_path kamailio|sbc
  local path=$1 target=$IP:5070 k0 s0 k1 s1 k2 s2 regs0 h0=0 h1=0 k m now next p0 r0 p1 r1
  start_kamailio "$path"
  if [[ $path == sbc ]]; then start_sbc; target=$IP:5060; h0=$(sbc_heap); fi
  log "$path: $PHONES phones from $SOURCES addresses at $RATE REGISTERs/s, then $REFRESHES refreshes each, $REFRESH_MS ms apart"
  SIPP_PIDS=()
  for (( k = 1; k <= SOURCES; k++ )); do
    # In $WORK: SIPp writes files of its own (<scenario>_<pid>_.csv) where it runs.
    (cd "$WORK" && "$SIPP" "$target" -sf "$WORK/uac-register.xml" -inf "$WORK/phones-$k.csv" -i "127.0.1.$k" -p 5090 -t un -max_socket $(( PER_SOURCE + 100 )) \
      -m "$PER_SOURCE" -r "$(( (RATE + SOURCES - 1) / SOURCES ))" -l $(( PER_SOURCE + 10 )) -nostdin -bg \
      -trace_stat -stf "$WORK/stat-$path-$k.csv" -trace_err -error_file "$WORK/err-$path-$k.log" \
      >"$WORK/sipp-$path-$k.out" 2>&1) || true
    p=$(sed -n 's/.*PID=\[\([0-9]*\)\].*/\1/p' "$WORK/sipp-$path-$k.out" | head -1)
    [[ -n $p ]] || die "sipp did not start (see $WORK/sipp-$path-$k.out)"
    SIPP_PIDS+=("$p"); PIDS+=("$p")
  done
  # The ramp ends when the registrar accepted every phone (the sbc forwards each first REGISTER).
  wait_until $(( PHONES / RATE * 3 + 30 )) phones_accepted \
    || log "$path: the registrar accepted $(accepted_regs) of $PHONES in the ramp"
  k1=$(cpu_ticks "$KAM_PID"); s1=0; [[ $path == sbc ]] && s1=$(cpu_ticks "$SBC_PID")
  regs0=$(accepted_regs); p0=$(phone_registers "$path")
  # Every 60 s of the refresh phase: the registrar's REGISTERs and the phones'.
  R[$path,minutes]=0; m=0; next=$(( $(date +%s) + 60 ))
  while ! sipps_done; do
    sleep 1
    now=$(date +%s)
    if (( now >= next )); then
      m=$(( m + 1 )); next=$(( next + 60 ))
      r1=$(accepted_regs); p1=$(phone_registers "$path")
      R[$path,reg$m]=$(( r1 - regs0 )); R[$path,phone$m]=$(( p1 - p0 )); regs0=$r1; p0=$p1
      R[$path,minutes]=$m
      log "$path: minute $m: phones sent ${R[$path,phone$m]} REGISTERs, the registrar accepted ${R[$path,reg$m]}"
      if [[ $path == sbc && $m == 2 ]]; then h1=$(sbc_heap); fi
    fi
    (( m < REFRESHES + 5 )) || die "$path: sipp still running"
  done
  k2=$(cpu_ticks "$KAM_PID"); s2=0; [[ $path == sbc ]] && s2=$(cpu_ticks "$SBC_PID")
  R[$path,kam]=$(( k2 - k1 )); R[$path,sbc]=$(( s2 - s1 ))
  R[$path,registered]=$(kam_stat usrloc:registered_users)
  R[$path,ok]=0; R[$path,failed]=0
  for (( k = 1; k <= SOURCES; k++ )); do
    R[$path,ok]=$(( R[$path,ok] + $(csv_last "$WORK/stat-$path-$k.csv" 'SuccessfulCall(C)') ))
    R[$path,failed]=$(( R[$path,failed] + $(csv_last "$WORK/stat-$path-$k.csv" 'FailedCall(C)') ))
  done
  if [[ $path == sbc ]]; then
    R[sbc,heap]=$(awk -v a="$h0" -v b="$h1" -v n="$PHONES" 'BEGIN { printf "%.0f", (b - a) / n }')
    R[sbc,forwarded]=$(sbc_count forwarded); R[sbc,absorbed]=$(sbc_count absorbed)
    R[sbc,refused]=$(sbc_count refused_full)
    R[sbc,limited]=$(sbc_json "show access" | sed -n 's/.*"rate_limited": *\([0-9][0-9]*\).*/\1/p' | head -1)
    stop_pid "$SBC_PID" 10
  fi
  stop_kamailio
}

run_path kamailio
run_path sbc

REFRESH_REGS=$(( PHONES * REFRESHES ))
us() { awk -v t="$1" -v n="$2" -v hz="$TICK" 'BEGIN { if (n > 0) printf "%.1f", t * 1e6 / hz / n; else print "n/a" }'; }
{
  echo "# Registration storm: $PHONES phones refreshing every $(( REFRESH_MS / 1000 )) s, registration-interval $INTERVAL s"
  echo
  echo "$STAMP, sbc $(repo_rev "$ROOT"), $(nproc) cores. Command: \`PHONES=$PHONES SOURCES=$SOURCES RATE=$RATE EXPIRES=$EXPIRES REFRESH_MS=$REFRESH_MS REFRESHES=$REFRESHES INTERVAL=$INTERVAL SOURCE_RATE=$SOURCE_RATE lab/bench/register-storm.sh\`."
  echo
  echo "$PHONES SIPp phones, $PER_SOURCE behind each of $SOURCES loopback addresses (127.0.1.1-$SOURCES), each on a socket of its own,"
  echo "register asking $EXPIRES s at $RATE REGISTERs/s in all, then refresh $REFRESHES times on the same Call-ID, $REFRESH_MS ms after each answer."
  echo "Through the sbc: \`registration-caching\`, \`registration-interval = $INTERVAL\`, \`min-reg-expire = $EXPIRES\` (the phones are told the $EXPIRES s they ask),"
  echo "\`source-rate = $SOURCE_RATE\` (raised from 15: $PER_SOURCE phones share each address); the registrar is asked $(( INTERVAL + EXPIRES )) s."
  echo
  echo "REGISTERs per minute of the refresh phase (the ramp excluded): what the phones sent, what the registrar accepted."
  echo
  echo "| minute | straight: phones = registrar | through the sbc: phones | through the sbc: registrar | registrar per binding per $INTERVAL s |"
  echo "|---:|---:|---:|---:|---:|"
  for (( m = 1; m <= R[sbc,minutes] || m <= R[kamailio,minutes]; m++ )); do
    echo "| $m | ${R[kamailio,reg$m]:--} | ${R[sbc,phone$m]:--} | ${R[sbc,reg$m]:--} | $(awk -v r="${R[sbc,reg$m]:-0}" -v n="$PHONES" -v i="$INTERVAL" 'BEGIN { printf "%.2f", r / n * i / 60 }') |"
  done
  echo
  echo "| path | sbc CPU per phone REGISTER (µs) | Kamailio CPU per phone REGISTER (µs) | phones registered to the end | failed | registrar's bindings at the end |"
  echo "|---|---:|---:|---:|---:|---:|"
  for path in kamailio sbc; do
    echo "| $path | $( [[ $path == sbc ]] && us "${R[sbc,sbc]}" "$REFRESH_REGS" || echo -) | $(us "${R[$path,kam]}" "$REFRESH_REGS") | ${R[$path,ok]} | ${R[$path,failed]} | ${R[$path,registered]:-?} |"
  done
  echo
  echo "CPU is over the refresh phase ($REFRESH_REGS phone REGISTERs per path), the process tree's utime + stime."
  echo "The sbc's cache: REGISTERs forwarded ${R[sbc,forwarded]:-?}, answered from the cache ${R[sbc,absorbed]:-?}, refused (full) ${R[sbc,refused]:-?}; requests rate-limited ${R[sbc,limited]:-?}."
  echo "The sbc's heap two minutes into the refresh phase (jemalloc \`stats.allocated\`, \`show memory\`): **${R[sbc,heap]:-?} bytes per phone**, its binding and the REGISTER transactions in flight (each held 32 s, Timer J)."
  kr=$(awk -v a="${R[kamailio,kam]}" -v b="${R[sbc,kam]}" 'BEGIN { if (a > 0) printf "%.3f", b / a; else print "n/a" }')
  echo
  echo "The registrar's CPU in the refresh phase, through the sbc ÷ straight: **$kr**."
} | tee "$OUT"
log "report: $OUT"
