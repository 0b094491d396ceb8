// Package kubernetes is the provider that runs each sandbox as a pod, through client-go. With a
// daemon, an init container (`hangar-envd install`, from hangar's image) copies hangar-envd
// (~10 MB) into an emptyDir (unless the image already has it) and the sandbox container runs
// `hangar-envd envd`, reached at the pod's IP or through the API server's port-forward
// (Config.DaemonVia); its access token lives in a Secret beside the pod, and the daemon is
// given only the token's SHA-256. The provider's own
// exec goes through the pods/exec subresource. Pods cannot be paused.
package kubernetes

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/hangar-dev/hangar/internal/names"
	"github.com/hangar-dev/hangar/internal/provider"
)

// Name is the provider's name in the API.
const Name = "kubernetes"

// DaemonPort is the port `hangar-envd envd` listens on in a pod, E2B's envd port.
const DaemonPort = 49983

const (
	containerName = "sandbox"
	initName      = "hangar-install"
	binVolume     = "hangar-bin"
	workVolume    = "workdir"
	binDir        = "/opt/hangar/bin"
	tokenHashEnv  = "HANGAR_ENVD_ACCESS_TOKEN_SHA256"
	tokenKey      = "access-token"

	labelManagedBy = "app.kubernetes.io/managed-by"
	labelInstance  = "hangar.dev/instance"
	labelSandbox   = "hangar.dev/sandbox"
	labelDaemon    = "hangar.dev/daemon"
	annotOwner     = "hangar.dev/owner"
	annotWorkdir   = "hangar.dev/workdir"
)

// idleScript keeps a pod without a daemon alive with nothing but /bin/sh and sleep.
const idleScript = `trap 'exit 0' TERM INT; while :; do sleep 3600 & wait $!; done`

// Config configures the kubernetes provider.
type Config struct {
	// Kubeconfig is the path of a kubeconfig file. Empty: the in-cluster configuration (the
	// control plane runs in a pod with a service account allowed to manage pods, secrets and
	// pods/exec in Namespace).
	Kubeconfig string
	// Namespace is where sandbox pods live. Empty: "default".
	Namespace string
	// Image is the image of a sandbox whose spec names none. Empty: ubuntu:24.04.
	Image string
	// Workdir is the workdir of a sandbox whose spec names none. Empty: /workspace.
	Workdir string
	// HangarImage is the image whose EnvdPath the init container runs as `EnvdPath install
	// DEST` to copy itself into the sandbox, so the daemon runs in any image (hangar's image:
	// FROM scratch, no cp needed). Empty: ghcr.io/hangar-dev/hangar:latest.
	HangarImage string
	// EnvdPath is where hangar-envd is in HangarImage, or in the sandbox image when
	// ImageHasDaemon. Empty: /usr/local/bin/hangar-envd.
	EnvdPath string
	// ImageHasDaemon says sandbox images already hold hangar-envd at EnvdPath: no init
	// container. False: the init container copies it in.
	ImageHasDaemon bool
	// RuntimeClassName runs sandbox pods under that runtime class (gvisor on GKE Sandbox, Kata)
	// for a kernel of their own. Empty: the cluster's default runtime.
	RuntimeClassName string
	// RunAsRoot runs sandbox containers as uid 0 (what images that install packages, and split
	// sessions, need), with the capabilities of RootCapabilities only. False (the default): as
	// RunAsUser:RunAsGroup with runAsNonRoot and no capability at all, the workdir an emptyDir
	// (an image's own folder is root's, not the uid's to write).
	RunAsRoot bool
	// RunAsUser and RunAsGroup are the uid and gid of sandbox containers unless RunAsRoot.
	// Zero: DefaultRunAsUser (the first user of most images: ubuntu's "ubuntu", E2B's "user").
	RunAsUser, RunAsGroup int64
	// Resources are the sandbox container's requests and limits, as Kubernetes quantities
	// ("500m", "2Gi"). A zero field: its DefaultResources value; "0": none.
	Resources Resources
	// MaxLifetime is the longest a sandbox pod runs (activeDeadlineSeconds): past it the kubelet
	// stops it and its sandbox reads failed. Zero: DefaultMaxLifetime; negative: no bound.
	MaxLifetime time.Duration
	// Instance tells this control plane's pods apart from other control planes' in the same
	// namespace (label hangar.dev/instance); List sees only its own. Empty: "default".
	Instance string
	// DaemonVia is how the control plane reaches a pod's daemon: DaemonViaPodIP (at the pod's
	// IP: a control plane in the cluster) or DaemonViaPortForward (through the API server's
	// port-forward, from a loopback port per sandbox: a control plane outside the cluster).
	// Empty: DaemonViaPodIP.
	DaemonVia string
	// ReadyTimeout bounds how long Create waits for the pod to be Ready (its daemon answering
	// its readiness probe). Zero: 2m.
	ReadyTimeout time.Duration
	// Logger receives the provider's log lines. Nil: discarded.
	Logger *slog.Logger
}

