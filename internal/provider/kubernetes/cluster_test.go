package kubernetes

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/hangar-dev/hangar/internal/envd"
	"github.com/hangar-dev/hangar/internal/provider"
	"github.com/hangar-dev/hangar/internal/provider/providertest"
)

// The tests of this file run against a real cluster: the one of HANGAR_TEST_KUBECONFIG
// (`make test-k8s` brings one up with scripts/k8s/up and sets it), with the images of
// scripts/k8s/images already on its node. Without it they skip, saying so.
const (
	clusterTimeout = 2 * time.Minute
	// execTimeout is the suite's timed-out exec's timeout: pods/exec takes over the suite's
	// 500ms to start a command on a loaded machine (seen failing both before and after the
	// sandbox pods were locked down), and the case wants the command started.
	execTimeout = 5 * time.Second
	// The images scripts/k8s/images imports; HANGAR_TEST_K8S_HANGAR_IMAGE and
	// HANGAR_TEST_K8S_SANDBOX_IMAGE name others.
	defaultHangarImage  = "hangar.test/hangar:k8s"
	defaultSandboxImage = "hangar.test/sandbox:k8s"
)

// cluster is a real cluster to test against, and a namespace of this test's own in it.
type cluster struct {
	kubeconfig, namespace string
	hangarImage, image    string
	kube                  kubernetes.Interface
}

// realCluster returns the cluster of HANGAR_TEST_KUBECONFIG with a new namespace, deleted when
// the test ends; without HANGAR_TEST_KUBECONFIG the test is skipped.
func realCluster(t *testing.T) *cluster {
	t.Helper()
	kc := os.Getenv("HANGAR_TEST_KUBECONFIG")
	if kc == "" {
		t.Skip("no real cluster: HANGAR_TEST_KUBECONFIG is unset (`make test-k8s` brings one up and sets it)")
	}
	rc, err := clientcmd.BuildConfigFromFlags("", kc)
	if err != nil {
		t.Fatalf("load HANGAR_TEST_KUBECONFIG: %v", err)
	}
	kube := testClient(t, rc)
	c := &cluster{kubeconfig: kc, kube: kube, hangarImage: defaultHangarImage, image: defaultSandboxImage}
	if v := os.Getenv("HANGAR_TEST_K8S_HANGAR_IMAGE"); v != "" {
		c.hangarImage = v
	}
	if v := os.Getenv("HANGAR_TEST_K8S_SANDBOX_IMAGE"); v != "" {
		c.image = v
	}
	ctx, cancel := context.WithTimeout(context.Background(), clusterTimeout)
	defer cancel()
	ns, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "hangar-test-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create a namespace: %v", err)
	}
	c.namespace = ns.Name
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), clusterTimeout)
		defer cancel()
		if err := kube.CoreV1().Namespaces().Delete(ctx, ns.Name, metav1.DeleteOptions{}); err != nil {
			t.Errorf("delete namespace %s: %v", ns.Name, err)
		}
	})
	return c
}

// testClient is a clientset over rc whose idle connections are closed when the test ends (runs
// last of its cleanups), so that none outlives the tests (goleak).
func testClient(t *testing.T, rc *rest.Config) kubernetes.Interface {
	t.Helper()
	hc, err := rest.HTTPClientFor(rc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { utilnet.CloseIdleConnectionsFor(hc.Transport) })
	kube, err := kubernetes.NewForConfigAndClient(rc, hc)
	if err != nil {
		t.Fatal(err)
	}
	return kube
}

// provider returns a provider over c (its namespace, images, instance, the rest of its Config
// the defaults unless mod changes it), closed when the test ends.
func (c *cluster) provider(t *testing.T, instance, via string, mod ...func(*Config)) *Provider {
	t.Helper()
	cfg := Config{Kubeconfig: c.kubeconfig, Namespace: c.namespace, Image: c.image, HangarImage: c.hangarImage,
		Instance: instance, DaemonVia: via, ReadyTimeout: clusterTimeout, Logger: slog.New(slog.NewTextHandler(t.Output(), nil))}
	for _, m := range mod {
		m(&cfg)
	}
	p, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(p.Close)
	return p
}

