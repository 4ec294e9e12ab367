// Wrapper module that builds the CNCF Distribution registry (the `registry:3` image's
// /bin/registry) at v3.1.2: the lab's site mirror, which the lab's kubelet pulls from when a
// converge names another registry (poweraware_image_registry). labhtpasswd writes its htpasswd
// file: the registry reads bcrypt entries only.
module poweraware.example/k8s/lab/registry

go 1.26.0

require (
	github.com/distribution/distribution/v3 v3.1.2
	golang.org/x/crypto v0.57.0
)

require (
	github.com/distribution/reference v0.6.0 // indirect
	github.com/opencontainers/go-digest v1.0.0 // indirect
	github.com/opencontainers/image-spec v1.1.1 // indirect
)