// Resources are a sandbox container's requests and limits, as Kubernetes quantities.
type Resources struct {
	CPURequest, CPULimit                           string
	MemoryRequest, MemoryLimit                     string
	EphemeralStorageRequest, EphemeralStorageLimit string
}

// DefaultResources are what a sandbox container gets unless told: a small request, so that a
// node takes many idle sandboxes, and limits a busy agent (a build, a test run) rarely meets.
// The ephemeral-storage limit bounds the container's writable layer, its logs and the workdir's
// emptyDir together: past it the kubelet evicts the pod.
var DefaultResources = Resources{
	CPURequest: "100m", CPULimit: "2",
	MemoryRequest: "256Mi", MemoryLimit: "2Gi",
	EphemeralStorageRequest: "1Gi", EphemeralStorageLimit: "10Gi",
}

// DefaultRunAsUser is the uid (and gid) sandbox containers run as unless Config says otherwise.
const DefaultRunAsUser = 1000

// DefaultMaxLifetime is how long a sandbox pod may run unless Config says otherwise.
const DefaultMaxLifetime = 24 * time.Hour

// RootCapabilities are all a root sandbox container keeps (Config.RunAsRoot): those of the
// runtime's default set that root needs to work on files of any user (CHOWN, DAC_OVERRIDE,
// FOWNER, FSETID), that the daemon and a split turn's harness need to run commands as another
// uid and end them (SETUID, SETGID, KILL), and ports under 1024 (NET_BIND_SERVICE). Dropped
// from that default set: NET_RAW (raw sockets: forged packets, ARP spoofing on the node's
// bridge), MKNOD, SETPCAP, SETFCAP, SYS_CHROOT, AUDIT_WRITE.
var RootCapabilities = []string{"CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "SETGID", "SETUID", "NET_BIND_SERVICE"}

// CheckQuantity says why s is not a Kubernetes quantity ("250m", "2Gi", "0"), or nil.
func CheckQuantity(s string) error {
	if _, err := resource.ParseQuantity(s); err != nil {
		return fmt.Errorf("must be a Kubernetes quantity, like 500m, 2 or 4Gi (%v)", err)
	}
	return nil
}

// requirements turns r (filled in with DefaultResources) into the container's requirements,
// and refuses a request above its limit, which the API server would refuse for every pod.
func (r Resources) requirements() (corev1.ResourceRequirements, error) {
	req := corev1.ResourceRequirements{Requests: corev1.ResourceList{}, Limits: corev1.ResourceList{}}
	for _, f := range []struct {
		name       corev1.ResourceName
		what       string
		request    string
		limit      string
		defRequest string
		defLimit   string
	}{
		{corev1.ResourceCPU, "cpu", r.CPURequest, r.CPULimit, DefaultResources.CPURequest, DefaultResources.CPULimit},
		{corev1.ResourceMemory, "memory", r.MemoryRequest, r.MemoryLimit, DefaultResources.MemoryRequest, DefaultResources.MemoryLimit},
		{corev1.ResourceEphemeralStorage, "ephemeral-storage", r.EphemeralStorageRequest, r.EphemeralStorageLimit,
			DefaultResources.EphemeralStorageRequest, DefaultResources.EphemeralStorageLimit},
	} {
		var quantities [2]resource.Quantity
		for i, v := range []string{cmp.Or(f.request, f.defRequest), cmp.Or(f.limit, f.defLimit)} {
			q, err := resource.ParseQuantity(v)
			if err != nil {
				return req, fmt.Errorf("%s %q: %w", f.what, v, CheckQuantity(v))
			}
			if q.Sign() < 0 {
				return req, fmt.Errorf("%s %q: must not be negative", f.what, v)
			}
			quantities[i] = q
		}
		request, limit := quantities[0], quantities[1]
		if !request.IsZero() {
			req.Requests[f.name] = request
		}
		if !limit.IsZero() {
			req.Limits[f.name] = limit
		}
		if !request.IsZero() && !limit.IsZero() && request.Cmp(limit) > 0 {
			return req, fmt.Errorf("the %s request %s is above its limit %s", f.what, request.String(), limit.String())
		}
	}
	return req, nil
}

// Provider is the kubernetes provider. It is safe for concurrent use.
type Provider struct {
	cfg       Config
	resources corev1.ResourceRequirements // cfg.Resources, parsed
	kube      kubernetes.Interface
	rest      *rest.Config // nil in tests with a fake clientset: no exec then
	log       *slog.Logger

	http *http.Client // the clientset's, whose idle connections Close closes; nil in tests

	fwdMu     sync.Mutex
	fwd       map[string]*forward // by pod name (DaemonViaPortForward)
	fwdClosed bool
}

var _ provider.Provider = (*Provider)(nil)

// New returns a kubernetes provider over the cluster of cfg.Kubeconfig (or the one it runs
// in). It does not contact the cluster. Close it to end its port-forwards.
func New(cfg Config) (*Provider, error) {
	switch cfg.DaemonVia {
	case "", DaemonViaPodIP, DaemonViaPortForward:
	default:
		return nil, fmt.Errorf("kubernetes provider: daemon access %q is neither %q nor %q", cfg.DaemonVia, DaemonViaPodIP, DaemonViaPortForward)
	}
	if _, err := cfg.Resources.requirements(); err != nil {
		return nil, fmt.Errorf("kubernetes provider: sandbox resources: %w", err)
	}
	var rc *rest.Config
	var err error
	if cfg.Kubeconfig != "" {
		rc, err = clientcmd.BuildConfigFromFlags("", cfg.Kubeconfig)
	} else {
		rc, err = rest.InClusterConfig()
	}
	if err != nil {
		return nil, fmt.Errorf("load kubernetes config: %w", err)
	}
	hc, err := rest.HTTPClientFor(rc)
	if err != nil {
		return nil, fmt.Errorf("new kubernetes client: %w", err)
	}
	kube, err := kubernetes.NewForConfigAndClient(rc, hc)
	if err != nil {
		return nil, fmt.Errorf("new kubernetes client: %w", err)
	}
	p, err := newProvider(cfg, kube, rc)
	if err != nil {
		return nil, err
	}
	p.http = hc
	return p, nil
}

// newProvider fills in cfg's defaults; tests call it with a fake clientset.
func newProvider(cfg Config, kube kubernetes.Interface, rc *rest.Config) (*Provider, error) {
	if cfg.Namespace == "" {
		cfg.Namespace = "default"
	}
	if cfg.Image == "" {
		cfg.Image = "ubuntu:24.04"
	}
	if cfg.Workdir == "" {
		cfg.Workdir = "/workspace"
	}
	if cfg.HangarImage == "" {
		cfg.HangarImage = "ghcr.io/hangar-dev/hangar:latest"
	}
	if cfg.EnvdPath == "" {
		cfg.EnvdPath = "/usr/local/bin/" + provider.EnvdName
	}
	if cfg.DaemonVia == "" {
		cfg.DaemonVia = DaemonViaPodIP
	}
	if cfg.Instance == "" {
		cfg.Instance = "default"
	}
	if cfg.ReadyTimeout <= 0 {
		cfg.ReadyTimeout = 2 * time.Minute
	}
	if cfg.RunAsUser == 0 {
		cfg.RunAsUser = DefaultRunAsUser
	}
	if cfg.RunAsGroup == 0 {
		cfg.RunAsGroup = DefaultRunAsUser
	}
	if cfg.RunAsUser < 0 || cfg.RunAsGroup < 0 {
		return nil, fmt.Errorf("kubernetes provider: run as %d:%d: uid and gid must be positive (RunAsRoot runs as root)", cfg.RunAsUser, cfg.RunAsGroup)
	}
	if cfg.MaxLifetime == 0 {
		cfg.MaxLifetime = DefaultMaxLifetime
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	res, err := cfg.Resources.requirements()
	if err != nil {
		return nil, fmt.Errorf("kubernetes provider: sandbox resources: %w", err)
	}
	return &Provider{cfg: cfg, resources: res, kube: kube, rest: rc, log: cfg.Logger.With("provider", Name), fwd: map[string]*forward{}}, nil
}

// Name returns "kubernetes".
func (p *Provider) Name() string { return Name }

func (p *Provider) podName(sandbox string) string {
	if p.cfg.Instance == "default" {
		return "hangar-" + sandbox
	}
	return "hangar-" + p.cfg.Instance + "-" + sandbox
}

// Create makes the sandbox's pod (and, with a daemon, its token's Secret) and waits until the pod
// is Ready. A pod that cannot start (its image cannot be pulled, it crashes, it is not Ready in
// ReadyTimeout) is deleted and Create returns an error saying why.
func (p *Provider) Create(ctx context.Context, spec provider.Spec) (provider.Sandbox, error) {
	if err := names.CheckSandbox(spec.Name); err != nil {
		return provider.Sandbox{}, fmt.Errorf("create sandbox: %w", err)
	}
	workdir := spec.Workdir
	if workdir == "" {
		workdir = p.cfg.Workdir
	}
	if !path.IsAbs(workdir) {
		return provider.Sandbox{}, fmt.Errorf("create sandbox %s: workdir %q is not absolute", spec.Name, workdir)
	}
	name := p.podName(spec.Name)
	var tokenHash string
	if spec.Daemon {
		token, err := provider.NewAccessToken()
		if err != nil {
			return provider.Sandbox{}, fmt.Errorf("create sandbox %s: %w", spec.Name, err)
		}
		tokenHash = provider.DaemonTokenSHA256(token)
		secret := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: p.cfg.Namespace, Labels: p.labels(spec)},
			Data:       map[string][]byte{tokenKey: []byte(token)},
		}
		if _, err := p.kube.CoreV1().Secrets(p.cfg.Namespace).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
			return provider.Sandbox{}, fmt.Errorf("create sandbox %s: create secret: %w", spec.Name, apiErr(err))
		}
	}
	pod, err := p.kube.CoreV1().Pods(p.cfg.Namespace).Create(ctx, p.podSpec(spec, name, workdir, tokenHash), metav1.CreateOptions{})
	if err != nil {
		p.cleanup(spec.Name, name, spec.Daemon)
		return provider.Sandbox{}, fmt.Errorf("create sandbox %s: create pod: %w", spec.Name, apiErr(err))
	}
	if spec.Daemon {
		p.ownSecret(ctx, pod)
	}
	pod, err = p.waitReady(ctx, pod)
	if err != nil {
		p.cleanup(spec.Name, name, spec.Daemon)
		return provider.Sandbox{}, fmt.Errorf("create sandbox %s: %w", spec.Name, err)
	}
	return p.sandbox(ctx, pod), nil
}

