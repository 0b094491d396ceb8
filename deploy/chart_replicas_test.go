package deploy_test

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
)

// deployment is the value set's one Deployment.
func deployment(t *testing.T, objs []object) appsv1.Deployment {
	t.Helper()
	deps := ofKind(objs, "Deployment")
	if len(deps) != 1 {
		t.Fatalf("%d Deployments, want 1", len(deps))
	}
	var d appsv1.Deployment
	deps[0].into(t, &d)
	return d
}

// TestChartRollout: a terminating pod sleeps before SIGTERM (Kubernetes' sleep action: the image
// has no shell), and Kubernetes waits for the sleep, hangar's shutdown-grace and the handover
// before it kills the pod; GKE drains the backend as long.
func TestChartRollout(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		set          string
		sleep, grace int64
	}{
		{"", 30, 30 + 30 + 15},
		{"replicas", 30, 30 + 90 + 15}, // config.shutdown-grace: 1m30s
		{"autoscaling", 20, 90},        // terminationGracePeriodSeconds given
	} {
		objs := render(t, tc.set)
		d := deployment(t, objs)
		ps := d.Spec.Template.Spec
		c := ps.Containers[0]
		if c.Lifecycle == nil || c.Lifecycle.PreStop == nil || c.Lifecycle.PreStop.Sleep == nil || c.Lifecycle.PreStop.Exec != nil {
			t.Errorf("set %q: want a preStop sleep action, got %+v", tc.set, c.Lifecycle)
		} else if got := c.Lifecycle.PreStop.Sleep.Seconds; got != tc.sleep {
			t.Errorf("set %q: preStop sleeps %d s, want %d", tc.set, got, tc.sleep)
		}
		if got := ps.TerminationGracePeriodSeconds; got == nil || *got != tc.grace {
			t.Errorf("set %q: terminationGracePeriodSeconds = %v, want %d", tc.set, d.Spec.Template.Spec.TerminationGracePeriodSeconds, tc.grace)
		}
		for _, o := range ofKind(objs, "GCPBackendPolicy") {
			spec := o["spec"].(map[string]any)["default"].(map[string]any)
			if got := spec["connectionDraining"].(map[string]any)["drainingTimeoutSec"]; fmt.Sprint(got) != fmt.Sprint(tc.grace) {
				t.Errorf("set %q: the GCPBackendPolicy drains for %v s, want %d", tc.set, got, tc.grace)
			}
		}
	}
	out, err := helm(t, "template", "rt", chartDir, "--set", "lifecycle.preStopSleepSeconds=0")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out, "preStop") || !strings.Contains(out, "terminationGracePeriodSeconds: 45") {
		t.Errorf("preStopSleepSeconds=0: want no preStop and 30+15 s of grace")
	}
}

