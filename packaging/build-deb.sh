#!/usr/bin/env bash
# Builds target/debian/sbc_<version>_<arch>.deb with dpkg-deb alone (no cargo-deb to install):
# the release binary (without the demo feature), the systemd unit, the MIB, an example
# configuration as a conffile, the docs and the maintainer scripts.
# SBC_BIN=path skips the build and packages that binary.
set -euo pipefail
cd "$(dirname "$0")/.."
version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
arch=$(dpkg --print-architecture)
bin=${SBC_BIN:-target/release/sbc}
if [ -z "${SBC_BIN:-}" ]; then
    cargo build --release --locked -p sbc --no-default-features
fi
root=target/debian/root
rm -rf "$root" && mkdir -p "$root/DEBIAN"
install -D -m 0755 "$bin" "$root/usr/bin/sbc"
install -D -m 0644 packaging/sbc.service "$root/usr/lib/systemd/system/sbc.service"
install -D -m 0644 alarms/mib/SBC-PAIR-MIB.txt "$root/usr/share/snmp/mibs/SBC-PAIR-MIB.txt"
install -d -m 0750 "$root/etc/sbc"
"$bin" default-config > "$root/etc/sbc/sbc.toml"
chmod 0640 "$root/etc/sbc/sbc.toml"
install -D -m 0644 README.md "$root/usr/share/doc/sbc/README.md"
install -D -m 0644 packaging/debian/copyright "$root/usr/share/doc/sbc/copyright"
install -m 0755 packaging/debian/postinst packaging/debian/prerm packaging/debian/postrm "$root/DEBIAN/"
echo /etc/sbc/sbc.toml > "$root/DEBIAN/conffiles"
size=$(du -sk "$root" | cut -f1)
cat > "$root/DEBIAN/control" <<CONTROL
Package: sbc
Version: $version
Architecture: $arch
Maintainer: SBC pair developers <sbc@example.invalid>
Installed-Size: $size
Depends: adduser, libc6
Section: net
Priority: optional
Description: high-availability SIP session border controller pair
 An active/standby SIP B2BUA pair with state sync, health-driven switchover,
 memory alarms and SNMP traps; a systemd unit runs one node.
CONTROL
out=target/debian/sbc_${version}_${arch}.deb
dpkg-deb --build --root-owner-group "$root" "$out" >/dev/null
echo "$out"
