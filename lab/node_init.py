"""The first process of a lab node: makes this machine look like one bare-metal Kubernetes node.

``lab/nodes.py`` starts it as ``unshare --mount --uts [--net] --propagation private /usr/bin/python3
node_init.py CONFIG``: it runs in a mount and UTS namespace of its own (a worker in a network
namespace of its own too), with the node's system
interpreter (the one a fresh Debian server has), and only the standard library, because once the
node's file system is in place nothing of the controller (its checkout, its virtualenv) is visible.

What it does, in order (each step idempotent, so a restart - ``lab reboot`` - boots the same disk):

1. the node's disk: overlays of ``/etc``, ``/usr``, ``/var`` and ``/opt`` whose upper layers are the
   node's own directories (the host's files are the "installed distribution"; every change the node
   makes stays in its layer), fresh ``/root`` and ``/home``, private ``/tmp`` and ``/run``;
2. the node's kernel: the fake sysfs trees of this node bind-mounted over the real paths
   (``/sys/devices/system/cpu``, ``/sys/class/powercap`` ...), and its ``/proc/stat``;
3. the lab's kubelet stand-in and "container images" at ``/usr/lib/poweraware-lab`` (read-only), and
   kubeadm at ``/usr/bin/kubeadm``;
4. the controller hidden: the checkout and the lab state directory are covered by empty tmpfs;
5. identity: hostname, ``/etc/hosts``, the login user with its SSH key and passwordless sudo, the
   SSH host key (generated on first boot, kept on the node's disk);
6. network (a worker: it has a network namespace of its own): its address, routes and pod overlay
   once the lab has cabled its ``eth0`` (lab/components/network.py);
7. boot: every enabled unit of ``multi-user.target``, oneshot or long-running (``systemctl --boot``,
   lab/node_systemctl.py);
8. services: ``sshd`` on the node's own address, and the static-pod runner on nodes that have one.

It then supervises them: a service that exits is restarted (1 s back-off); SIGTERM stops the units
the node's service manager runs (``systemctl --shutdown``, as systemd stops them when a machine goes
down), then them, and ends the namespace, which takes every mount with it.
"""

import ctypes
import ctypes.util
import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import time

MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_REMOUNT = 32
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18

LAB_LIB = "/usr/lib/poweraware-lab"
KUBEADM = "/usr/bin/kubeadm"
# Directories whose upper layer is the node's own disk. /usr holds /usr/local, where roles install
# their runners; /var holds /var/lib (kubelet, dpkg) and /var/log.
OVERLAYS = ("etc", "usr", "var", "opt")
# The node's view of these sysfs subtrees comes from its fake kernel (only those the tree has).
SYSFS_SUBTREES = (
    "devices/system/cpu",
    "devices/system/node",  # its NUMA nodes, whose CPUs are the fake kernel's, not this machine's
    "class/powercap",
    "devices/virtual/powercap",
    "class/hwmon",
)

_libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
_libc.mount.argtypes = (ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p)


def log(message):
    print(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} node-init: {message}", flush=True)


def mount(source, target, fstype=None, flags=0, data=None):
    def enc(value):
        return value.encode() if isinstance(value, str) else value

    if _libc.mount(enc(source), enc(str(target)), enc(fstype), flags, enc(data)) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"mount {source} on {target} ({fstype or 'bind'}): {os.strerror(errno)}")


def bind(source, target, read_only=False):
    mount(str(source), target, None, MS_BIND | MS_REC)
    if read_only:
        mount("none", target, None, MS_BIND | MS_REMOUNT | MS_RDONLY)


def set_up_disk(cfg):
    disk = pathlib.Path(cfg["disk"])
    work = pathlib.Path(cfg["overlay_work"])
    # Nothing mounted here may leak back into the controller's mount table.
    mount("none", "/", None, MS_REC | MS_PRIVATE)
    for name in OVERLAYS:
        upper, workdir = disk / name, work / name
        upper.mkdir(parents=True, exist_ok=True)
        workdir.mkdir(parents=True, exist_ok=True)
        mount("overlay", f"/{name}", "overlay", 0, f"lowerdir=/{name},upperdir={upper},workdir={workdir}")