// TestChartReplicated: with more than one replica (or an autoscaler) the chart makes a
// PodDisruptionBudget and spreads the pods over zones and nodes, on its own; with one, neither.
func TestChartReplicated(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		set        string
		replicated bool
	}{{"", false}, {"replicas", true}, {"autoscaling", true}} {
		objs := render(t, tc.set)
		d := deployment(t, objs)
		pdbs := ofKind(objs, "PodDisruptionBudget")
		spread := d.Spec.Template.Spec.TopologySpreadConstraints
		if !tc.replicated {
			if len(pdbs) != 0 || len(spread) != 0 {
				t.Errorf("set %q: one replica, yet %d PodDisruptionBudgets and %d spread constraints", tc.set, len(pdbs), len(spread))
			}
			continue
		}
		if len(pdbs) != 1 {
			t.Fatalf("set %q: %d PodDisruptionBudgets, want 1", tc.set, len(pdbs))
		}
		var pdb policyv1.PodDisruptionBudget
		pdbs[0].into(t, &pdb)
		if pdb.Spec.MaxUnavailable == nil || pdb.Spec.MaxUnavailable.IntValue() != 1 || pdb.Spec.Selector.MatchLabels["app.kubernetes.io/instance"] != "rt" {
			t.Errorf("set %q: the PodDisruptionBudget must let one of this release's pods go at a time: %+v", tc.set, pdb.Spec)
		}
		var keys []string
		for _, c := range spread {
			keys = append(keys, c.TopologyKey)
			if c.MaxSkew != 1 || c.WhenUnsatisfiable != corev1.ScheduleAnyway || c.LabelSelector == nil ||
				c.LabelSelector.MatchLabels["app.kubernetes.io/instance"] != "rt" || len(c.MatchLabelKeys) != 1 || c.MatchLabelKeys[0] != "pod-template-hash" {
				t.Errorf("set %q: spread constraint %+v: want maxSkew 1, ScheduleAnyway, this release's pods, per ReplicaSet", tc.set, c)
			}
		}
		if strings.Join(keys, " ") != "topology.kubernetes.io/zone kubernetes.io/hostname" {
			t.Errorf("set %q: spread over %v, want zones and nodes", tc.set, keys)
		}
	}

	objs := render(t, "autoscaling")
	if d := deployment(t, objs); d.Spec.Replicas != nil {
		t.Errorf("with an autoscaler the Deployment must not set replicas (each upgrade would reset it): %d", *d.Spec.Replicas)
	}
	hpas := ofKind(objs, "HorizontalPodAutoscaler")
	if len(hpas) != 1 {
		t.Fatalf("%d HorizontalPodAutoscalers, want 1", len(hpas))
	}
	var hpa autoscalingv2.HorizontalPodAutoscaler
	hpas[0].into(t, &hpa)
	if hpa.Spec.MinReplicas == nil || *hpa.Spec.MinReplicas != 2 || hpa.Spec.MaxReplicas != 5 || hpa.Spec.ScaleTargetRef.Name != "rt-hangar" ||
		len(hpa.Spec.Metrics) != 1 || hpa.Spec.Metrics[0].Resource.Name != corev1.ResourceCPU || *hpa.Spec.Metrics[0].Resource.Target.AverageUtilization != 70 {
		t.Errorf("the autoscaler must scale rt-hangar between 2 and 5 on 70%% CPU: %+v", hpa.Spec)
	}
	if n := len(ofKind(render(t, ""), "HorizontalPodAutoscaler")); n != 0 {
		t.Errorf("%d autoscalers by default, want none", n)
	}
}

// TestChartSessionAffinity: off by default (any replica serves a session); asked for, kube-proxy
// and GKE's load balancer keep a client on one pod.
func TestChartSessionAffinity(t *testing.T) {
	t.Parallel()
	service := func(set string) corev1.Service {
		var s corev1.Service
		ofKind(render(t, set), "Service")[0].into(t, &s)
		return s
	}
	if s := service("gateway"); s.Spec.SessionAffinity != "" {
		t.Errorf("session affinity by default: %q", s.Spec.SessionAffinity)
	}
	if p := ofKind(render(t, "gateway"), "GCPBackendPolicy")[0]; p["spec"].(map[string]any)["default"].(map[string]any)["sessionAffinity"] != nil {
		t.Errorf("the GCPBackendPolicy asks for session affinity by default")
	}
	s := service("autoscaling")
	if s.Spec.SessionAffinity != corev1.ServiceAffinityClientIP || s.Spec.SessionAffinityConfig == nil || *s.Spec.SessionAffinityConfig.ClientIP.TimeoutSeconds != 10800 {
		t.Errorf("service.sessionAffinity: ClientIP did not reach the Service: %+v", s.Spec)
	}
	p := ofKind(render(t, "autoscaling"), "GCPBackendPolicy")[0]
	if got := p["spec"].(map[string]any)["default"].(map[string]any)["sessionAffinity"]; got == nil || got.(map[string]any)["type"] != "CLIENT_IP" {
		t.Errorf("gke.sessionAffinity: CLIENT_IP did not reach the GCPBackendPolicy: %v", got)
	}
}

// TestChartExtraObjects: each of extraObjects is rendered, an object or a string, through tpl.
func TestChartExtraObjects(t *testing.T) {
	t.Parallel()
	objs := render(t, "autoscaling")
	found := map[string]string{}
	for _, o := range objs {
		found[o.kind()+"/"+o.name()] = o.namespace()
	}
	for _, want := range []string{"ConfigMap/rt-extra", "ServiceAccount/rt-hangar-extra"} {
		if ns, ok := found[want]; !ok || ns != "hangar" {
			t.Errorf("extraObjects: %s in %q, want it in hangar (have %v)", want, ns, found)
		}
	}
}

