#!/usr/bin/env bash
# register-storm.sh: a registration storm, through the sbc's registration cache and straight
# to the same Kamailio registrar, in one run, side by side.
#
#   SIPp uac 127.0.0.1:5090 (PHONES phones, RATE REGISTERs/s) ──► path ──► Kamailio registrar 127.0.0.1:5070
#     kamailio: straight to the registrar
#     sbc:      sbc access 127.0.0.1:5060 (registration-caching) ─ core 127.0.0.1:5062 ──► registrar
#
# Each phone registers once (the "register" pass), then, PAUSE_MS later, refreshes on the same
# Call-ID with the next CSeq (the "refresh" pass), as a phone does. Per path and pass: the
# REGISTERs the registrar accepted (its own `registrar:accepted_regs`, read with kamcmd), the
# CPU of the sbc and of Kamailio per phone (utime + stime of each process tree), failures;
# and the sbc's heap per binding (jemalloc `stats.allocated`, `show memory`, before the storm
# and once its transactions have ended).
#
# Usage:  cargo build --release -p sbc && lab/bench/register-storm.sh
# Knobs:  PHONES [10000], RATE [500], PAUSE_MS [PHONES/RATE*1000 + 5000], SBC_BIN
#         [target/release/sbc], SIPP [sipp], KAMAILIO [kamailio], KAMCMD [kamcmd],
#         OUT [lab/results/register-storm-<UTC>.md], KEEP_WORK=1 keeps the scratch dir.
# Needs UDP ports 5060, 5062, 5070 and 5090 free; signals only the processes it started.
set -euo pipefail
BENCH_NAME=register-storm
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
# shellcheck source=lib.sh
source "$HERE/lib.sh"

IP=127.0.0.1
PHONES=${PHONES:-10000}
RATE=${RATE:-500}
PAUSE_MS=${PAUSE_MS:-$(( PHONES * 1000 / RATE + 5000 ))}
SBC_BIN=${SBC_BIN:-$ROOT/target/release/sbc}
SIPP=${SIPP:-sipp}
KAMAILIO=${KAMAILIO:-kamailio}
KAMCMD=${KAMCMD:-kamcmd}
STAMP=$(date -u +%Y-%m-%dT%H%M%SZ)
OUT=${OUT:-$ROOT/lab/results/register-storm-$STAMP.md}
for v in PHONES RATE PAUSE_MS; do is_uint "${!v}" || die "$v must be a whole number"; done
[[ -x $SBC_BIN ]] || die "no sbc binary at $SBC_BIN (cargo build --release -p sbc)"
for p in 5060 5062 5070 5090; do need_free "$p"; done

