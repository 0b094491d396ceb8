package kubernetes

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/hangar-dev/hangar/internal/provider"
)

// client-go's websocket exec keeps a heartbeat goroutine after an exec ended by its context (a
// timed-out Exec, on a real cluster): it sees the closed connection at its next ping, within
// 5 s (remotecommand's pingPeriod), and returns. Anything else left over fails the tests.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("k8s.io/client-go/tools/remotecommand.(*heartbeat).start"))
}

const (
	testTimeout = 30 * time.Second
	testNS      = "sandboxes"
	testIP      = "10.1.2.3"
)

func newTestProvider(kube kubernetes.Interface, mod func(*Config)) *Provider {
	cfg := Config{Namespace: testNS, Image: "example.com/sandbox:1", HangarImage: "example.com/hangar:1", ReadyTimeout: testTimeout}
	if mod != nil {
		mod(&cfg)
	}
	p, err := newProvider(cfg, kube, nil)
	if err != nil {
		panic(err) // a test's config is the test's bug
	}
	return p
}

// kubelet stands in for the cluster: once the pod exists, it sets its status with set. The
// returned function waits for it and reports its failure.
func kubelet(t *testing.T, kube kubernetes.Interface, name string, set func(*corev1.PodStatus)) (wait func()) {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		done <- func() error {
			ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
			defer cancel()
			pods := kube.CoreV1().Pods(testNS)
			for {
				pod, err := pods.Get(ctx, name, metav1.GetOptions{})
				if err == nil {
					set(&pod.Status)
					_, err = pods.UpdateStatus(ctx, pod, metav1.UpdateOptions{})
					return err
				}
				select {
				case <-ctx.Done():
					return errors.New("pod " + name + " never created")
				case <-time.After(5 * time.Millisecond):
				}
			}
		}()
	}()
	return func() {
		t.Helper()
		if err := <-done; err != nil {
			t.Errorf("kubelet: %v", err)
		}
	}
}

func ready(st *corev1.PodStatus) {
	st.Phase = corev1.PodRunning
	st.PodIP = testIP
	st.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
}

