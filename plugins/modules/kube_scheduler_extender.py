#!/usr/bin/python
# Copyright: poweraware.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: kube_scheduler_extender
short_description: Register scheduler extenders in a kube-scheduler static pod, for Kubernetes 1.19 and newer
version_added: 0.1.0
description:
  - Writes a C(KubeSchedulerConfiguration) holding one or more scheduler extenders in the newest
    C(kubescheduler.config.k8s.io) version the running Kubernetes release serves
    (v1beta1 for 1.19-1.21, v1beta2 for 1.22, v1beta3 for 1.23-1.24, v1 from 1.25), and patches the
    kube-scheduler static pod manifest to load it.
  - The Kubernetes release is read from the manifest's image tag (any registry, port, path, tag
    suffix or digest), unless O(kubernetes_version) is given. Releases before 1.19 are refused.
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
      - Write the legacy scheduler C(Policy) (Kubernetes 1.19-1.22 only) instead of a C(KubeSchedulerConfiguration).
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
            description: CA bundle that verifies the extender's certificate.
            type: path
          insecure:
            description: Do not verify the extender's certificate (testing only).
            type: bool
            default: false
          server_name:
            description: Name to verify the extender's certificate against, when not the URL host.
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
  root:
    description:
      - Prefix for every file the module reads or writes. Paths inside the manifest and the config
        stay node paths; only file access is prefixed (for chroots and test node trees).
    type: path
    default: /
