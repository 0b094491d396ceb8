// Command pause is the test cluster's pod sandbox image: it holds a pod's namespaces and
// waits for SIGTERM or SIGINT, as Kubernetes' own pause does. The cluster has no registry to
// pull registry.k8s.io/pause from, so scripts/k8s/up builds this into a local image.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	c := make(chan os.Signal, 1)
	signal.Notify(c, syscall.SIGTERM, syscall.SIGINT)
	<-c
}
