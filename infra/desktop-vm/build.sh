#!/usr/bin/env bash
# Build the OS domain's virtual machine: a Debian bookworm desktop image made with debootstrap (no
# registry, no installer, no loop devices), booted by QEMU with its own kernel and initrd.
#
# Usage: sudo infra/desktop-vm/build.sh       (root for debootstrap; idempotent: exits at once when built)
#        MIRROR=http://... infra/desktop-vm/build.sh
#
# Output, in $AGENTWORLD_CACHE_DIR (else $XDG_CACHE_HOME/agentworld, else ~/.cache/agentworld)
# under desktop-vm/$VERSION, the layout sandboxes/desktop/vm.py reads:
#   disk.qcow2      the root file system (ext4 on the whole disk: boot with root=/dev/vda)
#   vmlinuz, initrd.img   Debian's kernel and initramfs, extracted from the image
#   agent_key, agent_key.pub   the project's SSH user key, authorised for the guest user `agent`
#   host_key.pub, known_hosts  the guest's SSH host public key (generated here), so clients verify it
#   manifest.json   version, packages, sizes, build time
# The directory appears by one rename at the end, so a present directory is a complete build.
set -euo pipefail

if [[ "${1:-}" == "-h" || "${1:-}" == "--help" ]]; then
    sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'
    exit 0
fi

VERSION=2
SUITE=bookworm
HOSTNAME_VM=agentworld-desktop-vm
# debootstrap resolves only Depends of --include, never Recommends: the image stays lean.
PACKAGES=linux-image-amd64,systemd-sysv,udev,dbus,openssh-server,python3,python3-pyatspi,python3-xlib,\
python3-pil,xvfb,openbox,at-spi2-core,dbus-x11,gnome-calculator,mousepad,xterm,xdotool,scrot,\
procps,iproute2,netbase,fonts-dejavu-core,xkb-data
FREE_SPACE_MB=1024  # room the guest user gets on top of what the tree occupies

# Under sudo, build into the invoking user's cache (where their runs look) and give it to them.
OWNER_HOME="$HOME"
if [[ -n "${SUDO_USER:-}" && "${SUDO_USER}" != root ]]; then
    OWNER_HOME=$(getent passwd "$SUDO_USER" | cut -d: -f6)
fi
CACHE_ROOT="${AGENTWORLD_CACHE_DIR:-${XDG_CACHE_HOME:-$OWNER_HOME/.cache}/agentworld}"
OUT="$CACHE_ROOT/desktop-vm/$VERSION"
DEB_CACHE="$CACHE_ROOT/desktop-vm/debs"

if [[ -f "$OUT/manifest.json" ]]; then
    echo "desktop VM image v$VERSION already built in $OUT"
    exit 0
fi
if [[ $EUID -ne 0 ]]; then
    echo "build.sh: debootstrap and a root-owned file tree need root; run it with sudo" >&2
    exit 1
fi
for tool in debootstrap mkfs.ext4 qemu-img ssh-keygen; do
    command -v "$tool" >/dev/null || {
        echo "build.sh: $tool is missing (apt-get install debootstrap e2fsprogs qemu-utils openssh-client)" >&2
        exit 1
    }
done

# The mirror comes from the host's apt configuration (infra/images/lib.sh, shared by the image builds).
source "$(cd "$(dirname "${BASH_SOURCE[0]}")/../images" && pwd)/lib.sh"
MIRROR="${MIRROR:-$(host_mirror)}"

START=$(date +%s)
step() { echo "[desktop-vm $(($(date +%s) - START))s] $*"; }

mkdir -p "$CACHE_ROOT/desktop-vm" "$DEB_CACHE"
WORK=$(mktemp -d "$CACHE_ROOT/desktop-vm/.build-$VERSION.XXXXXX")
ROOTFS="$WORK/rootfs"
STAGE="$WORK/out"
cleanup() {
    # debootstrap leaves /proc and /sys mounted in the tree when it fails half way.
    for m in proc sys dev/pts dev; do umount -l "$ROOTFS/$m" 2>/dev/null || true; done
    rm -rf "$WORK"
}
trap cleanup EXIT
mkdir -p "$ROOTFS" "$STAGE"

step "1/5 debootstrap $SUITE from $MIRROR (the longest step: several minutes)"
# Progress: debootstrap's latest step every 20 s; its warnings and errors in full if it fails.
debootstrap --variant=minbase --cache-dir="$DEB_CACHE" --include="$PACKAGES" \
    "$SUITE" "$ROOTFS" "$MIRROR" >"$WORK/debootstrap.out" 2>&1 &
DEBOOTSTRAP_PID=$!
while kill -0 "$DEBOOTSTRAP_PID" 2>/dev/null; do
    sleep 20
    echo "  ... $(grep '^I: ' "$WORK/debootstrap.out" | tail -n1)"
done
if ! wait "$DEBOOTSTRAP_PID"; then
    grep -E '^(W|E): ' "$WORK/debootstrap.out" >&2 || true
    echo "build.sh: debootstrap failed; the end of its log:" >&2
    tail -n 30 "$ROOTFS/debootstrap/debootstrap.log" "$WORK/debootstrap.out" >&2 || true
    exit 1
fi

step "2/5 configure: hostname, user agent, SSH keys, serial console, DHCP"
echo "$HOSTNAME_VM" >"$ROOTFS/etc/hostname"
printf '127.0.0.1 localhost\n127.0.1.1 %s\n' "$HOSTNAME_VM" >"$ROOTFS/etc/hosts"
echo "/dev/vda / ext4 defaults,noatime 0 1" >"$ROOTFS/etc/fstab"
# An empty machine-id makes systemd generate one at first boot, so VMs do not share it.
: >"$ROOTFS/etc/machine-id"
chroot "$ROOTFS" useradd --create-home --shell /bin/bash agent
chroot "$ROOTFS" passwd --lock root >/dev/null