func (p *Provider) labels(spec provider.Spec) map[string]string {
	return map[string]string{
		labelManagedBy: "hangar",
		labelInstance:  p.cfg.Instance,
		labelSandbox:   spec.Name,
		labelDaemon:    strconv.FormatBool(spec.Daemon),
	}
}

// podSpec is the sandbox's pod; with a daemon, one given tokenHash, the SHA-256 of its token.
// Every pod is locked down the same way (see securityContexts): seccomp RuntimeDefault, no
// privilege escalation, capabilities dropped, requests and limits, a bounded lifetime, no
// credentials to the cluster.
func (p *Provider) podSpec(spec provider.Spec, name, workdir, tokenHash string) *corev1.Pod {
	image := spec.Image
	if image == "" {
		image = p.cfg.Image
	}
	podSC, containerSC := p.securityContexts()
	env := make([]corev1.EnvVar, 0, len(spec.Env)+1)
	for _, k := range slices.Sorted(maps.Keys(spec.Env)) {
		env = append(env, corev1.EnvVar{Name: k, Value: spec.Env[k]})
	}
	c := corev1.Container{
		Name:            containerName,
		Image:           image,
		ImagePullPolicy: corev1.PullIfNotPresent,
		WorkingDir:      workdir,
		Env:             env,
		SecurityContext: containerSC,
		Resources:       *p.resources.DeepCopy(),
		Command:         []string{"/bin/sh", "-c", idleScript},
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Namespace:   p.cfg.Namespace,
			Labels:      p.labels(spec),
			Annotations: map[string]string{annotOwner: spec.Owner, annotWorkdir: workdir},
		},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			// A sandbox gets no credentials to the cluster it runs in.
			AutomountServiceAccountToken: ptr(false),
			EnableServiceLinks:           ptr(false),
			SecurityContext:              podSC,
		},
	}
	if p.cfg.MaxLifetime > 0 {
		pod.Spec.ActiveDeadlineSeconds = ptr(int64(max(p.cfg.MaxLifetime/time.Second, 1)))
	}
	if p.cfg.RuntimeClassName != "" {
		pod.Spec.RuntimeClassName = ptr(p.cfg.RuntimeClassName)
	}
	if !p.cfg.RunAsRoot {
		// The image's folder (or the one the runtime makes) is root's: the uid could not
		// write its own workdir. An emptyDir can be written by any uid; it counts against
		// the ephemeral-storage limit.
		vol := corev1.Volume{Name: workVolume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}
		if l, ok := p.resources.Limits[corev1.ResourceEphemeralStorage]; ok {
			vol.EmptyDir.SizeLimit = &l
		}
		pod.Spec.Volumes = append(pod.Spec.Volumes, vol)
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: workVolume, MountPath: workdir})
	}
	if spec.Daemon {
		bin := p.envdInPod()
		if !p.cfg.ImageHasDaemon {
			pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: binVolume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
			pod.Spec.InitContainers = []corev1.Container{{
				Name:            initName,
				Image:           p.cfg.HangarImage,
				ImagePullPolicy: corev1.PullIfNotPresent,
				Command:         []string{p.cfg.EnvdPath, "install", bin},
				VolumeMounts:    []corev1.VolumeMount{{Name: binVolume, MountPath: binDir}},
				// A copy needs no capability, and the sandbox's resources are more than it
				// needs (the pod's request is the larger of an init container's and the
				// containers' sum: the same costs nothing).
				SecurityContext: p.initSecurityContext(),
				Resources:       *p.resources.DeepCopy(),
			}}
			c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: binVolume, MountPath: binDir, ReadOnly: true})
		}
		c.Command = []string{bin, "envd", "--listen", "0.0.0.0:" + strconv.Itoa(DaemonPort), "--workdir", workdir}
		// The token's hash, not the token: the daemon's environment is readable by every
		// command in the pod. The token stays in the Secret, for hangar.
		c.Env = append(c.Env, corev1.EnvVar{Name: tokenHashEnv, Value: tokenHash})
		c.Ports = []corev1.ContainerPort{{Name: "envd", ContainerPort: DaemonPort, Protocol: corev1.ProtocolTCP}}
		c.ReadinessProbe = &corev1.Probe{
			ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/health", Port: intstr.FromInt32(DaemonPort)}},
			PeriodSeconds: 2,
		}
	}
	pod.Spec.Containers = []corev1.Container{c}
	return pod
}

