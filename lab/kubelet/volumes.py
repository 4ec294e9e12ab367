"""A pod's volumes as kubelet makes them, under ``/var/lib/kubelet/pods/<uid>/volumes``: ConfigMap,
Secret, projected (a service-account token, renewed), downwardAPI, emptyDir, hostPath, and the
``local`` or ``hostPath`` PersistentVolume of a claim; the API's volumes kept up to date.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import pathlib
import re
import shutil
import stat
import time

from .client import NodeApi
from .common import PodError, log

TOKEN_REFRESH_AT = 0.8  # kubelet renews a projected token after 80 % of its life
# kubelet's syncFrequency (default 1m, kubeadm sets none): how often a running pod's ConfigMap,
# Secret and downwardAPI volumes are brought up to date with the API
VOLUME_SYNC = 60.0
# volume types whose files come from the API, and the plugin directory kubelet keeps them in
API_VOLUMES = {"configMap": "configmap", "secret": "secret", "projected": "projected", "downwardAPI": "downward-api"}


def field_value(pod: dict, path: str, pod_ip: str, node_ip: str) -> str:
    """The downward API's fieldRef paths kubelet resolves."""
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    simple = {
        "metadata.name": meta.get("name", ""),
        "metadata.namespace": meta.get("namespace", ""),
        "metadata.uid": meta.get("uid", ""),
        "spec.nodeName": spec.get("nodeName", ""),
        "spec.serviceAccountName": spec.get("serviceAccountName", "default"),
        "status.podIP": pod_ip,
        "status.podIPs": pod_ip,
        "status.hostIP": node_ip,
        "status.hostIPs": node_ip,
    }
    if path in simple:
        return str(simple[path])
    match = re.fullmatch(r"metadata\.(labels|annotations)\['([^']+)'\]", path)
    if match:
        return str((meta.get(match.group(1)) or {}).get(match.group(2), ""))
    raise PodError(f"fieldRef {path!r} is not supported by the downward API")


def key_to_path_items(data: dict[str, bytes], items: list | None, default_mode: int) -> dict[str, tuple[bytes, int]]:
    """The files a ConfigMap/Secret volume (or projection) shows: every key, or the listed items."""
    if not items:
        return {key: (value, default_mode) for key, value in data.items()}
    out = {}
    for item in items:
        key = item.get("key")
        if key not in data:
            raise PodError(f"key {key!r} is not in the referenced object")
        out[item.get("path", key)] = (data[key], int(item.get("mode", default_mode)))
    return out


# --- volumes ---------------------------------------------------------------------------------
def _write_files(directory: pathlib.Path, files: dict[str, tuple[bytes, int]], owner_gid: int | None) -> None:
    """Atomically (re)write a volume's files: a new timestamped directory, then ``..data`` swapped,
    as kubelet's AtomicWriter does, so a reader never sees half an update."""
    directory.mkdir(parents=True, exist_ok=True)
    stamp = directory / f"..{time.strftime('%Y_%m_%d_%H_%M_%S')}.{os.getpid()}{time.monotonic_ns() % 100000}"
    stamp.mkdir(mode=0o755)
    for rel, (content, mode) in files.items():
        target = stamp / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content)
        os.chmod(target, mode)
        if owner_gid is not None:
            os.chown(target, -1, owner_gid)
    tmp_link = directory / "..data_tmp"
    tmp_link.unlink(missing_ok=True)
    tmp_link.symlink_to(stamp.name)
    old = os.readlink(directory / "..data") if (directory / "..data").is_symlink() else None
    os.replace(tmp_link, directory / "..data")
    tops = {r.split("/", 1)[0] for r in files}
    for rel in tops:
        link = directory / rel
        if not link.is_symlink():
            link.symlink_to(f"..data/{rel}")
    for entry in directory.iterdir():
        if entry.is_symlink() and not entry.name.startswith("..") and entry.name not in tops:
            entry.unlink()
    if old and old != stamp.name:
        shutil.rmtree(directory / old, ignore_errors=True)


@dataclasses.dataclass
class Volume:
    name: str
    source: pathlib.Path  # the directory (or file) bound at every mountPath of this volume
    token_expires: float = 0.0
    token_issued: float = 0.0
    spec: dict = dataclasses.field(default_factory=dict)
    payload: str = ""  # digest of the files written last (AtomicWriter writes only a changed payload)


def payload_digest(files: dict[str, tuple[bytes, int]]) -> str:
    digest = hashlib.sha256()
    for rel in sorted(files):
        content, mode = files[rel]
        digest.update(f"{rel}\0{mode}\0{len(content)}\0".encode() + content)
    return digest.hexdigest()


