# Copyright: poweraware.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What to change in a kube-scheduler static pod manifest to load an extender configuration.

The manifest gets (only when missing): the ``--config`` (or legacy ``--policy-config-file``)
flag, read-only hostPath volumes and mounts for that file and the extenders' TLS directories,
``dnsPolicy: ClusterFirstWithHostNet`` when an extender is addressed by a cluster DNS name, and
the annotation ``poweraware.k8s/scheduler-extender``: a JSON record of exactly what was added,
so that ``state=absent`` removes those things and nothing else, and a re-run can tell its own
additions from the user's.

The record also carries a digest of each CA file the extenders trust (``trust``). kube-scheduler
reads a ``caFile`` once, at start (client-go reloads a client certificate and key from their files,
not the CA), so a re-issued CA must restart it: the changed digest changes the manifest, and
kubelet restarts the static pod. A record an earlier version wrote has no digests; it gets them at
the next change of the manifest, or at once when the caller says the CA files changed
(``trust_changed``), so an upgrade alone restarts nothing.

Pure logic, no Ansible import; Python 3.9 compatible.
"""

from __future__ import annotations

import copy
import hashlib
import json
import posixpath

from ansible_collections.poweraware.k8s.plugins.module_utils.cluster import k8s_version as kv
from ansible_collections.poweraware.k8s.plugins.module_utils.scheduler import sched_config as sc
from ansible_collections.poweraware.k8s.plugins.module_utils.scheduler import sched_version as sv
from ansible_collections.poweraware.k8s.plugins.module_utils.scheduler.yaml_edit import (
    KeyRemove,
    KeySet,
    SeqAppend,
    SeqRemove,
    apply_ops,
    apply_ops_to_doc,
    comment_lines,
    dump,
    yaml,
)

ANNOTATION = "poweraware.k8s/scheduler-extender"
RECORD_VERSION = 1
CONFIG_VOLUME = "poweraware-scheduler-config"
TLS_VOLUME = "poweraware-extender-tls"
DNS_POLICY = "ClusterFirstWithHostNet"
FLAGS = {"config": "--config", "policy": "--policy-config-file"}
LEGACY_FLAGS = ("--policy-config-file", "--policy-configmap")


class ManifestError(ValueError):
    """The manifest cannot be patched; the message says why and what to do.

    ``errors`` lists every problem found (the message joins them), so the module can report all
    of them at once.
    """

    def __init__(self, message, errors=None):
        super().__init__(message)
        self.errors = list(errors) if errors else [message]

    @classmethod
    def of(cls, errors):
        return cls("; ".join(errors), errors)


def check_pod(doc, path):
    """Return the index of the kube-scheduler container, or raise ManifestError."""
    if not isinstance(doc, dict) or doc.get("kind") != "Pod" or not isinstance(doc.get("spec"), dict):
        raise ManifestError(
            f"{path} is not a Pod manifest (kind: Pod with a spec); point manifest_path at the kube-scheduler static "
            "pod"
        )
    containers = doc["spec"].get("containers")
    if not isinstance(containers, list) or not containers or not all(isinstance(c, dict) for c in containers):
        raise ManifestError(f"{path} has no containers")
    named = [i for i, c in enumerate(containers) if c.get("name") == "kube-scheduler"]
    if len(named) == 1:
        return named[0]
    if named:  # two or more: one was returned above
        where = ", ".join(f"spec.containers[{i}]" for i in named)
        raise ManifestError(
            f"{path} has {len(named)} containers named kube-scheduler ({where}); container names must be unique in "
            "a pod, so kubelet refuses this manifest and the module cannot tell which one to configure; fix: rename "
            "or remove the extra container"
        )
    if len(containers) == 1:
        return 0
    raise ManifestError(f"{path} has several containers and none is named kube-scheduler")


def _flag_lists(container):
    out = []
    for key in ("command", "args"):
        value = container.get(key)
        if value is not None and not (isinstance(value, list) and all(isinstance(x, str) for x in value)):
            raise ManifestError(f"container {key} must be a list of strings")
        out.append((key, value or []))
    return out


def _argv(lists):
    """kubelet's one argv from ``_flag_lists``: ``(list_key, index, item)`` for ``command`` then ``args``."""
    return [(key, index, item) for key, items in lists for index, item in enumerate(items)]