// securityContexts are a sandbox pod's and its container's: seccomp's RuntimeDefault profile
// (the runtime's own is Unconfined on most clusters), no privilege escalation (setuid
// binaries, file capabilities), and either a non-root uid with no capability at all (the Pod
// Security Standard "restricted") or root with RootCapabilities only ("baseline").
func (p *Provider) securityContexts() (*corev1.PodSecurityContext, *corev1.SecurityContext) {
	podSC := &corev1.PodSecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}}
	c := &corev1.SecurityContext{AllowPrivilegeEscalation: ptr(false), Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}}
	if p.cfg.RunAsRoot {
		podSC.RunAsNonRoot, podSC.RunAsUser, podSC.RunAsGroup = ptr(false), ptr(int64(0)), ptr(int64(0))
		for _, name := range RootCapabilities {
			c.Capabilities.Add = append(c.Capabilities.Add, corev1.Capability(name))
		}
		return podSC, c
	}
	podSC.RunAsNonRoot, podSC.RunAsUser, podSC.RunAsGroup = ptr(true), ptr(p.cfg.RunAsUser), ptr(p.cfg.RunAsGroup)
	podSC.FSGroup = ptr(p.cfg.RunAsGroup)
	return podSC, c
}

// initSecurityContext is the install init container's: no capability, as root or not.
func (p *Provider) initSecurityContext() *corev1.SecurityContext {
	return &corev1.SecurityContext{AllowPrivilegeEscalation: ptr(false), Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}}
}

