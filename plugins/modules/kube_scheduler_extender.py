#!/usr/bin/python
# Copyright: poweraware.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: kube_scheduler_extender
short_description: Register scheduler extenders in a kube-scheduler static pod, for Kubernetes 1.18 and newer
version_added: 0.1.0
description:
  - Writes a C(KubeSchedulerConfiguration) holding one or more scheduler extenders in the newest
    C(kubescheduler.config.k8s.io) version the running Kubernetes release serves
    (v1beta1 for 1.19-1.21, v1beta2 for 1.22, v1beta3 for 1.23-1.24, v1 from 1.25), and patches the
    kube-scheduler static pod manifest to load it.
  - The Kubernetes release is read from the manifest's image tag (any registry, port, path, tag
    suffix or digest), unless O(kubernetes_version) is given. Releases before 1.18 are refused.
  - When the manifest already passes C(--config), the extenders are merged into that file by
    C(urlPrefix); the user's profiles, plugins and other extenders are kept. A file in an older
    version the release still serves (for example C(v1beta3) on 1.25-1.28) is converted to the
    newest one when only C(apiVersion) has to change; otherwise it is kept and the module warns
    with the fields that block the conversion.
  - Before anything is written, the merged extender list goes through kube-scheduler's own
    validation (a C(prioritizeVerb) needs a positive weight, at most one C(bindVerb), a managed
    resource in one extender only, valid extended resource names, no unknown fields); every
    problem is reported at once, naming the entry, the value, why and the fix.
  - An existing mount that covers the configuration file or a TLS directory must be a hostPath of
    the same node path; another host directory or an C(emptyDir) is refused.
  - The manifest gets only what is missing - the C(--config) flag (in C(command) or C(args),
    wherever the installer keeps the flags), read-only hostPath volumes and mounts for the file
    and the extenders' TLS directories, C(dnsPolicy=ClusterFirstWithHostNet) when an extender URL
    is a cluster DNS name - and an annotation C(poweraware.k8s/scheduler-extender) that records
    exactly what was added. All other lines of the manifest keep their bytes.
  - O(state=absent) removes exactly what the annotation lists, which gives back the original
    manifest bytes.
  - Files are replaced atomically; before each change the old manifest and config are copied to
    O(backup_dir) with a UTC timestamp (never into the static pod directory, where kubelet would
    run them); only the newest O(backup_keep) copies per file are kept. A symlinked file is
    written through to its target (the link stays); a link that leads outside O(root) is refused.
    When a write fails, what the run already wrote is put back and the result says C(changed=false).
  - Files with CRLF line endings keep them; files that are not UTF-8 or paths that are directories
    are refused with a message naming the path.
  - For Kubernetes 1.19-1.22, O(legacy_policy=true) writes the legacy scheduler C(Policy) file
    and the C(--policy-config-file) flag instead.
  - Kubernetes 1.18 serves only alpha configuration APIs, so there the module always writes the
    C(Policy) file; a 1.18 manifest that passes C(--config) is refused, because 1.18's kube-scheduler
    ignores C(--policy-config-file) next to C(--config).
author:
  - poweraware.k8s contributors (@poweraware)
extends_documentation_fragment:
  - poweraware.k8s.attributes
attributes:
  check_mode:
    support: full
  diff_mode:
    support: full
    details: Unified diffs of the manifest and of the configuration file.
  idempotent:
    support: full
requirements:
  - PyYAML on the managed node.