def find_flag(container, flag):
    """``(value, list_key, item)`` of ``--flag=value`` or ``--flag value`` in command/args, or None.

    kubelet runs ``command`` then ``args`` as one argv, so a flag ending ``command`` takes its value
    from the first item of ``args``."""
    argv = _argv(_flag_lists(container))
    for position, (key, _index, item) in enumerate(argv):
        if item == flag and position + 1 < len(argv):
            return argv[position + 1][2], key, item
        if item.startswith(flag + "="):
            return item[len(flag) + 1 :], key, item
    return None


# Shells that take a script with -c: kube-scheduler's flags are then words inside one string, which
# this module cannot edit (an appended flag would become the script's $0, not kube-scheduler's).
SHELLS = frozenset({"sh", "bash", "dash", "ash", "ksh", "zsh", "busybox"})
# The flags the module reads from the manifest: a value it cannot read is never guessed at.
READ_FLAGS = ("--config", "--policy-config-file", "--kubeconfig", "--port")


def argv_problems(container):
    """Errors for a command line the module cannot read or extend safely (kubelet runs ``command``
    followed by ``args`` as one argv, with no shell unless the manifest names one)."""
    errors = []
    lists = _flag_lists(container)
    argv = _argv(lists)
    command = dict(lists)["command"]
    if command and posixpath.basename(command[0]) in SHELLS and "-c" in command[1:3]:
        errors.append(
            f"the kube-scheduler container runs a shell ({' '.join(command[:2])} ...): its flags are words of a "
            "script, which this module cannot read or extend (a flag appended to the list would reach the shell, "
            "not kube-scheduler); fix: give kube-scheduler and its flags as separate items of command/args, as "
            "kubeadm writes them, or add the extender to the scheduler's configuration by hand"
        )
        return errors
    for position, (key, index, item) in enumerate(argv):
        if item in READ_FLAGS:
            following = argv[position + 1][2] if position + 1 < len(argv) else None
            if following is None:
                errors.append(
                    f"{key}[{index}] is {item} with no value after it (kube-scheduler refuses to start: flag needs an "
                    f"argument); fix: write {item}=<value>, or remove it"
                )
            elif following.startswith("-"):
                errors.append(
                    f"{key}[{index}] is {item} followed by {following!r}, which kube-scheduler would take as its "
                    f"value; fix: write {item}=<value> before the other flags, or remove it"
                )
        elif any(char.isspace() for char in item) and any(word.split("=", 1)[0] in READ_FLAGS for word in item.split()):
            errors.append(
                f"{key}[{index}] {item!r} holds several words; kubelet passes it as one argument, so kube-scheduler "
                "does not see the flags inside it; fix: one flag per item"
            )
    return errors


def flags_list_key(container):
    """Where this installer keeps the flags: ``args`` when it uses it, else ``command``."""
    if container.get("args"):
        return "args"
    command = container.get("command") or []
    if not command and "args" in container:
        return "args"
    return "command"


def read_record(doc):
    annotations = (doc.get("metadata") or {}).get("annotations") or {}
    raw = annotations.get(ANNOTATION)
    if raw is None:
        return None
    try:
        record = json.loads(raw)
    except (TypeError, ValueError):
        raise ManifestError(
            f"annotation {ANNOTATION} on the manifest is not valid JSON; remove it by hand (it only records what this "
            "module added)"
        ) from None
    if not isinstance(record, dict) or record.get("v") != RECORD_VERSION:
        raise ManifestError(f"annotation {ANNOTATION} has an unknown format; remove it by hand")
    return record


def _covering_mount(path, mounts):
    """``(index, mount, mountPath)`` of the mount the container sees ``path`` through, or None.

    The container runtime mounts nested paths deepest last, so the longest mountPath that
    contains ``path`` is the one that serves it.
    """
    best = None
    for index, mount in enumerate(mounts):
        mount_path = mount.get("mountPath") if isinstance(mount, dict) else None
        if isinstance(mount_path, str) and mount_path:
            root = posixpath.normpath(mount_path)  # "/" stays "/"
            inside = path == root or path.startswith(root.rstrip("/") + "/")
            if inside and (best is None or len(root) > len(best[2])):
                best = (index, mount, root)
    return best


