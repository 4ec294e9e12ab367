"""One module per control-plane process, as controller-runtime's envtest has: each builds its
command line (flags and why) and its health check. lab/cluster.py starts them in order."""
