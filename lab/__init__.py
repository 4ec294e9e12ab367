"""The local Kubernetes lab: a real control plane whose nodes are hosts reached over SSH (docs/lab.md);
lab.testing is how tests use it."""