def mount_check(path, mounts, volumes):
    """``(covered, problem)`` for a node ``path`` the scheduler must read as the module wrote it.

    A mount that already covers the path is only good when it is a hostPath of the same node
    location (a hostPath of another directory or an emptyDir would show the scheduler something
    else than the file the module writes): ``problem`` then says what backs it and how to fix it.
    """
    found = _covering_mount(path, mounts)
    if found is None:
        return False, None
    index, mount, root = found
    name = mount.get("name")
    volume = next((v for v in volumes if isinstance(v, dict) and v.get("name") == name), None)
    rel = path[len(root) :].lstrip("/")
    sub = mount.get("subPath") or ""
    host = volume.get("hostPath") if isinstance(volume, dict) else None
    if isinstance(host, dict) and isinstance(host.get("path"), str) and host["path"].startswith("/"):
        seen = posixpath.normpath(posixpath.join(host["path"], sub, rel))  # joining "" adds a "/" normpath drops
        if seen == posixpath.normpath(path):
            return True, None
        with_sub = f" with subPath {sub}" if sub else ""
        backing = f"hostPath {host['path']}{with_sub}, so the scheduler would read node path {seen}"
    elif volume is None:
        backing = "no volume of that name"
    else:
        kinds = sorted(k for k in volume if k != "name")
        kind = kinds[0] if kinds else "typeless"
        backing = f"{'an' if kind[0] in 'aeiou' else 'a'} {kind} volume, not a hostPath"
    # the mount shows the node's own files when it is a hostPath of its own mountPath
    wanted = root
    without_sub = " without subPath" if sub else ""
    return True, (
        f"{path} is inside the existing mount {root} (volumeMounts[{index}], volume {name}: {backing}) instead of the "
        f"file the module writes on the node; fix: make volume {name} a hostPath of {wanted}{without_sub}, or "
        "remove that mount"
    )


def strip_ops(record, cindex):
    """Ops that remove what ``record`` says we added (in the reverse order of adding)."""
    ops = []
    cpath = ["spec", "containers", cindex]
    if record.get("dns_policy_added"):
        previous = record.get("dns_policy_previous")
        if previous is None:
            ops.append(KeyRemove(["spec"], "dnsPolicy"))
        else:
            ops.append(KeySet(["spec"], "dnsPolicy", previous))
    names = set(record.get("volumes") or [])
    if names:
        created = set(record.get("created_keys") or [])
        ops.append(
            SeqRemove(
                cpath,
                "volumeMounts",
                lambda m: isinstance(m, dict) and m.get("name") in names,
                "volumeMounts" in created,
            )
        )
        ops.append(
            SeqRemove(
                ["spec"], "volumes", lambda v: isinstance(v, dict) and v.get("name") in names, "volumes" in created
            )
        )
    if record.get("flag"):
        flag = record["flag"]
        ops.append(SeqRemove(cpath, record.get("flag_key", "command"), lambda x: x == flag))
    created_annotations = "annotations" in set(record.get("created_keys") or [])
    ops.append(KeyRemove(["metadata", "annotations"], ANNOTATION, drop_parent_if_empty=created_annotations))
    return ops


def inspect(doc, path):
    """Return ``(container_index, record, base_doc)``; base_doc is ``doc`` without our additions."""
    cindex = check_pod(doc, path)
    record = read_record(doc)
    base = apply_ops_to_doc(doc, strip_ops(record, cindex)) if record else copy.deepcopy(doc)
    return cindex, record, base


def target_file(base, cindex, mode, default_path):
    """The config/policy file the scheduler should load and whether the flag already names it."""
    container = base["spec"]["containers"][cindex]
    found = find_flag(container, FLAGS[mode])
    if found:
        return found[0], True
    return default_path, False