notes:
  - kube-scheduler restarts when its manifest changes. The role C(poweraware.k8s.scheduler_extender)
    waits for it to become healthy and restores the backups when it does not.
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
"""

import contextlib  # noqa: E402
import datetime  # noqa: E402
import os  # noqa: E402
import tempfile  # noqa: E402

from ansible.module_utils.basic import AnsibleModule, missing_required_lib  # noqa: E402
from ansible.module_utils.common.text.converters import to_bytes, to_native  # noqa: E402
from ansible_collections.poweraware.k8s.plugins.module_utils import _k8s_version as kv  # noqa: E402
from ansible_collections.poweraware.k8s.plugins.module_utils import _manifest_scheduler as ms  # noqa: E402
from ansible_collections.poweraware.k8s.plugins.module_utils import _scheduler_config as sc  # noqa: E402
from ansible_collections.poweraware.k8s.plugins.module_utils._manifest_yaml import HAS_YAML, yaml  # noqa: E402


def _host(root, path):
    """The file system path of a node path under ``root``."""
    if root in ("", "/"):
        return path
    return os.path.join(root, path.lstrip("/"))


def _inside(path, directory):
    path, directory = os.path.normpath(path), os.path.normpath(directory)
    return path == directory or path.startswith(directory.rstrip("/") + "/")


def _resolve(root, path):
    """The real file behind node ``path``: symbolic links followed, refused when they leave ``root``.

    Writing to the resolved path keeps a symlinked manifest a symlink (the file it points to is
    replaced atomically instead of the link being replaced by a regular file).
    """
    host = _host(root, path)
    real = os.path.realpath(host)
    if root not in ("", "/") and not _inside(real, os.path.realpath(root)):
        link = os.readlink(host) if os.path.islink(host) else real
        raise ms.ManifestError(
            "%s is a symbolic link to %s, which is outside the node root %s; the module reads and writes only inside "
            "root; fix: point the link at a file inside the node's file system (a relative link, or an absolute "
            "one under %s)" % (path, link, root, root)
        )
    return real


def _read(root, path):
    """Text of node file ``path`` (None when missing); a clear ManifestError when it cannot be text."""
    target = _resolve(root, path)
    try:
        with open(target, "rb") as handle:
            data = handle.read()
    except FileNotFoundError:
        return None
    except IsADirectoryError:
        raise ms.ManifestError(
            "%s is a directory, but a file is expected there; fix: point the path at the file, or remove the "
            "directory" % path
        ) from None
    except OSError as exc:
        raise ms.ManifestError(
            "cannot read %s: %s; fix: run the module as root (become: true)" % (path, exc.strerror)
        ) from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ms.ManifestError(
            "%s is not UTF-8 text (byte 0x%02x at offset %d); Kubernetes manifests and scheduler configurations are "
            "UTF-8 YAML; fix: convert the file to UTF-8 (for example with iconv -t utf-8) or point the path at the "
            "right file" % (path, data[exc.start], exc.start)
        ) from None


class Runner:
    def __init__(self, module):
        self.module = module
        self.params = module.params
        self.root = self.params["root"]
        self.stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%S%fZ")

    def fail(self, msg, **kwargs):
        # every refusal happens before anything is written, unless a caller says otherwise
        kwargs.setdefault("changed", False)
        self.module.fail_json(msg=msg, **kwargs)

    # --- validation, before anything is touched ---------------------------------------------------

    def validate(self):
        p = self.params
        errors = []
        manifest_dir = os.path.dirname(p["manifest_path"].rstrip("/"))
        for name in ("manifest_path", "config_path", "policy_path", "backup_dir"):
            if not p[name].startswith("/"):
                errors.append("%s must be an absolute path on the node, got %r" % (name, p[name]))
        if _inside(p["backup_dir"], manifest_dir):
            errors.append(
                "backup_dir %s is the static pod directory or inside it; kubelet would run the backups as pods. "
                "Use a directory such as /var/lib/poweraware/backups/kube-scheduler" % p["backup_dir"]
            )
        if p["backup_keep"] < 1:
            errors.append("backup_keep must be at least 1, got %d" % p["backup_keep"])
        if not os.path.isdir(self.root):
            errors.append("root %s is not a directory" % self.root)
        backup_host = _host(self.root, p["backup_dir"])
        if os.path.lexists(backup_host) and not os.path.isdir(backup_host):
            errors.append(
                "backup_dir %s exists and is not a directory; fix: remove that file or choose another backup_dir"
                % p["backup_dir"]
            )
        extenders = []
        if p["state"] == "present":
            if p["kubernetes_version"]:
                try:
                    kv.parse_version(p["kubernetes_version"])
                except kv.VersionError as exc:
                    errors.append(str(exc))
            extenders, ext_errors = sc.normalize_extenders(p["extenders"] or [])
            errors += ext_errors
            if not ext_errors:
                for ext in extenders:
                    for key in ("cert_file", "key_file", "ca_file"):
                        path = (ext.get("tls") or {}).get(key)
                        if path and os.path.isdir(_host(self.root, path)):
                            errors.append(
                                "TLS file %s (%s of %s) is a directory, but a PEM file is expected; fix: point %s at "
                                "the file" % (path, key, ext["url_prefix"], key)
                            )
                        elif path and not os.path.isfile(_host(self.root, path)):
                            message = "TLS file %s (%s of %s) does not exist on the node" % (
                                path,
                                key,
                                ext["url_prefix"],
                            )
                            if self.module.check_mode:
                                self.module.warn(message + "; it must exist before the real run")
                            else:
                                errors.append(message + "; create it first (the scheduler_extender role issues it)")
        elif p["extenders"]:
            self.module.warn("extenders is ignored with state=absent: everything the module added is removed")
        if errors:
            self.fail("invalid arguments, nothing was changed: " + "; ".join(errors), errors=errors)
        return extenders

    # --- writing ----------------------------------------------------------------------------------

    def backup(self, path, text):
        directory = _host(self.root, self.params["backup_dir"])
        os.makedirs(directory, mode=0o700, exist_ok=True)
        name = "%s.%s.bak" % (os.path.basename(path), self.stamp)
        target = os.path.join(directory, name)
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as handle:
            handle.write(to_bytes(text))
        self.prune(directory, os.path.basename(path))
        return os.path.join(self.params["backup_dir"], name)

    def prune(self, directory, base):
        prefix = base + "."
        found = sorted(n for n in os.listdir(directory) if n.startswith(prefix) and n.endswith(".bak"))
        for old in found[: -self.params["backup_keep"]]:
            os.unlink(os.path.join(directory, old))

    def write(self, path, text, mode=0o600):
        target = _resolve(self.root, path)
        directory = os.path.dirname(target)
        if not os.path.isdir(directory):
            os.makedirs(directory, mode=0o755)
        # a dot file: kubelet ignores hidden files in the static pod directory
        fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(target) + ".", suffix=".tmp", dir=directory)
        existed = os.path.exists(target)
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(to_bytes(text))
            os.chmod(tmp, mode)
            self.module.atomic_move(tmp, target)  # keeps an existing file's mode and owner
            if not existed:
                os.chmod(target, mode)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)

    def original_text(self, path, doc):
        """Bytes of the newest backup of ``path`` whose content equals ``doc`` (restores comments on absent)."""
        directory = _host(self.root, self.params["backup_dir"])
        if not os.path.isdir(directory):
            return None
        prefix = os.path.basename(path) + "."
        for name in sorted(
            (n for n in os.listdir(directory) if n.startswith(prefix) and n.endswith(".bak")), reverse=True
        ):
            try:
                with open(os.path.join(directory, name), "rb") as handle:
                    text = handle.read().decode("utf-8")
                if sc.same_content(yaml.safe_load(text), doc):
                    return text
            except (OSError, ValueError, yaml.YAMLError):
                continue
        return None

    # --- main -------------------------------------------------------------------------------------

    def run(self):
        p = self.params
        extenders = self.validate()
        try:
            manifest_text = _read(self.root, p["manifest_path"])
        except ms.ManifestError as exc:
            self.fail("nothing was changed: %s" % to_native(exc), changed=False)
        if manifest_text is None:
            self.fail(
                "manifest %s not found%s; is this a control-plane node, and is manifest_path right?"
                % (p["manifest_path"], "" if self.root == "/" else " under root %s" % self.root),
                changed=False,
            )
        try:
            if p["state"] == "present":
                plan = ms.plan_present(
                    manifest_text,
                    p["manifest_path"],
                    lambda path: _read(self.root, path),
                    extenders,
                    p["config_path"],
                    p["policy_path"],
                    kubernetes_version=p["kubernetes_version"],
                    legacy_policy=p["legacy_policy"],
                )
            else:
                plan = ms.plan_absent(
                    manifest_text,
                    p["manifest_path"],
                    lambda path: _read(self.root, path),
                    self.original_text,
                    config_path=p["config_path"],
                )
        except ms.ManifestError as exc:
            self.fail("nothing was changed: %s" % to_native(exc), errors=exc.errors, changed=False)
        except (sc.ConfigError, kv.VersionError) as exc:
            self.fail("nothing was changed: %s" % to_native(exc), changed=False)
        for warning in plan.warnings:
            self.module.warn(warning)
        result = {
            "changed": plan.changed,
            "manifest_changed": plan.manifest_changed,
            "config_changed": plan.file_changed,
            "manifest_reemitted": plan.reemitted and plan.manifest_changed,
            "config_existed": plan.file_before is not None,
            "backup_manifest": None,
            "backup_config": None,
        }
        if plan.record is not None:
            result.update(mode=plan.mode, config_path=plan.file_path, record=plan.record)
            result["config_created"] = (
                bool(plan.record.get("file_created")) if p["state"] == "absent" else plan.file_created
            )
        if p["state"] == "present":
            result.update(api_version=plan.api_version, kubernetes_version=plan.kubernetes_version)
        if plan.reemitted and plan.manifest_changed:
            self.module.warn(
                "the manifest is not block-style YAML that can be edited line by line; it was written out whole "
                "(same content, new layout)"
            )
        if self.module._diff:
            diff = []
            if plan.manifest_changed:
                diff.append(
                    {
                        "before_header": p["manifest_path"],
                        "after_header": p["manifest_path"],
                        "before": plan.manifest_before,
                        "after": plan.manifest_after,
                    }
                )
            if plan.file_changed:
                diff.append(
                    {
                        "before_header": plan.file_path
                        if plan.file_before is not None
                        else "%s (absent)" % plan.file_path,
                        "after_header": plan.file_path if not plan.file_delete else "%s (absent)" % plan.file_path,
                        "before": plan.file_before or "",
                        "after": "" if plan.file_delete else plan.file_after,
                    }
                )
            result["diff"] = diff
        if self.module.check_mode or not plan.changed:
            self.module.exit_json(**result)
        # Order matters for a scheduler that restarts as soon as the manifest changes: the config
        # goes first on present (the new manifest must find it), the manifest first on absent
        # (the old manifest must not lose its file while it still references it).
        done = []  # (node path, its text before this run or None): what to put back on failure
        backups = []
        step = "the backups"
        try:
            if plan.file_changed and plan.file_before is not None:
                result["backup_config"] = self.backup(plan.file_path, plan.file_before)
                backups.append(result["backup_config"])
            if plan.manifest_changed:
                result["backup_manifest"] = self.backup(p["manifest_path"], plan.manifest_before)
                backups.append(result["backup_manifest"])
            if p["state"] == "present":
                if plan.file_changed:
                    step = plan.file_path
                    self.write(plan.file_path, plan.file_after)
                    done.append((plan.file_path, plan.file_before))
                if plan.manifest_changed:
                    step = p["manifest_path"]
                    self.write(p["manifest_path"], plan.manifest_after)
                    done.append((p["manifest_path"], plan.manifest_before))
            else:
                if plan.manifest_changed:
                    step = p["manifest_path"]
                    self.write(p["manifest_path"], plan.manifest_after)
                    done.append((p["manifest_path"], plan.manifest_before))
                if plan.file_changed:
                    step = plan.file_path
                    if plan.file_delete:
                        os.unlink(_resolve(self.root, plan.file_path))
                    else:
                        self.write(plan.file_path, plan.file_after)
                    done.append((plan.file_path, plan.file_before))
        except (OSError, ms.ManifestError) as exc:
            self.roll_back(result, step, exc, done, backups)
        self.module.exit_json(**result)

    def roll_back(self, result, step, exc, done, backups):
        """Put back what this run wrote (newest first) and fail with an accurate ``changed``.

        A configuration file written for a manifest that could not be replaced must not stay:
        the next run would take it for the user's own file and state=absent would never remove it.
        """
        problems = []
        for path, before in reversed(done):
            try:
                if before is None:
                    os.unlink(_resolve(self.root, path))
                else:
                    self.write(path, before)
            except (OSError, ms.ManifestError) as undo_exc:
                problems.append("putting back %s failed too: %s" % (path, to_native(undo_exc)))
        reason = "writing %s failed: %s" % (step, to_native(getattr(exc, "strerror", None) or exc))
        if problems:
            result.update(changed=True)
            self.fail(
                "%s; %s; the backups listed here hold the previous files" % (reason, "; ".join(problems)), **result
            )
        for backup in backups:  # nothing changed, so nothing to restore from
            with contextlib.suppress(OSError):
                os.unlink(_host(self.root, backup))
        result.update(
            changed=False, manifest_changed=False, config_changed=False, backup_manifest=None, backup_config=None
        )
        undone = " and everything this run had written was put back" if done else ""
        self.fail("%s; nothing was changed%s" % (reason, undone), **result)


def main():
    tls_spec = {
        "cert_file": {"type": "path"},
        "key_file": {"type": "path", "no_log": False},
        "ca_file": {"type": "path"},
        "insecure": {"type": "bool", "default": False},
        "server_name": {"type": "str"},
    }
    extender_spec = {
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
        "managed_resources": {
            "type": "list",
            "elements": "dict",
            "options": {
                "name": {"type": "str", "required": True},
                "ignored_by_scheduler": {"type": "bool", "default": False},
            },
        },
        "tls": {"type": "dict", "options": tls_spec},
    }
    module = AnsibleModule(
        argument_spec={
            "state": {"type": "str", "choices": ["present", "absent"], "default": "present"},
            "manifest_path": {"type": "path", "default": "/etc/kubernetes/manifests/kube-scheduler.yaml"},
            "config_path": {"type": "path", "default": "/etc/kubernetes/scheduler-extender.yaml"},
            "policy_path": {"type": "path", "default": "/etc/kubernetes/scheduler-extender-policy.json"},
            "legacy_policy": {"type": "bool", "default": False},
            "kubernetes_version": {"type": "str"},
            "extenders": {"type": "list", "elements": "dict", "options": extender_spec},
            "backup_dir": {"type": "path", "default": "/var/lib/poweraware/backups/kube-scheduler"},
            "backup_keep": {"type": "int", "default": 5},
            "root": {"type": "path", "default": "/"},
        },
        required_if=[("state", "present", ["extenders"])],
        supports_check_mode=True,
    )
    if not HAS_YAML:
        module.fail_json(msg=missing_required_lib("PyYAML"))
    Runner(module).run()


if __name__ == "__main__":
    main()
