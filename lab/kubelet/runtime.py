"""What the container runtime does for a container's first process, in a preexec function before
exec: the pod's namespaces joined, a mount namespace whose root holds the node's directories and the
pod's volumes, the capabilities it keeps, its user and groups.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import os

from . import linux
from .common import PodError
from .linux import CLONE_NEWNS, MS_BIND, MS_NODEV, MS_NOSUID, MS_PRIVATE, MS_RDONLY, MS_REC, MS_REMOUNT
from .sandbox import join_pod

CREATE_FAILED = "lab kubelet: cannot create the container: "  # a preexec's last word, in the log


# --- the container's file system view --------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Mount:
    source: str
    target: str  # the container's mountPath
    read_only: bool


def resolve_in_root(root: str, path: str, max_links: int = 40) -> str:
    """``path`` as the container sees it, resolved inside ``root``: a symlink (``/var/run`` -> ``/run``)
    is followed within the root, never out of it (what runc's securejoin does)."""
    parts = [p for p in path.split("/") if p and p != "."]
    resolved: list[str] = []
    links = 0
    while parts:
        part = parts.pop(0)
        if part == "..":
            if resolved:
                resolved.pop()
            continue
        candidate = os.path.join(root, *resolved, part)
        if os.path.islink(candidate):
            links += 1
            if links > max_links:
                raise OSError(f"too many levels of symbolic links in {path}")
            target = os.readlink(candidate)
            if target.startswith("/"):
                resolved = []
            parts = [p for p in target.split("/") if p and p != "."] + parts
            continue
        resolved.append(part)
    return os.path.join(root, *resolved)


def _make_mount_point(root: str, target: str, is_dir: bool, scratch: str, overlays: list[str]) -> str:
    """The path of ``target`` inside ``root``, created without writing to the node: a missing path
    is made in a private overlay over its deepest existing ancestor (a tmpfs upper layer), unless
    that ancestor is already in one made for this container (``overlays``: an overlay over a
    directory of another overlay is refused with EINVAL, and it is writable anyway)."""
    inside = resolve_in_root(root, target)
    if os.path.lexists(inside):
        return inside
    ancestor = os.path.dirname(inside.rstrip("/"))
    while not os.path.isdir(ancestor):
        ancestor = os.path.dirname(ancestor)
    writable = any(ancestor == made or ancestor.startswith(made + "/") for made in overlays)
    if not writable and os.path.realpath(ancestor) != os.path.realpath(root):
        overlays.append(ancestor)
        upper, work = f"{scratch}/upper{len(overlays)}", f"{scratch}/work{len(overlays)}"
        os.makedirs(upper)
        os.makedirs(work)
        linux.mount("overlay", ancestor, "overlay", 0, f"lowerdir={ancestor},upperdir={upper},workdir={work}")
    if is_dir:
        os.makedirs(inside, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(inside), exist_ok=True)
        open(inside, "a").close()  # noqa: SIM115 - a mount point
    return inside


# Linux capability numbers (include/uapi/linux/capability.h), by the names Kubernetes uses.
CAPABILITIES = {
    name: number
    for number, name in enumerate(
        [
            "CHOWN",
            "DAC_OVERRIDE",
            "DAC_READ_SEARCH",
            "FOWNER",
            "FSETID",
            "KILL",
            "SETGID",
            "SETUID",
            "SETPCAP",
            "LINUX_IMMUTABLE",
            "NET_BIND_SERVICE",
            "NET_BROADCAST",
            "NET_ADMIN",
            "NET_RAW",
            "IPC_LOCK",
            "IPC_OWNER",
            "SYS_MODULE",
            "SYS_RAWIO",
            "SYS_CHROOT",
            "SYS_PTRACE",
            "SYS_PACCT",
            "SYS_ADMIN",
            "SYS_BOOT",
            "SYS_NICE",
            "SYS_RESOURCE",
            "SYS_TIME",
            "SYS_TTY_CONFIG",
            "MKNOD",
            "LEASE",
            "AUDIT_WRITE",
            "AUDIT_CONTROL",
            "SETFCAP",
            "MAC_OVERRIDE",
            "MAC_ADMIN",
            "SYSLOG",
            "WAKE_ALARM",
            "BLOCK_SUSPEND",
            "AUDIT_READ",
            "PERFMON",
            "BPF",
            "CHECKPOINT_RESTORE",
        ]
    )
}
# containerd's default set (its oci.DefaultSpec), what a container gets unless it adds or drops.
RUNTIME_DEFAULT_CAPABILITIES = frozenset(
    CAPABILITIES[name]
    for name in (
        [
            "CHOWN",
            "DAC_OVERRIDE",
            "FSETID",
            "FOWNER",
            "MKNOD",
            "NET_RAW",
            "SETGID",
            "SETUID",
            "SETFCAP",
            "SETPCAP",
            "NET_BIND_SERVICE",
            "SYS_CHROOT",
            "KILL",
            "AUDIT_WRITE",
        ]
    )
)
_PR_CAPBSET_DROP = 24


def kept_capabilities(container: dict) -> frozenset[int] | None:
    """The capabilities a container keeps, by containerd's rule for ``securityContext.capabilities``:
    ``add: [ALL]`` starts from every capability, ``drop: [ALL]`` from none, otherwise the runtime's
    default set; then the named ones are added and the named drops removed. None when the container
    names no capabilities: the lab then leaves the process the set it starts with (a difference from
    containerd, which would give its default set; every pod the roles deploy names its own)."""
    given = (container.get("securityContext") or {}).get("capabilities")
    if not given:
        return None

    def names(field: str) -> set[str]:
        found = set()
        for name in given.get(field) or []:
            key = str(name).upper().removeprefix("CAP_")
            if key != "ALL" and key not in CAPABILITIES:
                raise PodError(f"unknown capability {name!r} in securityContext.capabilities.{field}")
            found.add(key)
        return found

    add, drop = names("add"), names("drop")
    if "ALL" in add:
        kept = set(CAPABILITIES.values())
    elif "ALL" in drop:
        kept = set()
    else:
        kept = set(RUNTIME_DEFAULT_CAPABILITIES)
    kept |= {CAPABILITIES[n] for n in add - {"ALL"}}
    kept -= {CAPABILITIES[n] for n in drop - {"ALL"}}
    return frozenset(kept)


def limit_capabilities(kept: frozenset[int]) -> None:
    """Drop every other capability from the bounding set (before the uid changes: it needs
    CAP_SETPCAP). A process that stays uid 0 gets exactly the bounding set at exec; one that
    becomes non-root loses them all at setuid, as in a container without ambient capabilities."""
    for number in range(64):
        if number in kept:
            continue
        if linux.libc.prctl(_PR_CAPBSET_DROP, number, 0, 0, 0) != 0:
            code = ctypes.get_errno()
            if code == 22:  # EINVAL: past the kernel's last capability
                break
            raise OSError(code, f"prctl(PR_CAPBSET_DROP, {number}): {os.strerror(code)}")


def run_as(pod: dict, container: dict, image: dict | None = None) -> tuple | None:
    """``(uid, gid, groups)`` a container's process runs as, by kubelet's and the runtime's rules:
    the container's ``securityContext`` over the pod's, else the image's USER; None for the runtime's
    default (root). ``runAsNonRoot`` refuses uid 0 and an image that would run as root, with
    kubelet's own words (pkg/kubelet/kuberuntime/security_context_others.go)."""
    pod_ctx = (pod.get("spec") or {}).get("securityContext") or {}
    ctx = container.get("securityContext") or {}
    uid = ctx.get("runAsUser", pod_ctx.get("runAsUser"))
    gid = ctx.get("runAsGroup", pod_ctx.get("runAsGroup"))
    non_root = ctx.get("runAsNonRoot", pod_ctx.get("runAsNonRoot"))
    if uid is None and (image or {}).get("user"):
        # the image's USER (uid[:gid], numeric), as the runtime applies it when the pod names none
        image_uid, _colon, image_gid = str(image["user"]).partition(":")
        uid = int(image_uid)
        gid = gid if gid is not None else (int(image_gid) if image_gid else None)
    if uid is None:
        if non_root:
            # kubelet: an image whose user is root (an image without USER) cannot run as non-root.
            raise PodError("container has runAsNonRoot and image will run as root")
        return None
    if non_root and int(uid) == 0:
        raise PodError("container's runAsUser breaks non-root policy")
    groups = {int(g) for g in pod_ctx.get("supplementalGroups") or []}
    if pod_ctx.get("fsGroup") is not None:
        groups.add(int(pod_ctx["fsGroup"]))
    return int(uid), int(gid if gid is not None else uid), tuple(sorted(groups))


def container_preexec(*container):
    """``enter_container(*container)`` as a preexec function that says on stderr (the container's
    log) why it failed: subprocess only reports "Exception occurred in preexec_fn"."""

    def run() -> None:
        try:
            enter_container(*container)
        except BaseException as exc:
            with contextlib.suppress(OSError):
                os.write(2, f"{CREATE_FAILED}{exc!r}\n".encode())
            raise

    return run


def enter_container(
    pod_ns: str | None,
    rootfs: str,
    mounts: list[Mount],
    working_dir: str | None,
    user: tuple | None,
    capabilities: frozenset[int] | None = None,
) -> None:
    """Runs in the container's first process before exec: the pod's network and UTS namespaces
    (none for a host-network pod), a private mount namespace whose root is a tmpfs holding the node's top-level
    directories (recursive binds) and the volumes."""
    if pod_ns is not None:
        join_pod(pod_ns)
    linux.own_namespace(CLONE_NEWNS, "CLONE_NEWNS")
    linux.mount("none", "/", None, MS_REC | MS_PRIVATE)
    linux.mount("tmpfs", rootfs, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755")
    scratch = os.path.join(rootfs, ".lab-scratch")
    os.makedirs(scratch)
    linux.mount("tmpfs", scratch, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0700")
    for entry in os.scandir("/"):
        target = os.path.join(rootfs, entry.name)
        if entry.is_symlink():
            os.symlink(os.readlink(entry.path), target)
        elif entry.is_dir():
            os.mkdir(target)
            linux.mount(entry.path, target, None, MS_BIND | MS_REC)
    overlays: list[str] = []
    for mount in mounts:
        is_dir = os.path.isdir(mount.source)
        inside = _make_mount_point(rootfs, mount.target, is_dir, scratch, overlays)
        linux.mount(mount.source, inside, None, MS_BIND | MS_REC)
        if mount.read_only:
            linux.mount("none", inside, None, MS_BIND | MS_REMOUNT | MS_RDONLY)
    os.chroot(rootfs)
    os.chdir(working_dir or "/")
    if capabilities is not None:
        limit_capabilities(capabilities)
    if user is not None:
        uid, gid, groups = user
        os.setgroups(list(groups))
        os.setgid(gid)
        os.setuid(uid)