func TestCreateWithDaemon(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	kube := fake.NewClientset()
	p := newTestProvider(kube, nil)
	wait := kubelet(t, kube, "hangar-box", ready)
	sb, err := p.Create(ctx, provider.Spec{Name: "box", Owner: "alice@example.com", Daemon: true, Env: map[string]string{"A": "1"}})
	wait()
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	if sb.State != provider.StateRunning || sb.ID != "hangar-box" || sb.Workdir != "/workspace" {
		t.Errorf("Create = %+v, want running pod hangar-box in /workspace", sb)
	}
	secret, err := kube.CoreV1().Secrets(testNS).Get(ctx, "hangar-box", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("token secret: %v", err)
	}
	token := string(secret.Data[tokenKey])
	if len(token) != 64 {
		t.Errorf("token %q, want 64 hex digits", token)
	}
	if len(secret.OwnerReferences) != 1 || secret.OwnerReferences[0].Name != "hangar-box" {
		t.Errorf("secret owners %+v, want the pod", secret.OwnerReferences)
	}
	if sb.Daemon == nil || sb.Daemon.URL != "http://"+testIP+":49983" || sb.Daemon.AccessToken != token {
		t.Errorf("Daemon = %+v, want http://%s:49983 with the secret's token", sb.Daemon, testIP)
	}
	if sb.Data["harness"] != "/opt/hangar/bin/hangar-envd" {
		t.Errorf("harness %q, want the copied hangar-envd (the turns' harness)", sb.Data["harness"])
	}

	pod, err := kube.CoreV1().Pods(testNS).Get(ctx, "hangar-box", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	checkDaemonPod(t, pod, token)
}

// checkDaemonPod checks the pod of sandbox box, with a daemon whose token is token: no service
// account token, never restarted, hangar-envd copied in by an init container and mounted
// read-only, the token's hash (never the token) in the environment, a readiness probe on /health.
func checkDaemonPod(t *testing.T, pod *corev1.Pod, token string) {
	t.Helper()
	if pod.Spec.AutomountServiceAccountToken == nil || *pod.Spec.AutomountServiceAccountToken {
		t.Error("the pod mounts a service account token")
	}
	if pod.Spec.RestartPolicy != corev1.RestartPolicyNever {
		t.Errorf("restart policy %s", pod.Spec.RestartPolicy)
	}
	if len(pod.Spec.InitContainers) != 1 {
		t.Fatalf("%d init containers, want 1", len(pod.Spec.InitContainers))
	}
	init := pod.Spec.InitContainers[0]
	if init.Image != "example.com/hangar:1" || strings.Join(init.Command, " ") != "/usr/local/bin/hangar-envd install /opt/hangar/bin/hangar-envd" {
		t.Errorf("init container %s %q, want the hangar image copying the binary", init.Image, init.Command)
	}
	if len(pod.Spec.Volumes) != 2 || pod.Spec.Volumes[0].EmptyDir == nil || pod.Spec.Volumes[1].EmptyDir == nil {
		t.Errorf("volumes %+v, want two emptyDirs (the workdir, the binary)", pod.Spec.Volumes)
	}
	c := pod.Spec.Containers[0]
	checkLockedDown(t, pod, false)
	if len(c.VolumeMounts) != 2 || c.VolumeMounts[0].MountPath != "/workspace" || c.VolumeMounts[1].MountPath != "/opt/hangar/bin" || !c.VolumeMounts[1].ReadOnly {
		t.Errorf("mounts %+v, want the workdir and the binary's folder read-only", c.VolumeMounts)
	}
	if c.Image != "example.com/sandbox:1" || c.WorkingDir != "/workspace" {
		t.Errorf("sandbox container %s in %s", c.Image, c.WorkingDir)
	}
	if got := strings.Join(c.Command, " "); got != "/opt/hangar/bin/hangar-envd envd --listen 0.0.0.0:49983 --workdir /workspace" {
		t.Errorf("command %q", got)
	}
	if strings.Contains(strings.Join(c.Command, " "), token) {
		t.Error("the token is in the daemon's argv")
	}
	var hashed, fromSpec bool
	for _, e := range c.Env {
		if e.Name == tokenHashEnv && e.Value == provider.DaemonTokenSHA256(token) {
			hashed = true
		}
		if e.Name == "A" && e.Value == "1" {
			fromSpec = true
		}
		if strings.Contains(e.Value, token) || e.ValueFrom != nil {
			t.Errorf("env %s=%q (from %+v): the token, or something from outside the spec", e.Name, e.Value, e.ValueFrom)
		}
	}
	if !hashed || !fromSpec {
		t.Errorf("env %+v, want the token's hash and the spec's A=1", c.Env)
	}
	if c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet == nil || c.ReadinessProbe.HTTPGet.Path != "/health" {
		t.Errorf("readiness probe %+v, want GET /health", c.ReadinessProbe)
	}
	if pod.Annotations[annotOwner] != "alice@example.com" {
		t.Errorf("annotations %v, want the owner", pod.Annotations)
	}
}

// checkLockedDown checks what every sandbox pod gets: seccomp RuntimeDefault, no privilege
// escalation, every capability dropped (root: all but RootCapabilities), a non-root uid (or
// root when asked), the default requests and limits on every container, and a lifetime.
func checkLockedDown(t *testing.T, pod *corev1.Pod, root bool) {
	t.Helper()
	psc := pod.Spec.SecurityContext
	if psc == nil || psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("pod security context %+v, want seccomp RuntimeDefault", psc)
		return
	}
	switch {
	case root && (psc.RunAsUser == nil || *psc.RunAsUser != 0 || psc.RunAsNonRoot == nil || *psc.RunAsNonRoot):
		t.Errorf("pod runs as %v (non-root %v), want uid 0", psc.RunAsUser, psc.RunAsNonRoot)
	case !root && (psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil || *psc.RunAsUser != DefaultRunAsUser ||
		psc.RunAsGroup == nil || *psc.RunAsGroup != DefaultRunAsUser):
		t.Errorf("pod runs as %v:%v (non-root %v), want runAsNonRoot as %d:%[4]d", psc.RunAsUser, psc.RunAsGroup, psc.RunAsNonRoot, DefaultRunAsUser)
	}
	if d := pod.Spec.ActiveDeadlineSeconds; d == nil || *d != int64(DefaultMaxLifetime/time.Second) {
		t.Errorf("activeDeadlineSeconds %v, want %d", d, int64(DefaultMaxLifetime/time.Second))
	}
	for _, c := range append(slices.Clone(pod.Spec.InitContainers), pod.Spec.Containers...) {
		sc := c.SecurityContext
		if sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
			t.Errorf("container %s allows privilege escalation", c.Name)
			continue
		}
		if sc.Privileged != nil && *sc.Privileged {
			t.Errorf("container %s is privileged", c.Name)
		}
		var added []string
		if sc.Capabilities != nil {
			for _, a := range sc.Capabilities.Add {
				added = append(added, string(a))
			}
		}
		wantAdded := []string(nil)
		if root && c.Name == containerName {
			wantAdded = RootCapabilities
		}
		if sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || !slices.Equal(added, wantAdded) {
			t.Errorf("container %s capabilities %+v, want ALL dropped and %v added", c.Name, sc.Capabilities, wantAdded)
		}
		for name, want := range map[corev1.ResourceName]string{
			corev1.ResourceCPU: "100m", corev1.ResourceMemory: "256Mi", corev1.ResourceEphemeralStorage: "1Gi",
		} {
			if got := c.Resources.Requests[name]; got.String() != want {
				t.Errorf("container %s requests %s %s, want %s", c.Name, name, got.String(), want)
			}
		}
		for name, want := range map[corev1.ResourceName]string{
			corev1.ResourceCPU: "2", corev1.ResourceMemory: "2Gi", corev1.ResourceEphemeralStorage: "10Gi",
		} {
			if got := c.Resources.Limits[name]; got.String() != want {
				t.Errorf("container %s limits %s to %s, want %s", c.Name, name, got.String(), want)
			}
		}
	}
}