class PodVolumes:
    """Materialises a pod's volumes under /var/lib/kubelet/pods/<uid>/volumes."""

    def __init__(self, api: NodeApi, pod: dict, pod_dir: pathlib.Path, fs_group: int | None):
        self.api = api
        self.pod = pod
        self.pod_dir = pod_dir
        self.fs_group = fs_group
        self.volumes: dict[str, Volume] = {}

    def _dir(self, plugin: str, name: str) -> pathlib.Path:
        return self.pod_dir / "volumes" / f"kubernetes.io~{plugin}" / name

    def _projection_files(self, spec: dict, now: float, volume: Volume) -> dict[str, tuple[bytes, int]]:
        namespace = self.pod["metadata"]["namespace"]
        default_mode = int(spec.get("defaultMode", 0o644))
        files: dict[str, tuple[bytes, int]] = {}
        for source in spec.get("sources") or []:
            if "serviceAccountToken" in source:
                sat = source["serviceAccountToken"]
                seconds = int(sat.get("expirationSeconds", 3600))
                token, expires = self.api.token(self.pod, sat.get("audience"), seconds)
                volume.token_issued, volume.token_expires = now, expires
                files[sat["path"]] = (token.encode(), int(sat.get("mode", default_mode)))
            elif "configMap" in source or "secret" in source:
                kind = "ConfigMap" if "configMap" in source else "Secret"
                ref = source.get("configMap") or source.get("secret")
                data = self.api.object_data(kind, namespace, ref["name"], bool(ref.get("optional")))
                if data is not None:
                    files.update(key_to_path_items(data, ref.get("items"), default_mode))
            elif "downwardAPI" in source:
                files.update(self._downward(source["downwardAPI"].get("items") or [], default_mode))
            else:
                raise PodError(f"projected source {sorted(source)} is not supported by the lab's kubelet")
        return files

    def _downward(self, items: list, default_mode: int) -> dict[str, tuple[bytes, int]]:
        files = {}
        for item in items:
            if "fieldRef" not in item:
                raise PodError(f"downwardAPI item {item.get('path')!r}: only fieldRef is supported")
            value = field_value(self.pod, item["fieldRef"]["fieldPath"], "", "")
            files[item["path"]] = (value.encode(), int(item.get("mode", default_mode)))
        return files

    def _api_files(self, spec: dict, now: float, volume: Volume) -> dict[str, tuple[bytes, int]]:
        """The files of a volume whose content comes from the API (ConfigMap, Secret, projected,
        downwardAPI)."""
        if "configMap" in spec or "secret" in spec:
            kind = "ConfigMap" if "configMap" in spec else "Secret"
            ref = spec.get("configMap") or spec.get("secret")
            ref_name = ref.get("name") or ref.get("secretName")
            data = self.api.object_data(kind, self.pod["metadata"]["namespace"], ref_name, bool(ref.get("optional")))
            return key_to_path_items(data or {}, ref.get("items"), int(ref.get("defaultMode", 0o644)))
        if "projected" in spec:
            return self._projection_files(spec["projected"], now, volume)
        items = spec["downwardAPI"].get("items") or []
        return self._downward(items, int(spec["downwardAPI"].get("defaultMode", 0o644)))

    def _write(self, volume: Volume, files: dict[str, tuple[bytes, int]]) -> bool:
        digest = payload_digest(files)
        if digest == volume.payload:
            return False
        _write_files(volume.source, files, self.fs_group)
        volume.payload = digest
        return True

    def prepare(self) -> None:
        now = time.time()
        for spec in (self.pod.get("spec") or {}).get("volumes") or []:
            name = spec["name"]
            volume = Volume(name, pathlib.Path("/"), spec=spec)
            if "hostPath" in spec:
                volume.source = prepare_host_path(spec["hostPath"])
            elif "persistentVolumeClaim" in spec:
                volume.source = self._claimed(spec["persistentVolumeClaim"])
            elif "emptyDir" in spec:
                volume.source = self._dir("empty-dir", name)
                volume.source.mkdir(parents=True, exist_ok=True)
                os.chmod(volume.source, 0o777)  # noqa: S103 - as kubelet makes it: writable by any container user
            elif any(kind in spec for kind in API_VOLUMES):
                plugin = next(API_VOLUMES[kind] for kind in API_VOLUMES if kind in spec)
                volume.source = self._dir(plugin, name)
                self._write(volume, self._api_files(spec, now, volume))
            else:
                kinds = sorted(k for k in spec if k != "name")
                raise PodError(f"volume {name!r}: type {kinds} is not supported by the lab's kubelet")
            self.volumes[name] = volume

    def _claimed(self, source: dict) -> pathlib.Path:
        """A claim's volume on this node: a ``local`` PersistentVolume's path (which must exist: the
        local plugin creates nothing) or a ``hostPath`` one's. kubelet's local plugin gives a writable
        volume to the pod's fsGroup on its first mount (SetVolumeOwnership); hostPath volumes get no
        ownership change, as kubelet's hostPath plugin gives none."""
        pv = self.api.claimed_volume(self.pod["metadata"]["namespace"], source["claimName"])
        spec = pv["spec"]
        read_only = bool(source.get("readOnly"))
        if "hostPath" in spec:
            return prepare_host_path(spec["hostPath"])
        if "local" not in spec:
            kinds = sorted(k for k in ("csi", "nfs", "iscsi", "fc", "rbd", "cephfs") if k in spec) or ["?"]
            name = pv["metadata"]["name"]
            raise PodError(f"persistentvolume {name!r}: type {kinds} is not supported by the lab's kubelet")
        path = pathlib.Path(spec["local"]["path"])
        if not path.exists():
            raise PodError(f"MountVolume.NewMounter initialization failed: path {str(path)!r} does not exist")
        if self.fs_group is not None and not read_only:
            policy = ((self.pod.get("spec") or {}).get("securityContext") or {}).get("fsGroupChangePolicy")
            set_volume_ownership(path, self.fs_group, policy)
        return path

    def sync(self) -> list[str]:
        """kubelet's periodic pod sync for the volumes the API fills: a ConfigMap, Secret or
        downwardAPI volume, or a projected one without a token, is written again when its content
        changed (AtomicWriter: a new directory and the ``..data`` swap, only for a changed payload;
        a ``subPath`` mount keeps the file it was given). Projected tokens follow refresh_tokens.
        Returns the names of the volumes written."""
        now = time.time()
        written = []
        for volume in self.volumes.values():
            spec = volume.spec
            if not any(kind in spec for kind in API_VOLUMES) or volume.token_expires:
                continue
            if self._write(volume, self._api_files(spec, now, volume)):
                written.append(volume.name)
        return written

    def refresh_tokens(self) -> None:
        """Re-issue projected tokens at 80 % of their life (kubelet's token manager)."""
        now = time.time()
        for volume in self.volumes.values():
            if volume.token_expires and now >= volume.token_issued + TOKEN_REFRESH_AT * (
                volume.token_expires - volume.token_issued
            ):
                files = self._projection_files(volume.spec["projected"], now, volume)
                _write_files(volume.source, files, self.fs_group)
                meta = self.pod["metadata"]
                log(f"{meta['namespace']}/{meta['name']}: token of {volume.name} renewed")


