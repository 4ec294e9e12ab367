"""The site's switch: the bridge every node's cable plugs into, in a network namespace of its own.

A bare-metal cluster's nodes hang off a switch that no node's firewall sees. Were the bridge in a
node's namespace, that node's netfilter would see the frames it bridges between the others (Linux's
br_netfilter hands bridged IPv4 to iptables), and half of each asymmetric flow: a pod's call to
another node's InternalIP leaves over the site's network and its replies come back over the pod
overlay, so the bridging node's conntrack sees a connection without its replies, and kube-proxy's
``KUBE-FORWARD`` rule (``--ctstate INVALID -j DROP``) drops it after the handshake (metrics-server's
scrapes of the kubelets timed out so). So the switch is a process of the lab with a namespace of
its own holding only the bridge (``network.switch_commands``); every node, the control plane's
included, is cabled to it (``network.cable_commands``, run here).
"""

from __future__ import annotations

import os
import pathlib
import signal
import subprocess
import sys

from lab.components import network
from lab.process import LabProcess, python_module


def component(ready_file: pathlib.Path) -> LabProcess:
    return python_module("site-switch", __name__, [str(ready_file)], health=ready_file.exists)


def main() -> None:
    ready = pathlib.Path(sys.argv[1])
    os.unshare(os.CLONE_NEWNET)
    for argv in network.switch_commands():
        subprocess.run(argv, check=True)
    ready.write_text(f"{os.getpid()}\n")
    network.log(f"site switch {network.BRIDGE} ready (pid {os.getpid()})")
    signal.pause()


if __name__ == "__main__":
    main()
