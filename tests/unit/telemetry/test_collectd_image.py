"""The collectd image the collection ships (roles/collectd/files/Containerfile) is what the lab runs
and what the role's defaults name: the same collectd and Python, the base pinned by digest and every
package by version."""

from __future__ import annotations

import pathlib
import re
import subprocess

from poweraware_testing import role_defaults

from lab import images

REPO = pathlib.Path(__file__).resolve().parents[3]
CONTAINERFILE = REPO / "roles" / "collectd" / "files" / "Containerfile"


def _instructions() -> list[tuple[str, str]]:
    """(instruction, arguments) with continuation lines joined and comments dropped."""
    text = re.sub(
        r"\\\n",
        " ",
        "\n".join(line for line in CONTAINERFILE.read_text().splitlines() if not line.lstrip().startswith("#")),
    )
    return [tuple(line.strip().split(None, 1)) for line in text.splitlines() if line.strip()]


def _pins() -> dict[str, str]:
    run = " ".join(args for op, args in _instructions() if op == "RUN")
    return dict(re.findall(r"\b([a-z0-9][a-z0-9.+-]*)=([0-9][A-Za-z0-9.+~:-]*)", run))


def _installed(package: str) -> str:
    return subprocess.run(
        ["dpkg-query", "-W", "-f=${Version}", package], capture_output=True, text=True, check=True
    ).stdout


def _upstream(version: str) -> str:
    return version.split(":")[-1].rsplit("-", 1)[0]


def test_the_base_is_pinned_by_digest_and_every_package_by_version():
    base = [args for op, args in _instructions() if op == "FROM"]
    assert len(base) == 1 and re.fullmatch(r"docker\.io/library/debian:bookworm-slim@sha256:[0-9a-f]{64}", base[0])
    pins = _pins()
    assert {"collectd-core", "python3", "python3.11", "libpython3.11", "libmicrohttpd12", "libprotobuf-c1"} <= set(pins)
    run = " ".join(args for op, args in _instructions() if op == "RUN")
    installed = re.search(r"apt-get install -y --no-install-recommends (.*?);", run).group(1).split()
    assert all("=" in word for word in installed), installed  # nothing left to the archive's newest
    assert "snapshot.debian.org/archive/debian/${SNAPSHOT}" in run


def test_the_image_runs_the_collectd_and_python_the_lab_runs():
    pins = _pins()
    # the same Debian build of collectd, and the same Python release (Debian's security revision may
    # be newer in the image than on this machine: same 3.11.2 source, later fixes)
    assert pins["collectd-core"] == _installed("collectd-core")
    assert _upstream(pins["python3"]) == _upstream(_installed("python3"))
    assert _upstream(pins["python3.11"]) == _upstream(_installed("python3.11"))
    assert pins["libpython3.11"] == pins["python3.11"]
    # collectd's plugins load these at run time: the versions this machine's collectd links against
    for library in ("libmicrohttpd12", "libprotobuf-c1"):
        assert pins[library] == _installed(library), library


def test_the_roles_defaults_and_the_lab_name_the_containerfiles_collectd():
    defaults = role_defaults(REPO / "roles" / "collectd" / "defaults" / "main.yml")
    pins = _pins()
    assert defaults["collectd_image"] == ""  # your build: nothing published to default to
    assert defaults["collectd_image_tag"] == pins["collectd-core"]
    entrypoint = [args for op, args in _instructions() if op == "ENTRYPOINT"]
    assert entrypoint == ['["/usr/sbin/collectd", "-f"]']
    assert defaults["collectd_command"] == "/usr/sbin/collectd"
    lab = next(image for image in images.IMAGES if image.user_built == "collectd_image")
    assert lab.tag == lab.version == pins["collectd-core"]
    assert lab.system_path == defaults["collectd_command"]
    user = [args for op, args in _instructions() if op == "USER"]
    assert user == [lab.user]