func TestCreateVariants(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		cfg         func(*Config)
		spec        provider.Spec
		wantCommand string
		wantInit    int
		wantSecret  bool
	}{
		{name: "no daemon", spec: provider.Spec{Name: "plain", Image: "alpine:3", Workdir: "/src"},
			wantCommand: "/bin/sh -c " + idleScript},
		{name: "image has the daemon", cfg: func(c *Config) { c.ImageHasDaemon = true; c.EnvdPath = "/bin/hangar-envd" },
			spec: provider.Spec{Name: "builtin", Daemon: true}, wantCommand: "/bin/hangar-envd envd --listen 0.0.0.0:49983 --workdir /workspace",
			wantSecret: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
			defer cancel()
			kube := fake.NewClientset()
			p := newTestProvider(kube, tc.cfg)
			wait := kubelet(t, kube, "hangar-"+tc.spec.Name, ready)
			sb, err := p.Create(ctx, tc.spec)
			wait()
			if err != nil {
				t.Fatalf("Create: %v", err)
			}
			pod, err := kube.CoreV1().Pods(testNS).Get(ctx, sb.ID, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(pod.Spec.Containers[0].Command, " "); got != tc.wantCommand {
				t.Errorf("command %q, want %q", got, tc.wantCommand)
			}
			if len(pod.Spec.InitContainers) != tc.wantInit {
				t.Errorf("%d init containers, want %d", len(pod.Spec.InitContainers), tc.wantInit)
			}
			if tc.spec.Image != "" && pod.Spec.Containers[0].Image != tc.spec.Image {
				t.Errorf("image %s, want %s", pod.Spec.Containers[0].Image, tc.spec.Image)
			}
			if tc.spec.Workdir != "" && sb.Workdir != tc.spec.Workdir {
				t.Errorf("workdir %s, want %s", sb.Workdir, tc.spec.Workdir)
			}
			_, err = kube.CoreV1().Secrets(testNS).Get(ctx, sb.ID, metav1.GetOptions{})
			if (err == nil) != tc.wantSecret {
				t.Errorf("secret: %v, want it to exist: %v", err, tc.wantSecret)
			}
			if (sb.Daemon != nil) != tc.spec.Daemon {
				t.Errorf("Daemon = %+v with spec.Daemon %v", sb.Daemon, tc.spec.Daemon)
			}
		})
	}
}

