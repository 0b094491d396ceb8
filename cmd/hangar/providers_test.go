package main

import (
	"testing"
	"time"

	"github.com/hangar-dev/hangar/internal/config"
	"github.com/hangar-dev/hangar/internal/provider/kubernetes"
)

// TestKubernetesSettingsReachTheProvider: each k8s-* setting of `hangar serve` is in the
// provider's Config (the runtime class once was not), and the setting's 0s lifetime is the
// provider's "no bound".
func TestKubernetesSettingsReachTheProvider(t *testing.T) {
	t.Parallel()
	c, err := loadServeConfig([]string{
		"--k8s-namespace", "sandboxes", "--k8s-runtime-class", "gvisor", "--k8s-run-as-root=true",
		"--k8s-run-as-user", "2000", "--k8s-run-as-group", "3000", "--k8s-cpu-request", "1", "--k8s-cpu-limit", "4",
		"--k8s-memory-request", "1Gi", "--k8s-memory-limit", "8Gi", "--k8s-ephemeral-storage-request", "2Gi",
		"--k8s-ephemeral-storage-limit", "20Gi", "--k8s-max-lifetime", "0s",
	}, func(string) (string, bool) { return "", false }, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := kubernetesConfig(c.Providers, nil)
	want := kubernetes.Resources{CPURequest: "1", CPULimit: "4", MemoryRequest: "1Gi", MemoryLimit: "8Gi",
		EphemeralStorageRequest: "2Gi", EphemeralStorageLimit: "20Gi"}
	if got.RuntimeClassName != "gvisor" || !got.RunAsRoot || got.RunAsUser != 2000 || got.RunAsGroup != 3000 || got.Resources != want || got.MaxLifetime >= 0 {
		t.Errorf("kubernetes.Config %+v from the settings, want each of them in it and no lifetime bound", got)
	}
	def := kubernetesConfig(config.Default().Providers, nil)
	if def.MaxLifetime != 24*time.Hour || def.RunAsRoot || def.RunAsUser != kubernetes.DefaultRunAsUser || def.Resources != kubernetes.DefaultResources {
		t.Errorf("kubernetes.Config %+v from the defaults, want the provider's own defaults", def)
	}
}

// TestBadSandboxLimits: a sandbox limit that cannot be used is refused with the setting named.
func TestBadSandboxLimits(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"--k8s-cpu-limit", "two"},
		{"--k8s-run-as-user", "0"},
		{"--docker-cpus", "-1"},
		{"--docker-memory", "1KiB"},
		{"--docker-pids", "-5"},
		{"--docker-disk", "1KiB"},
	} {
		if _, err := loadServeConfig(args, func(string) (string, bool) { return "", false }, nil); err == nil {
			t.Errorf("%v accepted", args)
		}
	}
}

// TestDockerSettingsReachTheProvider: each docker limit of `hangar serve` is in the provider's
// Config, and the settings' 0 (no limit) is the provider's "no limit", not its default.
func TestDockerSettingsReachTheProvider(t *testing.T) {
	t.Parallel()
	noEnv := func(string) (string, bool) { return "", false }
	c, err := loadServeConfig([]string{"--docker-memory", "512MiB", "--docker-cpus", "0.5", "--docker-pids", "256", "--docker-disk", "4GiB"}, noEnv, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := dockerConfig(c.Providers, nil); got.MemoryBytes != 512<<20 || got.CPUs != 0.5 || got.Pids != 256 || got.DiskBytes != 4<<30 {
		t.Errorf("docker.Config %+v, want 512 MiB, 0.5 CPU, 256 pids, 4 GiB of disk", got)
	}
	c, err = loadServeConfig([]string{"--docker-cpus", "0", "--docker-pids", "0", "--docker-disk", "0"}, noEnv, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := dockerConfig(c.Providers, nil); got.CPUs >= 0 || got.Pids >= 0 || got.DiskBytes != 0 || got.MemoryBytes != 2<<30 {
		t.Errorf("docker.Config %+v, want no CPU, pids or disk limit and the default 2 GiB of memory", got)
	}
}
