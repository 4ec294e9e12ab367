# Copyright: poweraware.k8s contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Kubernetes release numbers from version strings and container image references.

Pure logic, no Ansible import (unit tests use it directly); Python 3.9 compatible because
modules that import it run on the managed nodes.

Image references are parsed the way the container tooling does it (registry host, optional
port, any number of path components, optional tag, optional digest), never by counting dots:
``registry.k8s.io/kube-scheduler:v1.29.3``, ``my.reg:5000/k8s/kube-scheduler:v1.28.0-rke2r1``,
``k8s.gcr.io/kube-scheduler:v1.21.14@sha256:...``.
"""

from __future__ import annotations

import re

# v1.29.3, 1.29, v1.28.0-rke2r1, v1.30.2+k3s1, v1.27.4_custom, v1.31.0-alpha.2
_VERSION_RE = re.compile(
    r"^v?(?P<major>0|[1-9][0-9]*)\.(?P<minor>0|[1-9][0-9]*)(?:\.(?P<patch>0|[1-9][0-9]*))?"
    r"(?P<suffix>[-+_][0-9A-Za-z.+_-]*)?$"
)
_DIGEST_RE = re.compile(r"^[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}$")
_TAG_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")
_NUMBER_RE = re.compile(r"[0-9]+")


class VersionError(ValueError):
    """A version string or image reference that does not name a Kubernetes release."""


def parse_version(text):
    """Return ``(major, minor, patch)`` from a Kubernetes version string.

    ``patch`` is ``None`` when the string has only ``major.minor``. Raises VersionError with
    a message that says what was expected.
    """
    if not isinstance(text, str):
        raise VersionError(f"Kubernetes version must be a string such as '1.29' or 'v1.29.3', got {text!r}")
    match = _VERSION_RE.match(text.strip())
    if not match:
        raise VersionError(
            f"cannot read a Kubernetes version from {text!r}: expected MAJOR.MINOR[.PATCH] with an optional "
            "leading 'v' and build suffix, for example '1.29', 'v1.29.3' or 'v1.28.0-rke2r1'"
        )
    patch = match.group("patch")
    return int(match.group("major")), int(match.group("minor")), (int(patch) if patch is not None else None)


def server_release(cluster_info, default=(1, 0)):
    """``(major, minor)`` of the API server, from what kubernetes.core.k8s_cluster_info returns.

    Reads the ``major`` and ``minor`` fields of ``version.server.kubernetes`` (the API server's
    ``/version``), each the first number in the field's text: managed clusters write ``"27+"``. A
    field that is missing or holds no number reads as ``default``'s, and so does a result without
    a version (a skipped task): never an error, the caller decides with what it gets.
    """
    fields = cluster_info
    for key in ("version", "server", "kubernetes"):
        fields = fields.get(key) if hasattr(fields, "get") else None
    if not hasattr(fields, "get"):
        fields = {}
    release = []
    for key, fallback in zip(("major", "minor"), default):
        match = _NUMBER_RE.search(str(fields[key])) if key in fields else None
        release.append(int(match.group()) if match else fallback)
    return tuple(release)


def split_image(image):
    """Split an image reference into ``(repository, tag, digest)``; tag and digest may be None."""
    if not isinstance(image, str) or not image.strip() or any(c.isspace() for c in image.strip()):
        raise VersionError(f"not a container image reference: {image!r}")
    ref = image.strip()
    digest = None
    if "@" in ref:
        ref, digest = ref.split("@", 1)
        if not _DIGEST_RE.fullmatch(digest):
            raise VersionError(f"image {image!r} has a malformed digest {digest!r}")
    # A tag follows the last ':' only if that ':' is after the last '/': a ':' before it
    # belongs to the registry's port (my.reg:5000/kube-scheduler).
    tag = None
    last_slash = ref.rfind("/")
    last_colon = ref.rfind(":")
    if last_colon > last_slash:
        ref, tag = ref[:last_colon], ref[last_colon + 1 :]
        if not _TAG_RE.fullmatch(tag):
            raise VersionError(f"image {image!r} has a malformed tag {tag!r}")
    if not ref or ref.endswith("/"):
        raise VersionError(f"image {image!r} has no repository name")
    return ref, tag, digest


def version_from_image(image):
    """Return ``(major, minor, patch)`` from the tag of an image reference.

    Raises VersionError when the reference has no tag (digest-only) or the tag is not a
    Kubernetes version (``latest``); the message tells the caller to pass the version.
    """
    _repository, tag, digest = split_image(image)
    if tag is None:
        what = "only a digest" if digest else "no tag"
        raise VersionError(
            f"image {image!r} has {what}, so the Kubernetes version cannot be read from it; "
            "set kubernetes_version explicitly"
        )
    try:
        return parse_version(tag)
    except VersionError:
        raise VersionError(
            f"the tag {tag!r} of image {image!r} is not a Kubernetes version; set kubernetes_version explicitly"
        ) from None


def format_version(version):
    """``(1, 29, 3)`` -> ``'1.29.3'``; ``(1, 29, None)`` -> ``'1.29'``."""
    major, minor, patch = version
    return f"{major}.{minor}" if patch is None else f"{major}.{minor}.{patch}"


def resolve_version(explicit, image):
    """The release to configure: ``(version, warnings)``.

    ``explicit`` (the user's ``kubernetes_version``, may be empty) wins; otherwise the tag of the
    kube-scheduler ``image`` (None when the container has none). A mismatch in major.minor between
    the two is a warning. Raises VersionError saying what to set when neither names a release.
    """
    image_version, image_error = None, None
    if isinstance(image, str):
        try:
            image_version = version_from_image(image)
        except VersionError as exc:
            image_error = str(exc)
    else:
        image_error = "the kube-scheduler container has no image; set kubernetes_version explicitly"
    if explicit:
        version = parse_version(explicit)
        warnings = []
        if image_version and image_version[:2] != version[:2]:
            warnings.append(
                f"kubernetes_version {explicit} differs from the manifest image tag ({image}); using {explicit}"
            )
        return version, warnings
    if image_version:
        return image_version, []
    raise VersionError(image_error)
