# Copyright: poweraware.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Kubernetes' grammar of names, as k8s.io/apimachinery/pkg/util/validation checks it: DNS-1123
labels (namespaces, most object names' parts) and subdomains (object names, annotation and label
prefixes), qualified names (label and annotation keys), label values, and extended resource names
(pkg/apis/core/validation). The one home of these rules: every check of the collection uses them.

Pure, standard library, Python 3.8: the scheduler extender ships it to its pod. Patterns are matched
whole (``fullmatch``: ``$`` would accept a trailing newline).
"""

from __future__ import annotations

import re

DNS1123_LABEL_MAX = 63
DNS1123_SUBDOMAIN_MAX = 253
QUALIFIED_NAME_MAX = 63
LABEL_VALUE_MAX = 63

_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_LABEL = re.compile(_LABEL)
_DNS1123_SUBDOMAIN = re.compile(rf"{_LABEL}(\.{_LABEL})*")
# qualifiedNameFmt: the name part of a qualified name, and a non-empty label value
_QUALIFIED_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")


def is_dns1123_label(value) -> bool:
    """IsDNS1123Label: lower-case alphanumerics and '-', starting and ending alphanumeric, at most 63."""
    return isinstance(value, str) and len(value) <= DNS1123_LABEL_MAX and bool(_DNS1123_LABEL.fullmatch(value))


def is_dns1123_subdomain(value) -> bool:
    """IsDNS1123Subdomain: DNS-1123 labels joined by '.', at most 253 characters in all."""
    return isinstance(value, str) and len(value) <= DNS1123_SUBDOMAIN_MAX and bool(_DNS1123_SUBDOMAIN.fullmatch(value))


def dns_name_labels(value):
    """The labels of a DNS host name, or None when ``value`` is not one: an optional final '.' (a
    fully qualified name), then a DNS-1123 subdomain whose every label is a DNS-1123 label, so at
    most 63 characters (IsDNS1123Subdomain alone does not bound a label). This is how
    IsFullyQualifiedDomainName reads a host name, without its minimum of two labels. Lower-case
    only, as the rest of this grammar: a caller that takes any case lowers the name first."""
    if not isinstance(value, str):
        return None
    name = value[:-1] if value.endswith(".") else value
    if not is_dns1123_subdomain(name):
        return None
    labels = name.split(".")
    return labels if all(len(label) <= DNS1123_LABEL_MAX for label in labels) else None


def is_qualified_name_part(value) -> bool:
    """The name part of a qualified name (an unprefixed label key): alphanumerics, '-', '_' and '.',
    starting and ending alphanumeric, at most 63 characters."""
    return isinstance(value, str) and len(value) <= QUALIFIED_NAME_MAX and bool(_QUALIFIED_NAME.fullmatch(value))


def is_label_value(value) -> bool:
    """IsValidLabelValue: empty, or a qualified name part (at most 63 characters)."""
    return value == "" or is_qualified_name_part(value)


def qualified_name_problems(value) -> list:
    """IsQualifiedName (a label or annotation key): the reasons ``value`` is not one, [] when it is."""
    parts = value.split("/")
    problems = []
    if len(parts) > 2:
        return ["it has more than one '/' (a qualified name is [<DNS subdomain>/]<name>)"]
    name = parts[-1]
    if len(parts) == 2:
        prefix = parts[0]
        if not prefix:
            problems.append("its prefix part is empty")
        elif not is_dns1123_subdomain(prefix):
            problems.append(f"its prefix part {prefix!r} is not a lower-case DNS subdomain of at most 253 characters")
    if not name:
        problems.append("its name part is empty")
    elif len(name) > QUALIFIED_NAME_MAX:
        problems.append("its name part is longer than 63 characters")
    if name and not _QUALIFIED_NAME.fullmatch(name):
        problems.append(
            f"its name part {name!r} must consist of alphanumerics, '-', '_' or '.' and start and end with an "
            "alphanumeric"
        )
    return problems


def extended_resource_name_problems(name) -> list:
    """validateExtendedResourceName: [] when ``name`` is a valid extended resource name."""
    problems = qualified_name_problems(name)
    if problems:
        return problems
    # IsExtendedResourceName: not native (no '/' or anything with 'kubernetes.io/'), not
    # 'requests.'-prefixed, and still a qualified name once prefixed with 'requests.'
    if "/" not in name or "kubernetes.io/" in name or name.startswith("requests."):
        return ["it is not an extended resource name (those are <domain>/<name> outside kubernetes.io)"]
    if qualified_name_problems("requests." + name):
        return ["its domain is too long to be an extended resource name"]
    return []
