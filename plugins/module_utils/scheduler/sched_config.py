# Copyright: poweraware.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""kube-scheduler configuration for scheduler extenders, for every Kubernetes release 1.19+.

Pure logic, no Ansible import; Python 3.9 compatible (runs on the managed node).

* The API versions each release serves and the conversion between them are in ``sched_version``.
* ``normalize_extenders`` checks the user's extender list (already typed by the module's
  argument spec) up front and returns every problem at once, each with what to change.
* ``render_extender`` writes one extender in the schema of a KubeSchedulerConfiguration
  (v1beta1 .. v1: ``enableHTTPS``, ``httpTimeout`` as a duration string) or of the legacy
  ``Policy`` file (1.19 - 1.22: ``enableHttps``, ``httpTimeout`` in nanoseconds).
* ``validate_extenders`` is kube-scheduler's own check of the ``extenders`` list (ported from
  its ``validation.go``), run on the merged result before anything is written.
"""

from __future__ import annotations

import copy
import ipaddress
import re

from ansible_collections.poweraware.k8s.plugins.module_utils.k8s_names import (
    dns_name_labels,
    extended_resource_name_problems,
)
from ansible_collections.poweraware.k8s.plugins.module_utils.scheduler.sched_version import (
    GROUP,
    KIND,
    POLICY_API_VERSION,
    POLICY_KIND,
    served_versions,
)

# --- durations --------------------------------------------------------------------------------

_DURATION_PART = re.compile(r"([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(ns|us|\u00b5s|ms|s|m|h)")
_UNIT_NS = {"ns": 1, "us": 1000, "\u00b5s": 1000, "ms": 10**6, "s": 10**9, "m": 60 * 10**9, "h": 3600 * 10**9}


def duration_to_ns(text):
    """Parse a Go duration string ('5s', '1m30s', '750ms') into nanoseconds; raises ValueError."""
    if not isinstance(text, str) or not text:
        raise ValueError("empty duration")
    pos, total = 0, 0.0
    while pos < len(text):
        match = _DURATION_PART.match(text, pos)
        if not match:
            raise ValueError(f"not a Go duration: {text!r}")
        total += float(match.group(1)) * _UNIT_NS[match.group(2)]
        pos = match.end()
    return int(round(total))


# --- extender input ---------------------------------------------------------------------------
#
# The module's argument spec owns the types, defaults and allowed keys of an extender entry
# (``-e`` strings are converted there, like YAML values); what is left here is what a spec cannot
# say: URL and path shapes, Go durations, extended resource names and rules across fields.

_URL_RE = re.compile(
    r"^(?P<scheme>https?)://(?P<host>\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+)(?::(?P<port>[0-9]{1,5}))?(?P<path>/[^\s?#]*)?$"
)
_VERB_RE = re.compile(r"^[A-Za-z0-9._~-]+(?:/[A-Za-z0-9._~-]+)*$")

VERBS = ("filter_verb", "prioritize_verb", "preempt_verb", "bind_verb")
TLS_FILES = ("cert_file", "key_file", "ca_file")
EXAMPLE_URL = "https://tas-service.telemetry-aware-scheduling.svc.cluster.local:9001"


def url_host(url_prefix):
    match = _URL_RE.match(url_prefix or "")
    return match.group("host") if match else None


def is_cluster_dns_name(host):
    """True for Service DNS names (<svc>.<ns>.svc, <svc>.<ns>.svc.cluster.local, any case, an
    optional final dot): only the cluster DNS resolves them, so kube-scheduler's pod needs
    dnsPolicy ClusterFirstWithHostNet (sched_manifest)."""
    labels = dns_name_labels(host.lower()) if isinstance(host, str) else None
    return labels is not None and len(labels) >= 3 and labels[2] == "svc"


def normalize_extenders(extenders):
    """Check the extenders the argument spec has typed; return ``(normalized, errors)``.

    ``normalized`` holds copies with ``enable_https`` derived from the URL when unset, empty
    strings as None and an empty ``tls`` as None; ``errors`` lists every problem found (all of
    them, not just the first), each naming the field, the value, why and the fix.
    """
    if not extenders:
        return [], ["extenders must be a non-empty list of extender definitions (each needs at least url_prefix)"]
    errors = []
    result = []
    seen = set()
    for index, raw in enumerate(extenders):
        where = f"extenders[{index}]"
        ext = dict(raw)
        errors += _url_problems(ext, where, seen)
        errors += _verb_problems(ext, where)
        weight = ext.get("weight")
        if weight is not None and weight <= 0:
            errors.append(
                f"{where}.weight must be a positive integer (kube-scheduler rejects 0 and negatives), got {weight!r}; "
                "fix: set it to 1 or more"
            )
        errors += _timeout_problems(ext, where)
        errors += _resource_problems(ext, where)
        errors += _tls_problems(ext, where)
        result.append(ext)
    binders = [f"extenders[{i}]" for i, ext in enumerate(result) if ext.get("bind_verb")]
    if len(binders) > 1:
        errors.append(
            f"only one extender may set bind_verb (kube-scheduler allows a single binder), found {len(binders)}: "
            f"{', '.join(binders)}; fix: keep bind_verb on one of them"
        )
    return result, errors


def _url_problems(ext, where, seen):
    """url_prefix is an http(s) URL with a valid port, listed once, and agrees with enable_https."""
    url = ext.get("url_prefix")
    match = _URL_RE.match(url or "")
    if not match:
        return [f"{where}.url_prefix must be an http:// or https:// URL such as '{EXAMPLE_URL}', got {url!r}"]
    errors = []
    if match.group("port") and not 0 < int(match.group("port")) < 65536:
        errors.append(f"{where}.url_prefix has an invalid port: {url!r}; fix: use a port from 1 to 65535")
    if url in seen:
        errors.append(f"{where}.url_prefix {url!r} is listed twice; each extender needs its own urlPrefix")
    seen.add(url)
    scheme = match.group("scheme")
    if ext.get("enable_https") is None:
        ext["enable_https"] = scheme == "https"
    elif ext["enable_https"] != (scheme == "https"):
        errors.append(
            f"{where}.enable_https is {ext['enable_https']} but url_prefix uses {scheme}://; make them agree "
            "(kube-scheduler builds the URL from enableHTTPS, not from the scheme)"
        )
    return errors


def _verb_problems(ext, where):
    errors = []
    for verb in VERBS:
        value = ext.get(verb) or None
        ext[verb] = value
        if value is not None and not _VERB_RE.fullmatch(value):
            errors.append(f"{where}.{verb} must be a URL path such as 'scheduler/filter', got {value!r}")
    if not any(ext[verb] for verb in VERBS):
        errors.append(f"{where} needs at least one of {', '.join(VERBS)}; fix: set filter_verb or prioritize_verb")
    return errors


def _timeout_problems(ext, where):
    timeout = ext.get("http_timeout") or None
    ext["http_timeout"] = timeout
    if timeout is None:
        return []
    try:
        if duration_to_ns(timeout) > 0:
            return []
    except ValueError:
        pass
    return [
        f"{where}.http_timeout must be a positive Go duration string such as '5s', '750ms' or '1m', got {timeout!r}"
    ]


def _resource_problems(ext, where):
    errors = []
    resources = ext.get("managed_resources") or []
    for rindex, res in enumerate(resources):
        name = res.get("name") or ""
        problems = extended_resource_name_problems(name)
        if problems:
            errors.append(
                f"{where}.managed_resources[{rindex}].name {name!r} is not an extended resource name "
                f"({'; '.join(problems)}); fix: use <domain>/<name> outside kubernetes.io, for example "
                "'telemetry/scheduling'"
            )
    ext["managed_resources"] = list(resources)
    return errors


def _tls_problems(ext, where):
    tls = {key: value for key, value in (ext.get("tls") or {}).items() if value not in (None, "")}
    ext["tls"] = tls if any(tls.values()) else None
    errors = []
    for key in TLS_FILES:
        value = tls.get(key)
        if value is not None and (not value.startswith("/") or "\n" in value):
            errors.append(f"{where}.tls.{key} must be an absolute path on the control-plane node, got {value!r}")
    if ("cert_file" in tls) != ("key_file" in tls):
        errors.append(f"{where}.tls needs both cert_file and key_file (a client certificate and its key) or neither")
    if ext["tls"] and ext.get("enable_https") is False:
        errors.append(f"{where}.tls is set but the extender is not https; use an https:// url_prefix")
        return errors
    # kube-scheduler's transport (pkg/scheduler/extender.go makeTransport, then client-go's
    # transport.TLSConfigFor): a CA file with insecure stops kube-scheduler at start-up, and an https
    # extender without a CA is called with verification off, silently (makeTransport sets Insecure).
    if tls.get("insecure") and "ca_file" in tls:
        errors.append(
            f"{where}.tls has both insecure and ca_file, which kube-scheduler refuses at start-up (client-go: "
            "'specifying a root certificates file with the insecure flag is not allowed'); fix: drop insecure "
            "to verify the extender with ca_file, or drop ca_file"
        )
    if ext.get("enable_https") and "ca_file" not in tls and not tls.get("insecure"):
        errors.append(
            f"{where} is https without tls.ca_file: kube-scheduler would then call it without verifying its "
            "certificate; fix: set tls.ca_file to the CA that signed the extender's serving certificate, or set "
            "tls.insecure: true to accept an unverified extender"
        )
    name = tls.get("server_name")
    if name is not None and not _server_name_ok(name):
        errors.append(
            f"{where}.tls.server_name {name!r} is not a host name or IP address (Go's TLS client verifies the "
            "certificate against it and sends it as SNI); fix: give the name in the extender's certificate, "
            "such as 'tas-service.telemetry-aware-scheduling.svc', without scheme, port or path"
        )
    return errors


def _server_name_ok(name):
    """A DNS name (an RFC 1123 subdomain in any case, labels of 63 characters at most, 253 in all,
    an optional final dot) or an IP address."""
    if not isinstance(name, str) or not name:
        return False
    try:
        ipaddress.ip_address(name)
        return True
    except ValueError:
        pass
    # any case: DNS names are case-insensitive (RFC 4343)
    return dns_name_labels(name.lower()) is not None


def tls_directories(extenders):
    """Directories holding the extenders' TLS files, sorted, without duplicates."""
    dirs = set()
    for ext in extenders:
        for key in TLS_FILES:
            path = (ext.get("tls") or {}).get(key)
            if path:
                dirs.add(path.rstrip("/").rsplit("/", 1)[0] or "/")
    return sorted(dirs)


