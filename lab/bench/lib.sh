# lab/bench/lib.sh: helpers shared by overload-prsm.sh and autoscale-opensips.sh
# (sourced, not run). The caller sets: WORK (scratch dir), IP, and `set -euo pipefail`.
#
# Process discipline: only PIDs started by the calling script are ever signalled
# (by PID, never by name); each is remembered in PIDS and stopped by cleanup.

die() { echo "${BENCH_NAME:-bench}: $*" >&2; exit 2; }
log() { echo "[$(date +%T)] $*" >&2; }
is_uint() { [[ $1 =~ ^[0-9]+$ ]]; }

udp_port_busy() { [[ -n $(ss -Hlun "sport = :$1" 2>/dev/null) ]]; }
# bound_by PORT PID: PORT is bound by PID itself (not by someone else's process).
bound_by() { [[ $(ss -Hlunp "sport = :$1" 2>/dev/null) == *"pid=$2,"* ]]; }
need_free() { ! udp_port_busy "$1" || die "UDP port $1 is bound by another process (ss -lunp 'sport = :$1')"; }

# All descendants of $1 (itself included), by walking PPIDs.
tree_pids() {
  ps -e -o pid=,ppid= | awk -v root="$1" '
    { kids[$2] = kids[$2] " " $1 }
    END {
      n = 1; q[1] = root; seen[root] = 1
      for (i = 1; i <= n; i++) {
        print q[i]; m = split(kids[q[i]], k, " ")
        for (j = 1; j <= m; j++) if (!(k[j] in seen)) { seen[k[j]] = 1; q[++n] = k[j] }
      }
    }'
}

alive() { [[ -n $1 ]] && kill -0 "$1" 2>/dev/null; }
# Start time (field 22 of /proc/PID/stat), to tell a PID from a later process reusing it.
start_time() { local s; s=$(cat "/proc/$1/stat" 2>/dev/null) || return 1; s=${s##*) }; set -- $s; echo "${20}"; }
still_ours() { [[ $(start_time "$1" 2>/dev/null) == "$2" ]]; }

# stop_pid PID [seconds]: SIGTERM, wait (bounded), then SIGKILL what is left of its tree
# (only processes that are provably the same ones).
stop_pid() {
  local pid=$1 secs=${2:-5} i p st left=0
  local -a tree=()
  [[ -n $pid ]] || return 0
  alive "$pid" || { wait "$pid" 2>/dev/null || true; return 0; }
  for p in $(tree_pids "$pid"); do st=$(start_time "$p") && tree+=("$p:$st"); done
  kill -TERM "$pid" 2>/dev/null || true
  for (( i = 0; i < secs * 10; i++ )); do alive "$pid" || break; sleep 0.1; done
  for (( i = 0; i < 30; i++ )); do
    left=0
    for p in "${tree[@]}"; do still_ours "${p%%:*}" "${p##*:}" && left=1; done
    (( left )) || break
    sleep 0.1
  done
  if (( left )); then
    log "pid $pid: processes left after SIGTERM, sending SIGKILL to them"
    for p in "${tree[@]}"; do still_ours "${p%%:*}" "${p##*:}" && kill -KILL "${p%%:*}" 2>/dev/null; done
  fi
  wait "$pid" 2>/dev/null || true
}

# wait_until SECONDS CMD...: poll CMD every 0.1 s, bounded.
wait_until() {
  local secs=$1 i; shift
  for (( i = 0; i < secs * 10; i++ )); do "$@" && return 0; sleep 0.1; done
  return 1
}

# CPU ticks (utime+stime) summed over the process tree of $1.
cpu_ticks() {
  local sum=0 p s rest f
  for p in $(tree_pids "$1"); do
    s=$(cat "/proc/$p/stat" 2>/dev/null) || continue
    rest=${s##*) }
    read -r -a f <<<"$rest"
    sum=$(( sum + f[11] + f[12] ))
  done
  echo "$sum"
}

# Field of the last line of a SIPp semicolon CSV, by header name ("" if absent).
csv_last() {
  local file=$1 col=$2
  [[ -s $file ]] || { echo ""; return; }
  awk -F';' -v c="$col" '
    NR == 1 { for (i = 1; i <= NF; i++) if ($i == c) k = i; next }
    NF > 1  { last = $k }
    END     { print (k ? last : "") }' "$file"
}

# rtt_stats FILE RTD: "count mean p99 max" (ms) of response time RTD in a SIPp -trace_rtt
# file (Date_ms;response_time_ms;rtd_no), nearest-rank p99; "0 n/a n/a n/a" when empty.
rtt_stats() {
  local file=$1 rtd=$2
  if [[ ! -s $file ]]; then echo "0 n/a n/a n/a"; return; fi
  awk -F';' -v r="$rtd" 'NR > 1 && $3 == r { print $2 }' "$file" | sort -g | awk '
    { v[NR] = $1; s += $1 }
    END {
      if (NR == 0) { print "0 n/a n/a n/a"; exit }
      k = int(0.99 * NR); if (k < 0.99 * NR) k++; if (k < 1) k = 1
      printf "%d %.1f %.1f %.1f\n", NR, s / NR, v[k], v[NR]
    }'
}

# write_sbc_config FILE ACCESS_PORT CORE_PORT UAS_PORT EXTRA_SIP_CONFIG ACCESS_EXTRA TRAILER
write_sbc_config() {
  local file=$1 ap=$2 cp=$3 up=$4 sipcfg=$5 access_extra=$6 trailer=$7
  cat >"$file" <<EOF
[sip-config]
$sipcfg

[[sip-interface]]
realm = "access"
address = "$IP"
port = $ap
transports = ["udp"]
$access_extra

[[sip-interface]]
realm = "core"
address = "$IP"
port = $cp
transports = ["udp"]

[[session-agent]]
name = "core"
realm = "core"
address = "$IP"
port = $up
transport = "udp"

[session-router]
default-route = "core"
$trailer
EOF
}

sbc_ready() { grep -q 'sbc ready' "$1" 2>/dev/null; }

# git revision of the sbc binary's source, for the reports.
repo_rev() {
  local r
  r=$(git -C "$1" rev-parse --short HEAD 2>/dev/null || echo unknown)
  git -C "$1" diff --quiet HEAD -- sbc config 2>/dev/null || r="$r (sbc/ or config/ modified)"
  echo "$r"
}
