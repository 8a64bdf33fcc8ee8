#!/usr/bin/env bash
# tls-vs-kamailio.sh: SIP over TLS, our SBC vs Kamailio (Debian's kamailio-tls-modules), side by
# side in one run, on loopback: TLS handshakes per second and the relay's CPU per handshake, CPU
# per call over TLS, and an interop check with Kamailio as the SBC's TLS peer.
#
# Usage (from anywhere inside the repo):
#   cargo build --release -p sbc -p sbc-lab && lab/bench/tls-vs-kamailio.sh
#   QUICK=1 lab/bench/tls-vs-kamailio.sh                  # smoke run, under a minute
#   RELAYS=kamailio INTEROP=0 lab/bench/tls-vs-kamailio.sh   # Kamailio alone (no sbc needed)
#
#   handshakes: sbc-lab tls-handshakes --target RELAY --ca ca.pem --server-name sbc.lab -c N
#               (closed loop of N connections: connect, full TLS handshake, close)
#     kamailio: kamailio -f lab/bench/kamailio-tls.cfg (TLS 127.0.0.1:$KAM_TLS_PORT)
#     sbc:      sbc run (access realm: TLS 127.0.0.1:$SBC_TLS_PORT, tls-profile "edge")
#   calls:      sbc-lab uac -t tls ──TLS──► relay ──TLS──► sbc-lab uas -t tls (127.0.0.1:$UAS_PORT)
#   interop:    sbc-lab uac ──TLS──► sbc ──TLS──► Kamailio ──TLS──► sbc-lab uas
#
# Both relays present the same certificate in the handshake and call steps (the lab PKI's
# sbc.pem, ECDSA P-256, SAN sbc.lab and 127.0.0.1, one CA): the same signature and key exchange
# work per handshake, only the implementations differ. In the interop step Kamailio presents
# kamailio.pem (SAN kamailio.lab, issued here from the same CA) and the SBC verifies that name.
#
# Environment (defaults in brackets; QUICK=1 defaults in braces):
#   RELAYS          relays to run, in order                        ["kamailio sbc"]
#   HS_CONCURRENCY  handshake steps: connections in flight         ["1 8 32"] {"8"}
#   HS_DURATION     seconds per handshake step                     [10] {3}
#   HS_OPTIONS=1    each connection also carries one SIP OPTIONS and waits for the response [0]
#   RATES           call steps: calls/s                            ["100 300"] {"100"}
#   DURATION        seconds of offered calls per call step        [10] {4}
#   HOLD            call hold time (UAC: 200 -> BYE)               [1s]
#   RING            UAS: 180 -> 200 delay                          [100ms]
#   INTEROP=0       skip the interop step (needs sbc and kamailio) [1]
#   INTEROP_RATE, INTEROP_CALLS   interop calls/s and calls        [20, 200] {20, 60}
#   KAM_TCP_CHILDREN  Kamailio's TLS workers                       [1]
#                   (2 corrupts its shared memory under concurrent handshakes: Kamailio 5.6.3
#                   with OpenSSL 3, kamailio/kamailio#3791; the step reports the CRITICAL lines)
#   SBC_WORKERS     the sbc's [sip-config] workers                 [2]
#   PORT_BASE       ports PORT_BASE+0..90 on 127.0.0.1 (TCP and UDP): sbc access 60 (tls 61),
#                   core 62 (tls 63), kamailio 71, uas 81, uac 90  [62000]
#   PKI_DIR         an existing lab PKI (sbc-lab tls-certs)        [fresh, in the scratch dir]
#   KAMAILIO, SBC_BIN, SBC_LAB   binaries   [/usr/sbin/kamailio, target/release/{sbc,sbc-lab}]
#   OUT_DIR         results                                        [<repo>/lab/results]
#   KEEP_WORK=1     keep the scratch dir (logs, JSON outputs) even on success
#
# Kamailio's TLS module (kamailio-tls-modules) is installed with apt-get when missing and the
# script runs as root, as ./run-tests.sh does for the test suite's packages.
#
# Output: $OUT_DIR/tls-<UTC>.{md,csv,svg}; the Markdown also on stdout; progress on stderr.
# A benchmark, not a test: exit 0 whenever the run completed (failed handshakes or calls are
# reported); 2 on bad setup (missing binary, busy port).
set -euo pipefail
BENCH_NAME=tls-bench

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(git -C "$SCRIPT_DIR" rev-parse --show-toplevel 2>/dev/null || (cd "$SCRIPT_DIR/../.." && pwd))
# shellcheck source=lab/bench/lib.sh
source "$SCRIPT_DIR/lib.sh"

QUICK=${QUICK:-0}
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
KAMAILIO=${KAMAILIO:-/usr/sbin/kamailio}
KAMAILIO_CFG=$SCRIPT_DIR/kamailio-tls.cfg
SBC_BIN=${SBC_BIN:-$TARGET/release/sbc}
SBC_LAB=${SBC_LAB:-$TARGET/release/sbc-lab}
RELAYS=${RELAYS:-"kamailio sbc"}
if [[ $QUICK == 1 ]]; then
  HS_CONCURRENCY=${HS_CONCURRENCY:-"8"}; HS_DURATION=${HS_DURATION:-3}
  RATES=${RATES:-"100"}; DURATION=${DURATION:-4}; INTEROP_CALLS=${INTEROP_CALLS:-60}