# --- rendering --------------------------------------------------------------------------------


def render_extender(ext, policy=False):
    """One extender entry in KubeSchedulerConfiguration form (or legacy Policy form)."""
    out = {"urlPrefix": ext["url_prefix"]}
    if ext.get("filter_verb"):
        out["filterVerb"] = ext["filter_verb"]
    if ext.get("preempt_verb"):
        out["preemptVerb"] = ext["preempt_verb"]
    if ext.get("prioritize_verb"):
        out["prioritizeVerb"] = ext["prioritize_verb"]
    out["weight"] = int(ext.get("weight") or 1)
    if ext.get("bind_verb"):
        out["bindVerb"] = ext["bind_verb"]
    out["enableHttps" if policy else "enableHTTPS"] = bool(ext.get("enable_https"))
    tls = ext.get("tls")
    if tls:
        tls_out = {}
        if tls.get("insecure"):
            tls_out["insecure"] = True
        if tls.get("server_name"):
            tls_out["serverName"] = tls["server_name"]
        for key, name in (("cert_file", "certFile"), ("key_file", "keyFile"), ("ca_file", "caFile")):
            if tls.get(key):
                tls_out[name] = tls[key]
        out["tlsConfig"] = tls_out
    if ext.get("http_timeout"):
        out["httpTimeout"] = duration_to_ns(ext["http_timeout"]) if policy else ext["http_timeout"]
    if ext.get("node_cache_capable"):
        out["nodeCacheCapable"] = True
    if ext.get("managed_resources"):
        out["managedResources"] = [
            {"name": res["name"], "ignoredByScheduler": bool(res.get("ignored_by_scheduler"))}
            for res in ext["managed_resources"]
        ]
    out["ignorable"] = bool(ext.get("ignorable"))
    return out


