"""The lab's kubelet: what runs a lab node's pods, one process per node (main.py, started by
lab/node_init.py from the node's copy of this directory: lab/nodes.py).

The node's system Python runs it, with the standard library and PyYAML only, and its modules import
one another relatively, so the same code is ``lab.kubelet.<module>`` on the controller (its tests,
the power meter) and ``kubelet.<module>`` on a node:

- main.py: the node's kubelet loop and its command line (__main__.py starts it);
- static_pods.py: the static pods of the node's manifests directory, and their mirror pods;
- pods.py: the API pods' loop (below): claims, start, restarts, init containers, status, deletion;
- containers.py: a pod's containers as the kubelet keeps them: command, environment, mounts;
- runtime.py: the container runtime's part: a container's file system view, user and capabilities;
- sandbox.py: the pod's network namespace, veth, address and resolv.conf;
- volumes.py, probes.py, pull.py (image references and pulls), client.py (kube-apiserver with the
  node's credentials);
- api.py: the kubelet API on port 10250, and stats.py its resource statistics;
- cpu_manager.py: kubelet 1.36's CPU manager (policies none and static, ``reservedSystemCPUs``): the
  node's topology from its /sys, each Guaranteed container's exclusive CPUs allocated at admission
  for every pod bound to the node and given back when the pod is gone or ended, kept in
  ``/var/lib/kubelet/cpu_manager_state`` byte for byte as kubelet writes it (no affinity is set);
- pod_resources.py: kubelet 1.36's PodResources API (``v1.PodResourcesLister``: List, Get,
  GetAllocatableResources, its rate limit) on ``/var/lib/kubelet/pod-resources/kubelet.sock``: the
  pods bound to the node and the CPUs the CPU manager gave each container, as a node agent (the
  Kubernetes Power Manager's) reads them; grpc_h2.py the unary gRPC server over HTTP/2 it uses, in
  the standard library (its messages are kubelet's api.proto, pod_resources_v1.proto, by hand);
- common.py and linux.py: what the others share (the pods' error and log; libc's namespaces and mounts).

The API pods: pods bound to this node whose image the lab knows run for real. static_pods.py runs
the node's static pods; pods.py and the modules it uses add what kubelet does for the pods the
scheduler binds to the node, for every pod with a container whose image repository is in the lab's
image map (``image-map.json``, written from lab/images.py). kwok's pod stages skip exactly those
pods, so each pod's status has one owner. For such a pod it gives each container what kubelet gives
one:

- a mount namespace of its own whose root is the node's file system with the pod's volumes at their
  ``mountPath``: ConfigMap, Secret, ``emptyDir``, ``hostPath``, persistent volume claims bound to a
  ``local`` or ``hostPath`` PersistentVolume, and projected volumes (service-account
  token from the TokenRequest API bound to the pod, refreshed at 80 % of its life, ``ca.crt`` from a
  ConfigMap, the namespace from the downward API), materialised under
  ``/var/lib/kubelet/pods/<uid>/volumes`` as kubelet does; nothing is created on the node's own
  paths (a missing mount point is made in a private overlay or tmpfs of the container);
- the image's entrypoint (or the container's ``command``) and ``args`` with ``$(VAR)`` expanded,
  the environment (``env`` with ``valueFrom``, ``envFrom``, ``KUBERNETES_SERVICE_HOST/PORT`` naming
  the ``default/kubernetes`` Service, 10.96.0.1:443), ``workingDir``, and the user and groups of its
  ``securityContext``;
- a network: ``hostNetwork`` pods use the node's; every other pod gets a network namespace of its
  own, held by a process as the pause container holds it, joined to the node's by a veth pair as
  Calico does it (``cali<hash>`` on the node with a /32 route to the pod, ``eth0`` in the pod with
  the pod's address from the node's pod CIDR, ``--pod-cidr`` 10.244.<node>.0/24, and a default
  route via 169.254.1.1, which the node's end answers for); a process binds what it likes there,
  as in a container;
- DNS as kubelet sets it: a pod with ``dnsPolicy: ClusterFirst`` (or ``ClusterFirstWithHostNet``
  on the host network) gets a resolv.conf naming the cluster DNS with the
  ``<ns>.svc.<domain> svc.<domain> <domain>`` search path and ``ndots:5``, merged with its
  ``dnsConfig``; ``Default`` keeps the node's, ``None`` uses ``dnsConfig`` alone;
- readiness, liveness and startup probes (httpGet, tcpSocket, exec, grpc) on the pod's address, restarts
  with kubelet's back-off (10 s doubling to 5 min, here 1 s to 20 s), ``restartPolicy``;
- the pod's status (phase, podIP, conditions, container states with ``CrashLoopBackOff`` and the
  last termination, restart counts), patched through the API with the node's own credentials;
- init containers (``spec.initContainers``) as kubelet runs them: one at a time, in order, each to a
  successful end before the next and before any container (``PodInitializing``); a failed one is
  retried with the back-off, or fails the pod under ``restartPolicy: Never``; the pod is
  ``Pending`` and ``Initialized`` false until the last one ends, and ``initContainerStatuses`` show
  them (``Init:0/1`` in ``kubectl get pods``); sidecars (an init container with ``restartPolicy:
  Always``) are not run and say so;
- output in ``/var/log/pods/<ns>_<pod>_<uid>/<container>/0.log``, linked from ``/var/log/containers``;
- deletion: a pod marked for deletion is stopped within its grace period, then removed from the
  API (``gracePeriodSeconds: 0``), and its directory with it;
- admission by the CPU manager (cpu_manager.py): a pod whose Allocate fails is ``Failed`` with
  kubelet's ``UnexpectedAdmissionError`` and message, and nothing of it runs.

An image that is mapped but whose container cannot start (no executable, a volume that cannot be
made, a refused token) shows the reason in the container's ``waiting`` state, as kubelet's
``CreateContainerError``/``CrashLoopBackOff`` do. Standard library only: the node's system Python
runs it.
"""