// TestCreateFails: a pod that cannot start makes Create fail with a clear error, and is deleted
// with its secret.
func TestCreateFails(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		status  func(*corev1.PodStatus)
		timeout time.Duration
		isErr   error
		want    []string
	}{
		{name: "image pull", status: func(st *corev1.PodStatus) {
			st.Phase = corev1.PodPending
			st.ContainerStatuses = []corev1.ContainerStatus{{Name: containerName, Image: "example.com/sandbox:1",
				State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: "Back-off pulling image"}}}}
		}, isErr: provider.ErrImageMissing, want: []string{"example.com/sandbox:1", "ImagePullBackOff", "cannot be pulled"}},
		{name: "crash", status: func(st *corev1.PodStatus) {
			st.Phase = corev1.PodRunning
			st.ContainerStatuses = []corev1.ContainerStatus{{Name: containerName, Image: "example.com/sandbox:1",
				State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "back-off restarting"}}}}
		}, want: []string{"cannot start", "CrashLoopBackOff"}},
		{name: "init failed", status: func(st *corev1.PodStatus) {
			st.Phase = corev1.PodFailed
			st.InitContainerStatuses = []corev1.ContainerStatus{{Name: initName,
				State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error", Message: "cp: no such file"}}}}
		}, want: []string{"stopped", "hangar-install exited with code 1", "cp: no such file"}},
		{name: "timeout", timeout: 300 * time.Millisecond, status: func(st *corev1.PodStatus) {
			st.Phase = corev1.PodPending
			st.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Message: "0/3 nodes are available"}}
		}, isErr: context.DeadlineExceeded, want: []string{"not ready in 300ms", "0/3 nodes are available"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
			defer cancel()
			kube := fake.NewClientset()
			p := newTestProvider(kube, func(c *Config) {
				if tc.timeout > 0 {
					c.ReadyTimeout = tc.timeout
				}
			})
			wait := kubelet(t, kube, "hangar-bad", tc.status)
			_, err := p.Create(ctx, provider.Spec{Name: "bad", Daemon: true})
			wait()
			if err == nil {
				t.Fatal("Create succeeded")
			}
			if tc.isErr != nil && !errors.Is(err, tc.isErr) {
				t.Errorf("error %v, want %v", err, tc.isErr)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			if _, err := kube.CoreV1().Pods(testNS).Get(ctx, "hangar-bad", metav1.GetOptions{}); err == nil {
				t.Error("the pod is still there")
			}
			if _, err := kube.CoreV1().Secrets(testNS).Get(ctx, "hangar-bad", metav1.GetOptions{}); err == nil {
				t.Error("the secret is still there")
			}
		})
	}
}

