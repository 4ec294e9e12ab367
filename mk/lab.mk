# Local Kubernetes lab (docs/lab.md): etcd, kube-apiserver, kube-controller-manager, kube-scheduler
# (as a static pod) and nodes that are hosts of their own, reached over SSH; `kubectl logs` reads a
# pod's output as on any cluster. Binaries are built once from the Go module proxy and cached per
# user; POWERAWARE_K8S_ASSETS or KUBEBUILDER_ASSETS names prebuilt ones instead.
.PHONY: lab lab-down lab-status lab-build

LAB_ARGS ?=

# system-deps first: the lab's nodes need sshd, sudo and libfuse3 (their kernels), and a machine that
# never ran `make test` has none of them; without it the build ran 28 minutes and then failed.
lab: venv system-deps
	$(BIN)/python -m lab up $(LAB_ARGS)

lab-down: venv
	$(BIN)/python -m lab down

lab-status: venv
	$(BIN)/python -m lab status

lab-build: venv system-deps
	$(BIN)/python -m lab build
