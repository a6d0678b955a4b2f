#!/usr/bin/env bash
# `make test-cgroup2`: run the sandbox tests on a cgroup-v2-only kernel, in a qemu VM.
#
# The host may run cgroup v1 (this project's CI machines do). The VM boots Debian's kernel (from
# the package registry, unpacked, not installed) with `cgroup_no_v1=all`, a busybox initramfs that
# loads the virtio/9p/overlay modules, the host's `/` over 9p read-only with a tmpfs overlay on
# top, then `switch_root`s into it and runs this script again with `--inside`: that mounts cgroup2
# on /sys/fs/cgroup and runs pytest from this worktree's .venv (`make dev` first). KVM when
# /dev/kvm is usable, TCG otherwise (slower; `-cpu max` because nsjail wants a newer x86-64 level
# than qemu's default CPU model). Needs root and the Debian packages in ci/vm-packages.txt
# (`make test-cgroup2` installs them). The kernel and initramfs are cached in .cache/cgroup2-vm.
#
# Inside, it also creates the unprivileged user `jobrunner-rootless` (with a subordinate id range)
# that tests/jobrunner/test_rootless.py runs servers as (rootless mode; newuidmap from `uidmap`).
#
# Exit status: pytest's inside the VM (0: every test passed), or 2 when the VM did not report.
# CGROUP2_VM_TESTS=id,id,... runs those pytest ids instead of the set below (the kernel command line
# carries it into the VM, so no spaces); CGROUP2_VM_TESTS=container runs ci/container-test.sh
# there instead (`make test-container` on a cgroup v1 host).
set -euo pipefail

TESTS=(
    tests/jobrunner/test_sandbox.py
    tests/jobrunner/test_sandbox_hardening.py
    tests/jobrunner/test_sandbox_workdir.py
    tests/jobrunner/test_cpu_share.py
    "tests/jobrunner/test_api.py::test_completed_job_status_outputs_and_downloads"
    tests/jobrunner/test_rootless.py
)
MODULES="virtio_ring virtio virtio_pci_modern_dev virtio_pci_legacy_dev virtio_pci netfs fscache
    9pnet 9pnet_virtio 9p overlay"

repo="$(cd "$(dirname "$0")/.." && pwd)"

if [ "${1:-}" = "--inside" ]; then
    # PID 1 of the VM, in the overlay of the host's root.
    export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
    mount -t proc proc /proc 2>/dev/null || true
    mount -t sysfs sysfs /sys 2>/dev/null || true
    mount -t devtmpfs devtmpfs /dev 2>/dev/null || true
    mkdir -p /dev/pts /dev/shm
    mount -t devpts devpts /dev/pts
    for dir in /tmp /run /dev/shm; do mount -t tmpfs -o mode=1777 tmpfs "$dir"; done
    mount -t cgroup2 cgroup2 /sys/fs/cgroup
    ip link set lo up
    echo "VM: kernel $(uname -r); /sys/fs/cgroup is $(stat -f -c %T /sys/fs/cgroup);" \
        "controllers: $(cat /sys/fs/cgroup/cgroup.controllers)"
    # Rootless mode (tests/jobrunner/test_rootless.py): an unprivileged user with subordinate
    # ids, made in the overlay as an operator would; each test delegates a cgroup to its server.
    useradd --system --user-group --no-create-home --home-dir /nonexistent \
        --shell /usr/sbin/nologin jobrunner-rootless
    usermod --add-subuids 300000-365535 --add-subgids 300000-365535 jobrunner-rootless
    export JOBRUNNER_ROOTLESS_USER=jobrunner-rootless
    # That user runs the worktree's .venv, whose interpreter may live below a 0700 home (pyenv's
    # in /root): let it pass through (in the VM's overlay only).
    dir="$(dirname "$(readlink -f "$repo/.venv/bin/python3")")"
    while [ "$dir" != / ]; do chmod o+x "$dir"; dir="$(dirname "$dir")"; done
    cd "$repo"
    set +e
    if [ "${CGROUP2_VM_TESTS:-}" = container ]; then
        # `make test-container` on a cgroup v1 host: podman here, its storage in RAM (an
        # overlayfs cannot be the upper layer of another), no systemd, no netfilter modules.
        mkdir -p /var/lib/containers /etc/containers
        mount -t tmpfs tmpfs /var/lib/containers
        printf '[engine]\ncgroup_manager = "cgroupfs"\nevents_logger = "file"\n' \
            >/etc/containers/containers.conf
        echo "containers:2147483647:2147483648" | tee -a /etc/subuid >>/etc/subgid
        CONTAINER_NETWORK=host bash ci/container-test.sh --inside-vm 2>&1
        code=$?
    else
        [ -z "${CGROUP2_VM_TESTS:-}" ] || IFS=, read -r -a TESTS <<<"$CGROUP2_VM_TESTS"
        CI=true JOBRUNNER_TEST_START_TIMEOUT=300 .venv/bin/python -m pytest -p no:cacheprovider -q -rA "${TESTS[@]}" 2>&1
        code=$?
    fi
    set -e
    echo "CGROUP2-VM-RESULT $code"
    sync
    echo o > /proc/sysrq-trigger  # power off
    sleep 60 2>/dev/null || true  # until the power is off