def conflicting_flags(base, cindex, mode, minor):
    """Errors for flags that would make kube-scheduler ignore or reject our file."""
    container = base["spec"]["containers"][cindex]
    errors = []
    if mode == "policy" and minor < sv.FIRST_CONFIG_MINOR and find_flag(container, FLAGS["config"]):
        # 1.18's options.ApplyTo reads the Policy flags only without --config (1.19 added
        # ApplyAlgorithmSourceTo for the --config case), so the Policy file would be ignored.
        errors.append(
            f"the manifest passes --config, and Kubernetes 1.{minor}'s kube-scheduler ignores --policy-config-file "
            "when --config is given (its v1alpha2 configuration is an alpha API this module does not write): add "
            "the extender to that file by hand, remove --config from the manifest so the module can write the "
            f"Policy file, or upgrade the control plane to 1.{sv.FIRST_CONFIG_MINOR} or newer"
        )
    if mode == "config":
        for flag in LEGACY_FLAGS:
            if find_flag(container, flag):
                errors.append(
                    f"the manifest already passes {flag} (a legacy scheduler Policy); set legacy_policy: true to add "
                    "the extender to that Policy, or remove the flag first"
                )
    elif find_flag(container, "--policy-configmap"):
        errors.append(
            "the manifest passes --policy-configmap; this module manages a Policy file, remove the flag first"
        )
    return errors


def present_ops(base, cindex, mode, file_path, flag_present, tls_dirs, need_cluster_dns, record_extra):
    """Ops that turn ``base`` into the desired manifest, and the record they leave behind."""
    ops = []
    spec = base["spec"]
    container = spec["containers"][cindex]
    cpath = ["spec", "containers", cindex]
    record = {"v": RECORD_VERSION, "mode": mode, "file": file_path, "volumes": [], "created_keys": []}
    if not flag_present:
        key = flags_list_key(container)
        flag = f"{FLAGS[mode]}={file_path}"
        items = container.get(key) or []
        # kubeadm writes the binary first and then its flags sorted; keep that order
        sorted_from = 1 if key == "command" and items and not items[0].startswith("-") else 0
        ops.append(SeqAppend(cpath, key, flag, sorted_from=sorted_from))
        record["flag"] = flag
        record["flag_key"] = key
    mounts = list(container.get("volumeMounts") or [])
    volumes = list(spec.get("volumes") or [])
    taken = {v.get("name") for v in volumes if isinstance(v, dict)} | {
        m.get("name") for m in mounts if isinstance(m, dict)
    }
    wanted = []
    problems = []
    covered, problem = mount_check(file_path, mounts, volumes)
    if problem:
        problems.append("the scheduler configuration " + problem)
    if not covered:
        wanted.append((CONFIG_VOLUME, file_path, "FileOrCreate"))
    uncovered = []
    for directory in tls_dirs:
        covered, problem = mount_check(directory, mounts, volumes)
        if problem:
            problems.append("the extenders' TLS directory " + problem)
        if not covered:
            uncovered.append(directory)
    if problems:
        raise ManifestError.of(problems)
    for number, directory in enumerate(uncovered):
        wanted.append((TLS_VOLUME if number == 0 else f"{TLS_VOLUME}-{number + 1}", directory, "DirectoryOrCreate"))
    if wanted:  # the lists the first volume creates are removed again with the last one (state=absent)
        record["created_keys"] += [
            key for key, owner in (("volumeMounts", container), ("volumes", spec)) if key not in owner
        ]
    for name, host_path, host_type in wanted:
        if name in taken:
            raise ManifestError(
                f"the manifest already has a volume or mount named {name} that this module did not add; rename it"
            )
        ops.append(SeqAppend(cpath, "volumeMounts", {"mountPath": host_path, "name": name, "readOnly": True}))
        ops.append(SeqAppend(["spec"], "volumes", {"hostPath": {"path": host_path, "type": host_type}, "name": name}))
        record["volumes"].append(name)
    if need_cluster_dns and base["spec"].get("dnsPolicy") != DNS_POLICY:
        record["dns_policy_added"] = True
        record["dns_policy_previous"] = base["spec"].get("dnsPolicy")
        ops.append(KeySet(["spec"], "dnsPolicy", DNS_POLICY))
    record.update(record_extra)
    metadata = base.get("metadata")
    if not isinstance(metadata, dict):
        raise ManifestError("the manifest has no metadata mapping")
    if not isinstance(metadata.get("annotations"), dict):
        if metadata.get("annotations") is not None:
            raise ManifestError("metadata.annotations of the manifest is not a mapping")
        record["created_keys"].append("annotations")
        record["created_keys"].sort()  # each key is recorded once
        ops.append(KeySet(["metadata"], "annotations", {ANNOTATION: encode_record(record)}))
    else:
        record["created_keys"].sort()
        ops.append(KeySet(["metadata", "annotations"], ANNOTATION, encode_record(record)))
    return ops, record