fi
HS_CONCURRENCY=${HS_CONCURRENCY:-"1 8 32"}
HS_DURATION=${HS_DURATION:-10}
HS_OPTIONS=${HS_OPTIONS:-0}
RATES=${RATES:-"100 300"}
DURATION=${DURATION:-10}
HOLD=${HOLD:-1s}
RING=${RING:-100ms}
INTEROP=${INTEROP:-1}
INTEROP_RATE=${INTEROP_RATE:-20}
INTEROP_CALLS=${INTEROP_CALLS:-200}
KAM_TCP_CHILDREN=${KAM_TCP_CHILDREN:-1}
SBC_WORKERS=${SBC_WORKERS:-2}
PORT_BASE=${PORT_BASE:-62000}
OUT_DIR=${OUT_DIR:-$ROOT/lab/results}
STAMP=$(date -u +%Y-%m-%dT%H%M%SZ)
BASE=$OUT_DIR/tls-$STAMP

IP=127.0.0.1
SBC_PORT=$(( PORT_BASE + 60 ))
SBC_TLS_PORT=$(( PORT_BASE + 61 ))
SBC_CORE_PORT=$(( PORT_BASE + 62 ))
SBC_CORE_TLS_PORT=$(( PORT_BASE + 63 ))
KAM_TLS_PORT=$(( PORT_BASE + 71 ))
UAS_PORT=$(( PORT_BASE + 81 ))
UAC_PORT=$(( PORT_BASE + 90 ))
SERVER_NAME=sbc.lab        # in the lab PKI's sbc.pem; both relays present it
UAS_NAME=uas.lab
KAM_NAME=kamailio.lab      # Kamailio's own certificate, interop step
CLK_TCK=$(getconf CLK_TCK)

# ---------------------------------------------------------------- checks ---
for v in HS_DURATION DURATION INTEROP_RATE INTEROP_CALLS KAM_TCP_CHILDREN SBC_WORKERS PORT_BASE; do
  is_uint "${!v}" && (( ${!v} > 0 )) || die "$v must be a positive integer"
done
(( PORT_BASE >= 1024 && PORT_BASE + 90 < 65536 )) || die "PORT_BASE must leave PORT_BASE+90 below 65536"
for c in $HS_CONCURRENCY; do is_uint "$c" && (( c > 0 )) || die "bad number in HS_CONCURRENCY: $c"; done
for r in $RATES; do is_uint "$r" && (( r > 0 )) || die "bad rate in RATES: $r"; done
[[ $HS_OPTIONS == [01] && $INTEROP == [01] && $QUICK == [01] ]] || die "HS_OPTIONS, INTEROP and QUICK are 0 or 1"

KAM_TLS_SO=/usr/lib/x86_64-linux-gnu/kamailio/modules/tls.so
need_kamailio() {
  [[ -x $KAMAILIO && -r $KAM_TLS_SO ]] && return 0
  if [[ $(id -u) == 0 ]]; then
    log "installing kamailio kamailio-tls-modules (Debian packages)"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq kamailio kamailio-tls-modules >/dev/null
  fi
  [[ -x $KAMAILIO && -r $KAM_TLS_SO ]] || die "kamailio with its TLS module is needed: apt-get install -y kamailio kamailio-tls-modules"
}
for relay in $RELAYS; do
  case $relay in
    kamailio) need_kamailio ;;
    sbc) [[ -x $SBC_BIN ]] || die "$SBC_BIN not found: cargo build --release -p sbc (or RELAYS=kamailio INTEROP=0)" ;;
    *) die "unknown relay '$relay' in RELAYS (kamailio, sbc)" ;;
  esac
done
if (( INTEROP )); then
  need_kamailio
  [[ -x $SBC_BIN ]] || die "$SBC_BIN not found: the interop step needs the sbc (or INTEROP=0)"
fi
[[ -x $SBC_LAB ]] || die "$SBC_LAB not found: cargo build --release -p sbc-lab (or set SBC_LAB)"
for t in ss jq openssl timeout; do command -v "$t" >/dev/null || die "$t not found"; done

tcp_port_busy() { [[ -n $(ss -Hltn "sport = :$1" 2>/dev/null) ]]; }
for p in $SBC_PORT $SBC_TLS_PORT $SBC_CORE_PORT $SBC_CORE_TLS_PORT $KAM_TLS_PORT $UAS_PORT $UAC_PORT; do
  tcp_port_busy "$p" && die "TCP port $p is already listened on (ss -ltnp 'sport = :$p'); set PORT_BASE"
  udp_port_busy "$p" && die "UDP port $p is already bound (ss -lunp 'sport = :$p'); set PORT_BASE"
done
# tcp_listened_by PORT PID: PORT is listened on by PID or one of its descendants.
tcp_listened_by() {
  local line p; line=$(ss -Hltnp "sport = :$1" 2>/dev/null)
  [[ -n $line ]] || return 1
  for p in $(tree_pids "$2"); do [[ $line == *"pid=$p,"* ]] && return 0; done
  return 1
}

WORK=$(mktemp -d "${TMPDIR:-/tmp}/tls-bench.XXXXXX")
mkdir -p "$OUT_DIR"

# ------------------------------------------------------- process control ---
RELAY_PID=""; UAS_PID=""; LOAD_PID=""; PEER_PID=""
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  stop_pid "$LOAD_PID" 3; stop_pid "$UAS_PID" 3; stop_pid "$RELAY_PID" 5; stop_pid "$PEER_PID" 5
  if (( rc == 0 )) && [[ ${KEEP_WORK:-0} != 1 ]]; then rm -rf "$WORK"
  else log "scratch files kept in $WORK"; fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# children_cpu VAR: user+sys CPU seconds of this shell's reaped children so far (bash `times`,
