# Local Kubernetes lab (docs/lab.md): etcd, kube-apiserver, kube-controller-manager, kube-scheduler
# (as a static pod) and kwok nodes on 127.0.0.1. Binaries are built once from the Go module proxy
# and cached per user; POWERAWARE_K8S_ASSETS or KUBEBUILDER_ASSETS names prebuilt ones instead.
.PHONY: lab lab-down lab-status lab-build lab-logs

LAB_ARGS ?=

lab: venv
	$(BIN)/python -m lab up $(LAB_ARGS)

lab-down: venv
	$(BIN)/python -m lab down

lab-status: venv
	$(BIN)/python -m lab status

# make lab-logs POD=NAMESPACE/NAME [CONTAINER=name]: a pod's output, as kubelet keeps it on its node.
lab-logs: venv
	@test -n "$(POD)" || { echo "usage: make lab-logs POD=NAMESPACE/NAME [CONTAINER=NAME]" >&2; exit 2; }
	$(BIN)/python -m lab logs $(POD) $(if $(CONTAINER),-c $(CONTAINER))

lab-build: venv
	$(BIN)/python -m lab build
