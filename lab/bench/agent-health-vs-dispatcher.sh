#!/usr/bin/env bash
# agent-health-vs-dispatcher.sh: how fast a next hop that stops answering is taken out of
# service, and how fast it is back once it answers again, our SBC's session-agent pings
# against Kamailio's dispatcher probing, side by side in one run, with the same settings.
#
# Usage (from anywhere inside the repo):
#   cargo build --release -p sbc && lab/bench/agent-health-vs-dispatcher.sh
#   ROUNDS=5 INTERVAL=2 MISSES=3 lab/bench/agent-health-vs-dispatcher.sh
#
# The agent: SIPp's built-in `uas` with -aa (it answers OPTIONS 200) on 127.0.0.2:$AGENT_PORT.
# For each relay in turn and each round: both see the agent up; the agent is SIGSTOPped (by
# its PID, at a random phase of the ping cycle: the same phases for both relays) and the
# relay's view is polled every 50 ms until it says out of service (detection); then
# SIGCONTed and polled until it says in service again (recovery). With INTERVAL i, MISSES m
# and TIMEOUT_MS t, expect detection between (m-1)·i + t and m·i + t.
#
#   sbc:      session-agent with ping-interval = $INTERVAL, ping-misses = $MISSES,
#             ping-response-timeout-ms = $TIMEOUT_MS; state read with
#             `sbc acli --json -c "show session-agents"`
#   kamailio: dispatcher with ds_ping_interval = $INTERVAL, ds_probing_threshold = $MISSES,
#             ds_inactive_threshold = 1, ds_probing_mode = 1 (probe always), tm fr_timer =
#             $TIMEOUT_MS (the OPTIONS' answer timeout); state read with
#             `kamcmd dispatcher.list`: up = A (active), down = I (inactive, no longer
#             selected); T (trying: failed pings below the threshold, still selected) is
#             neither
#
# Writes lab/results/agent-health-<UTC date>.md. Traffic: loopback only. Processes are
# stopped by the PIDs this script started.
set -euo pipefail
BENCH_NAME=agent-health
SCRIPT_DIR=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$SCRIPT_DIR/../.." && pwd)
# shellcheck source=lib.sh
source "$SCRIPT_DIR/lib.sh"

ROUNDS=${ROUNDS:-6}
INTERVAL=${INTERVAL:-1}
MISSES=${MISSES:-2}
TIMEOUT_MS=${TIMEOUT_MS:-500}
IP=127.0.0.1
AGENT_IP=127.0.0.2
AGENT_PORT=${AGENT_PORT:-5190}
SBC_PORT=${SBC_PORT:-5160}
SBC_CORE_PORT=${SBC_CORE_PORT:-5162}
KAM_PORT=${KAM_PORT:-5170}
SBC_BIN=${SBC_BIN:-$ROOT/target/release/sbc}
KAMAILIO=${KAMAILIO:-/usr/sbin/kamailio}
KAMCMD=${KAMCMD:-/usr/sbin/kamcmd}
SIPP=${SIPP:-sipp}
LIMIT=${LIMIT:-60}   # seconds a detection or a recovery may take at most

[[ -x $SBC_BIN ]] || die "no $SBC_BIN: cargo build --release -p sbc"
[[ -x $KAMAILIO ]] || die "kamailio not found at $KAMAILIO (Debian package kamailio)"
command -v "$SIPP" >/dev/null || die "sipp not found (Debian package sip-tester)"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/agent-health.XXXXXX")
PIDS=()
cleanup() {
  local p
  for p in "${PIDS[@]}"; do kill -CONT "$p" 2>/dev/null || true; stop_pid "$p" 3; done
}
trap cleanup EXIT

now_ms() { date +%s%3N; }

# The agent.
need_free "$AGENT_PORT"
"$SIPP" -sn uas -aa -i "$AGENT_IP" -p "$AGENT_PORT" -nostdin -bg -trace_err \
  -error_file "$WORK/agent.err" >"$WORK/agent.log" 2>&1 </dev/null || true
AGENT_PID=""
wait_until 10 udp_port_busy "$AGENT_PORT" || die "the SIPp agent did not bind $AGENT_IP:$AGENT_PORT"
AGENT_PID=$(ss -Hlunp "sport = :$AGENT_PORT" | grep -o 'pid=[0-9]*' | head -1 | cut -d= -f2)
[[ -n $AGENT_PID ]] || die "cannot find the SIPp agent's PID"
PIDS+=("$AGENT_PID")

# Our SBC.
cat >"$WORK/sbc.toml" <<EOF
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
name = "agent"
realm = "core"
address = "$AGENT_IP"
port = $AGENT_PORT
ping-interval = $INTERVAL
ping-misses = $MISSES
ping-response-timeout-ms = $TIMEOUT_MS
ping-send-mode = "continuous"

[session-router]
default-route = "agent"
EOF
mkdir -p -m 0700 "$WORK/mgmt"
SBC_MGMT=$WORK/mgmt/m.sock
sbc_state() {
  "$SBC_BIN" acli --mgmt-socket "$SBC_MGMT" --json -c "show session-agents" 2>/dev/null |
    python3 -c 'import json,sys
try:
    rows = json.load(sys.stdin)["session_agents"]
    print("up" if rows[0]["in_service"] else "down")
except Exception:
    print("?")'
}

