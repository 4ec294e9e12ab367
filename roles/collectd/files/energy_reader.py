"""The energy reader: the one process of the collectd pod that may read the energy counters.

``energy_uj`` is mode 0400, owned by root, since the RAPL side-channel fix (CVE-2020-8694, Linux
5.10 and backports). A non-root process would need ``CAP_DAC_READ_SEARCH`` in its effective set, and
Kubernetes cannot give one to a non-root container (no ambient capabilities). So the pod splits the
work: this reader runs as uid 0 with no capability at all (root reads the file as its owner), a
read-only root file system, the host's sysfs read-only and nothing else; collectd runs as
an unprivileged user and asks the reader for each counter over a Unix socket in a volume only the
pod's two containers share. The reader answers nothing but ``energy_uj`` files under its root and,
with ``--hwmon-root``, hwmon ``energyN_input`` counters of a chip there: amd_energy's (AMD Zen
without RAPL powercap zones) are root-only too on Linux 5.10 to 5.12 (drivers/hwmon/amd_energy.c,
mode 0400 from the same side-channel fix until the driver was removed).

Protocol, one request per connection: the client sends the counter's path as collectd sees it
(the same mount path in both containers) and a newline; the reader answers ``OK <microjoules>`` or
``ERR <errno> <message>`` and a newline, and closes. A path outside the roots, a file that is not
a counter or a path with ``..`` is refused with ``EACCES``.

``EnergyClient`` is the other end, imported by rapl_power.py from the same plugin directory. Both
import nothing outside the standard library and stay compatible with Python 3.6 (the image's
interpreter may be old).

Usage::

    python3 energy_reader.py --root /host/sys/devices/virtual/powercap \
        --hwmon-root /host/sys/class/hwmon --socket /run/poweraware-energy/energy.sock
    python3 energy_reader.py --check --socket /run/poweraware-energy/energy.sock

``--check`` is the container's readiness probe: it exits 0 when a reader answers on the socket
(it asks for a path the reader always refuses, so no counter is read), 1 otherwise.
"""

import argparse
import contextlib
import errno
import os
import re
import signal
import socket
import sys

COUNTER = "energy_uj"
# an hwmon energy counter (Documentation/hwmon/sysfs-interface.rst), in the chip's hwmonN directory
HWMON_COUNTER = re.compile(r"^energy[0-9]+_input$")
HWMON_CHIP = re.compile(r"^hwmon[0-9]+$")
MAX_REQUEST = 4096
TIMEOUT = 2.0
# the socket's mode: the reader's user and group (collectd's group, runAsGroup) may connect
SOCKET_MODE = 0o660


class Refused(Exception):
    """A request the reader does not answer with a counter: errno and message go to the client."""

    def __init__(self, code, message):
        Exception.__init__(self, message)
        self.code = code
        self.message = message


def resolve(root, requested, hwmon_root=None):
    """The file ``requested`` names, if the reader may read it: an ``energy_uj`` under ``root``, or
    (with ``hwmon_root``) an ``energyN_input`` of an hwmon chip listed there whose device lies in the
    same sysfs' ``devices`` (after resolving symbolic links: ``class/hwmon`` entries link there), with
    no ``..`` component. Raises Refused otherwise."""
    if not requested.startswith("/") or "\0" in requested:
        raise Refused(errno.EACCES, "not an absolute path: %r" % requested)
    parts = requested.split("/")
    if ".." in parts:
        raise Refused(errno.EACCES, "a path with '..' is not served: %r" % requested)
    if parts[-1] == COUNTER:
        real_root = os.path.realpath(root)
        real = os.path.realpath(requested)
        if os.path.commonpath([real_root, real]) != real_root or os.path.basename(real) != COUNTER:
            raise Refused(errno.EACCES, "%r is not under the energy reader's root %s" % (requested, root))
        return real
    if hwmon_root and HWMON_COUNTER.match(parts[-1]):
        lexical_root = os.path.normpath(hwmon_root)
        real = os.path.realpath(requested)
        devices = os.path.join(os.path.dirname(os.path.dirname(os.path.realpath(hwmon_root))), "devices")
        if (
            os.path.dirname(os.path.dirname(os.path.normpath(requested))) != lexical_root
            or not HWMON_COUNTER.match(os.path.basename(real))
            or not HWMON_CHIP.match(os.path.basename(os.path.dirname(real)))
            or os.path.commonpath([devices, real]) != devices
        ):
            raise Refused(errno.EACCES, "%r is not an hwmon chip's counter under %s" % (requested, hwmon_root))
        return real
    served = COUNTER + (" and hwmon energyN_input" if hwmon_root else "")
    raise Refused(errno.EACCES, "the energy reader serves %s files only, not %r" % (served, requested))


def answer(root, request, read=None, hwmon_root=None):
    """The reply line (bytes, with its newline) to one request line (bytes)."""
    read = read or _read_counter
    try:
        text = request.decode("utf-8")
    except UnicodeDecodeError:
        return b"ERR %d request is not UTF-8\n" % errno.EINVAL
    try:
        path = resolve(root, text.rstrip("\n"), hwmon_root)
        value = read(path)
    except Refused as exc:
        return ("ERR %d %s\n" % (exc.code, exc.message)).encode("utf-8")
    except OSError as exc:
        code = exc.errno or errno.EIO
        return ("ERR %d %s\n" % (code, exc.strerror or exc)).encode("utf-8")
    except ValueError:
        return ("ERR %d unexpected content in %s\n" % (errno.EIO, text.rstrip("\n"))).encode("utf-8")
    return ("OK %d\n" % value).encode("utf-8")


