#!/usr/bin/env bash
# Builds the .deb (reusing target/release/sbc when SBC_BIN is set), unpacks it into a private
# directory (never the real system), checks files, modes and the conffile, verifies the unit
# with systemd-analyze, runs the installed binary's --version and verify-config on the
# installed config, then starts it once on free loopback ports with a NOTIFY_SOCKET this test
# reads, expects READY=1, and stops it with SIGTERM by PID. Skips (and says so) without dpkg.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v dpkg-deb >/dev/null || { echo "test-deb: SKIPPED: dpkg-deb absent"; exit 0; }
deb=$(packaging/build-deb.sh | tail -1)
tmp=$(mktemp -d); pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$tmp"' EXIT
dpkg-deb -x "$deb" "$tmp/root"
dpkg-deb -e "$deb" "$tmp/ctl"
fail() { echo "test-deb: FAIL: $*" >&2; exit 1; }
for f in usr/bin/sbc:755 usr/lib/systemd/system/sbc.service:644 \
         usr/share/snmp/mibs/SBC-PAIR-MIB.txt:644 etc/sbc/sbc.toml:640 \
         usr/share/doc/sbc/README.md:644 usr/share/doc/sbc/copyright:644; do
    p=${f%:*}; m=${f#*:}
    [ -f "$tmp/root/$p" ] || fail "missing /$p"
    [ "$(stat -c %a "$tmp/root/$p")" = "$m" ] || fail "/$p mode $(stat -c %a "$tmp/root/$p"), want $m"
done
[ "$(dpkg-deb -c "$deb" | awk '{print $2}' | sort -u)" = "root/root" ] || fail "files not owned by root"
grep -qx /etc/sbc/sbc.toml "$tmp/ctl/conffiles" || fail "sbc.toml not a conffile"
for s in postinst prerm postrm; do sh -n "$tmp/ctl/$s" || fail "$s syntax"; done
# The unit as installed, its ExecStart pointed at the unpacked binary (verify checks it exists).
sed "s|/usr/bin/sbc|$tmp/root/usr/bin/sbc|g" "$tmp/root/usr/lib/systemd/system/sbc.service" > "$tmp/sbc.service"
out=$(systemd-analyze verify "$tmp/sbc.service" 2>&1) || fail "systemd-analyze verify: $out"
[ -z "$out" ] || fail "systemd-analyze verify warned: $out"
bin=$tmp/root/usr/bin/sbc
"$bin" --version | grep -q '^sbc ' || fail "--version"
"$bin" verify-config "$tmp/root/etc/sbc/sbc.toml" >/dev/null 2>&1 || fail "verify-config of the installed config"
# Start it: free loopback ports, a notify socket read by python3.
port() { python3 -c 'import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
a=$(port); n=$(port)
python3 - "$tmp/notify" > "$tmp/notified" <<'PY' &
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM); s.bind(sys.argv[1]); s.settimeout(30)
print("bound", flush=True)
try:
    while True:
        m = s.recv(4096).decode()
        print(m, flush=True)
        if "READY=1" in m: break
except socket.timeout:
    print("TIMEOUT", flush=True)
PY
reader=$!
for _ in $(seq 50); do grep -q bound "$tmp/notified" && break; sleep 0.1; done
NOTIFY_SOCKET=$tmp/notify "$bin" run --listen "127.0.0.1:$a" --next-hop "127.0.0.1:$n" \
    --mgmt-socket "$tmp/run/mgmt.sock" > "$tmp/stdout" 2> "$tmp/stderr" &
pid=$!
wait "$reader" || true
grep -q 'READY=1' "$tmp/notified" || { cat "$tmp/stderr" >&2; fail "no READY=1: $(cat "$tmp/notified")"; }
grep -q 'sbc ready' "$tmp/stdout" || fail "no ready line"
kill -TERM "$pid"; wait "$pid" || fail "exit status $? after SIGTERM"; pid=
echo "test-deb: OK ($deb)"