def set_up_homes(cfg):
    disk = pathlib.Path(cfg["disk"])
    for name in ("root", "home"):
        (disk / name).mkdir(mode=0o700 if name == "root" else 0o755, exist_ok=True)
        bind(disk / name, f"/{name}")


def graft(target, source):
    """Bind ``source`` at ``target``, even where the real machine has no such directory.

    sysfs cannot grow directories (this machine has no /sys/class/powercap), so the parent is
    shadowed by a tmpfs in which every original entry is bound back, then the new one is added."""
    target = pathlib.Path(target)
    if not target.exists():
        parent = target.parent
        if not parent.is_dir():
            raise OSError(f"cannot graft {target}: this machine has no {parent}")
        keep = os.open(parent, os.O_RDONLY | os.O_DIRECTORY)
        try:
            entries = os.listdir(f"/proc/self/fd/{keep}")
            mount("tmpfs", parent, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755")
            for entry in entries:
                original = f"/proc/self/fd/{keep}/{entry}"
                if os.path.isdir(original):
                    (parent / entry).mkdir()
                else:
                    (parent / entry).touch()
                bind(original, parent / entry)
        finally:
            os.close(keep)
        target.mkdir()
    bind(source, target)


def set_up_kernel(cfg):
    sys_tree = pathlib.Path(cfg["sysfs"])
    for sub in SYSFS_SUBTREES:
        source = sys_tree / sub
        if source.is_dir() and not source.is_symlink():
            graft(pathlib.Path("/sys") / sub, source)
    # The node's CPU times (lab/fake_procfs.py), read-only as the kernel's file is.
    stat = cfg.get("proc_stat")
    if stat and os.path.isfile(stat):
        bind(stat, "/proc/stat", read_only=True)


def set_up_lab_lib(cfg):
    lib = pathlib.Path(LAB_LIB)
    images = lib / "images"
    images.mkdir(parents=True, exist_ok=True)
    bind(cfg["images"], images, read_only=True)
    # kubeadm where its Debian/RPM package puts it, read-only like a package's file: every kubeadm
    # node has it, and `sudo kubeadm upgrade ...` / `kubeadm init phase ...` run as on a real node.
    kubeadm = images / "kubeadm"
    if kubeadm.is_file():
        target = pathlib.Path(KUBEADM)
        if not target.exists():
            target.touch(mode=0o755)
        bind(kubeadm, target, read_only=True)


def hide_controller(cfg):
    mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777")  # noqa: S108 - the node's own /tmp
    mount("tmpfs", "/run", "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755")
    for path in cfg["hide"]:
        if os.path.isdir(path):
            mount("tmpfs", path, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV, "mode=0755,size=4k")


def _ensure_line(path, line, match_prefix, mode=None):
    path = pathlib.Path(path)
    text = path.read_text() if path.exists() else ""
    if any(existing.startswith(match_prefix) for existing in text.splitlines()):
        return
    if text and not text.endswith("\n"):
        text += "\n"
    path.write_text(text + line + "\n")
    if mode is not None:
        os.chmod(path, mode)


def set_up_identity(cfg):
    name, address = cfg["name"], cfg["address"]
    _libc.sethostname(name.encode(), len(name))
    pathlib.Path("/etc/hostname").write_text(name + "\n")
    hosts = ["127.0.0.1\tlocalhost", "::1\tlocalhost ip6-localhost ip6-loopback"]
    hosts += [f"{addr}\t{host}" for host, addr in sorted(cfg["cluster_hosts"].items(), key=lambda h: h[1])]
    pathlib.Path("/etc/hosts").write_text("\n".join(hosts) + "\n")

    user, uid = cfg["user"], int(cfg["uid"])
    home = pathlib.Path("/home") / user
    _ensure_line("/etc/group", f"{user}:x:{uid}:", f"{user}:")
    _ensure_line("/etc/passwd", f"{user}:x:{uid}:{uid}:lab node login:{home}:/bin/bash", f"{user}:")
    # '*': no password can ever match, but the account is not locked (key logins work).
    _ensure_line("/etc/shadow", f"{user}:*:19000:0:99999:7:::", f"{user}:", mode=0o640)
    sudoers = pathlib.Path("/etc/sudoers.d") / "90-lab-login"
    sudoers.parent.mkdir(mode=0o750, exist_ok=True)
    sudoers.write_text(f"{user} ALL=(ALL:ALL) NOPASSWD: ALL\n")
    os.chmod(sudoers, 0o440)
    ssh_dir = home / ".ssh"
    ssh_dir.mkdir(parents=True, exist_ok=True)
    (ssh_dir / "authorized_keys").write_text(cfg["authorized_key"].strip() + "\n")
    for path, mode in ((home, 0o755), (ssh_dir, 0o700), (ssh_dir / "authorized_keys", 0o600)):
        os.chown(path, uid, uid)
        os.chmod(path, mode)

    first_boot = pathlib.Path("/etc/.lab-node-installed")
    if not first_boot.exists():
        # The services this machine enables (its databases, its Prometheus) are not the node's: a
        # freshly installed node boots with none of them.
        wants = pathlib.Path("/etc/systemd/system/multi-user.target.wants")
        for entry in wants.iterdir() if wants.is_dir() else []:
            entry.unlink()
        # and a node with nothing enabled has no .wants directory: systemctl removes one it empties
        if wants.is_dir():
            wants.rmdir()
        first_boot.write_text(f"{name}\n")

    ssh = pathlib.Path("/etc/ssh")
    key = ssh / "ssh_host_ed25519_key"
    marker = ssh / ".lab-host-key"
    if not marker.exists():
        # The distribution's host keys are the controller's: this node makes its own.
        for old in ssh.glob("ssh_host_*"):
            old.unlink()
        subprocess.run(
            ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"root@{name}", "-f", str(key)], check=True
        )
        marker.write_text("")
    (ssh / "sshd_config").write_text(
        "# Written by the lab (lab/node_init.py): this node's sshd, on its own address only.\n"
        f"ListenAddress {address}:{cfg['ssh_port']}\n"
        f"HostKey {key}\n"
        "PermitRootLogin no\n"
        "PasswordAuthentication no\n"
        "KbdInteractiveAuthentication no\n"
        "PubkeyAuthentication yes\n"
        "AuthorizedKeysFile .ssh/authorized_keys\n"
        # No PAM: a mount namespace has no login sessions to register (pam_loginuid, pam_systemd).
        "UsePAM no\n"
        "PrintMotd no\n"
        "AcceptEnv LANG LC_*\n"
        "Subsystem sftp /usr/lib/openssh/sftp-server\n"
        "PidFile /run/sshd.pid\n"
    )
    pathlib.Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)


