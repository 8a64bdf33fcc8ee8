#!/usr/bin/env bash
# The whole test suite, on a fresh machine: unit tests, then end-to-end tests that start the real
# `sbc` binary and SIPp on loopback.
#
# The end-to-end tests need SIPp (Debian package `sip-tester`) and net-snmp's trap receiver and
# tools (`snmptrapd`, `snmp`). As root this script installs what is missing; otherwise it stops
# and prints the exact apt-get line to run.
set -euo pipefail
cd "$(dirname "$0")"

missing=()
command -v sipp >/dev/null 2>&1 || missing+=(sip-tester)
command -v snmptrapd >/dev/null 2>&1 || missing+=(snmptrapd)
command -v snmptranslate >/dev/null 2>&1 || missing+=(snmp)
if ((${#missing[@]})); then
    if [ "$(id -u)" = 0 ]; then
        echo "installing ${missing[*]} (needed by the end-to-end tests)"
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
    else
        echo "The end-to-end tests need: ${missing[*]}. Install it with:" >&2
        echo "    sudo apt-get install -y ${missing[*]}" >&2
        exit 1
    fi
fi

# Every binary is built first so that a compile error shows before an hour of tests; the
# end-to-end tests (`cargo test -p sbc --test e2e`) run the `sbc` binary Cargo built for them.
cargo build --locked --workspace --bins
# --no-fail-fast: every test binary runs even when one fails; cargo still exits non-zero.
cargo test --locked --workspace --no-fail-fast "$@"
