#!/usr/bin/env bash
# routes-vs-mtree.sh: the cost of a route lookup per call with 10, 10,000 and 1,000,000
# to-address prefixes, our SBC (a local-routing-config file, the fst-indexed route table)
# against Kamailio's mtree (its in-memory prefix tree, loaded from db_text) with the same
# prefixes, side by side in one run.
#
# Usage (from anywhere inside the repo):
#   cargo build --release -p sbc && lab/bench/routes-vs-mtree.sh
#   SIZES="10 10000" RATE=300 DURATION=10 lab/bench/routes-vs-mtree.sh
#
# For each table size and each relay in turn (never two under load at once), fresh:
#   SIPp UAC (uac-numbers.xml, -inf: each call dials the next of 20,000 random 10-13 digit
#   numbers) -> relay -> SIPp built-in uas (127.0.0.1:$UAS_PORT)
# at $RATE calls/s for $DURATION s. Reported: calls, failed, the relay's CPU per call
# (utime+stime of its process tree over the load), its memory (ΣPss: shared pages counted
# once) 2 s after it is ready with the table and after the load, and its start-up time.
#   sbc:      [[local-routing-config]] with the N prefixes, every row to the UAS's agent;
#             a number no prefix matches goes by session-router's default-route (the same
#             agent)
#   kamailio: mtree "routes" over db_text with the same N prefixes; every new INVITE does
#             mt_match("routes", "$rU", "0") (longest prefix) and is relayed to the UAS
#             whatever it finds (as the reference relay config does)
# Writes lab/results/routes-<UTC date>.md. Loopback only; processes stopped by their PIDs.
set -euo pipefail
BENCH_NAME=routes
SCRIPT_DIR=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$SCRIPT_DIR/../.." && pwd)
# shellcheck source=lib.sh
source "$SCRIPT_DIR/lib.sh"

SIZES=${SIZES:-"10 10000 1000000"}
RATE=${RATE:-300}
DURATION=${DURATION:-10}
IP=127.0.0.1
UAS_PORT=${UAS_PORT:-5280}
SBC_PORT=${SBC_PORT:-5260}
SBC_CORE_PORT=${SBC_CORE_PORT:-5262}
KAM_PORT=${KAM_PORT:-5270}
UAC_PORT=${UAC_PORT:-5250}
SBC_BIN=${SBC_BIN:-$ROOT/target/release/sbc}
KAMAILIO=${KAMAILIO:-/usr/sbin/kamailio}
SIPP=${SIPP:-sipp}
[[ -x $SBC_BIN ]] || die "no $SBC_BIN: cargo build --release -p sbc"
[[ -x $KAMAILIO ]] || die "kamailio not found at $KAMAILIO (Debian package kamailio)"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/routes.XXXXXX")
PIDS=()
cleanup() { local p; for p in "${PIDS[@]}"; do stop_pid "$p" 3; done; }
trap cleanup EXIT
# ΣPss of the process tree of $1, kB: shared pages (Kamailio's shared memory, where mtree
# lives) counted once in all, not once per process as ΣVmRSS would.
mem_kb() {
  local sum=0 p v
  for p in $(tree_pids "$1"); do
    v=$(awk '$1 == "Pss:" { print $2; exit }' "/proc/$p/smaps_rollup" 2>/dev/null) || true
    sum=$(( sum + ${v:-0} ))
  done
  echo "$sum"
}

# The numbers dialled, and each table's prefixes (seeded: the same in every run).
python3 - "$WORK" $SIZES <<'PY'
import random, sys, os
work, sizes = sys.argv[1], [int(s) for s in sys.argv[2:]]
rng = random.Random(28)
with open(os.path.join(work, "numbers.csv"), "w") as f:
    f.write("SEQUENTIAL\n")
    for _ in range(20000):
        f.write("%d\n" % rng.randrange(10**9, 10**13))
for n in sizes:
    seen = set()
    while len(seen) < n:
        seen.add(str(rng.randrange(1, 10**rng.randint(3, 9))))
    with open(os.path.join(work, "routes-%d.csv" % n), "w") as f:
        for p in sorted(seen):
            f.write("%s,core\n" % p)
    os.makedirs(os.path.join(work, "db-%d" % n), exist_ok=True)
    with open(os.path.join(work, "db-%d" % n, "version"), "w") as f:
        f.write("table_name(str) table_version(int)\nroutes:1\n")
    with open(os.path.join(work, "db-%d" % n, "routes"), "w") as f:
        f.write("id(int,auto) tprefix(string) tvalue(string)\n")
        for i, p in enumerate(sorted(seen), 1):
            f.write("%d:%s:1\n" % (i, p))
PY

sbc_config() {
  cat >"$WORK/sbc-$1.toml" <<EOT
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

[session-router]
default-route = "core"

[[local-routing-config]]
name = "numbers"
file-name = "$WORK/routes-$1.csv"
source-realm = ["access"]
EOT
}
kam_config() {
  cat >"$WORK/kamailio-$1.cfg" <<EOT
#!KAMAILIO
debug=1
log_stderror=yes
fork=yes
children=2
listen=udp:$IP:$KAM_PORT
disable_tcp=yes
auto_aliases=no
dns=no
rev_dns=no
use_dns_cache=off
mpath="/usr/lib/x86_64-linux-gnu/kamailio/modules/"
loadmodule "tm.so"
loadmodule "sl.so"
loadmodule "rr.so"
loadmodule "pv.so"
loadmodule "siputils.so"
loadmodule "textops.so"
loadmodule "db_text.so"
loadmodule "mtree.so"
modparam("db_text", "max_result_rows", 2000000)
modparam("mtree", "db_url", "text://$WORK/db-$1")
modparam("mtree", "mtree", "name=routes;dbtable=routes;type=0")
modparam("mtree", "char_list", "0123456789")
modparam("mtree", "pv_value", "\$var(mtval)")
modparam("tm", "fr_timer", 5000)
request_route {
    if (is_method("CANCEL")) { if (t_check_trans()) t_relay(); exit; }
    if (has_totag()) {
        \$du = "sip:$IP:$UAS_PORT";
        if (is_method("ACK") && !t_check_trans()) { forward(); exit; }
        t_relay();
        exit;
    }
    if (is_method("INVITE")) { mt_match("routes", "\$rU", "0"); }
    \$du = "sip:$IP:$UAS_PORT";
    t_relay();
}
EOT
}