class Service:
    def __init__(self, name, argv, log_path):
        self.name, self.argv, self.log_path = name, argv, log_path
        self.proc = None
        self.next_start = 0.0

    def start(self):
        pathlib.Path(self.log_path).parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab", buffering=0) as out:
            out.write(f"==> {time.strftime('%Y-%m-%dT%H:%M:%S')} starting {' '.join(self.argv)}\n".encode())
            self.proc = subprocess.Popen(
                self.argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )
        log(f"started {self.name} (pid {self.proc.pid})")

    def supervise(self, now):
        if self.proc is not None and self.proc.poll() is None:
            return
        if self.proc is not None:
            log(f"{self.name} exited with {self.proc.returncode}: restarting in 1 s")
            self.proc = None
            self.next_start = now + 1.0
        if now >= self.next_start:
            self.start()

    def stop(self):
        if self.proc is None or self.proc.poll() is not None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            return
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


def services(cfg):
    found = [Service("sshd", ["/usr/sbin/sshd", "-D", "-e"], "/var/log/lab/sshd.log")]
    if cfg.get("kubelet"):
        found.append(
            Service("kubelet", ["/usr/bin/python3", f"{LAB_LIB}/kubelet", *cfg["kubelet"]], "/var/log/lab/kubelet.log")
        )
    return found