// ownSecret makes the pod the owner of its token's Secret, so the cluster deletes the Secret
// with the pod even if Destroy never runs. A failure is only logged: Destroy deletes both.
func (p *Provider) ownSecret(ctx context.Context, pod *corev1.Pod) {
	secrets := p.kube.CoreV1().Secrets(p.cfg.Namespace)
	s, err := secrets.Get(ctx, pod.Name, metav1.GetOptions{})
	if err == nil {
		s.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID}}
		_, err = secrets.Update(ctx, s, metav1.UpdateOptions{})
	}
	if err != nil {
		p.log.Warn("make pod own its secret", "pod", pod.Name, "err", err)
	}
}

// cleanup deletes what a failed Create made; failures are only logged, since the error that led
// here is the one to report.
func (p *Provider) cleanup(sandbox, name string, daemon bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := p.delete(ctx, name, daemon, 0); err != nil && !errors.Is(err, provider.ErrNotFound) {
		p.log.Error("delete pod after failed create", "sandbox", sandbox, "pod", name, "err", err)
	}
}

// delete deletes the pod name (and its Secret, with a daemon) after a grace period of grace
// seconds: 0 removes the object at once, while the kubelet may still be stopping its
// containers.
func (p *Provider) delete(ctx context.Context, name string, daemon bool, grace int64) error {
	err := p.kube.CoreV1().Pods(p.cfg.Namespace).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: ptr(grace)})
	if daemon {
		if serr := p.kube.CoreV1().Secrets(p.cfg.Namespace).Delete(ctx, name, metav1.DeleteOptions{}); serr != nil && !apierrors.IsNotFound(serr) && err == nil {
			err = serr
		}
	}
	if err != nil {
		return apiErr(err)
	}
	return nil
}

