#!/usr/bin/env bash
# The package test (issue 17). Builds the .deb (SBC_BIN=path packages that binary instead of a
# release build); checks it with dpkg-deb (control, contents, owners, modes, conffile), with
# lintian (no error, no warning), renders sbc(1) with man and checks it has a
# section for every subcommand of `sbc --help`, verifies the unit with systemd-analyze. Then
# installs it with the real dpkg into a private root (`dpkg --root`, the maintainer scripts run
# chrootless with $DPKG_ROOT), checks what postinst did, and runs the installed node there as
# the unit would (the user postinst created, only CAP_NET_BIND_SERVICE, no new privileges, the
# unit's own ExecStart with the installed configuration, its access port moved below 1024):
# READY=1 on the notify socket, the ACLI as that user and as root, the unit's ExecReload,
# save-config in /etc/sbc, `reboot` (re-exec under the same PID: no STOPPING=1), SIGTERM
# (STOPPING=1, exit 0). Reinstalls (the saved configuration kept), removes, purges, and lists
# what is left. The host's dpkg database, users and systemd state are checked unchanged.
#
# Needs root (dpkg --root, chown to the package's user), dpkg, systemd-analyze (package
# systemd), man (man-db), lintian, setpriv (util-linux) and python3 (the notify socket); skips, saying
# so, when not root. Everything lives under one temporary directory removed on exit; the node
# is killed by PID; every wait is bounded.
set -euo pipefail
cd "$(dirname "$0")/.."
t0=$(date +%s)
fail() { echo "test-deb: FAIL: $*" >&2; exit 1; }
if [ "$(id -u)" != 0 ]; then
    echo "test-deb: SKIPPED: needs root (dpkg --root, the package's user)"
    exit 0
fi
for tool in dpkg dpkg-deb dpkg-query systemd-analyze man setpriv python3 gzip strip lintian; do
    command -v "$tool" >/dev/null || fail "$tool is not installed"
done