def set_up_network(cfg, timeout=30.0):
    """A worker's network, as its boot configures one (ifupdown, networkd): wait for its cable (the
    lab plugs ``eth0`` in from the site's side once this process runs), then the addresses, routes
    and overlay the lab wrote for it, and its sysctls. The control-plane node has none to do."""
    network = cfg.get("network") or {}
    if not network:
        return
    interface = network["interface"]
    # sysfs shows the network devices of the namespace that mounted it: the node's /sys is this
    # machine's, so its /sys/class/net (what `ip -d`, udev and Ansible's facts read) comes from a
    # sysfs mounted here, in the node's own namespace.
    own = pathlib.Path("/run/lab-sysfs")
    own.mkdir(mode=0o700, exist_ok=True)
    mount("sysfs", own, "sysfs", MS_NOSUID | MS_NODEV | MS_RDONLY)
    for sub in ("class/net", "devices/virtual/net"):
        bind(own / sub, pathlib.Path("/sys") / sub)
    deadline = time.monotonic() + timeout
    while subprocess.run(["ip", "link", "show", interface], capture_output=True, check=False).returncode != 0:
        if time.monotonic() > deadline:
            raise RuntimeError(f"no {interface} within {timeout:.0f} s: the lab did not cable this node")
        time.sleep(0.05)
    for key, value in network["sysctls"].items():
        pathlib.Path("/proc/sys", key).write_text(f"{value}\n")
    for argv in network["commands"]:
        done = subprocess.run(argv, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)}: {done.stderr.strip()}")


def boot():
    # What systemd does at boot for multi-user.target, through the node's service manager.
    result = subprocess.run(["/usr/local/sbin/systemctl", "--boot"], capture_output=True, text=True, check=False)
    for line in (result.stdout + result.stderr).splitlines():
        log(f"boot: {line}")


def shut_down(timeout=10.0):
    """What systemd does when the machine goes down: stop the services its service manager runs
    (each by its KillMode= and TimeoutStopSec=). Within the lab's grace for the node's stop; what is
    left after it dies with the node (lab/nodes.py)."""
    try:
        result = subprocess.run(
            ["/usr/local/sbin/systemctl", "--shutdown"], capture_output=True, text=True, check=False, timeout=timeout
        )
    except subprocess.TimeoutExpired:
        log(f"shutdown: services still stopping after {timeout:.0f} s: left to the power-off")
        return
    for line in (result.stdout + result.stderr).splitlines():
        log(f"shutdown: {line}")


def main(argv):
    cfg = json.loads(pathlib.Path(argv[1]).read_text())
    set_up_disk(cfg)
    # Bind sources may live anywhere on this machine (the image cache in /root): before the homes.
    set_up_kernel(cfg)
    set_up_lab_lib(cfg)
    set_up_homes(cfg)
    hide_controller(cfg)
    set_up_identity(cfg)
    set_up_network(cfg)
    os.chdir("/")
    boot()
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    signal.signal(signal.SIGINT, lambda *_: stopping.append(True))
    running = services(cfg)
    pathlib.Path("/run/lab-node-ready").write_text(f"{os.getpid()}\n")
    log(f"{cfg['name']} up at {cfg['address']}")
    while not stopping:
        now = time.monotonic()
        for service in running:
            service.supervise(now)
        time.sleep(0.5)
    shut_down()
    for service in reversed(running):
        service.stop()
    log("stopped")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv))
    except Exception as exc:  # noqa: BLE001 - the reason must reach the lab's log, then exit
        log(f"FAILED: {exc!r}")
        shutil.rmtree("/run/lab-node-ready", ignore_errors=True)
        sys.exit(1)
