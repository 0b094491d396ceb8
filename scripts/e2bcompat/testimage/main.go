// Command testimage makes the image the E2B suite's Docker sandboxes run (hangar's test image:
// busybox and bash copied from this machine, imported, so no registry is needed) and prints
// its reference. scripts/e2bcompat/hangar.sh runs it for the docker provider.
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/docker/docker/client"

	"github.com/hangar-dev/hangar/internal/provider/docker/dockertest"
)

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		fmt.Fprintln(os.Stderr, "testimage:", err)
		os.Exit(1)
	}
	defer cli.Close()
	ref, err := dockertest.EnsureImage(ctx, cli)
	if err != nil {
		fmt.Fprintln(os.Stderr, "testimage:", err)
		os.Exit(1)
	}
	fmt.Println(ref)
}