# in this shell, not a subshell).
children_cpu() {
  times >"$WORK/times.txt"
  printf -v "$1" '%s' "$(awk 'NR == 2 { t = 0; for (i = 1; i <= 2; i++) { split($i, a, /[ms]/); t += a[1] * 60 + a[2] }; printf "%.2f", t }' "$WORK/times.txt")"
}

# ------------------------------------------------------------------- PKI ---
PKI=${PKI_DIR:-$WORK/pki}
if [[ -z ${PKI_DIR:-} ]]; then
  "$SBC_LAB" tls-certs --out "$PKI" >"$WORK/tls-certs.out" || die "sbc-lab tls-certs failed"
fi
for f in ca.pem ca-key.pem sbc.pem sbc-key.pem uas.pem uas-key.pem; do
  [[ -r $PKI/$f ]] || die "$PKI/$f missing (a lab PKI from sbc-lab tls-certs)"
done
# Kamailio's own certificate for the interop step: ECDSA P-256 like the lab's, from its CA.
if [[ ! -r $PKI/kamailio.pem ]]; then
  openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=$KAM_NAME" \
    -keyout "$PKI/kamailio-key.pem" -out "$WORK/kamailio.csr" 2>/dev/null
  printf 'subjectAltName=DNS:%s,IP:%s\nbasicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth,clientAuth\n' \
    "$KAM_NAME" "$IP" >"$WORK/kamailio.ext"
  openssl x509 -req -in "$WORK/kamailio.csr" -CA "$PKI/ca.pem" -CAkey "$PKI/ca-key.pem" \
    -CAcreateserial -CAserial "$WORK/ca.srl" -days 30 -sha256 -extfile "$WORK/kamailio.ext" \
    -out "$PKI/kamailio.pem" 2>/dev/null || die "cannot issue kamailio.pem from $PKI/ca.pem"
fi

# -------------------------------------------------------------- configs ---
# kam_tls_cfg FILE CERT_STEM: Kamailio's tls.cfg: server side presents CERT_STEM, asks no client
# certificate; client side (to the UAS) verifies the UAS's chain against the lab CA, SNI uas.lab.
kam_tls_cfg() {
  cat >"$1" <<EOF
[server:default]
method = TLSv1.2+
verify_certificate = no
require_certificate = no
certificate = $PKI/$2.pem
private_key = $PKI/$2-key.pem

[client:default]
method = TLSv1.2+
verify_certificate = yes
require_certificate = yes
ca_list = $PKI/ca.pem
server_name = $UAS_NAME
EOF
}
kam_tls_cfg "$WORK/kamailio-tls.cfg" sbc
kam_tls_cfg "$WORK/kamailio-tls-interop.cfg" kamailio

# sbc_config FILE AGENT_PORT AGENT_NAME: access and core realms over TLS (the lead's
# tls-profile schema), the core session-agent dialled over TLS and verified as AGENT_NAME.
sbc_config() {
  cat >"$1" <<EOF
[sip-config]
workers = $SBC_WORKERS

[[tls-profile]]
name = "edge"
end-entity-certificate = "$PKI/sbc.pem"
private-key = "$PKI/sbc-key.pem"
trusted-ca-certificates = ["$PKI/ca.pem"]
mutual-authenticate = false
tls-version = "compatibility"

[[sip-interface]]
realm = "access"
address = "$IP"
port = $SBC_PORT
transports = ["udp", "tls"]
tls-port = $SBC_TLS_PORT
tls-profile = "edge"

[[sip-interface]]
realm = "core"
address = "$IP"
port = $SBC_CORE_PORT
transports = ["udp", "tls"]
tls-port = $SBC_CORE_TLS_PORT
tls-profile = "edge"

[[session-agent]]
name = "core"
realm = "core"
address = "$IP"
port = $2
transport = "tls"
tls-profile = "edge"
tls-server-name = "$3"

[session-router]
default-route = "core"
EOF
}
sbc_config "$WORK/sbc.toml" "$UAS_PORT" "$UAS_NAME"
sbc_config "$WORK/sbc-interop.toml" "$KAM_TLS_PORT" "$KAM_NAME"