// TestChartMetricsPort: metrics.port moves /metrics to a port of its own, and the ServiceMonitor
// follows it; by default it stays on the API's port.
func TestChartMetricsPort(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ set, listen, port string }{
		{"servicemonitor", "", "http"},
		{"autoscaling", "0.0.0.0:9090", "metrics"},
	} {
		objs := render(t, tc.set)
		var cm corev1.ConfigMap
		ofKind(objs, "ConfigMap")[0].into(t, &cm)
		if got := cm.Data["HANGAR_METRICS_LISTEN"]; got != tc.listen {
			t.Errorf("set %q: HANGAR_METRICS_LISTEN=%q, want %q", tc.set, got, tc.listen)
		}
		sm := ofKind(objs, "ServiceMonitor")[0]["spec"].(map[string]any)["endpoints"].([]any)[0].(map[string]any)
		if sm["port"] != tc.port {
			t.Errorf("set %q: the ServiceMonitor scrapes port %v, want %s", tc.set, sm["port"], tc.port)
		}
		if tc.port == "http" {
			continue
		}
		d := deployment(t, objs)
		var svc corev1.Service
		ofKind(objs, "Service")[0].into(t, &svc)
		if ports := d.Spec.Template.Spec.Containers[0].Ports; len(ports) != 2 || ports[1].Name != "metrics" || ports[1].ContainerPort != 9090 {
			t.Errorf("set %q: the container's ports %+v lack metrics 9090", tc.set, ports)
		}
		if len(svc.Spec.Ports) != 2 || svc.Spec.Ports[1].Name != "metrics" || svc.Spec.Ports[1].TargetPort.String() != "metrics" {
			t.Errorf("set %q: the Service's ports %+v lack metrics", tc.set, svc.Spec.Ports)
		}
	}
}

// TestChartSecretStable: the chart's Secret outlives an uninstall, and the pods' checksum follows
// what they read from it: a HANGAR_SECRET that changes (as a generated one does in a render
// without the cluster, e.g. Argo CD's) rolls the pods, so replicas never hold different keys.
func TestChartSecretStable(t *testing.T) {
	t.Parallel()
	secret := func(objs []object) (key, checksum string) {
		var s corev1.Secret
		ofKind(objs, "Secret")[0].into(t, &s)
		if s.Annotations["helm.sh/resource-policy"] != "keep" {
			t.Errorf("the chart's Secret is not kept by helm uninstall: %v", s.Annotations)
		}
		return string(s.Data["hangar-secret"]), deployment(t, objs).Spec.Template.Annotations["checksum/secret"]
	}
	read := func(args ...string) (key, checksum string) {
		out, err := helm(t, append([]string{"template", "rt", chartDir, "--namespace", "hangar"}, args...)...)
		if err != nil {
			t.Fatal(err)
		}
		return secret(parseManifests(t, strings.Join(args, " "), out))
	}
	// The defaults' shared render is one render without the cluster; read() another.
	k1, c1 := secret(render(t, ""))
	// The checksum is of the very Secret rendered beside it (its one key here), not of another
	// random one.
	if sum := sha256.Sum256(fmt.Appendf(nil, "hangar-secret: %q", base64.StdEncoding.EncodeToString([]byte(k1)))); hex.EncodeToString(sum[:]) != c1 {
		t.Errorf("checksum/secret %s is not the digest of the Secret rendered with it", c1)
	}
	k2, c2 := read()
	if k1 == k2 || c1 == c2 {
		t.Errorf("two renders without the cluster: keys differ %v, checksums differ %v; want both to differ", k1 != k2, c1 != c2)
	}
	given := "--set=secret.hangarSecret=render-test-hangar-secret-0123456789abcdef"
	k3, c3 := read(given)
	k4, c4 := read(given)
	if k3 != k4 || c3 != c4 || k3 != "render-test-hangar-secret-0123456789abcdef" {
		t.Errorf("a given secret.hangarSecret must render the same Secret and checksum every time")
	}
	if _, c5 := read(given, "--set=secret.adminToken=render-test-admin-token-0123456789abcdefgh"); c5 == c3 {
		t.Errorf("a new admin token (the tokens file the pods mount) does not change the pods' checksum")
	}
}