// TestCluster runs the providers' suite against real pods, reaching their daemons both ways:
// through the API server's port-forward and at their pod IPs (routed to the test cluster's
// node). A second provider value stands for a restarted control plane.
func TestCluster(t *testing.T) {
	t.Parallel()
	c := realCluster(t)
	for _, via := range []string{DaemonViaPortForward, DaemonViaPodIP} {
		t.Run(via, func(t *testing.T) {
			t.Parallel()
			instance := providertest.UniqueName("t")
			providertest.Run(t, func(t *testing.T) provider.Provider { return c.provider(t, instance, via) },
				providertest.Options{Daemon: true, NoDaemon: true, NoPause: true, DaemonURLPerProvider: via == DaemonViaPortForward, ExecTimeout: execTimeout})
		})
	}
}

// TestClusterDaemon: the init container installed hangar-envd with its install verb (hangar's
// image has no cp), and a command started through the daemon streams its output as it runs.
func TestClusterDaemon(t *testing.T) {
	t.Parallel()
	c := realCluster(t)
	p := c.provider(t, providertest.UniqueName("t"), DaemonViaPortForward)
	ctx, cancel := context.WithTimeout(context.Background(), clusterTimeout)
	defer cancel()
	start := time.Now()
	sb, err := p.Create(ctx, provider.Spec{Name: providertest.UniqueName("stream"), Daemon: true})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	t.Logf("Create of a pod with a daemon (init container, readiness probe, port-forward): %s", time.Since(start))
	t.Cleanup(func() {
		if err := p.Destroy(context.Background(), sb); err != nil {
			t.Errorf("Destroy: %v", err)
		}
	})
	if sb.Daemon == nil {
		t.Fatalf("Create: no daemon in %+v", sb)
	}
	pod, err := c.kube.CoreV1().Pods(c.namespace).Get(ctx, sb.ID, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(pod.Status.InitContainerStatuses) != 1 {
		t.Fatalf("%d init container statuses, want 1", len(pod.Status.InitContainerStatuses))
	}
	init := pod.Status.InitContainerStatuses[0]
	if term := init.State.Terminated; term == nil || term.ExitCode != 0 {
		t.Errorf("init container %s (%s): %+v, want exited 0", init.Name, strings.Join(pod.Spec.InitContainers[0].Command, " "), init.State)
	}

	cli, err := envd.New(envd.Config{URL: sb.Daemon.URL, AccessToken: sb.Daemon.AccessToken})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	// The second line is written only once the first has been read through the stream: output
	// arrives as it is written, not when the command ends.
	st, err := cli.Start(ctx, envd.StartRequest{Cmd: "/bin/sh", Args: []string{"-c", "echo one; read -r line; echo $line"}, Stdin: true, Tag: "stream"})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	defer st.Close()
	next := func(want envd.EventKind) envd.Event {
		t.Helper()
		ev, err := st.Next()
		if err != nil || ev.Kind != want {
			t.Fatalf("Next = %v %q, %v; want %v", ev.Kind, ev.Data, err, want)
		}
		return ev
	}
	if ev := next(envd.EventStdout); string(ev.Data) != "one\n" {
		t.Fatalf("first output %q, want \"one\\n\"", ev.Data)
	}
	if err := cli.SendInput(ctx, envd.ByTag("stream"), []byte("two\n")); err != nil {
		t.Fatalf("SendInput: %v", err)
	}
	if ev := next(envd.EventStdout); string(ev.Data) != "two\n" {
		t.Fatalf("second output %q, want \"two\\n\"", ev.Data)
	}
	if ev := next(envd.EventEnd); ev.Exit.Code != 0 {
		t.Errorf("end %+v, want exit 0", ev.Exit)
	}

	// No command in the pod can read the daemon's token: the daemon has only its hash, and it
	// is not dumpable, so its environ is closed to the commands (its cmdline, which every
	// process may read, shows it is there: the read is not empty for want of a process).
	st2, err := cli.Start(ctx, envd.StartRequest{Cmd: "/bin/sh", Args: []string{"-c", "cat /proc/[0-9]*/environ /proc/[0-9]*/cmdline 2>/dev/null; echo; echo end"}})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	defer st2.Close()
	var out []byte
	for {
		ev, err := st2.Next()
		if err != nil {
			t.Fatalf("Next: %v", err)
		}
		if ev.Kind == envd.EventEnd {
			break
		}
		out = append(out, ev.Data...)
	}
	switch {
	case !bytes.Contains(out, []byte("end")) || !bytes.Contains(out, []byte("envd")):
		t.Errorf("the command read no process's cmdline: %q", out)
	case bytes.Contains(out, []byte(sb.Daemon.AccessToken)):
		t.Errorf("a command reads the daemon's token in /proc/*/environ or cmdline: %q", out)
	case bytes.Contains(out, []byte(provider.DaemonTokenSHA256(sb.Daemon.AccessToken))):
		t.Errorf("a command reads the daemon's environment (its token's hash) though the daemon is not dumpable: %q", out)
	}
}

// TestClusterPortForwardAgain: a port-forward that ended (its connection to the API server
// broke) is made again by the next Get, on the same loopback port, so the daemon URL the
// control plane holds still works; Destroy then closes it.
func TestClusterPortForwardAgain(t *testing.T) {
	t.Parallel()
	c := realCluster(t)
	p := c.provider(t, providertest.UniqueName("t"), DaemonViaPortForward)
	ctx, cancel := context.WithTimeout(context.Background(), clusterTimeout)
	defer cancel()
	sb, err := p.Create(ctx, provider.Spec{Name: providertest.UniqueName("again"), Daemon: true})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	if sb.Daemon == nil {
		t.Fatalf("Create: no daemon in %+v", sb)
	}
	p.fwdMu.Lock()
	f := p.fwd[sb.ID]
	p.fwdMu.Unlock()
	f.close() // as if its connection broke: ended, still in the map
	got, err := p.Get(ctx, sb)
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	if got.Daemon == nil || got.Daemon.URL != sb.Daemon.URL {
		t.Fatalf("Get after the port-forward ended: daemon %+v, want the URL %s again", got.Daemon, sb.Daemon.URL)
	}
	cli, err := envd.New(envd.Config{URL: got.Daemon.URL, AccessToken: got.Daemon.AccessToken})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	if _, err := cli.List(ctx); err != nil {
		t.Errorf("the daemon through the new port-forward: %v", err)
	}
	if err := p.Destroy(ctx, sb); err != nil {
		t.Fatalf("Destroy: %v", err)
	}
	p.fwdMu.Lock()
	n := len(p.fwd)
	p.fwdMu.Unlock()
	if n != 0 {
		t.Errorf("%d port-forwards left after Destroy, want 0", n)
	}
}

// TestClusterLockedDown: with the provider's defaults a sandbox pod starts, its daemon answers,
// and its commands run as uid 1000 with no capability at all, no_new_privs, a seccomp filter
// and the memory limit, in a workdir they can write; with RunAsRoot they run as root with
// RootCapabilities only (no NET_RAW). Both through the daemon and the provider's exec.
func TestClusterLockedDown(t *testing.T) {
	t.Parallel()
	c := realCluster(t)
	const rootCaps = 1<<0 | 1<<1 | 1<<3 | 1<<4 | 1<<5 | 1<<6 | 1<<7 | 1<<10 // RootCapabilities' bits
	for _, tc := range []struct {
		name     string
		root     bool
		uid, gid string
		caps     uint64
	}{
		{"non-root", false, "1000", "1000", 0},
		{"root", true, "0", "0", rootCaps},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := c.provider(t, providertest.UniqueName("t"), DaemonViaPodIP, func(cfg *Config) { cfg.RunAsRoot = tc.root })
			ctx, cancel := context.WithTimeout(context.Background(), clusterTimeout)
			defer cancel()
			sb, err := p.Create(ctx, provider.Spec{Name: providertest.UniqueName("locked"), Daemon: true})
			if err != nil {
				t.Fatalf("Create: %v", err)
			}
			t.Cleanup(func() {
				if err := p.Destroy(context.Background(), sb); err != nil {
					t.Errorf("Destroy: %v", err)
				}
			})
			if sb.Daemon == nil {
				t.Fatalf("Create: no daemon in %+v", sb)
			}
			const probe = `echo "uid=$(id -u)"; echo "gid=$(id -g)"; grep -E '^(CapEff|CapBnd|NoNewPrivs|Seccomp):' /proc/self/status | tr -d ' \t';
touch written && echo writable=yes; echo "memory=$(cat /sys/fs/cgroup/memory.max /sys/fs/cgroup/memory/memory.limit_in_bytes 2>/dev/null)"`
			res, err := p.Exec(ctx, sb, provider.ExecRequest{Command: probe})
			if err != nil || res.ExitCode != 0 {
				t.Fatalf("Exec: %v, %+v", err, res)
			}
			cli, err := envd.New(envd.Config{URL: sb.Daemon.URL, AccessToken: sb.Daemon.AccessToken})
			if err != nil {
				t.Fatal(err)
			}
			defer cli.Close()
			st, err := cli.Start(ctx, envd.StartRequest{Cmd: "/bin/sh", Args: []string{"-c", probe}})
			if err != nil {
				t.Fatalf("Start: %v", err)
			}
			defer st.Close()
			var viaDaemon []byte
			for {
				ev, err := st.Next()
				if err != nil {
					t.Fatalf("Next: %v", err)
				}
				if ev.Kind == envd.EventEnd {
					break
				}
				viaDaemon = append(viaDaemon, ev.Data...)
			}
			for how, out := range map[string]string{"pods/exec": string(res.Stdout), "the daemon": string(viaDaemon)} {
				got := map[string]string{}
				for _, line := range strings.Fields(out) {
					k, v, _ := strings.Cut(strings.Replace(line, ":", "=", 1), "=")
					got[k] = v
				}
				t.Logf("%s, through %s: %v", tc.name, how, got)
				capEff, err1 := strconv.ParseUint(got["CapEff"], 16, 64)
				capBnd, err2 := strconv.ParseUint(got["CapBnd"], 16, 64)
				if got["uid"] != tc.uid || got["gid"] != tc.gid || err1 != nil || err2 != nil || capEff != tc.caps || capBnd != tc.caps ||
					got["NoNewPrivs"] != "1" || got["Seccomp"] != "2" || got["writable"] != "yes" || got["memory"] != "2147483648" {
					t.Errorf("through %s: %v; want uid %s, gid %s, capabilities %#x (effective and bounding), NoNewPrivs 1, Seccomp 2 (a filter), the workdir writable, a 2Gi memory limit",
						how, got, tc.uid, tc.gid, tc.caps)
				}
			}
		})
	}
}

