#!/usr/bin/env bash
# What users and their tools see of a node, written to a folder so that two builds can be
# compared (issue 25: a refactor keeps every interface): `sbc --help` of every subcommand and
# the man page, the default configuration, every `show` command in text and JSON, the /metrics
# families and labels, an snmpwalk of the MIB. Beside each raw file a `.shape` file keeps what
# must not change (words, keys, names, types) and drops what varies from run to run (numbers,
# times, ids); `diff -r A B` over two snapshots' .shape files is the check.
#
#   lab/snapshot/interfaces.sh SBC_BINARY OUT_DIR
#
# The node runs lab/snapshot/node.toml on loopback ports 17060-17199 and 27000-27199 (media),
# its management socket in OUT_DIR; SIPp (sip-tester) places 20 calls through it first so
# that counters and media report something. Needs sipp, snmpwalk (snmp), curl, jq, python3.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
sbc="$(realpath "$1")"
out="$(realpath -m "$2")"
mkdir -p "$out"/{help,show,tmp}
sock="$out/tmp/sbc.sock"
cp "$here/node.toml" "$out/tmp/node.toml"

pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT

# Help and man page.
"$sbc" --help >"$out/help/sbc.txt"
for sub in run acli witness verify-config default-config demo; do
    "$sbc" "$sub" --help >"$out/help/$sub.txt" 2>&1 || true
done
"$sbc" man >"$out/help/sbc.1" 2>/dev/null || true
"$sbc" default-config >"$out/default-config.toml"
"$sbc" verify-config "$root/config/sbc.example.toml" >"$out/verify-example.toml" 2>/dev/null

# The node and 20 calls.
"$sbc" run --config "$out/tmp/node.toml" --mgmt-socket "$sock" >"$out/tmp/node.out" 2>"$out/tmp/node.err" &
pids+=($!)
for _ in $(seq 1 100); do grep -q '^sbc ready' "$out/tmp/node.out" 2>/dev/null && break; sleep 0.1; done
grep -q '^sbc ready' "$out/tmp/node.out" || { echo "node did not start: $(cat "$out/tmp/node.err")" >&2; exit 1; }
(cd "$out/tmp" && timeout 60 sipp -sn uas -i 127.0.0.1 -p 17080 -m 20 -bg -nostdin >/dev/null 2>&1 || true)
(cd "$out/tmp" && timeout 60 sipp -sn uac -i 127.0.0.1 -p 17070 -m 20 -r 10 -d 500 \
    127.0.0.1:17060 -s bob -nostdin -timeout 30 >/dev/null 2>&1 || true)

acli() { "$sbc" acli --mgmt-socket "$sock" "$@"; }
for topic in health redundancy memory alarms sip-stats workers dialogs media access-control tls \
    running-config configuration; do
    acli -c "show $topic" >"$out/show/$topic.txt" 2>&1 || true
    acli --json -c "show $topic" >"$out/show/$topic.json" 2>&1 || true
done
acli -c "display-alarms" >"$out/show/display-alarms.txt" 2>&1 || true

curl -s http://127.0.0.1:17090/metrics >"$out/metrics.txt"
snmpwalk -v2c -c snapshot -t 2 -r 1 -M "+$root/snmp/mib:/usr/share/snmp/mibs" \
    -m SNMPv2-MIB:SBC-PAIR-MIB 127.0.0.1:17161 .1.3.6.1 >"$out/snmpwalk.txt" 2>/dev/null || true
cleanup
pids=()
rm -rf "$out/tmp"

# Shapes: what must stay the same.
python3 - "$out" <<'PY'
import json, pathlib, re, sys
out = pathlib.Path(sys.argv[1])
num = re.compile(r"(?<![A-Za-z_])[-+]?\d+(\.\d+)?(e[-+]?\d+)?")
def text_shape(s):
    s = re.sub(r"\b[0-9a-f]{16}\b", "HEX", s)
    s = re.sub(r"\S+@\S+", "CALLID", s)
    s = re.sub(r"\d{4}-\d\d-\d\dT\S+", "TIME", s)
    return re.sub(r"[ \t]+", " ", num.sub("N", s))
def json_shape(v, path=""):
    if isinstance(v, dict):
        for k in sorted(v):
            yield from json_shape(v[k], f"{path}.{k}")
        if not v:
            yield f"{path} {{}}"
    elif isinstance(v, list):
        if not v:
            yield f"{path} []"
        seen = set()
        for x in v:
            for line in json_shape(x, f"{path}[]"):
                if line not in seen:
                    seen.add(line)
                    yield line
    else:
        kind = type(v).__name__
        if kind == "str":
            kind = "str"
        yield f"{path} {kind}"
for f in sorted(out.rglob("*")):
    if f.is_dir() or f.suffix == ".shape":
        continue
    s = f.read_text(errors="replace")
    if f.suffix == ".json":
        try:
            shape = "\n".join(json_shape(json.loads(s))) + "\n"
        except ValueError:
            shape = text_shape(s)
    elif f.name == "metrics.txt":
        lines = []
        for line in s.splitlines():
            if line.startswith("#"):
                lines.append(line)
            else:
                name = re.match(r"[^{ ]+", line)
                labels = re.findall(r'(\w+)="', line)
                lines.append(f"{name.group(0) if name else line} {','.join(labels)}")
        shape = "\n".join(sorted(set(lines))) + "\n"
    elif f.name == "snmpwalk.txt":
        shape = "\n".join(sorted({re.sub(r"\.\d+(\.\d+)*$", ".IDX", l.split(" = ")[0]) + " = " + (l.split(" = ")[1].split(":")[0] if " = " in l else "") for l in s.splitlines()})) + "\n"
    else:
        shape = text_shape(s)
    pathlib.Path(str(f) + ".shape").write_text(shape)
PY
echo "snapshot in $out"