# What the host has of sbc: compared at the end.
host_state() {
    dpkg-query -W -f='${db:Status-Abbrev} ${Version}\n' sbc 2>&1 || true
    for f in /var/lib/dpkg/info/sbc.* /var/lib/systemd/deb-systemd-helper-enabled/*sbc*; do
        if [ -e "$f" ]; then echo "$f"; fi
    done
    getent passwd sbc || true
    getent group sbc || true
    ls -ld /usr/bin/sbc /usr/lib/systemd/system/sbc.service /usr/lib/sysusers.d/sbc.conf \
        /etc/sbc /etc/systemd/system/multi-user.target.wants/sbc.service 2>&1 || true
}
host_before=$(host_state)

tmp=$(mktemp -d /tmp/sbc-deb.XXXXXX)
chmod 0755 "$tmp" # the node runs as the package's user and reaches its files below
pid=
reader=
cleanup() {
    if [ -n "$pid" ]; then kill -KILL "$pid" 2>/dev/null || true; fi
    if [ -n "$reader" ]; then kill -KILL "$reader" 2>/dev/null || true; fi
    rm -rf "$tmp"
}
trap cleanup EXIT
trap "exit 143" TERM INT # so that a timeout still runs cleanup

# gzip, not xz: xz takes half a minute of CPU on a debug binary (lintian refuses no compression).
deb=$(SBC_DEB_COMPRESSION=${SBC_DEB_COMPRESSION:-gzip} packaging/build-deb.sh | tail -1)
[ -f "$deb" ] || fail "build-deb.sh made no package"
echo "test-deb: built $deb ($(du -k "$deb" | cut -f1) KiB)"

# --- The package as built ---
dpkg-deb --info "$deb" > "$tmp/info" || fail "dpkg-deb --info"
[ "$(dpkg-deb --field "$deb" Package)" = sbc ] || fail "Package field"
dpkg-deb --field "$deb" Depends | grep -q libc6 || fail "no libc6 in Depends"
dpkg-deb --contents "$deb" > "$tmp/contents" || fail "dpkg-deb --contents"
awk '$2 != "root/root" { print; bad = 1 } END { exit bad }' "$tmp/contents" \
    || fail "files not owned by root"
for f in ./usr/bin/sbc:-rwxr-xr-x ./usr/lib/systemd/system/sbc.service:-rw-r--r-- \
    ./usr/lib/sysusers.d/sbc.conf:-rw-r--r-- ./usr/share/snmp/mibs/SBC-PAIR-MIB.txt:-rw-r--r-- \
    ./etc/sbc/:drwxr-x--- ./etc/sbc/sbc.toml:-rw------- ./usr/share/man/man1/sbc.1.gz:-rw-r--r-- \
    ./usr/share/doc/sbc/README.md:-rw-r--r-- ./usr/share/doc/sbc/copyright:-rw-r--r-- \
    ./usr/share/doc/sbc/changelog.gz:-rw-r--r-- ./usr/share/lintian/overrides/sbc:-rw-r--r--; do
    p=${f%%:*}
    m=${f#*:}
    got=$(awk -v p="$p" '$6 == p { print $1 }' "$tmp/contents")
    [ -n "$got" ] || fail "$p is not in the package"
    [ "$got" = "$m" ] || fail "$p is $got, want $m"
done
dpkg-deb --ctrl-tarfile "$deb" | tar -xO ./conffiles | grep -qx /etc/sbc/sbc.toml \
    || fail "/etc/sbc/sbc.toml is not a conffile"
# Lintian judges the package: no error and no warning (the overrides shipped in the package,
# with their reasons, are the configuration's modes); informational tags are printed.
lint_rc=0
lintian --tag-display-limit 0 --display-info --fail-on error,warning "$deb" > "$tmp/lintian" 2>&1 || lint_rc=$?
grep -v 'running with root privileges' "$tmp/lintian" | sed 's/^/test-deb: lintian: /' || true
[ "$lint_rc" = 0 ] || fail "lintian found errors or warnings (exit $lint_rc, above)"
echo "test-deb: lintian: no error, no warning ($(grep -c '^I:' "$tmp/lintian" || true) informational)"

# --- The manual page ---
dpkg-deb -x "$deb" "$tmp/x"
page=$tmp/x/usr/share/man/man1/sbc.1.gz
warnings=$(MANWIDTH=80 man --warnings -l "$page" 2>&1 >"$tmp/man.txt") || fail "man -l: $warnings"
[ -z "$warnings" ] || fail "man -l warned: $warnings"
subcommands=$("$tmp/x/usr/bin/sbc" --help | awk '/^Commands:/ { on = 1; next } /^$/ { on = 0 }
    on && $1 != "help" { print $1 }')
[ -n "$subcommands" ] || fail "no subcommand in sbc --help"
for s in $subcommands; do
    grep -q "^SBC ${s^^}" "$tmp/man.txt" || fail "sbc(1) has no section for sbc $s"
done
echo "test-deb: sbc(1) renders, $(wc -l < "$tmp/man.txt") lines, sections for:" "${subcommands//$'\n'/ }"

# --- Installed with dpkg into a private root ---
R=$tmp/root
mkdir -p "$R/var/lib/dpkg/info" "$R/var/lib/dpkg/updates" "$R/var/lib/dpkg/triggers" "$R/etc" \
    "$R/run"
# The dependencies, as this host has them installed (the root holds no other package).
deps=$(dpkg-deb --field "$deb" Depends | sed 's/[,|]/\n/g' | sed 's/(.*//; s/ //g' | sort -u)
# shellcheck disable=SC2086 # one word per package
dpkg-query -s $deps > "$R/var/lib/dpkg/status" || fail "dependencies missing on this host: $deps"
dpkg_root() { dpkg --root="$R" --force-script-chrootless --log="$tmp/dpkg.log" "$@"; }
dpkg_root -i "$deb" > "$tmp/install.out" 2>&1 || { cat "$tmp/install.out"; fail "dpkg -i"; }
[ "$(dpkg-query --admindir="$R/var/lib/dpkg" -W -f='${db:Status-Abbrev}' sbc)" = "ii " ] \
    || fail "sbc not installed in the root"
verify=$(dpkg_root --verify sbc) || fail "dpkg --verify: $verify"
[ -z "$verify" ] || fail "dpkg --verify: $verify"
entry=$(grep '^sbc:' "$R/etc/passwd") || fail "postinst made no user sbc"
uid=$(cut -d: -f3 <<<"$entry")
gid=$(awk -F: '$1 == "sbc" { print $3 }' "$R/etc/group")
[ "$(cut -d: -f6,7 <<<"$entry")" = /nonexistent:/usr/sbin/nologin ] || fail "user sbc: $entry"
[ "$uid" -lt 1000 ] || fail "sbc is not a system user: $entry"
[ "$(stat -c %a:%u:%g "$R/etc/sbc")" = "770:0:$gid" ] \
    || fail "/etc/sbc is $(stat -c %a:%u:%g "$R/etc/sbc"), want 770:0:$gid"
[ "$(stat -c %a:%u:%g "$R/etc/sbc/sbc.toml")" = "600:$uid:$gid" ] \
    || fail "/etc/sbc/sbc.toml is $(stat -c %a:%u:%g "$R/etc/sbc/sbc.toml"), want 600:$uid:$gid"
[ ! -e "$R/etc/systemd/system/multi-user.target.wants/sbc.service" ] \
    || fail "enabled on first install"
[ -e "$R/var/lib/systemd/deb-systemd-helper-enabled/sbc.service.dsh-also" ] \
    || fail "deb-systemd-helper has no state for sbc.service"
unit=$R/usr/lib/systemd/system/sbc.service
# Verified as installed, its binary pointed into the root (verify checks that it exists and is
# executable) and man finding sbc(1) there (verify runs `man` for each Documentation=).
sed "s|/usr/bin/sbc|$R/usr/bin/sbc|g" "$unit" > "$tmp/sbc.service"
out=$(MANPATH=$R/usr/share/man systemd-analyze verify "$tmp/sbc.service" 2>&1) \
    || fail "systemd-analyze verify: $out"
# verify also loads the units ours is ordered with, so another package's unit on this machine
# can warn (freeradius.service's MemoryLimit= on Debian 12): reported, only ours must be clean.
ours=$(printf '%s\n' "$out" | grep -F "sbc.service" || true)
others=$(printf '%s\n' "$out" | grep -vF "sbc.service" | grep -v '^$' || true)
[ -z "$others" ] || echo "test-deb: systemd-analyze verify, about other units (not ours): $others"
[ -z "$ours" ] || fail "systemd-analyze verify warned: $ours"
exposure=$(systemd-analyze security --offline=yes "$tmp/sbc.service" 2>/dev/null \
    | sed -n 's/.*Overall exposure level for sbc.service: *//p')
echo "test-deb: installed; systemd-analyze verify clean; exposure $exposure"

# --- The installed node, run as the unit runs it ---
# A TCP+UDP port free on loopback, in [lo, hi).
free_port() {
    python3 - "$1" "$2" <<'PY'
import socket, sys
for p in range(int(sys.argv[1]), int(sys.argv[2])):
    try:
        for kind in (socket.SOCK_DGRAM, socket.SOCK_STREAM):
            s = socket.socket(socket.AF_INET, kind); s.bind(("127.0.0.1", p)); s.close()
        print(p); break
    except OSError:
        pass
PY
}
access=$(free_port 900 1024) # below 1024: only CAP_NET_BIND_SERVICE lets user sbc bind it
core=$(free_port 42000 43000)
next=$(free_port 43000 44000)
# Each steering pool: two RTP/RTCP pairs (the fewest allowed), bound when the node starts.
pool1=$(free_port 44000 44100)
pool2=$(free_port $((pool1 + 10)) 44200)
for p in "$access" "$core" "$next" "$pool1" "$pool2"; do
    [ -n "$p" ] || fail "no free loopback port"
done
conf=$R/etc/sbc/sbc.toml
"$R/usr/bin/sbc" verify-config "$conf" > /dev/null 2> "$tmp/verify" \
    || fail "verify-config of the installed configuration: $(cat "$tmp/verify")"
# The operator's edit: the interfaces, the next hop and the media pools on free ports (the same
# file, so the same owner and mode).
sed -e "s/^port = 5060\b/port = $access/" -e "s/^port = 5062\b/port = $core/" \
    -e "s/^port = 5080\b/port = $next/" \
    -e "s/^start-port = 20000\b/start-port = $pool1/; s/^end-port = 20999\b/end-port = $((pool1 + 3))/" \
    -e "s/^start-port = 21000\b/start-port = $pool2/; s/^end-port = 21999\b/end-port = $((pool2 + 3))/" \
    "$conf" > "$tmp/edited"
grep -q "^port = $access" "$tmp/edited" || fail "the installed configuration has no port 5060"
cat "$tmp/edited" > "$conf"
# What RuntimeDirectory=sbc, RuntimeDirectoryMode=0700 make.
install -d -o "$uid" -g "$gid" -m 0700 "$R/run/sbc"
# The unit's own command lines, their paths moved into the root.
unit_cmd() {
    sed -n "s/^$1=//p" "$unit" | sed -e "s| /usr/bin/| $R/usr/bin/|g; s|^/usr/bin/|$R/usr/bin/|" \
        -e "s| /etc/| $R/etc/|g; s| /run/| $R/run/|g"
}
# User=sbc, Group=sbc, NoNewPrivileges=yes, CapabilityBoundingSet= and AmbientCapabilities=
# CAP_NET_BIND_SERVICE. An array, not a function: `"${as_sbc[@]}" cmd &` gives the PID that
# becomes the node (setpriv execs it), where a backgrounded function would give a subshell's.
# shellcheck disable=SC2054 # the commas are setpriv's capability lists
as_sbc=(setpriv --reuid="$uid" --regid="$gid" --clear-groups --no-new-privs
    --inh-caps=-all,+net_bind_service --ambient-caps=-all,+net_bind_service
    --bounding-set=-all,+net_bind_service)
python3 - "$tmp/notify" > "$tmp/notified" <<'PY' &
import os, socket, sys, time
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1]); os.chmod(sys.argv[1], 0o666)
print("bound", flush=True)
end = time.monotonic() + 90
while time.monotonic() < end:
    s.settimeout(max(0.1, end - time.monotonic()))
    try:
        m = s.recv(4096).decode()
    except socket.timeout:
        break
    print(m.replace("\n", " "), flush=True)
    if "STOPPING=1" in m:
        break