// waitReady watches the pod until it is Ready, cannot start, or ReadyTimeout passes.
func (p *Provider) waitReady(ctx context.Context, pod *corev1.Pod) (*corev1.Pod, error) {
	ctx, cancel := context.WithTimeout(ctx, p.cfg.ReadyTimeout)
	defer cancel()
	pods := p.kube.CoreV1().Pods(p.cfg.Namespace)
	for {
		// Watch first, then get: a change between the two is then seen either way.
		w, err := pods.Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + pod.Name})
		if err != nil {
			return nil, p.notReady(ctx, pod, fmt.Errorf("watch pod %s: %w", pod.Name, apiErr(err)))
		}
		cur, err := pods.Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			w.Stop()
			return nil, p.notReady(ctx, pod, fmt.Errorf("get pod %s: %w", pod.Name, apiErr(err)))
		}
		pod = cur
		done, err := readiness(pod)
	events:
		for !done && err == nil {
			var ev watch.Event
			var ok bool
			select {
			case ev, ok = <-w.ResultChan():
			case <-ctx.Done():
			}
			if !ok {
				break events // the watch ended (a server timeout), or ctx did
			}
			switch ev.Type {
			case watch.Deleted:
				err = fmt.Errorf("pod %s was deleted while starting", pod.Name)
			case watch.Added, watch.Modified:
				if cur, ok := ev.Object.(*corev1.Pod); ok && cur.Name == pod.Name {
					pod = cur
					done, err = readiness(pod)
				}
			}
		}
		w.Stop()
		if done || err != nil {
			return pod, err
		}
		if ctx.Err() != nil {
			return nil, p.notReady(ctx, pod, ctx.Err())
		}
	}
}

// notReady is the error for a pod that did not become Ready, with what it last reported.
func (p *Provider) notReady(ctx context.Context, pod *corev1.Pod, err error) error {
	if errors.Is(err, context.DeadlineExceeded) && ctx.Err() != nil {
		return fmt.Errorf("pod %s/%s was not ready in %s (%s): %w", p.cfg.Namespace, pod.Name, p.cfg.ReadyTimeout, describe(pod), err)
	}
	return err
}

// readiness reports whether the pod is Ready, or an error when it can no longer become Ready.
func readiness(pod *corev1.Pod) (bool, error) {
	if pod.DeletionTimestamp != nil {
		return false, fmt.Errorf("pod %s is being deleted", pod.Name)
	}
	switch pod.Status.Phase {
	case corev1.PodFailed, corev1.PodSucceeded:
		if d := pod.Spec.ActiveDeadlineSeconds; d != nil && pod.Status.Reason == "DeadlineExceeded" {
			return false, fmt.Errorf("pod %s reached the sandboxes' lifetime of %s (its activeDeadlineSeconds) and was stopped: %s",
				pod.Name, time.Duration(*d)*time.Second, describe(pod))
		}
		if pod.Status.Reason == "Evicted" {
			// Past its ephemeral-storage limit (or its workdir's sizeLimit), or its node short
			// of memory or disk: the kubelet's message says which.
			return false, fmt.Errorf("pod %s was evicted by its node: %s", pod.Name, strings.TrimSpace(pod.Status.Message))
		}
		return false, fmt.Errorf("pod %s stopped: %s", pod.Name, describe(pod))
	}
	if reason, image, msg, ok := stuck(pod); ok {
		err := fmt.Errorf("pod %s cannot start: %s %s: %s", pod.Name, image, reason, msg)
		if reason == "ErrImagePull" || reason == "ImagePullBackOff" || reason == "InvalidImageName" {
			return false, fmt.Errorf("%w: image %s cannot be pulled (%s: %s); push it to a registry the cluster can reach, or fix its name",
				provider.ErrImageMissing, image, reason, msg)
		}
		return false, err
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue && pod.Status.PodIP != "" {
			return true, nil
		}
	}
	return false, nil
}

// stuck finds a container (init or not) waiting for a reason it will not get over by itself.
func stuck(pod *corev1.Pod) (reason, image, msg string, ok bool) {
	statuses := append(slices.Clone(pod.Status.InitContainerStatuses), pod.Status.ContainerStatuses...)
	for _, s := range statuses {
		w := s.State.Waiting
		if w == nil {
			continue
		}
		switch w.Reason {
		case "ErrImagePull", "ImagePullBackOff", "InvalidImageName", "CreateContainerConfigError",
			"CreateContainerError", "CrashLoopBackOff", "RunContainerError":
			return w.Reason, s.Image, w.Message, true
		}
	}
	return "", "", "", false
}