# Kamailio's dispatcher.
echo "1 sip:$AGENT_IP:$AGENT_PORT 0 0" >"$WORK/dispatcher.list"
cat >"$WORK/kamailio.cfg" <<EOF
#!KAMAILIO
debug=1
log_stderror=yes
fork=yes
children=1
listen=udp:$IP:$KAM_PORT
disable_tcp=yes
auto_aliases=no
dns=no
rev_dns=no
use_dns_cache=off
mpath="/usr/lib/x86_64-linux-gnu/kamailio/modules/"
loadmodule "tm.so"
loadmodule "sl.so"
loadmodule "pv.so"
loadmodule "ctl.so"
loadmodule "dispatcher.so"
modparam("ctl", "binrpc", "unix:$WORK/kamailio.ctl")
modparam("tm", "fr_timer", $TIMEOUT_MS)
modparam("dispatcher", "list_file", "$WORK/dispatcher.list")
modparam("dispatcher", "ds_ping_interval", $INTERVAL)
modparam("dispatcher", "ds_probing_threshold", $MISSES)
modparam("dispatcher", "ds_inactive_threshold", 1)
modparam("dispatcher", "ds_probing_mode", 1)
modparam("dispatcher", "ds_ping_from", "sip:ping@$IP")
request_route {
    sl_send_reply("404", "Not here");
}
EOF
kam_state() {
  local flags
  flags=$("$KAMCMD" -s "unix:$WORK/kamailio.ctl" dispatcher.list 2>/dev/null | grep -o 'FLAGS: [A-Z]*' | head -1 | cut -d' ' -f2) || true
  # A: active; T: trying (failed pings below ds_probing_threshold: still selected); I:
  # inactive (not selected); D: disabled.
  case $flags in
    A*) echo up ;;
    I* | D*) echo down ;;
    T*) echo trying ;;
    *) echo "?" ;;
  esac
}

# poll_until STATE_FN WANT: milliseconds until STATE_FN prints WANT (polled every 50 ms),
# or "timeout" after LIMIT seconds.
poll_until() {
  local fn=$1 want=$2 start i
  start=$(now_ms)
  for (( i = 0; i < LIMIT * 20; i++ )); do
    [[ $($fn) == "$want" ]] && { echo $(( $(now_ms) - start )); return 0; }
    sleep 0.05
  done
  echo timeout
}

declare -A DETECT RECOVER
for relay in sbc kamailio; do
  case $relay in
    sbc)
      need_free "$SBC_PORT"; need_free "$SBC_CORE_PORT"
      "$SBC_BIN" run --config "$WORK/sbc.toml" --mgmt-socket "$SBC_MGMT" >"$WORK/sbc.log" 2>&1 </dev/null &
      RELAY_PID=$!; STATE=sbc_state ;;
    kamailio)
      need_free "$KAM_PORT"
      "$KAMAILIO" -f "$WORK/kamailio.cfg" -DD -E -m 64 -M 8 >"$WORK/kamailio.log" 2>&1 </dev/null &
      RELAY_PID=$!; STATE=kam_state ;;
  esac
  PIDS+=("$RELAY_PID")
  log "$relay: waiting until it sees the agent in service"
  [[ $(poll_until $STATE up) != timeout ]] || die "$relay never saw the agent up (logs in $WORK)"
  RANDOM=28   # the same stop phases for both relays, run after run
  for (( r = 1; r <= ROUNDS; r++ )); do
    # Stopped at a random phase of the ping cycle (an up-detection follows an answered
    # ping, so a whole-interval sleep would always stop it just after one: the worst case).
    sleep "$(( INTERVAL * 2 )).$(printf '%03d' $(( RANDOM % 1000 )))"
    kill -STOP "$AGENT_PID"
    d=$(poll_until $STATE down)
    kill -CONT "$AGENT_PID"
    u=$(poll_until $STATE up)
    log "$relay round $r: out of service after $d ms, back after $u ms"
    DETECT[$relay]+="$d "; RECOVER[$relay]+="$u "
  done
  stop_pid "$RELAY_PID" 5
done

mean() { python3 -c 'import sys
v=[int(x) for x in sys.argv[1:] if x.isdigit()]
print(f"{sum(v)/len(v)/1000:.2f}" if v else "-")' "$@"; }
mkdir -p "$ROOT/lab/results"
OUT=$ROOT/lab/results/agent-health-$(date -u +%Y-%m-%d).md
{
  echo "# Session-agent health: detection and recovery, sbc vs Kamailio dispatcher"
  echo
  echo "Run: \`ROUNDS=$ROUNDS INTERVAL=$INTERVAL MISSES=$MISSES TIMEOUT_MS=$TIMEOUT_MS lab/bench/agent-health-vs-dispatcher.sh\` at $(repo_rev "$ROOT"), $(date -u +%FT%TZ), $(nproc) cores."
  echo "Agent: SIPp uas -aa on $AGENT_IP:$AGENT_PORT, SIGSTOPped then SIGCONTed; state polled every 50 ms."
  echo "Ping every $INTERVAL s, out after $MISSES unanswered pings, an answer waited for $TIMEOUT_MS ms; in service again after one answered ping."
  echo
  echo "| relay | out of service after (s, each round) | mean | back in service after (s, each round) | mean |"
  echo "|---|---|---|---|---|"
  for relay in sbc kamailio; do
    # shellcheck disable=SC2086 # word lists
    echo "| $relay | $(for v in ${DETECT[$relay]}; do printf '%s ' "$(mean "$v")"; done)| $(mean ${DETECT[$relay]}) | $(for v in ${RECOVER[$relay]}; do printf '%s ' "$(mean "$v")"; done)| $(mean ${RECOVER[$relay]}) |"
  done
} >"$OUT"
cat "$OUT"