def _norm_entry(entry):
    """Compare extender entries the way kube-scheduler decodes them (defaults dropped, case-insensitive keys)."""
    if not isinstance(entry, dict):
        return entry
    out = {}
    for key, value in entry.items():
        k = str(key).lower()
        if isinstance(value, dict):
            value = _norm_entry(value)
        elif isinstance(value, list):
            value = [_norm_entry(v) for v in value]
        if value in (None, False, "", 0, [], {}) and k != "weight":
            continue
        if k == "ignoredbyscheduler" and value is False:
            continue
        out[k] = value
    if out.get("weight") in (None, 0):
        out["weight"] = 1
    return out


def entries_equal(a, b):
    return _norm_entry(a) == _norm_entry(b)


# kube-scheduler 1.19 - 1.22 still serves healthz and metrics over plain HTTP, and takes their
# address from the file once --config is given: --port=0 (kubeadm's way to turn that port off) is
# then ignored and the defaults open 0.0.0.0:10251 (kubernetes/kubernetes issue 109900; 1.23 removed
# insecure serving). Those releases refuse port 0 and default "" back to 0.0.0.0:10251, so a
# configuration created for a manifest that turned the port off binds it to loopback, where kubeadm's
# --bind-address=127.0.0.1 puts the secure port (kube-scheduler 1.21 and 1.22 checked:
# test_scheduler_config_versions.py). 1.23+ refuse any port but 0 there: the file is for 1.19 - 1.22.
LOOPBACK_INSECURE_ADDRESS = "127.0.0.1:10251"