// TestClusterDiskFillEvicted: a sandbox that writes past its ephemeral-storage limit is evicted
// by the kubelet (at its next check), and reads failed with the kubelet's reason: the node's
// disk is not the sandbox's to fill.
func TestClusterDiskFillEvicted(t *testing.T) {
	t.Parallel()
	c := realCluster(t)
	p := c.provider(t, providertest.UniqueName("t"), DaemonViaPodIP, func(cfg *Config) {
		cfg.Resources.EphemeralStorageRequest, cfg.Resources.EphemeralStorageLimit = "16Mi", "64Mi"
	})
	ctx, cancel := context.WithTimeout(context.Background(), clusterTimeout)
	defer cancel()
	sb, err := p.Create(ctx, provider.Spec{Name: providertest.UniqueName("fill"), Daemon: true})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	t.Cleanup(func() {
		if err := p.Destroy(context.Background(), sb); err != nil {
			t.Errorf("Destroy: %v", err)
		}
	})
	pods := c.kube.CoreV1().Pods(c.namespace)
	w, err := pods.Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + sb.ID})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	// In the workdir (an emptyDir), twice the limit; the eviction may cut the command short.
	res, err := p.Exec(ctx, sb, provider.ExecRequest{Command: "dd if=/dev/zero of=fill bs=1M count=128 2>&1; sync"})
	t.Logf("dd: %v %q", err, res.Stdout)
	for failed := false; !failed; {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatal("the watch ended before the pod was evicted")
			}
			pod, isPod := ev.Object.(*corev1.Pod)
			if !isPod {
				continue
			}
			switch pod.Status.Phase {
			case corev1.PodFailed:
				t.Logf("pod %s: %s %s", pod.Name, pod.Status.Reason, pod.Status.Message)
				failed = true
			case corev1.PodSucceeded:
				// The daemon exited 0 on the kubelet's SIGTERM, and its phase won over the
				// eviction's, with no reason.
				t.Fatalf("pod %s: Succeeded (%s), want Failed and Evicted", pod.Name, describe(pod))
			}
		case <-ctx.Done():
			t.Fatalf("the pod was not evicted in %s after writing twice its ephemeral-storage limit", clusterTimeout)
		}
	}
	got, err := p.Get(ctx, sb)
	// The workdir's sizeLimit or the container's ephemeral-storage limit: whichever the
	// kubelet checks first.
	if err != nil || got.State != provider.StateFailed || !strings.Contains(got.Reason, "was evicted by its node") || !strings.Contains(got.Reason, "64Mi") {
		t.Errorf("Get after the eviction: %s (%q), %v; want failed, evicted past the 64Mi limit", got.State, got.Reason, err)
	}
}