declare -A R
for n in $SIZES; do
  sbc_config "$n"; kam_config "$n"
  for relay in sbc kamailio; do
    t0=$(date +%s.%N)
    case $relay in
      sbc)
        need_free "$SBC_PORT"
        "$SBC_BIN" run --config "$WORK/sbc-$n.toml" >"$WORK/$relay-$n.log" 2>&1 </dev/null &
        RELAY_PID=$!; TARGET="$IP:$SBC_PORT"
        wait_until 120 sbc_ready "$WORK/$relay-$n.log" || die "sbc did not start (see $WORK/$relay-$n.log)" ;;
      kamailio)
        need_free "$KAM_PORT"
        "$KAMAILIO" -f "$WORK/kamailio-$n.cfg" -DD -E -m 2048 -M 16 >"$WORK/$relay-$n.log" 2>&1 </dev/null &
        RELAY_PID=$!; TARGET="$IP:$KAM_PORT"
        wait_until 120 bound_by "$KAM_PORT" "$RELAY_PID" || die "kamailio did not start (see $WORK/$relay-$n.log)"
        sleep 1 ;;
    esac
    PIDS+=("$RELAY_PID")
    R[$relay,$n,start]=$(python3 -c "import sys; print(f'{float(sys.argv[2])-float(sys.argv[1]):.1f}')" "$t0" "$(date +%s.%N)")
    sleep 2
    R[$relay,$n,rss0]=$(mem_kb "$RELAY_PID")
    need_free "$UAS_PORT"
    "$SIPP" -sn uas -i "$IP" -p "$UAS_PORT" -nostdin -timeout $(( DURATION + 40 ))s \
      >"$WORK/uas-$relay-$n.log" 2>&1 </dev/null &
    UAS_PID=$!; PIDS+=("$UAS_PID")
    wait_until 10 udp_port_busy "$UAS_PORT" || die "the UAS did not bind"
    calls=$(( RATE * DURATION ))
    c0=$(cpu_ticks "$RELAY_PID")
    "$SIPP" -sf "$SCRIPT_DIR/sipp/uac-numbers.xml" -inf "$WORK/numbers.csv" -i "$IP" -p "$UAC_PORT" \
      -r "$RATE" -m "$calls" -nostdin -timeout $(( DURATION + 30 ))s -trace_stat -stf "$WORK/uac-$relay-$n.csv" \
      "$TARGET" >"$WORK/uac-$relay-$n.log" 2>&1 </dev/null || true
    c1=$(cpu_ticks "$RELAY_PID")
    R[$relay,$n,rss1]=$(mem_kb "$RELAY_PID")
    R[$relay,$n,ok]=$(csv_last "$WORK/uac-$relay-$n.csv" "SuccessfulCall(C)")
    R[$relay,$n,failed]=$(csv_last "$WORK/uac-$relay-$n.csv" "FailedCall(C)")
    hz=$(getconf CLK_TCK)
    R[$relay,$n,cpu]=$(python3 -c "import sys; t=(int(sys.argv[2])-int(sys.argv[1]))/int(sys.argv[3]); c=max(int(sys.argv[4] or 0),1); print(f'{t/c*1e6:.0f}')" "$c0" "$c1" "$hz" "${R[$relay,$n,ok]}")
    log "$relay, $n prefixes: ${R[$relay,$n,ok]} ok, ${R[$relay,$n,failed]} failed, ${R[$relay,$n,cpu]} us CPU/call, Pss ${R[$relay,$n,rss0]} -> ${R[$relay,$n,rss1]} kB, started in ${R[$relay,$n,start]} s"
    stop_pid "$UAS_PID" 3
    stop_pid "$RELAY_PID" 5
  done
done

mkdir -p "$ROOT/lab/results"
OUT=$ROOT/lab/results/routes-$(date -u +%Y-%m-%d).md
{
  echo "# Route lookup per call: sbc (local-routing-config, fst index) vs Kamailio mtree"
  echo
  echo "Run: \`SIZES=\"$SIZES\" RATE=$RATE DURATION=$DURATION lab/bench/routes-vs-mtree.sh\` at $(repo_rev "$ROOT"), $(date -u +%FT%TZ), $(nproc) cores."
  echo "Each call dials a different random 10-13 digit number (20,000 in a SIPp -inf file); prefixes random, 1-9 digits."
  echo
  echo "| prefixes | relay | calls ok | failed | CPU per call (µs) | ΣPss loaded → after the load (kB) | start (s) |"
  echo "|---|---|---|---|---|---|---|"
  for n in $SIZES; do
    for relay in sbc kamailio; do
      echo "| $n | $relay | ${R[$relay,$n,ok]} | ${R[$relay,$n,failed]} | ${R[$relay,$n,cpu]} | ${R[$relay,$n,rss0]} → ${R[$relay,$n,rss1]} | ${R[$relay,$n,start]} |"
    done
  done
} >"$OUT"
cat "$OUT"