# ------------------------------------------------------------ components ---
# start_kamailio TAG TLS_CFG: sets the PID into the variable named by $3 (RELAY_PID / PEER_PID).
start_kamailio() {
  local tag=$1 cfg=$2 var=$3 pid
  "$KAMAILIO" -f "$KAMAILIO_CFG" -DD -E -m 1024 -M 16 \
    -A "TLS_PORT=$KAM_TLS_PORT" -A "UAS_URI=\"sip:$IP:$UAS_PORT;transport=tls\"" \
    -A "TLS_CFG=\"$cfg\"" -A "TCP_CHILDREN=$KAM_TCP_CHILDREN" \
    >"$WORK/$tag-kamailio.log" 2>&1 </dev/null &
  pid=$!
  printf -v "$var" '%s' "$pid"
  # The TLS socket is listened on by Kamailio's TCP main process, a child of the PID started.
  wait_until 15 tcp_listened_by "$KAM_TLS_PORT" "$pid" || die "kamailio did not listen on $IP:$KAM_TLS_PORT (see $WORK/$tag-kamailio.log)"
  sleep 0.5
}
sbc_ready_in() { sbc_ready "$1"; }
# start_sbc TAG CONFIG: RELAY_PID, SBC_MGMT.
start_sbc() {
  local tag=$1 cfg=$2
  mkdir -p -m 0700 "$WORK/mgmt-$tag"
  SBC_MGMT=$WORK/mgmt-$tag/m.sock
  RUST_LOG=${RUST_LOG:-warn} "$SBC_BIN" run --config "$cfg" --mgmt-socket "$SBC_MGMT" \
    >"$WORK/$tag-sbc.log" 2>&1 </dev/null &
  RELAY_PID=$!
  wait_until 15 sbc_ready_in "$WORK/$tag-sbc.log" || die "sbc did not print 'sbc ready' (see $WORK/$tag-sbc.log)"
  wait_until 5 tcp_listened_by "$SBC_TLS_PORT" "$RELAY_PID" || die "sbc does not listen on TLS $IP:$SBC_TLS_PORT (see $WORK/$tag-sbc.log)"
}
# start_relay RELAY TAG: RELAY_PID, RELAY_TLS (the relay's TLS address).
start_relay() {
  case $1 in
    kamailio) start_kamailio "$2" "$WORK/kamailio-tls.cfg" RELAY_PID; RELAY_TLS=$IP:$KAM_TLS_PORT ;;
    sbc) start_sbc "$2" "$WORK/sbc.toml"; RELAY_TLS=$IP:$SBC_TLS_PORT ;;
  esac
  alive "$RELAY_PID" || die "$1 exited at start (see $WORK/$2-*.log)"
}
start_uas() {
  local tag=$1
  "$SBC_LAB" uas -t tls -l "$IP:$UAS_PORT" --tls-cert "$PKI/uas.pem" --tls-key "$PKI/uas-key.pem" \
    --tls-ca "$PKI/ca.pem" --ring "$RING" --hold "$HOLD" \
    >"$WORK/$tag-uas.out" 2>&1 </dev/null &
  UAS_PID=$!
  wait_until 10 tcp_listened_by "$UAS_PORT" "$UAS_PID" || die "UAS did not listen on TLS $IP:$UAS_PORT (see $WORK/$tag-uas.out)"
}
# Kamailio's memory-corruption reports in a log (its TLS module with OpenSSL 3, more than one
# worker: "qm_free(): BUG: freeing already freed pointer", "fragm. ... overwritten") and workers
# it lost ("child process N exited by a signal"); not the "receive_fd(): EOF" of a normal stop.
kam_critical() { local n; n=$(grep -c -E 'BUG:|exited by a signal' "$1" 2>/dev/null) || true; echo "${n:-0}"; }
relay_log() { ls "$WORK/$1"-{kamailio,sbc}.log 2>/dev/null | head -1; }

declare -A R=()
jget() { jq -r "$2 // empty" "$1" 2>/dev/null || true; }

# ------------------------------------------------------------ handshakes ---
run_handshakes() {   # RELAY CONCURRENCY
  local relay=$1 c=$2 tag="hs-$1-$2" rc=0 c0 c1 u0 u1 out
  log "handshakes: $relay, $c at once, ${HS_DURATION}s"
  start_relay "$relay" "$tag"
  out=$WORK/$tag.json
  local -a extra=()
  (( HS_OPTIONS )) && extra+=(--options)
  c0=$(cpu_ticks "$RELAY_PID"); children_cpu u0
  "$SBC_LAB" tls-handshakes --target "$RELAY_TLS" --ca "$PKI/ca.pem" --server-name "$SERVER_NAME" \
    -c "$c" -d "${HS_DURATION}s" "${extra[@]}" >"$out" 2>"$WORK/$tag.err" </dev/null &
  LOAD_PID=$!
  wait "$LOAD_PID" || rc=$?
  LOAD_PID=""
  children_cpu u1; c1=$(cpu_ticks "$RELAY_PID")
  alive "$RELAY_PID" || log "WARNING: $relay died during the step (see $(relay_log "$tag"))"
  R[hs,$relay,$c,alive]=$(alive "$RELAY_PID" && echo yes || echo "no (died)")
  stop_pid "$RELAY_PID" 5; RELAY_PID=""
  R[hs,$relay,$c,rc]=$rc
  R[hs,$relay,$c,completed]=$(jget "$out" .completed)
  R[hs,$relay,$c,failed]=$(jget "$out" .failed)
  R[hs,$relay,$c,rate]=$(jget "$out" '.handshakes_per_s | . * 10 | round / 10')
  R[hs,$relay,$c,p50]=$(jget "$out" '.handshake_ms.p50 | . * 100 | round / 100')
  R[hs,$relay,$c,p99]=$(jget "$out" '.handshake_ms.p99 | . * 100 | round / 100')
  R[hs,$relay,$c,negotiated]=$(jq -r '.negotiated | keys | join(", ")' "$out" 2>/dev/null || true)
  R[hs,$relay,$c,failures]=$(jq -r '.failures | to_entries | map("\(.key): \(.value)") | join("; ")' "$out" 2>/dev/null || true)
  # A relay that lost processes during the step took their CPU counters with it: no figure.
  R[hs,$relay,$c,cpu]=$( [[ ${R[hs,$relay,$c,alive]} == yes ]] && awk -v d=$(( c1 - c0 )) -v hz="$CLK_TCK" 'BEGIN { printf "%.2f", d / hz }' || echo n/a)
  R[hs,$relay,$c,driver_cpu]=$(awk -v a="$u0" -v b="$u1" 'BEGIN { printf "%.2f", b - a }')
  R[hs,$relay,$c,cpu_us]=$(awk -v s="${R[hs,$relay,$c,cpu]}" -v n="${R[hs,$relay,$c,completed]:-0}" 'BEGIN { if (n > 0 && s != "n/a") printf "%.0f", s * 1e6 / n; else print "n/a" }')
  R[hs,$relay,$c,critical]=$( [[ $relay == kamailio ]] && kam_critical "$WORK/$tag-kamailio.log" || echo 0)
  log "  $relay c=$c: ${R[hs,$relay,$c,completed]:-?} handshakes (${R[hs,$relay,$c,rate]:-?}/s), failed ${R[hs,$relay,$c,failed]:-?}, relay CPU ${R[hs,$relay,$c,cpu]} s (${R[hs,$relay,$c,cpu_us]} µs each), driver CPU ${R[hs,$relay,$c,driver_cpu]} s"
}

