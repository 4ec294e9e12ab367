// Wrapper module that builds the lab's container runtime streaming server (main.go): exec, attach
// and port-forward for the lab's kubelet, served by k8s.io/cri-streaming at the lab's Kubernetes
// release, as containerd's CRI plugin serves them.
module poweraware.example/k8s/lab/cri-streaming

go 1.26.0

require (
	github.com/creack/pty v1.1.24
	golang.org/x/sys v0.40.0
	k8s.io/cri-api v0.36.3
	k8s.io/cri-streaming v0.36.3
	k8s.io/utils v0.0.0-20260210185600-b8788abfbbc2
)

require (
	github.com/emicklei/go-restful/v3 v3.13.0 // indirect
	github.com/go-logr/logr v1.4.3 // indirect
	github.com/moby/spdystream v0.5.1 // indirect
	golang.org/x/net v0.49.0 // indirect
	golang.org/x/text v0.33.0 // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20260128011058-8636f8732409 // indirect
	google.golang.org/grpc v1.79.3 // indirect
	google.golang.org/protobuf v1.36.12-0.20260120151049-f2248ac996af // indirect
	k8s.io/klog/v2 v2.140.0 // indirect
	k8s.io/streaming v0.36.3 // indirect
)
