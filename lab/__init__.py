"""The local Kubernetes lab: a real control plane on 127.0.0.1 with kwok nodes (docs/lab.md)."""