def encode_record(record):
    return json.dumps(record, sort_keys=True, separators=(",", ":"))


def patch(text, doc, ops_strip, ops_add):
    """Apply strip then add ops to the manifest text; returns ``(text, doc, reemitted)``."""
    return apply_ops(text, doc, list(ops_strip) + list(ops_add))


# --- the configuration file: the same line-level edits, so the user's file keeps its comments -------


def _url_in(urls):
    return lambda entry: isinstance(entry, dict) and entry.get("urlPrefix") in urls


def config_strip_ops(record):
    """Ops that take our extenders out of a user's config file and put back what they replaced."""
    ops = [SeqRemove([], "extenders", _url_in(set(record.get("extenders") or [])), drop_key_if_empty=True)]
    ops += [SeqAppend([], "extenders", entry) for entry in (record.get("replaced") or {}).values()]
    return ops


def config_add_ops(base, entries):
    """Ops that merge ``entries`` into ``base`` by urlPrefix, and the entries they replace."""
    existing = {e.get("urlPrefix"): e for e in (base.get("extenders") or []) if isinstance(e, dict)}
    replaced = {}
    ops = []
    for entry in entries:
        url = entry["urlPrefix"]
        if url in existing and sc.entries_equal(existing[url], entry):
            continue
        if url in existing:
            replaced[url] = existing[url]
        ops.append(SeqAppend([], "extenders", entry))
    if replaced:
        ops.insert(0, SeqRemove([], "extenders", _url_in(set(replaced)), drop_key_if_empty=True))
    return ops, replaced


def edit_file(text, doc, ops, mode):
    """``(new_text, new_doc, reemitted)``: surgical for YAML configs, re-rendered JSON for Policy files.

    ``reemitted`` is True when a YAML configuration could not be changed in place (flow style) and
    ``new_text`` is the whole document written out again (its comments gone)."""
    new_text, new_doc, reemitted = apply_ops(text, doc, ops)
    if new_doc == doc:
        return text, doc, False
    if mode == "policy":
        return render_file(new_doc, mode, False), new_doc, False
    return new_text, new_doc, reemitted


def _reemission_problem(path, text):
    """The refusal when writing ``text`` out again would drop the user's comments, else None."""
    comments = comment_lines(text)
    if not comments:
        return None
    lines = ", ".join(str(n) for n in comments[:5]) + (" ..." if len(comments) > 5 else "")
    return (
        f"{path} cannot be changed in place (flow-style YAML such as {{...}} or [...] where the change goes), and "
        f"writing it out again would drop its comments (lines {lines}); fix: write that part in block style (one "
        "key per line, '- ' items), or remove the comments you do not need, and run again"
    )


REEMITTED_WARNING = (
    "{path} could not be changed in place (flow-style YAML) and is written out again in block style: the same "
    "content in another layout; the backup holds the original"
)


# --- the whole change, as a pure function of the files' contents -----------------------------------


class Plan:
    """Everything the module needs to write, computed without touching the node."""

    def __init__(self):
        self.manifest_before = None
        self.manifest_after = None
        self.file_path = None
        self.file_before = None
        self.file_after = None  # None with file_delete=True means: remove the file
        self.file_delete = False
        self.file_created = False
        self.mode = None
        self.api_version = None
        self.kubernetes_version = None
        self.warnings = []
        self.reemitted = False
        self.record = None
        self.annotation = ""  # the record exactly as the manifest carries it afterwards ("" without one)
        # The manifest had lost a registration whose configuration file is still ours (regenerated by
        # kubeadm upgrade or an installer, or a run cut short between its two writes).
        self.restored = False

    @property
    def manifest_changed(self):
        return self.manifest_after != self.manifest_before

    @property
    def file_changed(self):
        if self.file_delete:
            return self.file_before is not None
        return self.file_after is not None and self.file_after != self.file_before

    @property
    def changed(self):
        return self.manifest_changed or self.file_changed