# ------------------------------------------------------------------ calls ---
# run_uac TAG TARGET RATE CALLS [uac args...]: the UAC's JSON in $WORK/TAG-uac.json; sets UAC_RC.
run_uac() {
  local tag=$1 target=$2 rate=$3 calls=$4; shift 4
  UAC_RC=0
  "$SBC_LAB" uac "$target" -t tls -l "$IP:$UAC_PORT" --tls-ca "$PKI/ca.pem" \
    --tls-server-name "$SERVER_NAME" -r "$rate" -m "$calls" --hold "$HOLD" \
    --max-concurrent $(( rate * 5 + 100 )) --max-time "$(( calls / rate * 3 + 60 ))s" --json "$@" \
    >"$WORK/$tag-uac.json" 2>"$WORK/$tag-uac.err" </dev/null &
  LOAD_PID=$!
  wait "$LOAD_PID" || UAC_RC=$?
  LOAD_PID=""
}

run_calls() {   # RELAY RATE
  local relay=$1 rate=$2 tag="calls-$1-$2" calls=$(( $2 * DURATION )) c0 c1 u0 u1 t0 t1 out
  log "calls: $relay at $rate calls/s for ${DURATION}s ($calls calls, held $HOLD)"
  start_uas "$tag"
  start_relay "$relay" "$tag"
  c0=$(cpu_ticks "$RELAY_PID"); children_cpu u0; t0=$(date +%s.%N)
  run_uac "$tag" "$RELAY_TLS" "$rate" "$calls"
  t1=$(date +%s.%N); children_cpu u1; c1=$(cpu_ticks "$RELAY_PID")
  alive "$RELAY_PID" || log "WARNING: $relay died during the step (see $(relay_log "$tag"))"
  R[calls,$relay,$rate,alive]=$(alive "$RELAY_PID" && echo yes || echo "no (died)")
  stop_pid "$UAS_PID" 3; UAS_PID=""
  stop_pid "$RELAY_PID" 5; RELAY_PID=""
  out=$WORK/$tag-uac.json
  R[calls,$relay,$rate,rc]=$UAC_RC
  R[calls,$relay,$rate,attempted]=$(jget "$out" .attempted)
  R[calls,$relay,$rate,completed]=$(jget "$out" .completed)
  R[calls,$relay,$rate,failed]=$(jget "$out" .failed)
  R[calls,$relay,$rate,failures]=$(jq -r '.failures | to_entries | map("\(.key): \(.value)") | join("; ")' "$out" 2>/dev/null || true)
  R[calls,$relay,$rate,p99]=$(jget "$out" '.invite_to_first_response.p99_ms')
  # completed ÷ the seconds of offered traffic (the run itself also holds the last calls)
  R[calls,$relay,$rate,cps]=$(awk -v n="${R[calls,$relay,$rate,completed]:-0}" -v d="$DURATION" 'BEGIN { printf "%.1f", n / d }')
  R[calls,$relay,$rate,wall]=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
  R[calls,$relay,$rate,cpu]=$( [[ ${R[calls,$relay,$rate,alive]} == yes ]] && awk -v d=$(( c1 - c0 )) -v hz="$CLK_TCK" 'BEGIN { printf "%.2f", d / hz }' || echo n/a)
  R[calls,$relay,$rate,uac_cpu]=$(awk -v a="$u0" -v b="$u1" 'BEGIN { printf "%.2f", b - a }')
  R[calls,$relay,$rate,cpu_us]=$(awk -v s="${R[calls,$relay,$rate,cpu]}" -v n="${R[calls,$relay,$rate,completed]:-0}" 'BEGIN { if (n > 0 && s != "n/a") printf "%.0f", s * 1e6 / n; else print "n/a" }')
  R[calls,$relay,$rate,critical]=$( [[ $relay == kamailio ]] && kam_critical "$WORK/$tag-kamailio.log" || echo 0)
  log "  $relay@$rate: ${R[calls,$relay,$rate,completed]:-?} of ${R[calls,$relay,$rate,attempted]:-?} calls completed, failed ${R[calls,$relay,$rate,failed]:-?}, relay CPU ${R[calls,$relay,$rate,cpu]} s (${R[calls,$relay,$rate,cpu_us]} µs a call)"
}