PY
reader=$!
wait_for() { # PATTERN FILE COUNT SECONDS
    local i
    for ((i = 0; i < $4 * 10; i++)); do
        [ "$(grep -c -- "$1" "$2")" -ge "$3" ] && return 0
        if [ -n "$pid" ] && ! kill -0 "$pid" 2>/dev/null; then return 1; fi
        sleep 0.1
    done
    return 1
}
wait_for bound "$tmp/notified" 1 5 || fail "notify socket not bound"
start_cmd=$(unit_cmd ExecStart)
# shellcheck disable=SC2086 # the unit's command line, split as systemd splits it (no quotes)
NOTIFY_SOCKET=$tmp/notify "${as_sbc[@]}" $start_cmd > "$tmp/stdout" 2> "$tmp/stderr" &
pid=$!
wait_for READY=1 "$tmp/notified" 1 30 || { cat "$tmp/stderr" >&2; fail "no READY=1: $(cat "$tmp/notified")"; }
grep -q "sbc ready: .*127.0.0.1:$access" "$tmp/stdout" || fail "ready line: $(cat "$tmp/stdout")"
sock=$R/run/sbc/sbc.sock
"${as_sbc[@]}" "$R/usr/bin/sbc" acli --mgmt-socket "$sock" -c "show health" > "$tmp/health" \
    || fail "ACLI as sbc: $(cat "$tmp/health")"