CONFIG_HEADER = (
    "# Managed by poweraware.k8s.kube_scheduler_extender: rewritten on every run, edits are lost.\n"
    "# To keep settings of your own, pass kube-scheduler your own --config file; the module then\n"
    "# merges its extenders into that file and leaves the rest of it alone.\n"
)


def written_by_module(text):
    """A configuration file this module created (its header), e.g. left by a run that was cut short."""
    return isinstance(text, str) and text.startswith(CONFIG_HEADER.split("\n", 1)[0])


def render_file(doc, mode, created):
    if mode == "policy":
        return json.dumps(doc, indent=2) + "\n"
    return (CONFIG_HEADER if created else "") + dump(doc)


def _load(text, what):
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ManifestError(f"{what} is not valid YAML: {exc}") from None


def _manifest_dir(path):
    return path.rstrip("/").rsplit("/", 1)[0] or "/"


def trust_digests(extenders, read_file):
    """``{ca_file: "sha256:<16 hex>"}`` of the CA files the extenders trust that exist on the node
    (a missing one is reported by the caller's file check)."""
    digests = {}
    for ext in extenders:
        path = (ext.get("tls") or {}).get("ca_file")
        if path and path not in digests:
            text = read_file(path)
            if text is not None:
                digests[path] = "sha256:" + hashlib.sha256(text.encode()).hexdigest()[:16]
    return dict(sorted(digests.items()))