# ---------------------------------------------------------------- interop ---
run_interop() {
  local tag=interop out
  log "interop: lab UAC --TLS--> sbc --TLS--> Kamailio --TLS--> lab UAS, $INTEROP_CALLS calls at $INTEROP_RATE/s"
  start_uas "$tag"
  start_kamailio "$tag" "$WORK/kamailio-tls-interop.cfg" PEER_PID
  start_sbc "$tag" "$WORK/sbc-interop.toml"
  run_uac "$tag" "$IP:$SBC_TLS_PORT" "$INTEROP_RATE" "$INTEROP_CALLS"
  "$SBC_BIN" acli --mgmt-socket "$SBC_MGMT" --json -c "show sip-stats" >"$WORK/$tag-sip-stats.json" 2>/dev/null || true
  R[interop,sbc_alive]=$(alive "$RELAY_PID" && echo yes || echo "no (died)")
  R[interop,kam_alive]=$(alive "$PEER_PID" && echo yes || echo "no (died)")
  stop_pid "$UAS_PID" 3; UAS_PID=""
  stop_pid "$RELAY_PID" 5; RELAY_PID=""
  stop_pid "$PEER_PID" 5; PEER_PID=""
  out=$WORK/$tag-uac.json
  R[interop,rc]=$UAC_RC
  R[interop,attempted]=$(jget "$out" .attempted)
  R[interop,completed]=$(jget "$out" .completed)
  R[interop,failed]=$(jget "$out" .failed)
  R[interop,failures]=$(jq -r '.failures | to_entries | map("\(.key): \(.value)") | join("; ")' "$out" 2>/dev/null || true)
  R[interop,tls]=$(jq -c '.. | objects | select(has("tls")) | .tls' "$WORK/$tag-sip-stats.json" 2>/dev/null | head -1 || true)
  R[interop,critical]=$(kam_critical "$WORK/$tag-kamailio.log")
  # Kamailio's verdict on the SBC's client side and the SBC's on Kamailio's certificate: any TLS
  # error either logged.
  R[interop,kam_tls_errors]=$(grep -c 'ERROR: tls' "$WORK/$tag-kamailio.log" 2>/dev/null || true)
  log "  interop: ${R[interop,completed]:-?} of ${R[interop,attempted]:-?} calls completed, failed ${R[interop,failed]:-?}"
}

# -------------------------------------------------------------------- run ---
for c in $HS_CONCURRENCY; do
  for relay in $RELAYS; do run_handshakes "$relay" "$c"; sleep 1; done
done
for rate in $RATES; do
  for relay in $RELAYS; do run_calls "$relay" "$rate"; sleep 1; done
done
(( INTEROP )) && run_interop

# ----------------------------------------------------------------- report ---
num() { [[ -n ${1:-} ]] && echo "$1" || echo "n/a"; }
ratio() { awk -v a="${1:-n/a}" -v b="${2:-n/a}" 'BEGIN { if (a != "n/a" && b != "n/a" && a != "" && b != "" && b > 0) printf "%.2f", a / b; else print "n/a" }'; }
both() { [[ " $RELAYS " == *" sbc "* && " $RELAYS " == *" kamailio "* ]]; }

CSV=$BASE.csv
echo "step,relay,kind,value,relay_cpu_us,p99_ms,completed,failed,relay_cpu_s,load_cpu_s" >"$CSV"
for c in $HS_CONCURRENCY; do
  for relay in $RELAYS; do
    echo "handshakes c=$c,$relay,handshakes_per_s,${R[hs,$relay,$c,rate]:-},${R[hs,$relay,$c,cpu_us]},${R[hs,$relay,$c,p99]:-},${R[hs,$relay,$c,completed]:-},${R[hs,$relay,$c,failed]:-},${R[hs,$relay,$c,cpu]},${R[hs,$relay,$c,driver_cpu]}" >>"$CSV"
  done
done
for rate in $RATES; do
  for relay in $RELAYS; do
    echo "calls $rate/s,$relay,calls_per_s,${R[calls,$relay,$rate,cps]:-},${R[calls,$relay,$rate,cpu_us]},${R[calls,$relay,$rate,p99]:-},${R[calls,$relay,$rate,completed]:-},${R[calls,$relay,$rate,failed]:-},${R[calls,$relay,$rate,cpu]},${R[calls,$relay,$rate,uac_cpu]}" >>"$CSV"
  done
done
sed -i 's/,n\/a/,/g' "$CSV"

SVG=$BASE.svg
"$SBC_LAB" chart bars "$CSV" -o "$SVG" --x step --group relay \
  --title "SIP over TLS: $(echo "$RELAYS" | sed 's/ / vs /g')" \
  --subtitle "loopback, 2 cores shared with the load generators ($STAMP)\\nhandshakes: full handshakes, closed loop of c connections, ${HS_DURATION}s; calls: lab UAC -TLS- relay -TLS- lab UAS, ${DURATION}s, held $HOLD" \
  --panel "Handshakes/s (handshake steps) | calls/s completed (call steps)=value;height=140" \
  --panel "Relay CPU per handshake | per call (µs)=relay_cpu_us;height=140" \
  --panel "Handshake p99 | INVITE to first response p99 (ms)=p99_ms;height=120" \
  --panel "Failed handshakes | failed calls=failed;height=100" \
  || log "WARNING: chart failed"