def new_config(api_version, entries, kubeconfig=None, insecure_loopback=False):
    """A fresh KubeSchedulerConfiguration holding only our extenders (and the client kubeconfig).

    ``insecure_loopback``: a 1.19 - 1.22 manifest passes --port=0, which the file would override
    with 0.0.0.0:10251; the plain-HTTP port is bound to loopback instead.
    """
    doc = {"apiVersion": api_version, "kind": KIND}
    if kubeconfig:
        # kube-scheduler before 1.23 ignores --kubeconfig when --config is given, so the
        # file must carry it (newer releases apply the flag on top; the value is the same).
        doc["clientConnection"] = {"kubeconfig": kubeconfig}
    if insecure_loopback:
        doc["healthzBindAddress"] = LOOPBACK_INSECURE_ADDRESS
        doc["metricsBindAddress"] = LOOPBACK_INSECURE_ADDRESS
    doc["extenders"] = copy.deepcopy(list(entries))
    return doc


def new_policy(entries):
    return {"kind": POLICY_KIND, "apiVersion": POLICY_API_VERSION, "extenders": copy.deepcopy(list(entries))}


def check_existing_document(doc, minor, policy, path):
    """Errors for an existing config/policy file we are asked to merge into."""
    if not isinstance(doc, dict):
        return [f"{path} does not hold a YAML/JSON mapping; fix or remove the file (or the flag that points to it)"]
    errors = []
    if policy:
        if doc.get("kind", POLICY_KIND) != POLICY_KIND:
            errors.append(f"{path} has kind {doc.get('kind')!r}, expected Policy")
    else:
        if doc.get("kind") != KIND:
            errors.append(f"{path} has kind {doc.get('kind')!r}, expected {KIND}")
        api_version = doc.get("apiVersion", "")
        group, _sep, version = str(api_version).partition("/")
        served = served_versions(minor)
        if group != GROUP or version not in served:
            errors.append(
                f"{path} uses apiVersion {api_version!r}, which kube-scheduler 1.{minor} does not serve (it serves "
                f"{', '.join(GROUP + '/' + v for v in served)}); migrate the file "
                f"to {GROUP}/{served[0]} first"
            )
    extenders = doc.get("extenders")
    if extenders is not None and not isinstance(extenders, list):
        errors.append(f"{path}: extenders must be a list")
    return errors