def plan_present(
    manifest_text,
    manifest_path,
    read_file,
    extenders,
    config_path,
    policy_path,
    kubernetes_version=None,
    legacy_policy=False,
    trust_changed=False,
):
    """Compute the manifest and config/policy file for ``state=present``.

    ``extenders`` must come from ``sched_config.normalize_extenders`` (already validated);
    ``read_file(node_path)`` returns a file's text or None. Raises ManifestError or
    ``sched_config.ConfigError`` / ``k8s_version.VersionError`` with a clear message.
    """
    result = Plan()
    result.manifest_before = manifest_text
    doc = _load(manifest_text, manifest_path)
    cindex, record, base = inspect(doc, manifest_path)
    container = base["spec"]["containers"][cindex]
    version, warnings = kv.resolve_version(kubernetes_version, container.get("image"))
    result.warnings += warnings
    result.kubernetes_version = kv.format_version(version)
    api_version, warnings = sv.select_api_version(version, legacy_policy)
    result.warnings += warnings
    mode = "policy" if sv.is_policy(api_version) else "config"
    result.mode = mode
    errors = argv_problems(container)
    if errors:  # the flags below cannot be read reliably
        raise ManifestError.of(errors)
    errors = conflicting_flags(base, cindex, mode, version[1])
    default_path = policy_path if mode == "policy" else config_path
    for what, path in (("config_path", config_path), ("policy_path", policy_path)):
        if _manifest_dir(path) == _manifest_dir(manifest_path):
            errors.append(
                f"{what} {path} is inside the static pod directory {_manifest_dir(manifest_path)}, where kubelet would "
                "try to run it as a pod; choose another directory (for example /etc/kubernetes)"
            )
    file_path, flag_present = target_file(base, cindex, mode, default_path)
    if not file_path.startswith("/"):
        errors.append(f"the manifest's {FLAGS[mode]} flag names a relative path {file_path!r}; make it absolute")
    if errors:
        raise ManifestError.of(errors)
    result.file_path = file_path
    policy = mode == "policy"
    entries = [sc.render_extender(ext, policy=policy) for ext in extenders]
    current_text = read_file(file_path)
    result.file_before = current_text
    owned = bool(
        record and record.get("file_created") and record.get("file") == file_path and record.get("mode") == mode
    )
    if not owned and not record and not flag_present and mode == "config" and written_by_module(current_text):
        # Our own file, which the manifest does not load. Either the manifest was written anew from a
        # template that knows nothing of us - kubeadm upgrade apply/node and kubespray regenerate every
        # static pod from the ClusterConfiguration, keeping no line of ours - or a run stopped between
        # writing the configuration and the manifest. Both leave kube-scheduler scheduling without the
        # extenders and saying nothing; the file stays ours (absent deletes it), not the user's.
        owned = True
        result.restored = True
        result.warnings.append(
            f"{manifest_path} does not load {file_path}, which this module wrote: the manifest was written anew "
            "since the extenders were registered (kubeadm upgrade apply/node and installer re-runs regenerate it "
            "from their templates) or an earlier run stopped between its two writes, and kube-scheduler has "
            "scheduled without the extenders since. They are registered again now. Run this role again after every "
            "kubeadm upgrade on each control-plane node (docs/scheduler-extender.md, 'Upgrades')"
        )
    convert = []
    if owned or current_text is None:
        kubeconfig = find_flag(container, "--kubeconfig")
        if policy:
            desired = sc.new_policy(entries)
        else:
            port = find_flag(container, "--port")
            desired = sc.new_config(
                api_version,
                entries,
                kubeconfig[0] if kubeconfig else None,
                insecure_loopback=version[1] <= sv.LAST_INSECURE_SERVING_MINOR
                and bool(port)
                and port[0].strip() == "0",
            )
        created, replaced = True, {}
    else:
        current = _load(current_text, file_path)
        problems = sc.check_existing_document(current, version[1], policy, file_path)
        if problems:
            raise ManifestError.of(problems)
        if not policy:
            convert = _conversion(current, version[1], file_path, result.warnings)
        strip = config_strip_ops(record) if record and record.get("file") == file_path else []
        add, replaced = config_add_ops(apply_ops_to_doc(current, strip), entries)
        file_text, desired, reemitted = edit_file(current_text, current, convert + strip + add, mode)
        if reemitted:
            problem = _reemission_problem(file_path, current_text)
            if problem:
                raise ManifestError(problem)
            result.warnings.append(REEMITTED_WARNING.format(path=file_path))
        created = False
        if not policy:
            api_version = desired["apiVersion"]
    result.file_created = created
    result.api_version = api_version
    ours = {e["urlPrefix"] for e in entries}

    def origin(_index, entry):
        return "from the module's extenders" if entry.get("urlPrefix") in ours else f"already in {file_path}"

    # kube-scheduler validates the whole list, the user's entries included, and exits at start on
    # the first problem: check the merged result now, before anything is written.
    invalid = sc.validate_extenders(desired.get("extenders"), origin, strict=not policy)
    if invalid:
        raise ManifestError(
            f"kube-scheduler would refuse {file_path} as it would be written "
            f"({'merged with the existing entries' if not created else 'new file'}): {'; '.join(invalid)}",
            invalid,
        )
    if current_text is not None and _load(current_text, file_path) == desired:
        result.file_after = current_text
    elif created:
        result.file_after = render_file(desired, mode, created)
    else:
        result.file_after = file_text
    need_dns = any(sc.is_cluster_dns_name(sc.url_host(ext["url_prefix"])) for ext in extenders)
    record_extra = {"file_created": created, "extenders": [e["urlPrefix"] for e in entries], "replaced": replaced}
    tls_dirs = sc.tls_directories(extenders)
    trust = trust_digests(extenders, read_file)
    # A record of an earlier version gets the digests only when told the CA changed, or when the
    # manifest changes anyway: recording them is a manifest change, which restarts kube-scheduler.
    if trust and (not record or "trust" in record or trust_changed):
        record_extra["trust"] = trust
    add, new_record = present_ops(base, cindex, mode, file_path, flag_present, tls_dirs, need_dns, record_extra)
    if trust and "trust" not in record_extra and apply_ops_to_doc(base, add) != doc:
        add, new_record = present_ops(
            base, cindex, mode, file_path, flag_present, tls_dirs, need_dns, dict(record_extra, trust=trust)
        )
    elif trust and "trust" not in record_extra:
        result.warnings.append(
            "the manifest's record was written by an earlier version and does not hold the digests of the CA files "
            "kube-scheduler trusts; they are recorded at the next change of the manifest (set trust_changed when "
            "a CA file has been replaced, so that kube-scheduler restarts and loads it)"
        )
    result.record = new_record
    desired_manifest = apply_ops_to_doc(base, add)
    result.annotation = desired_manifest["metadata"]["annotations"][ANNOTATION]
    if desired_manifest == doc:
        result.manifest_after = manifest_text
    else:
        strip = strip_ops(record, cindex) if record else []
        text, _new_doc, reemitted = patch(manifest_text, doc, strip, add)
        result.manifest_after = text
        result.reemitted = reemitted
    return result