"$R/usr/bin/sbc" acli --mgmt-socket "$sock" -c "show health" > /dev/null || fail "ACLI as root"
reload_cmd=$(unit_cmd ExecReload)
# shellcheck disable=SC2086
"${as_sbc[@]}" $reload_cmd > "$tmp/reload" 2>&1 || fail "ExecReload: $(cat "$tmp/reload")"
"${as_sbc[@]}" "$R/usr/bin/sbc" acli --mgmt-socket "$sock" -c save-config > "$tmp/save" 2>&1 \
    || fail "save-config as sbc: $(cat "$tmp/save")"
[ "$(stat -c %a:%u "$conf")" = "600:$uid" ] || fail "saved file is $(stat -c %a:%u "$conf")"
[ -f "$conf.bak" ] || fail "save-config kept no .bak"
grep -q "port = $access" "$conf" || fail "saved file lost the edit"
# `reboot` re-executes in place (same PID): STATUS=rebooting, READY=1 again, no STOPPING=1.
"${as_sbc[@]}" "$R/usr/bin/sbc" acli --mgmt-socket "$sock" -c reboot > /dev/null 2>&1 || true
wait_for READY=1 "$tmp/notified" 2 30 || fail "no READY=1 after reboot: $(cat "$tmp/notified")"
! grep -q STOPPING=1 "$tmp/notified" || fail "STOPPING=1 sent on reboot: $(cat "$tmp/notified")"
grep -q STATUS=rebooting "$tmp/notified" || fail "no STATUS=rebooting: $(cat "$tmp/notified")"
kill -0 "$pid" || fail "the node exited on reboot"
wait_for 'sbc ready' "$tmp/stdout" 2 10 || fail "no second ready line"
"${as_sbc[@]}" "$R/usr/bin/sbc" acli --mgmt-socket "$sock" -c "show health" > /dev/null \
    || fail "ACLI after reboot"