// describe sums up a pod's status for a person.
func describe(pod *corev1.Pod) string {
	parts := []string{"phase " + string(pod.Status.Phase)}
	if pod.Status.Reason != "" || pod.Status.Message != "" {
		parts = append(parts, strings.TrimSpace(pod.Status.Reason+" "+pod.Status.Message))
	}
	for _, s := range append(slices.Clone(pod.Status.InitContainerStatuses), pod.Status.ContainerStatuses...) {
		switch {
		case s.State.Waiting != nil:
			parts = append(parts, fmt.Sprintf("container %s waiting: %s %s", s.Name, s.State.Waiting.Reason, s.State.Waiting.Message))
		case s.State.Terminated != nil:
			t := s.State.Terminated
			parts = append(parts, fmt.Sprintf("container %s exited with code %d: %s %s", s.Name, t.ExitCode, t.Reason, t.Message))
		}
	}
	for _, c := range pod.Status.Conditions {
		if c.Status != corev1.ConditionTrue && c.Message != "" {
			parts = append(parts, fmt.Sprintf("%s: %s", c.Type, c.Message))
		}
	}
	return strings.Join(parts, "; ")
}

// Get reads the sandbox's pod. Its daemon counts as answering when the pod is Ready: the kubelet
// probes /health; the control plane does not.
func (p *Provider) Get(ctx context.Context, sb provider.Sandbox) (provider.Sandbox, error) {
	pod, err := p.pod(ctx, sb)
	if err != nil {
		return provider.Sandbox{}, fmt.Errorf("get sandbox %s: %w", sb.Name, err)
	}
	return p.sandbox(ctx, pod), nil
}

// pod gets the sandbox's pod and makes sure it is this instance's.
func (p *Provider) pod(ctx context.Context, sb provider.Sandbox) (*corev1.Pod, error) {
	name := sb.ID
	if name == "" {
		name = p.podName(sb.Name)
	}
	pod, err := p.kube.CoreV1().Pods(p.cfg.Namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		if apierrors.IsNotFound(err) {
			p.endForward(name)
		}
		return nil, fmt.Errorf("get pod %s: %w", name, apiErr(err))
	}
	if pod.Labels[labelInstance] != p.cfg.Instance || pod.Labels[labelSandbox] != sb.Name {
		return nil, fmt.Errorf("pod %s is not this control plane's sandbox %s: %w", name, sb.Name, provider.ErrNotFound)
	}
	return pod, nil
}

// List returns the sandboxes of this instance's pods.
func (p *Provider) List(ctx context.Context) ([]provider.Sandbox, error) {
	list, err := p.kube.CoreV1().Pods(p.cfg.Namespace).List(ctx, metav1.ListOptions{
		LabelSelector: labelManagedBy + "=hangar," + labelInstance + "=" + p.cfg.Instance,
	})
	if err != nil {
		return nil, fmt.Errorf("list sandboxes: %w", apiErr(err))
	}
	out := make([]provider.Sandbox, 0, len(list.Items))
	for i := range list.Items {
		out = append(out, p.sandbox(ctx, &list.Items[i]))
	}
	return out, nil
}

// Destroy deletes the sandbox's pod and its token's Secret, and returns once the pod is gone:
// its containers stopped (SIGTERM, SIGKILL a second later), so its daemon no longer answers.
// (A grace period of 0 would remove the pod from the API at once, its containers still
// running for a while.)
func (p *Provider) Destroy(ctx context.Context, sb provider.Sandbox) error {
	pod, err := p.pod(ctx, sb)
	if err != nil {
		return fmt.Errorf("destroy sandbox %s: %w", sb.Name, err)
	}
	p.endForward(pod.Name)
	if err := p.delete(ctx, pod.Name, pod.Labels[labelDaemon] == "true", 1); err != nil {
		return fmt.Errorf("destroy sandbox %s: %w", sb.Name, err)
	}
	if err := p.waitGone(ctx, pod); err != nil {
		return fmt.Errorf("destroy sandbox %s: %w", sb.Name, err)
	}
	return nil
}

// waitGone watches pod until it is deleted (or another pod has its name).
func (p *Provider) waitGone(ctx context.Context, pod *corev1.Pod) error {
	pods := p.kube.CoreV1().Pods(p.cfg.Namespace)
	for {
		// Watch first, then get: a deletion between the two is then seen either way.
		w, err := pods.Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + pod.Name})
		if err != nil {
			return fmt.Errorf("watch pod %s: %w", pod.Name, apiErr(err))
		}
		cur, err := pods.Get(ctx, pod.Name, metav1.GetOptions{})
		gone := apierrors.IsNotFound(err) || (err == nil && cur.UID != pod.UID)
		for !gone && err == nil {
			select {
			case ev, ok := <-w.ResultChan():
				if !ok {
					err = errWatchEnded
				} else if ev.Type == watch.Deleted {
					gone = true
				}
			case <-ctx.Done():
				err = fmt.Errorf("pod %s still stopping: %w", pod.Name, ctx.Err())
			}
		}
		w.Stop()
		switch {
		case gone:
			return nil
		case errors.Is(err, errWatchEnded):
			continue // a server timeout: watch again
		case err != nil:
			return fmt.Errorf("wait for pod %s to go: %w", pod.Name, apiErr(err))
		}
	}
}