def _read_counter(path):
    with open(path) as handle:
        return int(handle.read().strip())


def _receive_line(conn, limit=MAX_REQUEST):
    data = b""
    while not data.endswith(b"\n") and len(data) < limit:
        chunk = conn.recv(limit - len(data))
        if not chunk:
            break
        data += chunk
    return data


def serve(root, path, log=None, ready=None, stop=None, hwmon_root=None):
    """Answer requests on a Unix socket at ``path`` until SIGTERM/SIGINT (or ``stop()`` is true).
    A socket file left by an earlier run (the volume outlives the container) is replaced."""
    log = log or (lambda message: sys.stdout.write(message + "\n") or sys.stdout.flush())
    if not os.path.lexists(root):
        # a node without RAPL (an ARM server, AMD with amd_energy: collectd reads hwmon there): no
        # energy_uj to serve (each request is refused, ENOENT), but the pod must be Ready, and the
        # hwmon counters are still served
        log("energy reader: no powercap tree at %s (a node without RAPL): every energy_uj request is refused" % root)
    elif not os.path.isdir(root):
        raise SystemExit("energy reader: %s is not a directory (is the host's sysfs mounted?)" % root)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old_umask = os.umask(0o777 & ~SOCKET_MODE)
    try:
        server.bind(path)
    finally:
        os.umask(old_umask)
    server.listen(8)
    server.settimeout(0.5)
    log("energy reader: serving %s files under %s on %s" % (COUNTER, root, path))
    if hwmon_root:
        log("energy reader: serving hwmon energyN_input counters of the chips under %s" % hwmon_root)
    if ready is not None:
        ready()
    try:
        while not (stop and stop()):
            try:
                conn, _addr = server.accept()
            except socket.timeout:
                continue
            with conn:
                conn.settimeout(TIMEOUT)
                try:
                    conn.sendall(answer(root, _receive_line(conn), hwmon_root=hwmon_root))
                except OSError as exc:
                    log("energy reader: a client went away: %s" % exc)
    finally:
        server.close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)


def _round_trip(socket_path, request, timeout):
    """One request line to the reader at ``socket_path`` and its reply line (newline kept, so a
    truncated reply shows); OSError when nothing answers in ``timeout`` seconds."""
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.settimeout(timeout)
    try:
        conn.connect(socket_path)
        conn.sendall((request + "\n").encode("utf-8"))
        return _receive_line(conn).decode("utf-8", "replace")
    finally:
        conn.close()


class EnergyClient:
    """rapl_power.py's ``read_text`` through the reader: ``energy_uj`` files and hwmon
    ``energyN_input`` counters are asked for over the socket, every other file (names, labels,
    ranges, limits, power readings: world-readable) is read directly."""

    def __init__(self, socket_path, read_text, timeout=TIMEOUT):
        self.socket_path = socket_path
        self.read_direct = read_text
        self.timeout = timeout

    def __call__(self, path):
        name = os.path.basename(path)
        if name != COUNTER and not HWMON_COUNTER.match(name):
            return self.read_direct(path)
        try:
            reply = _round_trip(self.socket_path, path, self.timeout).rstrip("\n")
        except OSError as exc:
            code = exc.errno or errno.EIO
            raise OSError(code, "energy reader at %s: %s" % (self.socket_path, exc.strerror or exc)) from exc
        status, _sep, rest = reply.partition(" ")
        if status == "OK":
            return rest
        if status == "ERR":
            code, _sep, message = rest.partition(" ")
            raise OSError(int(code) if code.isdigit() else errno.EIO, "energy reader: %s" % message)
        raise OSError(errno.EIO, "energy reader at %s: unexpected reply %r" % (self.socket_path, reply[:80]))


# what --check asks for: refused by every reader (not an energy_uj file), so it reads nothing
CHECK_REQUEST = "/"


def check(path, timeout=TIMEOUT):
    """(True, reply) when a reader answers on the socket ``path`` with a well-formed line, else
    (False, why): the readiness probe. A refusal is an answer; silence or garbage is not."""
    try:
        reply = _round_trip(path, CHECK_REQUEST, timeout)
    except OSError as exc:
        return False, "no energy reader answers on %s: %s" % (path, exc.strerror or exc)
    if reply.endswith("\n") and reply.split(" ", 1)[0] in ("OK", "ERR"):
        return True, reply.rstrip("\n")
    return False, "unexpected reply on %s: %r" % (path, reply[:80])


def main(argv=None):
    parser = argparse.ArgumentParser(description="Serve energy_uj counters to collectd over a Unix socket.")
    parser.add_argument(
        "--root", help="the powercap directory (of the read-only host sysfs mount); required unless --check"
    )
    parser.add_argument(
        "--hwmon-root",
        help="class/hwmon of the same sysfs mount: its chips' energyN_input counters are served too (amd_energy)",
    )
    parser.add_argument("--socket", required=True, help="the Unix socket to create (in the pod's shared volume)")
    parser.add_argument("--check", action="store_true", help="exit 0 when a reader answers on --socket (probe)")
    args = parser.parse_args(argv)
    if args.check:
        ok, message = check(args.socket)
        (sys.stdout if ok else sys.stderr).write(message + "\n")
        return 0 if ok else 1
    if not args.root:
        parser.error("--root is required to serve")
    stopping = []

    def _stop(_signum, _frame):
        stopping.append(True)

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    serve(args.root, args.socket, stop=lambda: bool(stopping), hwmon_root=args.hwmon_root)
    return 0


if __name__ == "__main__":
    sys.exit(main())