ssh-keygen -q -t ed25519 -N '' -C "agentworld-desktop-vm-user" -f "$STAGE/agent_key"
install -d -m 700 "$ROOTFS/home/agent/.ssh"
install -m 600 "$STAGE/agent_key.pub" "$ROOTFS/home/agent/.ssh/authorized_keys"
chroot "$ROOTFS" chown -R agent:agent /home/agent/.ssh

# One host key, generated here, replaces the ones openssh-server's postinst made: its public half
# is the VM's known_hosts entry, so clients verify the guest instead of trusting the first key seen.
rm -f "$ROOTFS"/etc/ssh/ssh_host_*
ssh-keygen -q -t ed25519 -N '' -C "$HOSTNAME_VM" -f "$ROOTFS/etc/ssh/ssh_host_ed25519_key"
cp "$ROOTFS/etc/ssh/ssh_host_ed25519_key.pub" "$STAGE/host_key.pub"
echo "$HOSTNAME_VM $(cut -d' ' -f1,2 "$STAGE/host_key.pub")" >"$STAGE/known_hosts"
cat >"$ROOTFS/etc/ssh/sshd_config.d/agentworld.conf" <<'EOF'
HostKey /etc/ssh/ssh_host_ed25519_key
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin no
AllowUsers agent
UseDNS no
X11Forwarding no
EOF

# systemd-networkd takes a DHCP lease on QEMU's user-mode NIC (the only route out is the host's
# port forward into sshd; `restrict=on` on the host side gives the guest no outbound network).
cat >"$ROOTFS/etc/systemd/network/20-dhcp.network" <<'EOF'
[Match]
Name=en* eth*

[Network]
DHCP=ipv4
EOF
ln -sf /lib/systemd/system/systemd-networkd.service \
    "$ROOTFS/etc/systemd/system/multi-user.target.wants/systemd-networkd.service"
ln -sf /lib/systemd/system/serial-getty@.service \
    "$ROOTFS/etc/systemd/system/getty.target.wants/serial-getty@ttyS0.service"
# Units a throwaway VM does not need and that only lengthen the boot.
for unit in systemd-networkd-wait-online.service apt-daily.timer apt-daily-upgrade.timer \
    e2scrub_all.timer e2scrub_reap.service fstrim.timer man-db.timer dpkg-db-backup.timer \
    systemd-timesyncd.service getty@tty1.service; do
    ln -sf /dev/null "$ROOTFS/etc/systemd/system/$unit"
done
# Font caches as of the final tree: stale ones make every application (and the window manager)
# rebuild its own under the user's home at start, slow under software emulation.
chroot "$ROOTFS" fc-cache -s -f
# Documentation, manual pages and translations nobody reads in a throwaway VM.
rm -rf "$ROOTFS"/usr/share/doc/* "$ROOTFS"/usr/share/man/* "$ROOTFS"/usr/share/info/*
find "$ROOTFS/usr/share/locale" -mindepth 1 -maxdepth 1 ! -name 'C.*' ! -name locale.alias -exec rm -rf {} +
rm -rf "$ROOTFS"/var/cache/apt/archives/*.deb "$ROOTFS"/var/lib/apt/lists/* "$ROOTFS"/var/log/*.log

step "3/5 extract the kernel and initrd"
cp "$(readlink -f "$ROOTFS/vmlinuz")" "$STAGE/vmlinuz"
cp "$(readlink -f "$ROOTFS/initrd.img")" "$STAGE/initrd.img"
KERNEL_VERSION=$(basename "$(readlink -f "$ROOTFS/vmlinuz")" | sed 's/^vmlinuz-//')

step "4/5 ext4 file system from the tree (mkfs.ext4 -d), converted to qcow2"
USED_MB=$(du -sm "$ROOTFS" | cut -f1)
SIZE_MB=$((USED_MB * 12 / 10 + FREE_SPACE_MB))
mkfs.ext4 -q -L agentworld-root -d "$ROOTFS" "$WORK/disk.raw" "${SIZE_MB}M"
qemu-img convert -f raw -O qcow2 "$WORK/disk.raw" "$STAGE/disk.qcow2"
rm -f "$WORK/disk.raw"

step "5/5 manifest"
QCOW_BYTES=$(stat -c %s "$STAGE/disk.qcow2")
cat >"$STAGE/manifest.json" <<EOF
{
  "version": $VERSION,
  "suite": "$SUITE",
  "hostname": "$HOSTNAME_VM",
  "user": "agent",
  "kernel_version": "$KERNEL_VERSION",
  "kernel_cmdline": "root=/dev/vda rw console=ttyS0",
  "packages": "$PACKAGES",
  "tree_mb": $USED_MB,
  "disk_virtual_mb": $SIZE_MB,
  "disk_qcow2_bytes": $QCOW_BYTES,
  "build_seconds": $(($(date +%s) - START))
}
EOF
chmod 600 "$STAGE/agent_key"
if [[ -n "${SUDO_USER:-}" && "${SUDO_USER}" != root ]]; then
    chown -R "$SUDO_USER": "$STAGE"
fi
mv "$STAGE" "$OUT"
step "built desktop VM image v$VERSION in $OUT (tree ${USED_MB} MB, qcow2 $((QCOW_BYTES / 1048576)) MB)"