options:
  state:
    description: Whether the extenders are registered (V(present)) or what this module added is removed (V(absent)).
    type: str
    choices: [present, absent]
    default: present
  manifest_path:
    description: The kube-scheduler static pod manifest, as a path on the node.
    type: path
    default: /etc/kubernetes/manifests/kube-scheduler.yaml
  config_path:
    description:
      - The C(KubeSchedulerConfiguration) file to create when the manifest does not pass C(--config) yet.
      - Must not be in the static pod directory.
    type: path
    default: /etc/kubernetes/scheduler-extender.yaml
  policy_path:
    description: The legacy C(Policy) file to create with O(legacy_policy=true).
    type: path
    default: /etc/kubernetes/scheduler-extender-policy.json
  legacy_policy:
    description:
      - Write the legacy scheduler C(Policy) (Kubernetes 1.19-1.22) instead of a C(KubeSchedulerConfiguration).
      - On 1.18 the C(Policy) is written either way.
    type: bool
    default: false
  kubernetes_version:
    description:
      - The Kubernetes release of the scheduler, for example V(1.29) or V(v1.29.3).
      - Detected from the manifest's image tag when not given; required when the image has no version tag.
    type: str
  extenders:
    description: The extenders to register (required with O(state=present)).
    type: list
    elements: dict
    suboptions:
      url_prefix:
        description: URL prefix of the extender; C(https://) enables HTTPS.
        type: str
        required: true
      filter_verb:
        description: Path appended to O(extenders[].url_prefix) for the filter call.
        type: str
      prioritize_verb:
        description: Path appended to O(extenders[].url_prefix) for the prioritize call.
        type: str
      preempt_verb:
        description: Path for the preempt call.
        type: str
      bind_verb:
        description: Path for the bind call (only one extender may bind).
        type: str
      weight:
        description: Multiplier of the prioritize scores; a positive integer.
        type: int
        default: 1
      enable_https:
        description: Use HTTPS; defaults to whether O(extenders[].url_prefix) is C(https://).
        type: bool
      http_timeout:
        description: Timeout of one call, a Go duration such as V(5s) (kube-scheduler's default is 5s).
        type: str
      node_cache_capable:
        description: The extender caches nodes, so the scheduler sends only node names.
        type: bool
        default: false
      ignorable:
        description: Scheduling goes on when the extender fails or is unreachable.
        type: bool
        default: false
      managed_resources:
        description:
          - Extended resources the extender manages; only pods requesting one of them are sent to it.
        type: list
        elements: dict
        suboptions:
          name:
            description: Extended resource name, for example V(telemetry/scheduling).
            type: str
            required: true
          ignored_by_scheduler:
            description: kube-scheduler does not check nodes for this resource.
            type: bool
            default: false
      tls:
        description: TLS files on the node (their directories are mounted read-only into the pod).
        type: dict
        suboptions:
          cert_file:
            description: Client certificate the scheduler presents to the extender.
            type: path
          key_file:
            description: Key of O(extenders[].tls.cert_file).
            type: path
          ca_file:
            description:
              - CA bundle that verifies the extender's certificate. Required for an C(https://) extender unless
                O(extenders[].tls.insecure) (kube-scheduler calls an https extender without a CA unverified).
            type: path
          insecure:
            description:
              - Do not verify the extender's certificate (testing only). Not together with
                O(extenders[].tls.ca_file), which kube-scheduler refuses at start-up.
            type: bool
            default: false
          server_name:
            description: Host name or IP address to verify the extender's certificate against, when not the URL host.
            type: str
  backup_dir:
    description:
      - Directory on the node for timestamped copies of the manifest and config before each change.
      - Must not be the static pod directory or inside it.
    type: path
    default: /var/lib/poweraware/backups/kube-scheduler
  backup_keep:
    description: How many backups to keep per file (the oldest are removed).
    type: int
    default: 5
  trust_changed:
    description:
      - The CA files the extenders trust (C(ca_file)) were just replaced. kube-scheduler reads them only when
        it starts, so the manifest records a digest of each and a changed CA changes the manifest, which
        restarts kube-scheduler.
      - Needed only for a manifest an earlier version annotated without digests (they are otherwise added at
        its next change, so an upgrade alone restarts nothing); the role P(poweraware.k8s.scheduler_extender#role)
        sets it when it installs a new CA.
    type: bool
    default: false
  root:
    description:
      - Prefix for every file the module reads or writes. Paths inside the manifest and the config
        stay node paths; only file access is prefixed (for chroots and test node trees).
    type: path
    default: /
notes:
  - kube-scheduler restarts when its manifest changes, which includes a changed CA file it trusts (see
    O(trust_changed)); a renewed client certificate and key are reloaded by kube-scheduler itself (client-go
    reads them from their files again every five minutes) and restart nothing. The role
    C(poweraware.k8s.scheduler_extender) waits for it to become healthy and restores the backups when it does not.
seealso:
  - name: Scheduler Configuration (Kubernetes documentation)
    description: The C(KubeSchedulerConfiguration) API, its versions and the migration notes between them.
    link: https://kubernetes.io/docs/reference/scheduling/config/
  - name: kube-scheduler configuration (v1) reference
    description: Every field of the C(Extender) entry the module writes.
    link: https://kubernetes.io/docs/reference/config-api/kube-scheduler-config.v1/
"""

EXAMPLES = r"""
- name: Register Telemetry Aware Scheduling in kube-scheduler
  poweraware.k8s.kube_scheduler_extender:
    extenders:
      - url_prefix: https://tas-service.telemetry-aware-scheduling.svc.cluster.local:9001
        filter_verb: scheduler/filter
        prioritize_verb: scheduler/prioritize
        weight: 1
        ignorable: true
        http_timeout: 5s
        managed_resources:
          - name: telemetry/scheduling
            ignored_by_scheduler: true
        tls:
          cert_file: /etc/kubernetes/pki/tas/client.crt
          key_file: /etc/kubernetes/pki/tas/client.key
          ca_file: /etc/kubernetes/pki/tas/ca.crt
  register: scheduler

- name: Legacy Policy form on a Kubernetes 1.21 control plane
  poweraware.k8s.kube_scheduler_extender:
    legacy_policy: true
    extenders:
      - url_prefix: http://127.0.0.1:9001
        filter_verb: filter

- name: Remove what the module added
  poweraware.k8s.kube_scheduler_extender:
    state: absent
"""

RETURN = r"""
kubernetes_version:
  description: The Kubernetes release used to choose the API version.
  returned: state=present
  type: str
  sample: 1.29.3
api_version:
  description: C(apiVersion) of the configuration file (V(v1) for the legacy Policy).
  returned: state=present
  type: str
  sample: kubescheduler.config.k8s.io/v1
mode:
  description: V(config) (KubeSchedulerConfiguration) or V(policy) (legacy Policy).
  returned: when something is or was registered
  type: str
  sample: config
config_path:
  description: The configuration file the scheduler loads (the user's own C(--config) file when there was one).
  returned: when something is or was registered
  type: str
  sample: /etc/kubernetes/scheduler-extender.yaml
config_created:
  description: The configuration file is owned by the module (it did not exist before); a rollback deletes it.
  returned: when something is or was registered
  type: bool
config_existed:
  description: The configuration file existed before this run.
  returned: always
  type: bool
manifest_changed:
  description: The manifest was (or in check mode would be) rewritten.
  returned: always
  type: bool
config_changed:
  description: The configuration file was (or in check mode would be) written or removed.
  returned: always
  type: bool
registration_restored:
  description:
    - The manifest no longer loaded the configuration file this module had written (regenerated by
      C(kubeadm upgrade) or an installer re-run, or a run cut short between its two writes), so
      kube-scheduler had been running without the extenders; this run registers them again and warns.
  returned: always
  type: bool
manifest_reemitted:
  description:
    - The manifest could not be edited line by line (flow-style YAML or JSON) and was written out
      whole by PyYAML (same content, different layout).
  returned: always
  type: bool
backup_manifest:
  description: Backup of the manifest taken before the change (null when nothing changed or in check mode).
  returned: always
  type: str
  sample: /var/lib/poweraware/backups/kube-scheduler/kube-scheduler.yaml.20260101T120000000000Z.bak
backup_config:
  description: Backup of the configuration file before the change (null when it did not exist or did not change).
  returned: always
  type: str
record:
  description:
    - What the module added to the manifest (the content of its C(poweraware.k8s/scheduler-extender) annotation).
  returned: when something is or was registered
  type: dict
annotation:
  description:
    - The C(poweraware.k8s/scheduler-extender) annotation exactly as the manifest carries it after this run
      (compact JSON, sorted keys); empty after O(state=absent). The mirror pod shows the same string.
  returned: always
  type: str
  sample: '{"extenders":["https://tas.example:9001"],"v":1}'
"""

import os  # noqa: E402
import time  # noqa: E402

from ansible.module_utils.basic import AnsibleModule, missing_required_lib  # noqa: E402
from ansible.module_utils.common.text.converters import to_native  # noqa: E402
from ansible_collections.poweraware.k8s.plugins.module_utils.cluster import k8s_version as kv  # noqa: E402
from ansible_collections.poweraware.k8s.plugins.module_utils.node_files.files import (  # noqa: E402
    LOCK_WAIT_S,
    NodeFileError,
    NodeFiles,
    inside,
    lock_directory,
)
from ansible_collections.poweraware.k8s.plugins.module_utils.scheduler import sched_config as sc  # noqa: E402
from ansible_collections.poweraware.k8s.plugins.module_utils.scheduler import sched_manifest as ms  # noqa: E402
from ansible_collections.poweraware.k8s.plugins.module_utils.scheduler import sched_version as sv  # noqa: E402
from ansible_collections.poweraware.k8s.plugins.module_utils.scheduler.yaml_edit import HAS_YAML, yaml  # noqa: E402


def _fail(module, msg, **kwargs):
    # every refusal happens before anything is written, unless a caller says otherwise
    kwargs.setdefault("changed", False)
    module.fail_json(msg=msg, **kwargs)


def _validate(module, files):
    """The checks the argument spec cannot make (meaning, not types); returns the normalized extenders."""
    p = module.params
    errors = _path_problems(p, files)
    if p["backup_keep"] < 1:
        errors.append(f"backup_keep must be at least 1, got {p['backup_keep']}; fix: keep at least one backup")
    extenders = []
    if p["state"] == "present":
        if p["kubernetes_version"]:
            try:
                kv.parse_version(p["kubernetes_version"])
            except kv.VersionError as exc:
                errors.append(str(exc))
        extenders, ext_errors = sc.normalize_extenders(p["extenders"])
        errors += ext_errors or _tls_file_problems(module, files, extenders)
    elif p["extenders"]:
        module.warn("extenders is ignored with state=absent: everything the module added is removed")
    if errors:
        _fail(module, "invalid arguments, nothing was changed: " + "; ".join(errors), errors=errors)
    return extenders


def _path_problems(p, files):
    """Node paths are absolute, backups stay out of the static pod directory, root and backup_dir are directories."""
    errors = []
    for name in ("manifest_path", "config_path", "policy_path", "backup_dir"):
        if not p[name].startswith("/"):
            errors.append(f"{name} must be an absolute path on the node, got {p[name]!r}")
    static_pod_dir = os.path.dirname(p["manifest_path"].rstrip("/"))
    backup_in_static_pods = inside(p["backup_dir"], static_pod_dir)
    if backup_in_static_pods:
        errors.append(
            f"backup_dir {p['backup_dir']} is the static pod directory or inside it; kubelet would run the backups "
            "as pods. Use a directory such as /var/lib/poweraware/backups/kube-scheduler"
        )
    if not os.path.isdir(files.root):
        errors.append(f"root {files.root} is not a directory; fix: point root at the node's file tree")
    backup_host = files.host(p["backup_dir"])
    resolved = os.path.realpath(backup_host)
    if not backup_in_static_pods and inside(resolved, os.path.realpath(files.host(static_pod_dir))):
        # a symbolic link on the way: the backups would land where kubelet runs every file as a pod
        errors.append(
            f"backup_dir {p['backup_dir']} leads through a symbolic link into the static pod directory "
            f"({resolved}); kubelet would run the backups as pods. Use a directory that is not linked there, "
            "such as /var/lib/poweraware/backups/kube-scheduler"
        )
    if os.path.lexists(backup_host) and not os.path.isdir(backup_host):
        errors.append(
            f"backup_dir {p['backup_dir']} exists and is not a directory; fix: remove that file or choose another "
            "backup_dir"
        )
    return errors


def _tls_file_problems(module, files, extenders):
    errors = []
    for ext in extenders:
        for key in ("cert_file", "key_file", "ca_file"):
            path = (ext.get("tls") or {}).get(key)
            if path and os.path.isdir(files.host(path)):
                errors.append(
                    f"TLS file {path} ({key} of {ext['url_prefix']}) is a directory, but a PEM file is expected; "
                    f"fix: point {key} at the file"
                )
            elif path and not os.path.isfile(files.host(path)):
                message = f"TLS file {path} ({key} of {ext['url_prefix']}) does not exist on the node"
                if module.check_mode:
                    module.warn(message + "; it must exist before the real run")
                else:
                    errors.append(message + "; create it first (the scheduler_extender role issues it)")
    return errors


def _plan(module, files, extenders):
    p = module.params
    try:
        manifest_text = files.read(p["manifest_path"])
    except NodeFileError as exc:
        _fail(module, f"nothing was changed: {to_native(exc)}")
    if manifest_text is None:
        under = "" if files.root == "/" else f" under root {files.root}"
        _fail(module, f"manifest {p['manifest_path']} not found{under}; is this a control-plane node, and is "
              "manifest_path right?")  # fmt: skip

    def same_as(doc):
        def matches(text):
            try:
                return sc.same_content(yaml.safe_load(text), doc)
            except yaml.YAMLError:
                return False

        return matches

    try:
        if p["state"] == "present":
            return ms.plan_present(manifest_text, p["manifest_path"], files.read, extenders, p["config_path"],
                                   p["policy_path"], kubernetes_version=p["kubernetes_version"],
                                   legacy_policy=p["legacy_policy"], trust_changed=p["trust_changed"])  # fmt: skip
        return ms.plan_absent(
            manifest_text,
            p["manifest_path"],
            files.read,
            lambda path, doc: files.original_text(path, same_as(doc)),
            config_path=p["config_path"],
        )
    except ms.ManifestError as exc:
        _fail(module, f"nothing was changed: {to_native(exc)}", errors=exc.errors)
    except (NodeFileError, sv.ConfigError, kv.VersionError) as exc:
        _fail(module, f"nothing was changed: {to_native(exc)}")


def _diff(manifest_path, plan):
    diff = []
    if plan.manifest_changed:
        diff.append({"before_header": manifest_path, "after_header": manifest_path,
                     "before": plan.manifest_before, "after": plan.manifest_after})  # fmt: skip
    if plan.file_changed:
        absent = f"{plan.file_path} (absent)"
        diff.append({
            "before_header": plan.file_path if plan.file_before is not None else absent,
            "after_header": plan.file_path if not plan.file_delete else absent,
            "before": plan.file_before or "",
            "after": "" if plan.file_delete else plan.file_after,
        })  # fmt: skip
    return diff


def _result(module, plan):
    p = module.params
    result = {
        "changed": plan.changed,
        "manifest_changed": plan.manifest_changed,
        "config_changed": plan.file_changed,
        "manifest_reemitted": plan.reemitted and plan.manifest_changed,
        "registration_restored": plan.restored,
        "config_existed": plan.file_before is not None,
        "backup_manifest": None,
        "backup_config": None,
        # The annotation exactly as the manifest carries it ("" when nothing of ours is registered).
        "annotation": plan.annotation,
    }
    if plan.record is not None:
        result.update(mode=plan.mode, config_path=plan.file_path, record=plan.record)
        result["config_created"] = (
            bool(plan.record.get("file_created")) if p["state"] == "absent" else plan.file_created
        )
    if p["state"] == "present":
        result.update(api_version=plan.api_version, kubernetes_version=plan.kubernetes_version)
    return result


def _lock(module, files):
    """One run at a time per static pod directory (flock on it; shared in check mode): two runs at once
    would each merge their extenders into the files they read, and the later write would drop the
    other's registration while both report success. Returns the descriptor that holds the lock."""
    directory = files.host(os.path.dirname(module.params["manifest_path"]))
    deadline = time.monotonic() + LOCK_WAIT_S
    while True:
        try:
            fd = lock_directory(directory, exclusive=not module.check_mode, deadline=deadline)
        except TimeoutError:
            _fail(module, f"another kube_scheduler_extender run has held the lock on {directory} for more than "
                  f"{LOCK_WAIT_S:g} s; nothing was changed: let it finish, then run again")  # fmt: skip
        except OSError:
            return None  # not a directory we can open: the plan names the manifest path's problem
        if fd is not None or not os.path.isdir(directory):
            return fd


def run_module(module):
    p = module.params
    files = NodeFiles(p["root"], p["backup_dir"], p["backup_keep"], move=module.atomic_move)
    extenders = _validate(module, files)
    lock = _lock(module, files)
    try:
        _run_locked(module, files, extenders)
    finally:
        if lock is not None:
            os.close(lock)


def _run_locked(module, files, extenders):
    p = module.params
    plan = _plan(module, files, extenders)
    for warning in plan.warnings:
        module.warn(warning)
    result = _result(module, plan)
    if plan.reemitted and plan.manifest_changed:
        module.warn(
            "the manifest is not block-style YAML that can be edited line by line; it was written out whole "
            "(same content, new layout)"
        )
    if module._diff:
        result["diff"] = _diff(p["manifest_path"], plan)
    if module.check_mode or not plan.changed:
        module.exit_json(**result)
    _write(module, files, plan, result)


def _write(module, files, plan, result):
    """Write the planned files with backups; on failure put back what can be and say what happened."""
    p = module.params
    # Order matters for a scheduler that restarts as soon as the manifest changes: the config
    # goes first on present (the new manifest must find it), the manifest first on absent
    # (the old manifest must not lose its file while it still references it).
    config = (
        [(plan.file_path, plan.file_before, None if plan.file_delete else plan.file_after)] if plan.file_changed else []
    )
    manifest = [(p["manifest_path"], plan.manifest_before, plan.manifest_after)] if plan.manifest_changed else []
    backups, failure = files.apply(config + manifest if p["state"] == "present" else manifest + config)
    result["backup_config"] = backups.get(plan.file_path) if plan.file_changed else None
    result["backup_manifest"] = backups.get(p["manifest_path"]) if plan.manifest_changed else None
    if failure is None:
        module.exit_json(**result)
    if failure["problems"]:
        # A configuration file written for a manifest that could not be replaced must not stay:
        # the next run would take it for the user's own file and state=absent would never remove it.
        result.update(changed=True)
        _fail(module, f"{failure['reason']}; {'; '.join(failure['problems'])}; the backups listed here hold the "
              "previous files", **result)  # fmt: skip
    result.update(changed=False, manifest_changed=False, config_changed=False, backup_manifest=None,
                  backup_config=None)  # fmt: skip
    undone = " and everything this run had written was put back" if failure["undone"] else ""
    _fail(module, f"{failure['reason']}; nothing was changed{undone}", **result)


def argument_spec():
    """The options, their types, defaults and allowed keys (a fresh copy for each AnsibleModule)."""
    tls = {
        "cert_file": {"type": "path"},
        "key_file": {"type": "path", "no_log": False},
        "ca_file": {"type": "path"},
        "insecure": {"type": "bool", "default": False},
        "server_name": {"type": "str"},
    }
    managed_resource = {
        "name": {"type": "str", "required": True},
        "ignored_by_scheduler": {"type": "bool", "default": False},
    }
    extender = {
        "url_prefix": {"type": "str", "required": True},
        "filter_verb": {"type": "str"},
        "prioritize_verb": {"type": "str"},
        "preempt_verb": {"type": "str"},
        "bind_verb": {"type": "str"},
        "weight": {"type": "int", "default": 1},
        "enable_https": {"type": "bool"},
        "http_timeout": {"type": "str"},
        "node_cache_capable": {"type": "bool", "default": False},
        "ignorable": {"type": "bool", "default": False},
        "managed_resources": {"type": "list", "elements": "dict", "options": managed_resource},
        "tls": {"type": "dict", "options": tls},
    }
    return {
        "state": {"type": "str", "choices": ["present", "absent"], "default": "present"},
        "manifest_path": {"type": "path", "default": "/etc/kubernetes/manifests/kube-scheduler.yaml"},
        "config_path": {"type": "path", "default": "/etc/kubernetes/scheduler-extender.yaml"},
        "policy_path": {"type": "path", "default": "/etc/kubernetes/scheduler-extender-policy.json"},
        "legacy_policy": {"type": "bool", "default": False},
        "kubernetes_version": {"type": "str"},
        "extenders": {"type": "list", "elements": "dict", "options": extender},
        "backup_dir": {"type": "path", "default": "/var/lib/poweraware/backups/kube-scheduler"},
        "backup_keep": {"type": "int", "default": 5},
        "trust_changed": {"type": "bool", "default": False},
        "root": {"type": "path", "default": "/"},
    }


def main():
    module = AnsibleModule(
        argument_spec=argument_spec(),
        required_if=[("state", "present", ["extenders"])],
        supports_check_mode=True,
    )
    if not HAS_YAML:
        module.fail_json(msg=missing_required_lib("PyYAML"))
    run_module(module)


if __name__ == "__main__":
    main()