def _url_key(entry):
    return str(entry.get("urlPrefix")) if isinstance(entry, dict) else ""


def same_content(a, b):
    """Equal documents, ignoring the order of extenders (restoring an entry appends it)."""

    def canonical(doc):
        if not isinstance(doc, dict) or not isinstance(doc.get("extenders"), list):
            return doc
        out = dict(doc)
        out["extenders"] = sorted(doc["extenders"], key=_url_key)
        return out

    return canonical(a) == canonical(b)


# --- kube-scheduler's own validation of the extenders list ------------------------------------
#
# Ported from k8s.io/kubernetes pkg/scheduler/apis/config/validation/validation.go, function
# validateExtenders (with validateExtendedResourceName, and IsExtendedResourceName from
# pkg/apis/core/v1/helper/helpers.go, IsQualifiedName from apimachinery). The function runs on
# the internal type after decoding, so one set of rules covers v1beta1, v1beta2, v1beta3 and v1;
# it was compared in release-1.19/1.20 (ValidatePolicy shares it), 1.21/1.22 and v1.36.3 and has
# the same three rules everywhere: a prioritizeVerb needs weight > 0, at most one bindVerb, a
# managed resource name (a valid extended resource name) in one extender only. It does NOT
# require urlPrefix, bound the weight (beyond int64) or require a verb.
#
# On top of that, kube-scheduler decodes --config strictly since 1.17 (kubernetes PR #83030):
# an unknown or mis-cased field, or a value of the wrong type, makes it exit at start, so the
# field table below (config/v1 types.go Extender, ExtenderTLSConfig, ExtenderManagedResource;
# the same JSON names in v1beta1 .. v1beta3) is checked as well. Not for the legacy Policy,
# whose decoder accepted other spellings (enableHttps, nanosecond httpTimeout).

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1

_STR, _BOOL, _INT, _DURATION, _TLS, _RESOURCES = "string", "boolean", "integer", "duration", "tls", "resources"
EXTENDER_FIELDS = {
    "urlPrefix": _STR,
    "filterVerb": _STR,
    "preemptVerb": _STR,
    "prioritizeVerb": _STR,
    "weight": _INT,
    "bindVerb": _STR,
    "enableHTTPS": _BOOL,
    "tlsConfig": _TLS,
    "httpTimeout": _DURATION,
    "nodeCacheCapable": _BOOL,
    "managedResources": _RESOURCES,
    "ignorable": _BOOL,
}
TLS_CONFIG_FIELDS = {
    "insecure": _BOOL,
    "serverName": _STR,
    "certFile": _STR,
    "keyFile": _STR,
    "caFile": _STR,
    "certData": _STR,
    "keyData": _STR,
    "caData": _STR,
}
MANAGED_RESOURCE_FIELDS = {"name": _STR, "ignoredByScheduler": _BOOL}


def _type_problem(kind, value):
    """Why kube-scheduler's strict decoder refuses ``value`` for a field of ``kind``, or None."""
    if value is None:
        return None  # JSON null decodes to the zero value
    if kind == _STR and not isinstance(value, str):
        return "must be a string"
    if kind == _BOOL and not isinstance(value, bool):
        return "must be true or false"
    if kind == _INT:
        if isinstance(value, bool) or not isinstance(value, int):
            return "must be an integer"
        if not INT64_MIN <= value <= INT64_MAX:
            return "does not fit in a 64-bit integer"
    if kind == _DURATION:
        if not isinstance(value, str):
            return "must be a Go duration string such as '5s' (a number is the legacy Policy's nanoseconds)"
        try:
            # time.ParseDuration also takes a sign and a bare "0"
            if value.lstrip("+-") != "0":
                duration_to_ns(value.lstrip("+-"))
        except ValueError:
            return "is not a Go duration such as '5s', '750ms' or '1m'"
    if kind in (_TLS,) and not isinstance(value, dict):
        return "must be a mapping"
    if kind == _RESOURCES and not isinstance(value, list):
        return "must be a list of {name, ignoredByScheduler}"
    return None