_RW_MASK, _EXEC_MASK = 0o660, 0o110  # pkg/volume/volume_linux.go rwMask, execMask


def set_volume_ownership(root: pathlib.Path, fs_group: int, policy: str | None) -> None:
    """kubelet's SetVolumeOwnership for a writable volume: every file's group becomes ``fs_group``
    and gains group read-write (directories also execute and setgid, so new files inherit the
    group); ``OnRootMismatch`` skips the walk when the root already has the group and the mode.
    Symbolic links get the group but no chmod (it would change their target)."""
    if policy == "OnRootMismatch":
        info = root.stat()
        wanted = _RW_MASK | _EXEC_MASK
        has_mode = info.st_mode & wanted == wanted and info.st_mode & stat.S_ISGID
        if info.st_gid == fs_group and root.is_dir() and has_mode:
            return
    # walkDeep: the children first, the root last
    paths = [os.path.join(d, n) for d, dirs, files in os.walk(root, topdown=False) for n in (*files, *dirs)]
    for path in [*paths, str(root)]:
        info = os.lstat(path)
        os.lchown(path, -1, fs_group)
        if stat.S_ISLNK(info.st_mode):
            continue
        mask = _RW_MASK | (_EXEC_MASK | stat.S_ISGID if stat.S_ISDIR(info.st_mode) else 0)
        os.chmod(path, stat.S_IMODE(info.st_mode) | mask)


def prepare_host_path(host_path: dict) -> pathlib.Path:
    path = pathlib.Path(host_path["path"])
    kind = host_path.get("type") or ""
    if kind == "DirectoryOrCreate" or (kind == "" and not os.path.lexists(path)):
        # unset type: kubelet checks nothing, and the runtime creates a missing source as a directory
        # (containerd's CRI, as Docker did): NFD's features.d on a node that never had one
        path.mkdir(mode=0o755, parents=True, exist_ok=True)
    elif kind == "FileOrCreate":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch(mode=0o644, exist_ok=True)
    elif kind == "Directory" and not path.is_dir():
        raise PodError(f"hostPath type check failed: {path} is not a directory")
    elif kind == "File" and not path.is_file():
        raise PodError(f"hostPath type check failed: {path} is not a file")
    elif kind == "Socket" and not path.is_socket():
        raise PodError(f"hostPath type check failed: {path} is not a socket file")
    return path