kill -TERM "$pid"
for ((i = 0; i < 200; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
kill -0 "$pid" 2>/dev/null && fail "still running 20 s after SIGTERM"
status=0
wait "$pid" || status=$?
pid=
[ "$status" = 0 ] || fail "exit status $status after SIGTERM: $(cat "$tmp/stderr"); notified: $(cat "$tmp/notified")"
wait "$reader" || true
reader=
grep -q STOPPING=1 "$tmp/notified" || fail "no STOPPING=1: $(cat "$tmp/notified")"
unpriv=$(cat /proc/sys/net/ipv4/ip_unprivileged_port_start 2>/dev/null || echo 1024)
if [ "$access" -lt "$unpriv" ]; then how="by CAP_NET_BIND_SERVICE"; else how="(unprivileged here)"; fi
echo "test-deb: the installed node ran as uid $uid, bound port $access $how: READY=1, ACLI," \
    "ExecReload, save-config, reboot, SIGTERM"

# --- Reinstall (an upgrade's path), remove, purge ---
saved=$(md5sum < "$conf")
dpkg_root -i "$deb" > "$tmp/reinstall.out" 2>&1 || { cat "$tmp/reinstall.out"; fail "reinstall"; }
[ "$(md5sum < "$conf")" = "$saved" ] || fail "reinstall replaced the saved configuration"
[ "$(stat -c %a:%u "$conf")" = "600:$uid" ] || fail "reinstall changed the saved file's owner"
[ "$(stat -c %a:%u:%g "$R/etc/sbc")" = "770:0:$gid" ] || fail "reinstall: /etc/sbc not 770 root:sbc"
dpkg_root --remove sbc > "$tmp/remove.out" 2>&1 || { cat "$tmp/remove.out"; fail "dpkg --remove"; }
[ ! -e "$R/usr/bin/sbc" ] || fail "remove left /usr/bin/sbc"
[ -f "$conf" ] || fail "remove took the conffile"
dpkg_root --purge sbc > "$tmp/purge.out" 2>&1 || { cat "$tmp/purge.out"; fail "dpkg --purge"; }
left=$(dpkg-query --admindir="$R/var/lib/dpkg" -W -f='${db:Status-Abbrev}' sbc 2>/dev/null || true)
[ -z "$left" ] || [ "$left" = "pn " ] || fail "after purge sbc is '$left'"
[ ! -e "$R/etc/sbc" ] || fail "purge left $(find "$R/etc/sbc")"
leftover=$(cd "$R" && find . -path ./var/lib/dpkg -prune -o -type f -print | sort)
for f in $leftover; do
    case $f in
        ./etc/passwd | ./etc/group | ./etc/shadow | ./etc/gshadow | ./etc/passwd- | ./etc/group- \
            | ./etc/shadow- | ./etc/gshadow- | ./etc/.pwd.lock) ;; # the user sbc, kept
        *) fail "purge left $f" ;;
    esac
done
echo "test-deb: removed and purged; left:" "${leftover//$'\n'/ }" "(the user sbc, kept), empty directories"

host_after=$(host_state)
[ "$host_before" = "$host_after" ] || fail "the host changed: before: $host_before; after: $host_after"
echo "test-deb: the host is unchanged (dpkg-query -W sbc: $(dpkg-query -W sbc 2>&1 | head -1))"
echo "test-deb: OK in $(($(date +%s) - t0)) s"
