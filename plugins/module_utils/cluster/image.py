# Copyright: poweraware.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Container image references: a tag for people, a digest for the runtime.

Pure logic, no Ansible imports, Python 3.9 compatible.

Each role names its image with three variables, ``<role>_image`` (the repository),
``<role>_image_tag`` and ``<role>_image_digest``. The reference a pod gets is
``repository:tag@sha256:<64 hex>``: the container runtime pulls by digest and ignores the tag, so
a tag moved on the registry (or a registry that serves something else under it) cannot change what
runs, while people still read the version. An empty digest gives ``repository:tag``, for the images
whose publishers give no digest to pin (docs/security.md lists them, with the reason).

The grammar is the distribution reference grammar's (github.com/distribution/reference):
repository path components are lowercase alphanumerics joined by ``.``, ``_``, ``__`` or dashes,
with an optional ``host[:port]`` first; a tag is ``[\\w][\\w.-]{0,127}``; this collection pins
``sha256`` digests only (what every registry it deploys from serves).
"""

from __future__ import annotations

import re

from ansible_collections.poweraware.k8s.plugins.module_utils.k8s_names import is_dns1123_subdomain

__all__ = ["image_reference", "pull_secret_names", "reference_errors"]

_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_HOST = r"(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)*(?::[0-9]+)?)"
_PATH = re.compile(rf"^{_COMPONENT}(?:/{_COMPONENT})*$")
_HOST_ONLY = re.compile(rf"^{_HOST}$")
_TAG = re.compile(r"^[\w][\w.-]{0,127}$")
_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")


def _is_repository(value):
    """A repository: the first component is a registry host when it has a '.' or a ':' or is
    ``localhost`` (how the runtimes split ``host/path``), and the path is lowercase components."""
    if not isinstance(value, str) or not value or len(value) > 255:
        return False
    first, _slash, rest = value.partition("/")
    if rest and ("." in first or ":" in first or first == "localhost"):
        return bool(_HOST_ONLY.match(first) and _PATH.match(rest))
    return bool(_PATH.match(value))


def reference_errors(repository, tag, digest, variable):
    """Every problem with the three values of ``variable`` (``collectd_image``), each naming the
    variable, the value, the reason and the fix; an empty list when there is none."""
    errors = []
    if not _is_repository(repository):
        hint = ""
        if isinstance(repository, str) and ("@" in repository or ":" in repository.rsplit("/", 1)[-1]):
            hint = f"; put the tag in {variable}_tag and the digest in {variable}_digest"
        errors.append(
            f"{variable}={repository!r} is not an image repository (lowercase path components, an optional "
            f"registry host first, no tag or digest){hint}"
        )
    if not isinstance(tag, str) or not _TAG.fullmatch(tag):
        errors.append(
            f"{variable}_tag={tag!r} is not an image tag: up to 128 letters, digits, '_', '.' or '-', "
            "not starting with '.' or '-' (quote a tag YAML would read as a number, such as \"0.7.0\")"
        )
    if digest not in ("", None) and (not isinstance(digest, str) or not _DIGEST.fullmatch(digest)):
        errors.append(
            f"{variable}_digest={digest!r} is not a digest: write 'sha256:' and the 64 lowercase hex digits the "
            "registry reports for the tag (the image index for multi-architecture images), or leave it empty "
            "to run the tag alone"
        )
    return errors


def image_reference(repository, tag, digest, variable):
    """``repository:tag@digest`` (``repository:tag`` without a digest); ValueError listing every
    problem (see :func:`reference_errors`)."""
    errors = reference_errors(repository, tag, digest, variable)
    if errors:
        raise ValueError("; ".join(errors))
    return f"{repository}:{tag}@{digest}" if digest else f"{repository}:{tag}"


def pull_secret_names(value, variable):
    """The Secret names of ``variable`` (``collectd_image_pull_secrets``) for a pod's
    ``imagePullSecrets``: a list, or the comma-separated string ``-e`` gives (``-e
    poweraware_image_pull_secrets=mirror,backup``), each a DNS-1123 subdomain, in order, without
    repeats. ValueError listing every problem, naming the variable, the value and the fix."""
    if value in (None, ""):
        return []
    if isinstance(value, str):
        value = [part.strip() for part in value.split(",")]
    if not isinstance(value, (list, tuple)):
        raise ValueError(
            f"{variable}={value!r} is not a list of Secret names: write a YAML list such as [registry-mirror], "
            "or names separated by commas"
        )
    errors, names = [], []
    for name in value:
        if isinstance(name, dict) and set(name) == {"name"}:
            name = name["name"]  # the pod spec's own form, {name: ...}
        if not is_dns1123_subdomain(name):
            errors.append(
                f"{variable} item {name!r} is not a Secret name: lowercase letters, digits, '-' and '.', starting and "
                "ending with a letter or digit, up to 253 characters"
            )
        elif name not in names:
            names.append(name)
    if errors:
        raise ValueError("; ".join(errors))
    return names