// TestRestartAndDestroy: a new provider over the same cluster finds the sandbox (List, Get, with
// its token), sees only its own instance's, and Destroy deletes the pod and its secret.
func TestRestartAndDestroy(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	kube := fake.NewClientset()
	first := newTestProvider(kube, nil)
	wait := kubelet(t, kube, "hangar-kept", ready)
	sb, err := first.Create(ctx, provider.Spec{Name: "kept", Daemon: true})
	wait()
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	other := newTestProvider(kube, func(c *Config) { c.Instance = "other" })
	if list, err := other.List(ctx); err != nil || len(list) != 0 {
		t.Errorf("another instance's List = %+v, %v; want nothing", list, err)
	}
	if err := other.Destroy(ctx, sb); !errors.Is(err, provider.ErrNotFound) {
		t.Errorf("another instance's Destroy: %v, want ErrNotFound", err)
	}

	p := newTestProvider(kube, nil)
	list, err := p.List(ctx)
	if err != nil || len(list) != 1 {
		t.Fatalf("List = %+v, %v; want the sandbox", list, err)
	}
	if got := list[0]; got.Name != "kept" || got.State != provider.StateRunning || got.Daemon == nil || *got.Daemon != *sb.Daemon {
		t.Errorf("List found %+v, want %+v", got, sb)
	}
	got, err := p.Get(ctx, provider.Sandbox{Name: "kept", ID: sb.ID})
	if err != nil || got.State != provider.StateRunning || got.Daemon == nil || got.Daemon.AccessToken != sb.Daemon.AccessToken {
		t.Errorf("Get = %+v, %v; want running with the token", got, err)
	}
	if err := p.Destroy(ctx, sb); err != nil {
		t.Fatalf("Destroy: %v", err)
	}
	if _, err := p.Get(ctx, sb); !errors.Is(err, provider.ErrNotFound) {
		t.Errorf("Get after Destroy: %v, want ErrNotFound", err)
	}
	if _, err := kube.CoreV1().Secrets(testNS).Get(ctx, sb.ID, metav1.GetOptions{}); err == nil {
		t.Error("the secret outlived Destroy")
	}
	if err := p.Destroy(ctx, sb); !errors.Is(err, provider.ErrNotFound) {
		t.Errorf("second Destroy: %v, want ErrNotFound", err)
	}
}