fi

[ "$(id -u)" = 0 ] || { echo "cgroup2-vm: needs root" >&2; exit 2; }
for tool in qemu-system-x86_64 cpio; do
    command -v "$tool" >/dev/null || { echo "cgroup2-vm: missing $tool (make test-cgroup2 installs ci/vm-packages.txt)" >&2; exit 2; }
done
[ -x /bin/busybox ] || { echo "cgroup2-vm: missing /bin/busybox (busybox-static)" >&2; exit 2; }
[ -x "$repo/.venv/bin/python" ] || { echo "cgroup2-vm: run make dev first" >&2; exit 2; }

cache="$repo/.cache/cgroup2-vm"
mkdir -p "$cache"
if [ ! -e "$cache/vmlinuz" ]; then
    package="$(apt-cache depends linux-image-amd64 | awk '/Depends: linux-image-/ {print $2; exit}')"
    echo "cgroup2-vm: fetching $package"
    (cd "$cache" && apt-get download -q "$package")
    rm -rf "$cache/kernel"
    dpkg-deb -x "$cache/$package"_*.deb "$cache/kernel"
    cp "$cache"/kernel/boot/vmlinuz-* "$cache/vmlinuz"
fi
if [ ! -e "$cache/initrd.cpio.gz" ]; then
    build="$cache/initrd"
    rm -rf "$build"
    mkdir -p "$build"/{bin,proc,sys,dev,host,upper,newroot,modules}
    cp /bin/busybox "$build/bin/busybox"
    for module in $MODULES; do
        file="$(find "$cache/kernel/lib/modules" -name "$module.ko*" | head -n 1)"
        [ -n "$file" ] || continue  # built into this kernel
        case "$file" in
            *.xz) xz -dc "$file" >"$build/modules/$module.ko" ;;
            *.zst) zstd -qdc "$file" >"$build/modules/$module.ko" ;;
            *) cp "$file" "$build/modules/$module.ko" ;;
        esac
    done
    cat >"$build/init" <<'EOF'
#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc; mount -t sysfs sysfs /sys; mount -t devtmpfs devtmpfs /dev
# Dependencies first; a few passes instead of a dependency resolver.
for pass in 1 2 3; do for m in $MODULES; do
    [ -e /modules/$m.ko ] && insmod /modules/$m.ko 2>/dev/null; done; done
mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize=262144,cache=loose host /host || exec sh
mount -t tmpfs tmpfs /upper && mkdir /upper/data /upper/work
mount -t overlay overlay -o lowerdir=/host,upperdir=/upper/data,workdir=/upper/work /newroot || exec sh
umount /proc /sys /dev
# switch_root, not chroot: a chrooted process may not create user namespaces (nsjail needs them).
exec switch_root /newroot /bin/bash "$SCRIPT" --inside
EOF
    sed -i "s|\$MODULES|$(echo $MODULES)|" "$build/init"
    chmod 755 "$build/init"
    (cd "$build" && find . | cpio -o -H newc --quiet | gzip -1) >"$cache/initrd.cpio.gz"
fi

# KVM when it works: under nested virtualisation it may not (on this project's machines `-cpu host`
# fails to set MSR 0x10a, and without arch-capabilities the kernel hangs before its first line), so
# a 20 s boot without a root file system must reach the kernel's panic first.
accel=(-accel tcg -cpu max)
name=TCG
if [ -w /dev/kvm ] && [ "${CGROUP2_VM_ACCEL:-auto}" != tcg ]; then
    kvm=(-enable-kvm -cpu host,-arch-capabilities)
    if timeout 20 qemu-system-x86_64 "${kvm[@]}" -m 256 -nographic -no-reboot -monitor none \
        -serial stdio -kernel "$cache/vmlinuz" -append "console=ttyS0 panic=-1" -nic none \
        </dev/null 2>&1 | grep -a -q "Kernel panic"; then
        accel=("${kvm[@]}")
        name=KVM
    fi
fi
log="$cache/console.log"
echo "cgroup2-vm: booting ($name); console in $log"
timeout "${CGROUP2_VM_TIMEOUT:-1800}" qemu-system-x86_64 "${accel[@]}" -m 4096 -smp 2 \
    -nographic -no-reboot -monitor none -serial stdio \
    -kernel "$cache/vmlinuz" -initrd "$cache/initrd.cpio.gz" \
    -append "console=ttyS0 quiet panic=-1 cgroup_no_v1=all SCRIPT=$repo/ci/cgroup2-vm.sh${CGROUP2_VM_TESTS:+ CGROUP2_VM_TESTS=$CGROUP2_VM_TESTS}" \
    -virtfs local,path=/,mount_tag=host,security_model=none,readonly=on,multidevs=remap \
    -nic none </dev/null | tee "$log" | grep -v '^\s*$' || true
result="$(grep -a -o 'CGROUP2-VM-RESULT [0-9]*' "$log" | tail -n 1 | awk '{print $2}')"
[ -n "$result" ] || { echo "cgroup2-vm: the VM did not report a result (see $log)" >&2; exit 2; }
exit "$result"