MD=$BASE.md
GIT_REV=$(repo_rev "$ROOT")
KAM_VERSION=$( { "$KAMAILIO" -v 2>&1 || true; } | head -n1 | sed 's/^version: //; s/ *$//')
SSL_VERSION=$(openssl version 2>/dev/null || echo "OpenSSL ?")
CMDLINE="RELAYS=\"$RELAYS\" HS_CONCURRENCY=\"$HS_CONCURRENCY\" HS_DURATION=$HS_DURATION HS_OPTIONS=$HS_OPTIONS RATES=\"$RATES\" DURATION=$DURATION HOLD=$HOLD INTEROP=$INTEROP KAM_TCP_CHILDREN=$KAM_TCP_CHILDREN SBC_WORKERS=$SBC_WORKERS lab/bench/tls-vs-kamailio.sh"
{
  echo "# SIP over TLS: $(echo "$RELAYS" | sed 's/ / vs /g') ($STAMP)"
  echo
  echo "- command: \`$CMDLINE\`"
  echo "- machine: $(nproc) cores, $(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo), $(uname -sr), load average at the report: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "- versions: $KAM_VERSION with kamailio-tls-modules ($SSL_VERSION); sbc \`$SBC_BIN\` (rustls 0.23, ring), repo $GIT_REV; load: \`$SBC_LAB tls-handshakes\`, \`uac\`/\`uas -t tls\` (rustls 0.23, ring)"
  [[ " $RELAYS " == *" kamailio "* ]] && echo "- kamailio: \`kamailio -f lab/bench/kamailio-tls.cfg -DD -E -m 1024 -M 16 -A TCP_CHILDREN=$KAM_TCP_CHILDREN\` (tm + rr relay, TLS $IP:$KAM_TLS_PORT, $KAM_TCP_CHILDREN TLS worker(s); tls.cfg: TLSv1.2+, presents sbc.pem, no client certificate asked, verifies the UAS's chain)"
  [[ " $RELAYS " == *" sbc "* ]] && echo "- sbc: \`sbc run\` (workers = $SBC_WORKERS; access TLS $IP:$SBC_TLS_PORT and core TLS $IP:$SBC_CORE_TLS_PORT with tls-profile \"edge\": sbc.pem, compatibility (1.2 + 1.3), no mutual TLS; core agent over TLS verified as $UAS_NAME)"
  echo "- certificates: the lab PKI (\`sbc-lab tls-certs\`): ECDSA P-256 CA and leaves; both relays present the same sbc.pem (SAN $SERVER_NAME, $IP) in the handshake and call steps"
  echo "- files: \`$(basename "$CSV")\`, \`$(basename "$SVG")\` (chart)"
  echo
  echo "## TLS handshakes"
  echo
  echo "\`sbc-lab tls-handshakes --target RELAY --ca ca.pem --server-name $SERVER_NAME -c C -d ${HS_DURATION}s$( (( HS_OPTIONS )) && echo " --options")\`: C connections at once in a closed loop, each a TCP connect, a full handshake (no session resumption offered), $( (( HS_OPTIONS )) && echo "one OPTIONS answered, ")close_notify and FIN. Relay CPU: utime+stime of its processes (/proc), over the step."
  echo
  echo "| connections at once | relay | handshakes | failed | handshakes/s | handshake p50 / p99 (ms) | relay CPU (s) | relay CPU per handshake (µs) | driver CPU (s) | negotiated | relay alive after | relay memory errors |"
  echo "|---:|---|---:|---:|---:|---|---:|---:|---:|---|---|---:|"
  for c in $HS_CONCURRENCY; do
    for relay in $RELAYS; do
      printf '| %s | %s | %s | %s | %s | %s / %s | %s | %s | %s | %s | %s | %s |\n' "$c" "$relay" \
        "$(num "${R[hs,$relay,$c,completed]:-}")" "$(num "${R[hs,$relay,$c,failed]:-}")" "$(num "${R[hs,$relay,$c,rate]:-}")" \
        "$(num "${R[hs,$relay,$c,p50]:-}")" "$(num "${R[hs,$relay,$c,p99]:-}")" "${R[hs,$relay,$c,cpu]}" "${R[hs,$relay,$c,cpu_us]}" \
        "${R[hs,$relay,$c,driver_cpu]}" "$(num "${R[hs,$relay,$c,negotiated]:-}")" "${R[hs,$relay,$c,alive]}" "${R[hs,$relay,$c,critical]}"
    done
  done
  for c in $HS_CONCURRENCY; do
    for relay in $RELAYS; do
      [[ -n ${R[hs,$relay,$c,failures]:-} ]] && echo && echo "- $relay, $c at once, failures: ${R[hs,$relay,$c,failures]}"
    done
  done
  if [[ " $RELAYS " == *" kamailio "* ]] && (( KAM_TCP_CHILDREN == 1 )); then
    echo
    echo "Kamailio runs one TLS worker process (\`KAM_TCP_CHILDREN=1\`): with two, Kamailio 5.6.3 on OpenSSL 3 corrupts its shared memory under concurrent handshakes (\`qm_free(): BUG: freeing already freed pointer\` from the tls module, then a worker aborts: kamailio/kamailio#3791, fixed in 5.8 with \`tls_threads_mode\`). Its handshakes/s is therefore one core's worth at most, while the sbc may use both: compare the CPU per handshake."
  fi
  if both; then
    echo
    echo "| connections at once | handshakes/s, sbc ÷ kamailio | relay CPU per handshake, sbc ÷ kamailio |"
    echo "|---:|---:|---:|"
    for c in $HS_CONCURRENCY; do
      printf '| %s | %s | %s |\n' "$c" "$(ratio "${R[hs,sbc,$c,rate]:-}" "${R[hs,kamailio,$c,rate]:-}")" "$(ratio "${R[hs,sbc,$c,cpu_us]}" "${R[hs,kamailio,$c,cpu_us]}")"
    done
  fi
  echo
  echo "## Calls over TLS"
  echo
  echo "\`sbc-lab uac RELAY -t tls --tls-ca ca.pem --tls-server-name $SERVER_NAME -r RATE -m RATE×$DURATION --hold $HOLD\` → relay → \`sbc-lab uas -t tls --ring $RING\` ($IP:$UAS_PORT, uas.pem). The UAC carries all its calls on one TLS connection, and so does the relay toward the UAS: this is the cost of SIP over established TLS connections (records, framing, routing), two handshakes in all. CPU per call: the relay's utime+stime over the UAC's run ÷ calls completed."
  echo
  echo "| calls/s | relay | attempted | completed | failed | completed ÷ ${DURATION} s | wall (s) | INVITE → first response p99 (ms) | relay CPU (s) | relay CPU per call (µs) | UAC CPU (s) | relay alive after | relay memory errors |"
  echo "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|"
  for rate in $RATES; do
    for relay in $RELAYS; do
      printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' "$rate" "$relay" \
        "$(num "${R[calls,$relay,$rate,attempted]:-}")" "$(num "${R[calls,$relay,$rate,completed]:-}")" "$(num "${R[calls,$relay,$rate,failed]:-}")" \
        "${R[calls,$relay,$rate,cps]}" "${R[calls,$relay,$rate,wall]}" "$(num "${R[calls,$relay,$rate,p99]:-}")" "${R[calls,$relay,$rate,cpu]}" "${R[calls,$relay,$rate,cpu_us]}" \
        "${R[calls,$relay,$rate,uac_cpu]}" "${R[calls,$relay,$rate,alive]}" "${R[calls,$relay,$rate,critical]}"
    done
  done
  for rate in $RATES; do
    for relay in $RELAYS; do
      [[ -n ${R[calls,$relay,$rate,failures]:-} ]] && echo && echo "- $relay at $rate calls/s, failures: ${R[calls,$relay,$rate,failures]}"
    done
  done
  if both; then
    echo
    echo "| calls/s | relay CPU per call, sbc ÷ kamailio | failed calls, sbc − kamailio |"
    echo "|---:|---:|---:|"
    for rate in $RATES; do
      fd=$(awk -v a="${R[calls,sbc,$rate,failed]:-}" -v b="${R[calls,kamailio,$rate,failed]:-}" 'BEGIN { if (a == "" || b == "") print "n/a"; else printf "%+d", a - b }')
      printf '| %s | %s | %s |\n' "$rate" "$(ratio "${R[calls,sbc,$rate,cpu_us]}" "${R[calls,kamailio,$rate,cpu_us]}")" "$fd"
    done
  fi
  if (( INTEROP )); then
    echo
    echo "## Interop: Kamailio as the SBC's TLS peer"
    echo
    echo "lab UAC ($IP:$UAC_PORT) ──TLS──► sbc access $IP:$SBC_TLS_PORT ─ core ──TLS──► Kamailio $IP:$KAM_TLS_PORT (presents kamailio.pem, SAN $KAM_NAME; the sbc's session-agent verifies \`tls-server-name = \"$KAM_NAME\"\`) ──TLS──► lab UAS $IP:$UAS_PORT (Kamailio verifies its chain). $INTEROP_CALLS calls at $INTEROP_RATE/s, held $HOLD."
    echo
    echo "| attempted | completed | failed | sbc alive after | kamailio alive after | Kamailio TLS errors logged | Kamailio memory errors |"
    echo "|---:|---:|---:|---|---|---:|---:|"
    printf '| %s | %s | %s | %s | %s | %s | %s |\n' "$(num "${R[interop,attempted]:-}")" "$(num "${R[interop,completed]:-}")" "$(num "${R[interop,failed]:-}")" \
      "${R[interop,sbc_alive]}" "${R[interop,kam_alive]}" "${R[interop,kam_tls_errors]:-0}" "${R[interop,critical]}"
    [[ -n ${R[interop,failures]:-} ]] && echo && echo "Failures: ${R[interop,failures]}"
    [[ -n ${R[interop,tls]:-} ]] && echo && echo "The sbc's \`show sip-stats\` \`tls\` object after the calls: \`${R[interop,tls]}\`"
    if [[ ${R[interop,failed]:-x} == 0 && ${R[interop,completed]:-0} == "${INTEROP_CALLS}" ]]; then
      echo
      echo "**Interop passed**: every call completed through the sbc and Kamailio over TLS on both hops."
    else
      echo
      echo "**Interop FAILED**: see the scratch dir's interop-* logs."
    fi
  fi
  echo
  echo "Ratios are ours ÷ Kamailio's: a CPU ratio below 1 means the sbc spends less CPU per handshake or per call; a handshakes/s ratio above 1 means it completed more. On 2 cores the load generator shares the machine with the relay, so the handshakes/s of a step is bounded by the driver's own CPU too (its column): the relay CPU per handshake is the like-for-like figure. See lab/bench/README.md."
} | tee "$MD"
log "report written to $MD"
