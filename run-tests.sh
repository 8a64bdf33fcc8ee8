#!/usr/bin/env bash
# The whole test suite, on a fresh machine: unit tests, then end-to-end tests that start the real
# `sbc` binary and SIPp on loopback.
#
# The end-to-end tests need SIPp (Debian package `sip-tester`) and net-snmp's trap receiver and
# tools (`snmptrapd`, `snmp`), `tshark` and `sngrep` (the SIP trace), `kamailio` (a registrar) and `kamailio-presence-modules` (a presence server), `baresip-core` and `linphone-cli` (softphones), `dnsmasq` (SRV records), `freeradius` and
# `freeradius-utils` (a RADIUS accounting server and `radclient`); the lab's media tests and lab/bench/media-vs-rtpengine.sh need
# rtpengine (`rtpengine-daemon`); the package test needs `systemd`, `man-db`, `python3` and
# `dpkg-dev`. As root this script installs what is missing; otherwise it
# stops and prints the exact apt-get line to run.
#
# rtpengine-daemon's package enables a systemd service (rtpengine-daemon.service, NG on
# localhost:2223, media ports 30000-40000 from /etc/rtpengine/rtpengine.conf). In a container
# without systemd (this project's machines: policy-rc.d denies the start) nothing is started;
# on a machine with systemd it may run. The tests never use it: each starts its own rtpengine
# with --config-file=none, on an NG port and a media port range it checked were free.
# Likewise freeradius's package enables freeradius.service (ports 1812/1813); the tests never
# use it: each starts its own FreeRADIUS on a free loopback port with a config of its own
# (tests/src/freeradius.rs).
set -euo pipefail
cd "$(dirname "$0")"

missing=()
command -v sipp >/dev/null 2>&1 || missing+=(sip-tester)
command -v snmptrapd >/dev/null 2>&1 || missing+=(snmptrapd)
command -v snmptranslate >/dev/null 2>&1 || missing+=(snmp)
command -v rtpengine >/dev/null 2>&1 || missing+=(rtpengine-daemon)
# The IPv6 tests make a network namespace of their own and put addresses on its loopback
# (sbc_e2e::netns: `ip`, `sysctl`).
command -v ip >/dev/null 2>&1 || missing+=(iproute2)
command -v sysctl >/dev/null 2>&1 || missing+=(procps)
# The routing tests: Kamailio as a multi-domain registrar (usrloc, registrar, tm, rr).
command -v kamailio >/dev/null 2>&1 || missing+=(kamailio)
# The subscription tests: Kamailio as a presence server (presence, presence_mwi; its tables in
# db_text, which the kamailio package has).
[ -f /usr/lib/x86_64-linux-gnu/kamailio/modules/presence_mwi.so ] ||
    missing+=(kamailio-presence-modules)
# The registration tests: baresip softphones register through the SBC and call each other
# (the core package: the binary and its modules, without the GTK front end).
command -v baresip >/dev/null 2>&1 || missing+=(baresip-core)
# A session-agent named by DNS: dnsmasq serves its SRV records on loopback (the daemon alone,
# without the package that starts a system service).
[ -x /usr/sbin/dnsmasq ] || missing+=(dnsmasq-base)
# The accounting tests: FreeRADIUS as the RADIUS accounting server (its detail file counts the
# requests), radclient to send requests by hand.
command -v freeradius >/dev/null 2>&1 || [ -x /usr/sbin/freeradius ] || missing+=(freeradius)
command -v radclient >/dev/null 2>&1 || missing+=(freeradius-utils)
# The SIP trace tests: sngrep as a HEP receiver.
command -v sngrep >/dev/null 2>&1 || missing+=(sngrep)
# The package test (packaging/test-deb.sh): systemd-analyze and systemd-sysusers, man, the
# notify socket's reader, dpkg-shlibdeps for the package's Depends.
command -v systemd-analyze >/dev/null 2>&1 || missing+=(systemd)
command -v man >/dev/null 2>&1 || missing+=(man-db)
command -v python3 >/dev/null 2>&1 || missing+=(python3)
command -v dpkg-shlibdeps >/dev/null 2>&1 || missing+=(dpkg-dev)
# A real Prometheus scrapes a pair and evaluates the Grafana dashboard's expressions; installed
# without its recommended node exporter.
lean=()
[ -x /usr/bin/prometheus ] || lean+=(prometheus)
# Lintian judges the package (packaging/test-deb.sh).
command -v lintian >/dev/null 2>&1 || lean+=(lintian)
# The SIP trace tests: tshark reads the pcap `show sip-trace <id> --pcap` writes, and sngrep's.
command -v tshark >/dev/null 2>&1 || lean+=(tshark)
# Attended transfer between real phones: linphone's console (linphonec) sends REFER with
# Replaces and honours an INVITE with Replaces (baresip 1.0 does neither).
command -v linphonec >/dev/null 2>&1 || lean+=(linphone-cli)
if ((${#missing[@]} + ${#lean[@]})); then
    if [ "$(id -u)" = 0 ]; then
        echo "installing ${missing[*]} ${lean[*]} (needed by the end-to-end tests)"
        apt-get update -qq
        if ((${#missing[@]})); then
            DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
        fi
        if ((${#lean[@]})); then
            DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
                "${lean[@]}" >/dev/null
        fi
    else
        echo "The end-to-end tests need: ${missing[*]} ${lean[*]}. Install it with:" >&2
        ((${#missing[@]})) && echo "    sudo apt-get install -y ${missing[*]}" >&2
        ((${#lean[@]})) && echo "    sudo apt-get install -y --no-install-recommends ${lean[*]}" >&2
        exit 1
    fi
fi

# Installed above, so the lab's rtpengine tests must not skip.
export SBC_LAB_REQUIRE_RTPENGINE=1

# Every binary is built first so that a compile error shows before an hour of tests; the
# end-to-end tests (`cargo test -p sbc --test e2e`) run the `sbc` binary Cargo built for them,
# and the demo's (`cargo test -p sbc-demo`) the `sbc-demo` binary.
cargo build --locked --workspace --bins
# --no-fail-fast: every test binary runs even when one fails; cargo still exits non-zero.
cargo test --locked --workspace --no-fail-fast "$@"
# Alone, since it saturates every core for 60 s (it is ignored in the parallel run above); not
# when the run above was given arguments (a filter).
if [ $# -eq 0 ]; then
    cargo test --locked -p sbc --test e2e pair_cpu_hog -- --ignored
    # The .deb (issue 17), built around the debug binary built above (SBC_BIN: not the minutes
    # of a release build; packaging/build-deb.sh alone builds the release one), installed with
    # dpkg into a private root, its node run as the unit runs it, then purged. Bounded.
    SBC_BIN=target/debug/sbc timeout 300 packaging/test-deb.sh
fi