WORK=$(mktemp -d /tmp/register-storm.XXXXXX)
PIDS=()
cleanup() {
  local p
  for p in "${PIDS[@]}"; do stop_pid "$p"; done
  if [[ ${KEEP_WORK:-} == 1 ]]; then log "scratch kept: $WORK"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT
TICK=$(getconf CLK_TCK)

# The phones: one user each.
{ echo SEQUENTIAL; for (( i = 1; i <= PHONES; i++ )); do printf 'phone%05d;\n' "$i"; done; } >"$WORK/phones.csv"
sed "s/PAUSE_MS/$PAUSE_MS/" "$HERE/sipp/uac-register.xml" >"$WORK/uac-register.xml"

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
accepted_regs() {
  "$KAMCMD" -s "unix:$WORK/kamailio.ctl" stats.get_statistics registrar: 2>/dev/null \
    | sed -n 's/.*accepted_regs *= *\([0-9][0-9]*\).*/\1/p' | head -1
}
stop_kamailio() { stop_pid "$KAM_PID" 5; }
phones_accepted() { local n; n=$(accepted_regs); (( ${n:-0} >= PHONES )); }
sipp_done() { ! kill -0 "$SIPP_PID" 2>/dev/null; }

start_sbc() {
  write_sbc_config "$WORK/sbc.toml" 5060 5062 5070 \
    "workers = 2" 'registration-caching = true' \
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

declare -A R
run_path() {   # run_path kamailio|sbc
  local path=$1 target=$IP:5070 k0 s0 k1 s1 k2 s2 regs1 h0 h1
  start_kamailio "$path"
  if [[ $path == sbc ]]; then start_sbc; target=$IP:5060; h0=$(sbc_heap); fi
  log "$path: $PHONES phones at $RATE REGISTERs/s, refreshes $PAUSE_MS ms later"
  k0=$(cpu_ticks "$KAM_PID"); s0=0; [[ $path == sbc ]] && s0=$(cpu_ticks "$SBC_PID")
  "$SIPP" "$target" -sf "$WORK/uac-register.xml" -inf "$WORK/phones.csv" -i "$IP" -p 5090 \
    -m "$PHONES" -r "$RATE" -l $(( PHONES + 100 )) -nostdin -bg -trace_stat -stf "$WORK/stat-$path.csv" \
    -trace_err -error_file "$WORK/err-$path.log" >"$WORK/sipp-$path.out" 2>&1 || true
  SIPP_PID=$(sed -n 's/.*PID=\[\([0-9]*\)\].*/\1/p' "$WORK/sipp-$path.out" | head -1)
  [[ -n $SIPP_PID ]] || die "sipp did not start (see $WORK/sipp-$path.out)"
  PIDS+=("$SIPP_PID")
  # The register pass ends when the registrar accepted every phone (the sbc forwards each).
  wait_until $(( PHONES / RATE * 3 + 30 )) phones_accepted \
    || log "$path: the registrar accepted $(accepted_regs) of $PHONES in the register pass"
  k1=$(cpu_ticks "$KAM_PID"); s1=0; [[ $path == sbc ]] && s1=$(cpu_ticks "$SBC_PID")
  regs1=$(accepted_regs)
  wait_until $(( PAUSE_MS / 1000 + PHONES / RATE * 3 + 60 )) sipp_done \
    || die "$path: sipp still running"
  k2=$(cpu_ticks "$KAM_PID"); s2=0; [[ $path == sbc ]] && s2=$(cpu_ticks "$SBC_PID")
  R[$path,regs1]=$regs1
  R[$path,regs2]=$(( $(accepted_regs) - regs1 ))
  R[$path,kam1]=$(( k1 - k0 )); R[$path,kam2]=$(( k2 - k1 ))
  R[$path,sbc1]=$(( s1 - s0 )); R[$path,sbc2]=$(( s2 - s1 ))
  R[$path,ok]=$(csv_last "$WORK/stat-$path.csv" 'SuccessfulCall(C)')
  R[$path,failed]=$(csv_last "$WORK/stat-$path.csv" 'FailedCall(C)')
  if [[ $path == sbc ]]; then
    # The phones' transactions end 64·T1 (32 s) after their last answer: what stays is the
    # bindings.
    log "sbc: waiting 35 s for the transactions to end before reading the heap"
    sleep 35
    h1=$(sbc_heap)
    R[sbc,heap]=$(awk -v a="$h0" -v b="$h1" -v n="$PHONES" 'BEGIN { printf "%.0f", (b - a) / n }')
    R[sbc,forwarded]=$(sbc_count forwarded); R[sbc,absorbed]=$(sbc_count absorbed)
    R[sbc,bindings]=$(sbc_json "show registrations" | sed -n 's/.*"bindings": *\([0-9][0-9]*\).*/\1/p' | head -1)
    stop_pid "$SBC_PID" 10
  fi
  stop_kamailio
}

run_path kamailio
run_path sbc

us() { awk -v t="$1" -v n="$2" -v hz="$TICK" 'BEGIN { if (n > 0) printf "%.1f", t * 1e6 / hz / n; else print "n/a" }'; }
{
  echo "# Registration storm: $PHONES phones at $RATE REGISTERs/s, then their refreshes"
  echo
  echo "$STAMP, sbc $(repo_rev "$ROOT"), $(nproc) cores. Command: \`PHONES=$PHONES RATE=$RATE lab/bench/register-storm.sh\`."
  echo "Each phone registers, then refreshes ${PAUSE_MS} ms later on the same Call-ID (CSeq 2)."
  echo "CPU per phone is the process tree's utime + stime over the pass, divided by the phones."
  echo
  echo "| path | pass | REGISTERs the registrar accepted | sbc CPU per phone (µs) | Kamailio CPU per phone (µs) |"
  echo "|---|---|---:|---:|---:|"
  for path in kamailio sbc; do
    echo "| $path | register | ${R[$path,regs1]} | $( [[ $path == sbc ]] && us "${R[sbc,sbc1]}" "$PHONES" || echo -) | $(us "${R[$path,kam1]}" "$PHONES") |"
    echo "| $path | refresh | ${R[$path,regs2]} | $( [[ $path == sbc ]] && us "${R[sbc,sbc2]}" "$PHONES" || echo -) | $(us "${R[$path,kam2]}" "$PHONES") |"
  done
  echo
  echo "SIPp: kamailio path ${R[kamailio,ok]:-?} phones registered and refreshed, ${R[kamailio,failed]:-?} failed; sbc path ${R[sbc,ok]:-?}, ${R[sbc,failed]:-?} failed."
  echo "The sbc's cache: ${R[sbc,bindings]:-?} bindings, REGISTERs forwarded ${R[sbc,forwarded]:-?}, answered from the cache ${R[sbc,absorbed]:-?}."
  echo "The sbc's heap (jemalloc \`stats.allocated\`, \`show memory\`): **${R[sbc,heap]:-?} bytes per binding** (its growth from before the storm to 35 s after the last refresh, when the transactions have ended, over $PHONES bindings)."
  kr=$(awk -v a="${R[kamailio,regs2]}" -v b="${R[sbc,regs2]}" 'BEGIN { if (a > 0) printf "%.3f", b / a; else print "n/a" }')
  echo
  echo "Refreshes reaching the registrar, sbc ÷ straight: **$kr**."
} | tee "$OUT"
log "report: $OUT"