def _conversion(current, minor, file_path, warnings):
    """Ops that move a user's file from an older served version to the newest one, when that is safe."""
    source = sv.config_version(current)
    target = sv.conversion_target(source, minor)
    if not target:
        return []
    blockers = sv.conversion_blockers(current, source, target)
    if blockers:
        warnings.append(
            f"{file_path} stays in {sv.GROUP}/{source}, which Kubernetes 1.{minor} still serves but a later release "
            f"removes: it cannot be converted to {target} safely ({'; '.join(blockers)}); convert it by hand "
            "(https://kubernetes.io/docs/reference/scheduling/config/) before upgrading"
        )
        return []
    note = ""
    if source in sv.OLD_DEFAULT_WEIGHTS:
        note = (
            "; from v1beta3 on the default score weights of InterPodAffinity and NodeAffinity are 2 and of "
            f"TaintToleration 3 (the release applies them anyway once {source} is removed)"
        )
    warnings.append(
        f"{file_path} was converted from {sv.GROUP}/{source} (deprecated or older than the newest version Kubernetes "
        f"1.{minor} serves) to {sv.GROUP}/{target}: only apiVersion changes, every other field means the same in "
        f"both{note}"
    )
    return [KeySet([], "apiVersion", f"{sv.GROUP}/{target}")]


def plan_absent(manifest_text, manifest_path, read_file, original_text=None, config_path=None):
    """Compute the manifest and file for ``state=absent``: remove exactly what the record lists.

    ``original_text(path, doc)`` may return earlier bytes of ``path`` that parse to ``doc``
    (a backup), so a merged config goes back to its original bytes, comments included.
    Without a record, a file at ``config_path`` that carries this module's header and that the
    manifest does not load is a leftover of an interrupted run, and is deleted.
    """
    result = Plan()
    result.manifest_before = manifest_text
    result.manifest_after = manifest_text
    doc = _load(manifest_text, manifest_path)
    cindex = check_pod(doc, manifest_path)
    record = read_record(doc)
    if not record:
        loaded = find_flag(doc["spec"]["containers"][cindex], FLAGS["config"])
        if config_path and not (loaded and loaded[0] == config_path):
            text = read_file(config_path)
            if written_by_module(text):
                result.mode = "config"
                result.file_path = config_path
                result.file_before = text
                result.file_delete = True
        return result
    result.record = record
    result.mode = record.get("mode")
    file_path = record.get("file")
    result.file_path = file_path
    current_text = read_file(file_path) if file_path else None
    result.file_before = current_text
    if current_text is not None:
        if record.get("file_created"):
            result.file_delete = True
        else:
            current = _load(current_text, file_path)
            if isinstance(current, dict):
                text, restored, reemitted = edit_file(
                    current_text, current, config_strip_ops(record), record.get("mode")
                )
                earlier = original_text(file_path, restored) if original_text and restored != current else None
                result.file_after = earlier if earlier is not None else text
                if reemitted and earlier is None:  # removing our entries must not be blocked: say what it costs
                    lost = comment_lines(current_text)
                    result.warnings.append(
                        REEMITTED_WARNING.format(path=file_path)
                        + (f" (its comments on lines {', '.join(map(str, lost))} are not kept)" if lost else "")
                    )
    text, _new_doc, reemitted = patch(manifest_text, doc, strip_ops(record, cindex), [])
    result.manifest_after = text
    result.reemitted = reemitted
    return result