def _field_problems(mapping, fields, path, where):
    errors = []
    for key in mapping:
        if key not in fields:
            near = [f for f in fields if f.lower() == str(key).lower()]
            fix = f"rename it to {near[0]} (field names are case-sensitive)" if near else "remove it"
            errors.append(
                f"{path}.{key}{where}: unknown field; kube-scheduler decodes its configuration strictly and exits on "
                f"unknown fields; fix: {fix} (known fields: {', '.join(fields)})"
            )
            continue
        problem = _type_problem(fields[key], mapping[key])
        if problem:
            errors.append(
                f"{path}.{key}{where}: {mapping[key]!r} {problem}; kube-scheduler cannot decode it and exits at start; "
                "fix the value"
            )
    return errors


def validate_extenders(extenders, origin=None, strict=True):
    """kube-scheduler's validation of a merged ``extenders`` list; every problem, each with its fix.

    ``origin(index, entry)`` names where an entry comes from (ours or the user's file) for the
    messages; ``strict`` adds the strict-decoding field checks (KubeSchedulerConfiguration only).
    """
    errors = []
    if extenders is None:
        return errors
    if not isinstance(extenders, list):
        return [f"extenders: {extenders!r} must be a list of extender entries; fix the configuration file"]

    def where(index, entry):
        url = entry.get("urlPrefix") if isinstance(entry, dict) else None
        parts = [f"urlPrefix {url}"] if url else []
        label = origin(index, entry) if origin else None
        if label:
            parts.append(label)
        return f" ({', '.join(parts)})" if parts else ""

    binders = []
    managed = {}
    for index, entry in enumerate(extenders):
        path = f"extenders[{index}]"
        if not isinstance(entry, dict):
            errors.append(f"{path}: {entry!r} is not a mapping; fix: make it an extender entry with urlPrefix")
            continue
        at = where(index, entry)
        if strict:
            errors += _field_problems(entry, EXTENDER_FIELDS, path, at)
            if isinstance(entry.get("tlsConfig"), dict):
                errors += _field_problems(entry["tlsConfig"], TLS_CONFIG_FIELDS, path + ".tlsConfig", at)
        weight = entry.get("weight") or 0
        if entry.get("prioritizeVerb") and isinstance(weight, int) and weight <= 0:
            errors.append(
                f"{path}.weight{at}: {weight!r}: kube-scheduler refuses it, an extender with a prioritizeVerb must "
                "have a positive weight applied to it; fix: set weight to 1 or more (or drop prioritizeVerb)"
            )
        if entry.get("bindVerb"):
            binders.append((path, at))
        resources = entry.get("managedResources") or []
        if not isinstance(resources, list):
            continue
        for rindex, resource in enumerate(resources):
            rpath = f"{path}.managedResources[{rindex}]"
            if not isinstance(resource, dict):
                errors.append(f"{rpath}{at}: {resource!r} must be a mapping {{name, ignoredByScheduler}}")
                continue
            if strict:
                errors += _field_problems(resource, MANAGED_RESOURCE_FIELDS, rpath, at)
            name = resource.get("name")
            if not isinstance(name, str):
                name = "" if name is None else str(name)
            for problem in extended_resource_name_problems(name):
                errors.append(
                    f"{rpath}.name{at}: {name!r}: {problem}; kube-scheduler refuses it; fix: use an extended resource "
                    "name such as 'telemetry/scheduling'"
                )
            if name in managed:
                first_path, first_at = managed[name]
                errors.append(
                    f"{rpath}.name{at}: {name!r} is already managed by {first_path}{first_at}: kube-scheduler refuses "
                    "a duplicate extender managed resource name; fix: keep the resource in one extender only (if the "
                    "other is an existing TAS extender, remove it from the scheduler configuration first, or do not "
                    "register a second one)"
                )
            else:
                managed[name] = (rpath, at)
    if len(binders) > 1:
        errors.append(
            f"extenders: found {len(binders)} extenders implementing bind "
            f"({'; '.join(path + at for path, at in binders)}): kube-scheduler allows only one extender with "
            "a bindVerb; fix: keep bindVerb on one of them"
        )
    return errors