var errWatchEnded = errors.New("the watch ended")

// Pause is not possible: a pod cannot be frozen.
func (p *Provider) Pause(context.Context, provider.Sandbox) (provider.Sandbox, error) {
	return provider.Sandbox{}, fmt.Errorf("pause sandbox: kubernetes pods cannot be paused: %w", provider.ErrUnsupported)
}

// Resume is not possible: a pod cannot be frozen.
func (p *Provider) Resume(context.Context, provider.Sandbox) (provider.Sandbox, error) {
	return provider.Sandbox{}, fmt.Errorf("resume sandbox: kubernetes pods cannot be paused: %w", provider.ErrUnsupported)
}

// envdInPod is where hangar-envd is in a sandbox pod with a daemon: copied by the init
// container into binDir, or EnvdPath when the image has it.
func (p *Provider) envdInPod() string {
	if p.cfg.ImageHasDaemon {
		return p.cfg.EnvdPath
	}
	return binDir + "/" + provider.EnvdName
}

// sandbox is the provider's view of a pod.
func (p *Provider) sandbox(ctx context.Context, pod *corev1.Pod) provider.Sandbox {
	sb := provider.Sandbox{
		Name:     pod.Labels[labelSandbox],
		Provider: Name,
		ID:       pod.Name,
		State:    provider.StateCreating,
		Workdir:  pod.Annotations[annotWorkdir],
		Data:     map[string]string{"namespace": pod.Namespace, "pod": pod.Name, "uid": string(pod.UID)},
	}
	if pod.Spec.NodeName != "" {
		sb.Data["node"] = pod.Spec.NodeName
	}
	if pod.Labels[labelDaemon] == "true" {
		sb.Data["harness"] = p.envdInPod() // the turns' harness is hangar-envd's verb
	}
	ready, err := readiness(pod)
	if pod.Labels[labelDaemon] == "true" && pod.Status.PodIP != "" {
		sb.Daemon = p.daemon(ctx, pod, ready)
	}
	switch {
	case pod.DeletionTimestamp != nil:
		sb.State = provider.StateDestroyed
	case err != nil:
		sb.State, sb.Reason = provider.StateFailed, err.Error()
	case ready:
		sb.State = provider.StateRunning
	case pod.Status.Phase == corev1.PodRunning:
		// Running but not Ready: the daemon stopped answering its readiness probe.
		sb.State = provider.StateFailed
		sb.Reason = "the pod runs but is not ready (its daemon does not answer /health): " + describe(pod)
	}
	return sb
}

// daemon is how to reach the pod's daemon (nil when it cannot be reached now).
func (p *Provider) daemon(ctx context.Context, pod *corev1.Pod, ready bool) *provider.Daemon {
	url := "http://" + hostPort(pod.Status.PodIP)
	if p.cfg.DaemonVia == DaemonViaPortForward {
		if !ready || pod.DeletionTimestamp != nil {
			return nil // no port-forward to a pod that is not serving
		}
		var err error
		if url, err = p.forwardedURL(ctx, pod); err != nil {
			p.log.Warn("reach a sandbox's daemon", "pod", pod.Name, "err", err)
			return nil
		}
	}
	return &provider.Daemon{URL: url, AccessToken: p.token(ctx, pod.Name)}
}

// token reads the daemon's access token from the pod's Secret; "" when it cannot.
func (p *Provider) token(ctx context.Context, name string) string {
	s, err := p.kube.CoreV1().Secrets(p.cfg.Namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		p.log.Warn("read sandbox token", "secret", name, "err", err)
		return ""
	}
	return string(s.Data[tokenKey])
}

func hostPort(ip string) string {
	if strings.Contains(ip, ":") {
		return "[" + ip + "]:" + strconv.Itoa(DaemonPort)
	}
	return ip + ":" + strconv.Itoa(DaemonPort)
}

// apiErr marks an API error with the provider sentinel it means.
func apiErr(err error) error {
	switch {
	case apierrors.IsNotFound(err):
		return fmt.Errorf("%w: %w", provider.ErrNotFound, err)
	case apierrors.IsServiceUnavailable(err), apierrors.IsServerTimeout(err), apierrors.IsTimeout(err):
		return fmt.Errorf("%w: %w", provider.ErrUnavailable, err)
	}
	var netErr interface{ Timeout() bool }
	if errors.As(err, &netErr) || strings.Contains(err.Error(), "connection refused") {
		return fmt.Errorf("%w: %w", provider.ErrUnavailable, err)
	}
	return err
}

func ptr[T any](v T) *T { return &v }