// TestGetStates: what Get reports as the pod's status changes.
func TestGetStates(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		status func(*corev1.PodStatus)
		want   provider.State
		reason string
	}{
		{"ready", ready, provider.StateRunning, ""},
		{"pending", func(st *corev1.PodStatus) { st.Phase = corev1.PodPending }, provider.StateCreating, ""},
		{"not ready", func(st *corev1.PodStatus) {
			ready(st)
			st.Conditions[0].Status = corev1.ConditionFalse
		}, provider.StateFailed, "does not answer /health"},
		{"daemon exited", func(st *corev1.PodStatus) {
			st.Phase = corev1.PodFailed
			st.ContainerStatuses = []corev1.ContainerStatus{{Name: containerName,
				State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled"}}}}
		}, provider.StateFailed, "exited with code 137: OOMKilled"},
		{"lifetime reached", func(st *corev1.PodStatus) {
			st.Phase, st.Reason, st.Message = corev1.PodFailed, "DeadlineExceeded", "Pod was active on the node longer than the specified deadline"
		}, provider.StateFailed, "reached the sandboxes' lifetime of 24h0m0s"},
		{"disk filled", func(st *corev1.PodStatus) {
			st.Phase, st.Reason, st.Message = corev1.PodFailed, "Evicted", `Usage of EmptyDir volume "workdir" exceeds the limit "10Gi". `
		}, provider.StateFailed, `was evicted by its node: Usage of EmptyDir volume "workdir" exceeds the limit "10Gi".`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
			defer cancel()
			kube := fake.NewClientset()
			p := newTestProvider(kube, nil)
			wait := kubelet(t, kube, "hangar-s", ready)
			sb, err := p.Create(ctx, provider.Spec{Name: "s", Daemon: true})
			wait()
			if err != nil {
				t.Fatalf("Create: %v", err)
			}
			pod, err := kube.CoreV1().Pods(testNS).Get(ctx, sb.ID, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			pod.Status = corev1.PodStatus{}
			tc.status(&pod.Status)
			if _, err := kube.CoreV1().Pods(testNS).UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			got, err := p.Get(ctx, sb)
			if err != nil {
				t.Fatalf("Get: %v", err)
			}
			if got.State != tc.want || !strings.Contains(got.Reason, tc.reason) {
				t.Errorf("Get = %s (%q), want %s with %q", got.State, got.Reason, tc.want, tc.reason)
			}
		})
	}
}

func TestUnsupported(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := newTestProvider(fake.NewClientset(), nil)
	sb := provider.Sandbox{Name: "x", ID: "hangar-x"}
	if _, err := p.Pause(ctx, sb); !errors.Is(err, provider.ErrUnsupported) {
		t.Errorf("Pause: %v, want ErrUnsupported", err)
	}
	if _, err := p.Resume(ctx, sb); !errors.Is(err, provider.ErrUnsupported) {
		t.Errorf("Resume: %v, want ErrUnsupported", err)
	}
	// A fake clientset cannot exec; a real cluster connection can.
	if _, err := p.Exec(ctx, sb, provider.ExecRequest{Command: "true"}); !errors.Is(err, provider.ErrUnsupported) {
		t.Errorf("Exec without a cluster: %v, want ErrUnsupported", err)
	}
	if _, err := p.Create(ctx, provider.Spec{Name: "Not_A_Label"}); err == nil {
		t.Error("Create with a bad name succeeded")
	}
}

// TestEnvScript: the exec wrapper sets the folder and the environment, then runs the command.
func TestEnvScript(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	argv := append([]string{"/bin/sh", "-c", envScript, "hangar-env", dir, "A=1 2", "B=x", "--"},
		provider.ShellArgv(`printf '%s|%s|%s' "$A" "$B" "$(pwd)"`)...)
	out, err := execCommand(argv)
	if err != nil {
		t.Fatal(err)
	}
	if want := "1 2|x|" + dir; out != want {
		t.Errorf("output %q, want %q", out, want)
	}
}

func TestNewDaemonVia(t *testing.T) {
	t.Parallel()
	_, err := New(Config{DaemonVia: "tunnel"})
	if err == nil || !strings.Contains(err.Error(), `"tunnel" is neither "pod-ip" nor "port-forward"`) {
		t.Errorf("New(DaemonVia tunnel) error = %v, want it named and the two modes listed", err)
	}
	// Without a cluster connection (the fake clientset's tests), a port-forward cannot be made:
	// the sandbox comes back without a daemon URL rather than with a wrong one.
	p := newTestProvider(nil, func(c *Config) { c.DaemonVia = DaemonViaPortForward })
	if _, err := p.startForward(context.Background(), &corev1.Pod{}, 0); !errors.Is(err, provider.ErrUnsupported) {
		t.Errorf("startForward without a cluster connection: %v, want ErrUnsupported", err)
	}
	p.Close()
}

// TestPodSettings: what the provider's settings change in a sandbox's pod.
func TestPodSettings(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		cfg   func(*Config)
		check func(t *testing.T, pod *corev1.Pod)
	}{
		{name: "defaults", check: func(t *testing.T, pod *corev1.Pod) {
			checkLockedDown(t, pod, false)
			if pod.Spec.RuntimeClassName != nil {
				t.Errorf("runtime class %q, want the cluster's default", *pod.Spec.RuntimeClassName)
			}
			if fs := pod.Spec.SecurityContext.FSGroup; fs == nil || *fs != DefaultRunAsUser {
				t.Errorf("fsGroup %v, want %d", fs, DefaultRunAsUser)
			}
			v := pod.Spec.Volumes[0]
			if v.Name != workVolume || v.EmptyDir == nil || v.EmptyDir.SizeLimit == nil || v.EmptyDir.SizeLimit.String() != "10Gi" {
				t.Errorf("volume %+v, want the workdir's emptyDir bounded by the ephemeral-storage limit", v)
			}
		}},
		{name: "root", cfg: func(c *Config) { c.RunAsRoot = true }, check: func(t *testing.T, pod *corev1.Pod) {
			checkLockedDown(t, pod, true)
			if len(pod.Spec.Volumes) != 1 || pod.Spec.Volumes[0].Name != binVolume {
				t.Errorf("volumes %+v, want only the binary's: a root sandbox's workdir is the image's", pod.Spec.Volumes)
			}
		}},
		{name: "uid and gid", cfg: func(c *Config) { c.RunAsUser, c.RunAsGroup = 65532, 65533 }, check: func(t *testing.T, pod *corev1.Pod) {
			sc := pod.Spec.SecurityContext
			if *sc.RunAsUser != 65532 || *sc.RunAsGroup != 65533 || *sc.FSGroup != 65533 || !*sc.RunAsNonRoot {
				t.Errorf("security context %+v, want non-root 65532:65533, fsGroup 65533", sc)
			}
		}},
		{name: "runtime class", cfg: func(c *Config) { c.RuntimeClassName = "gvisor" }, check: func(t *testing.T, pod *corev1.Pod) {
			if rc := pod.Spec.RuntimeClassName; rc == nil || *rc != "gvisor" {
				t.Errorf("runtime class %v, want gvisor", rc)
			}
		}},
		{name: "resources", cfg: func(c *Config) {
			c.Resources = Resources{CPURequest: "0", CPULimit: "500m", MemoryLimit: "0", EphemeralStorageLimit: "1Gi", EphemeralStorageRequest: "512Mi"}
		}, check: func(t *testing.T, pod *corev1.Pod) {
			r := pod.Spec.Containers[0].Resources
			if _, ok := r.Requests[corev1.ResourceCPU]; ok {
				t.Errorf("a cpu request %v, want none (0)", r.Requests)
			}
			if _, ok := r.Limits[corev1.ResourceMemory]; ok {
				t.Errorf("a memory limit %v, want none (0)", r.Limits)
			}
			cpu, mem, disk := r.Limits[corev1.ResourceCPU], r.Requests[corev1.ResourceMemory], r.Requests[corev1.ResourceEphemeralStorage]
			if cpu.String() != "500m" || mem.String() != "256Mi" || disk.String() != "512Mi" {
				t.Errorf("cpu limit %s, memory request %s, ephemeral-storage request %s; want 500m, the default 256Mi, 512Mi", cpu.String(), mem.String(), disk.String())
			}
		}},
		{name: "lifetime", cfg: func(c *Config) { c.MaxLifetime = 90 * time.Minute }, check: func(t *testing.T, pod *corev1.Pod) {
			if d := pod.Spec.ActiveDeadlineSeconds; d == nil || *d != 5400 {
				t.Errorf("activeDeadlineSeconds %v, want 5400", d)
			}
		}},
		{name: "no lifetime", cfg: func(c *Config) { c.MaxLifetime = -1 }, check: func(t *testing.T, pod *corev1.Pod) {
			if d := pod.Spec.ActiveDeadlineSeconds; d != nil {
				t.Errorf("activeDeadlineSeconds %d, want none", *d)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := newTestProvider(fake.NewClientset(), tc.cfg)
			tc.check(t, p.podSpec(provider.Spec{Name: "box", Daemon: true}, "hangar-box", "/workspace", "hash"))
		})
	}
}

// TestBadResources: a quantity the API server would refuse in every pod is refused at start.
func TestBadResources(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		res  Resources
		want string
	}{
		{Resources{CPULimit: "two"}, `cpu "two": must be a Kubernetes quantity`},
		{Resources{MemoryRequest: "-1Gi"}, `memory "-1Gi": must not be negative`},
		{Resources{MemoryRequest: "4Gi"}, "the memory request 4Gi is above its limit 2Gi"},
	} {
		_, err := newProvider(Config{Resources: tc.res}, fake.NewClientset(), nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("resources %+v: error %v, want it to say %q", tc.res, err, tc.want)
		}
	}
	if err := CheckQuantity("1.5Gi"); err != nil {
		t.Errorf("CheckQuantity(1.5Gi): %v", err)
	}
}
