package deploy_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/yaml"
)

const chartDir = "helm/hangar"

// valueSets are the value files the chart is rendered with (beside the defaults).
var valueSets = []string{"ingress", "gateway", "existing-secret", "replicas", "servicemonitor", "gvisor", "autoscaling"}

// object is one rendered manifest.
type object map[string]any

func (o object) kind() string { s, _ := o["kind"].(string); return s }

func (o object) name() string {
	m, _ := o["metadata"].(map[string]any)
	s, _ := m["name"].(string)
	return s
}

func (o object) namespace() string {
	m, _ := o["metadata"].(map[string]any)
	s, _ := m["namespace"].(string)
	return s
}

func (o object) annotations() map[string]any {
	m, _ := o["metadata"].(map[string]any)
	a, _ := m["annotations"].(map[string]any)
	return a
}

// into converts o into a typed Kubernetes object.
func (o object) into(t *testing.T, v any) {
	t.Helper()
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o, v); err != nil {
		t.Fatalf("%s %s: %v", o.kind(), o.name(), err)
	}
}

// helm runs the chart's helm with args and returns its stdout, or its error with stderr.
func helm(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd := exec.Command(tool(t, "helm", "HANGAR_HELM"), args...)
	cmd.Stdout, cmd.Stderr = &out, &errOut
	// helm keeps caches and config under HOME; a test's own temp dirs keep the machine clean.
	home := t.TempDir()
	cmd.Env = append(os.Environ(), "HOME="+home, "HELM_CACHE_HOME="+home+"/cache", "HELM_CONFIG_HOME="+home+"/config", "HELM_DATA_HOME="+home+"/data")
	if err := cmd.Run(); err != nil {
		return out.String(), errors.New(strings.TrimSpace(errOut.String()))
	}
	return out.String(), nil
}

// rendered keeps each value set's manifests: the tests read them, never change them.
var rendered sync.Map // set name -> []object

// render runs helm template with the value file of set ("" for the defaults), once per set,
// and parses what it prints, the test hook included.
func render(t *testing.T, set string) []object {
	t.Helper()
	if objs, ok := rendered.Load(set); ok {
		return objs.([]object)
	}
	a := []string{"template", "rt", chartDir, "--namespace", "hangar"}
	if set != "" {
		a = append(a, "-f", filepath.Join("testdata", "values-"+set+".yaml"))
	}
	out, err := helm(t, a...)
	if err != nil {
		t.Fatalf("helm template (%s): %v", set, err)
	}
	objs := parseManifests(t, set, out)
	if len(objs) == 0 {
		t.Fatalf("helm template (%s) rendered nothing", set)
	}
	rendered.Store(set, objs)
	return objs
}

// parseManifests parses what helm template printed for set.
func parseManifests(t *testing.T, set, out string) []object {
	t.Helper()
	var objs []object
	dec := yaml.NewYAMLOrJSONDecoder(strings.NewReader(out), 4096)
	for {
		var o object
		if err := dec.Decode(&o); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("parse the manifests of %q: %v", set, err)
		}
		if o != nil {
			objs = append(objs, o)
		}
	}
	return objs
}

func ofKind(objs []object, kind string) []object {
	var out []object
	for _, o := range objs {
		if o.kind() == kind {
			out = append(out, o)
		}
	}
	return out
}

// eachSet runs f over the defaults and every value set.
func eachSet(t *testing.T, f func(t *testing.T, set string, objs []object)) {
	for _, set := range append([]string{""}, valueSets...) {
		name := set
		if name == "" {
			name = "defaults"
		}
		t.Run(name, func(t *testing.T) { f(t, set, render(t, set)) })
	}
}

func TestChartLint(t *testing.T) {
	t.Parallel()
	for _, set := range append([]string{""}, valueSets...) {
		args := []string{"lint", "--strict", chartDir}
		if set != "" {
			args = append(args, "-f", filepath.Join("testdata", "values-"+set+".yaml"))
		}
		if out, err := helm(t, args...); err != nil {
			t.Errorf("helm lint (%q): %v\n%s", set, err, out)
		}
	}
}

// typed are the Kubernetes kinds the chart renders, each checked field by field against its Go
// type: a misspelt field (readinesProbe) would otherwise be dropped by the API server, or
// refused only at install.
var typed = map[string]func() any{
	"Deployment": func() any { return &appsv1.Deployment{} }, "Service": func() any { return &corev1.Service{} },
	"ServiceAccount": func() any { return &corev1.ServiceAccount{} }, "ConfigMap": func() any { return &corev1.ConfigMap{} },
	"Secret": func() any { return &corev1.Secret{} }, "Pod": func() any { return &corev1.Pod{} },
	"Namespace": func() any { return &corev1.Namespace{} }, "PersistentVolumeClaim": func() any { return &corev1.PersistentVolumeClaim{} },
	"Role": func() any { return &rbacv1.Role{} }, "RoleBinding": func() any { return &rbacv1.RoleBinding{} },
	"NetworkPolicy": func() any { return &networkingv1.NetworkPolicy{} }, "Ingress": func() any { return &networkingv1.Ingress{} },
	"PodDisruptionBudget":     func() any { return &policyv1.PodDisruptionBudget{} },
	"HorizontalPodAutoscaler": func() any { return &autoscalingv2.HorizontalPodAutoscaler{} },
}

// crds are the kinds of other projects' CustomResourceDefinitions the chart may render.
var crds = []string{"HTTPRoute", "ServiceMonitor", "BackendConfig", "GCPBackendPolicy", "HealthCheckPolicy"}

func TestChartManifestsAreValid(t *testing.T) {
	t.Parallel()
	eachSet(t, func(t *testing.T, _ string, objs []object) {
		for _, o := range objs {
			newObj, ok := typed[o.kind()]
			if !ok {
				if !slices.Contains(crds, o.kind()) {
					t.Errorf("%s %s: a kind this test does not know", o.kind(), o.name())
				}
				continue
			}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(o, newObj(), true); err != nil {
				t.Errorf("%s %s: %v", o.kind(), o.name(), err)
			}
			if o.namespace() == "" && o.kind() != "Namespace" {
				t.Errorf("%s %s has no namespace", o.kind(), o.name())
			}
		}
	})
}

// checkContainer holds a container to the chart's rules; probes are asked of long-running
// containers only (a helm test pod runs once).
func checkContainer(t *testing.T, where string, c corev1.Container, probes bool) {
	t.Helper()
	if probes && (c.LivenessProbe == nil || c.ReadinessProbe == nil) {
		t.Errorf("%s: container %s lacks a liveness or readiness probe", where, c.Name)
	}
	if c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
		t.Errorf("%s: container %s lacks memory requests and limits: %+v", where, c.Name, c.Resources)
	}
	sc := c.SecurityContext
	switch {
	case sc == nil:
		t.Errorf("%s: container %s has no securityContext", where, c.Name)
	case sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot:
		t.Errorf("%s: container %s may run as root", where, c.Name)
	case sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem:
		t.Errorf("%s: container %s has a writable root filesystem", where, c.Name)
	case sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation:
		t.Errorf("%s: container %s allows privilege escalation", where, c.Name)
	case sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") || len(sc.Capabilities.Add) > 0:
		t.Errorf("%s: container %s does not drop every capability", where, c.Name)
	}
}

func TestChartContainers(t *testing.T) {
	t.Parallel()
	eachSet(t, func(t *testing.T, _ string, objs []object) {
		deps := ofKind(objs, "Deployment")
		if len(deps) != 1 {
			t.Fatalf("%d Deployments, want 1", len(deps))
		}
		var d appsv1.Deployment
		deps[0].into(t, &d)
		ps := d.Spec.Template.Spec
		if ps.SecurityContext == nil || ps.SecurityContext.SeccompProfile == nil || ps.SecurityContext.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
			t.Errorf("the Deployment's pods lack seccomp RuntimeDefault")
		}
		for _, c := range append(ps.InitContainers, ps.Containers...) {
			checkContainer(t, "Deployment", c, true)
		}
		probe := ps.Containers[0].LivenessProbe
		if probe == nil || probe.HTTPGet == nil || probe.HTTPGet.Path != "/healthz" ||
			ps.Containers[0].ReadinessProbe == nil || ps.Containers[0].ReadinessProbe.HTTPGet.Path != "/readyz" {
			t.Errorf("liveness must ask /healthz and readiness /readyz")
		}
		for _, o := range ofKind(objs, "Pod") {
			var p corev1.Pod
			o.into(t, &p)
			if p.Annotations["helm.sh/hook"] != "test" {
				t.Errorf("Pod %s is not a helm test hook", p.Name)
			}
			for _, c := range p.Spec.Containers {
				checkContainer(t, "Pod "+p.Name, c, false)
			}
		}
	})
}

// TestChartRBAC: the provider's permissions are a Role and RoleBinding in the sandbox namespace
// (never the release's, where hangar's own Secret is), never cluster-wide, and grant what
// internal/provider/kubernetes does and nothing it does not: no pods/log, and pods/portforward
// only when hangar reaches daemons through the API server.
func TestChartRBAC(t *testing.T) {
	t.Parallel()
	eachSet(t, func(t *testing.T, set string, objs []object) {
		for _, o := range objs {
			if strings.HasPrefix(o.kind(), "Cluster") {
				t.Errorf("%s %s: the chart must grant nothing cluster-wide", o.kind(), o.name())
			}
		}
		sandboxNS := "hangar-sandboxes"
		if set == "gvisor" {
			sandboxNS = "agents"
		}
		roles := ofKind(objs, "Role")
		if len(roles) != 1 || len(ofKind(objs, "RoleBinding")) != 1 {
			t.Fatalf("%d Roles and %d RoleBindings, want 1 each", len(roles), len(ofKind(objs, "RoleBinding")))
		}
		var r rbacv1.Role
		roles[0].into(t, &r)
		if r.Namespace != sandboxNS {
			t.Errorf("the Role is in %q, want the sandbox namespace %q", r.Namespace, sandboxNS)
		}
		want := map[string][]string{
			"pods": {"create", "get", "list", "watch", "delete"}, "pods/exec": {"create", "get"},
			"secrets": {"create", "get", "update", "delete"},
		}
		if set == "gvisor" { // config.k8s-daemon-via: port-forward
			want["pods/portforward"] = []string{"create", "get"}
		}
		for res, verbs := range want {
			for _, v := range verbs {
				if !grants(r.Rules, res, v) {
					t.Errorf("the Role does not grant %s on %s, which the kubernetes provider does", v, res)
				}
			}
		}
		for _, rule := range r.Rules {
			for _, res := range rule.Resources {
				for _, v := range rule.Verbs {
					if !slices.Contains(want[res], v) {
						t.Errorf("the Role grants %s on %s, which the kubernetes provider does not use here", v, res)
					}
				}
			}
		}
		for _, rule := range r.Rules {
			if slices.Contains(rule.Verbs, "*") || slices.Contains(rule.Resources, "*") {
				t.Errorf("the Role has a wildcard: %+v", rule)
			}
		}
		var b rbacv1.RoleBinding
		ofKind(objs, "RoleBinding")[0].into(t, &b)
		if b.Namespace != sandboxNS || b.RoleRef.Kind != "Role" || len(b.Subjects) != 1 || b.Subjects[0].Namespace != "hangar" {
			t.Errorf("the RoleBinding must bind the Role in %s to the ServiceAccount in hangar: %+v", sandboxNS, b)
		}
	})
}

func grants(rules []rbacv1.PolicyRule, resource, verb string) bool {
	for _, r := range rules {
		if slices.Contains(r.APIGroups, "") && slices.Contains(r.Resources, resource) && slices.Contains(r.Verbs, verb) {
			return true
		}
	}
	return false
}

// TestChartSecretsStayInSecrets: no secret value (the chart's Secret's data, the value set's
// secrets) appears in a ConfigMap or as a plain env value.
func TestChartSecretsStayInSecrets(t *testing.T) {
	t.Parallel()
	eachSet(t, func(t *testing.T, set string, objs []object) {
		var secrets []string
		for _, o := range ofKind(objs, "Secret") {
			var s corev1.Secret
			o.into(t, &s)
			for k, v := range s.Data {
				secrets = append(secrets, string(v))
				for _, line := range strings.Fields(string(v)) {
					if len(line) >= 16 && k == "tokens" {
						secrets = append(secrets, line)
					}
				}
			}
		}
		if set == "replicas" {
			secrets = append(secrets, "render-test-db-password", "render-test-admin-token", "render-test-hangar-secret", "render-test-e2b-key")
			if len(ofKind(objs, "Secret")) != 1 {
				t.Fatalf("the replicas set gives secrets as values: want the chart's Secret")
			}
		}
		var plain []string
		for _, o := range ofKind(objs, "ConfigMap") {
			var cm corev1.ConfigMap
			o.into(t, &cm)
			for k, v := range cm.Data {
				plain = append(plain, k+"="+v)
			}
		}
		var d appsv1.Deployment
		ofKind(objs, "Deployment")[0].into(t, &d)
		for _, c := range d.Spec.Template.Spec.Containers {
			for _, e := range c.Env {
				plain = append(plain, e.Name+"="+e.Value)
				if (e.Name == "HANGAR_SECRET" || e.Name == "HANGAR_DATABASE_URL" || e.Name == "HANGAR_E2B_API_KEY") && (e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil) {
					t.Errorf("%s is not read from a Secret", e.Name)
				}
			}
		}
		for _, s := range secrets {
			for _, p := range plain {
				if s != "" && strings.Contains(p, s) {
					t.Errorf("a secret value shows in plain configuration: %q", p)
				}
			}
		}
	})
}

func TestChartValueSets(t *testing.T) {
	t.Parallel()
	t.Run("ingress", func(t *testing.T) {
		objs := render(t, "ingress")
		ing := ofKind(objs, "Ingress")
		if len(ing) != 1 {
			t.Fatalf("%d Ingresses, want 1", len(ing))
		}
		a := ing[0].annotations()
		if a["nginx.ingress.kubernetes.io/proxy-buffering"] != "off" || a["nginx.ingress.kubernetes.io/proxy-read-timeout"] != "3600" {
			t.Errorf("the Ingress lacks the SSE annotations: %v", a)
		}
	})
	t.Run("gateway", func(t *testing.T) {
		objs := render(t, "gateway")
		if len(ofKind(objs, "HTTPRoute")) != 1 || len(ofKind(objs, "GCPBackendPolicy")) != 1 {
			t.Fatalf("want an HTTPRoute and a GCPBackendPolicy")
		}
	})
	t.Run("replicas", func(t *testing.T) {
		objs := render(t, "replicas")
		var d appsv1.Deployment
		ofKind(objs, "Deployment")[0].into(t, &d)
		if d.Spec.Replicas == nil || *d.Spec.Replicas != 3 || len(ofKind(objs, "PodDisruptionBudget")) != 1 {
			t.Fatalf("want 3 replicas and a PodDisruptionBudget")
		}
		var cm corev1.ConfigMap
		ofKind(objs, "ConfigMap")[0].into(t, &cm)
		if cm.Data["HANGAR_LOCAL_PROVIDER"] != "false" {
			t.Errorf("the chart offers the local provider: its sandboxes would run in hangar's pod")
		}
		if cm.Data["HANGAR_STREAM_MAX_TOTAL"] != "1024" || cm.Data["HANGAR_STREAM_TURN_LOGS"] != "false" || cm.Data["HANGAR_LOG_LEVEL"] != "debug" {
			t.Errorf("config did not become HANGAR_* settings: %v", cm.Data)
		}
	})
	t.Run("servicemonitor", func(t *testing.T) {
		objs := render(t, "servicemonitor")
		if len(ofKind(objs, "ServiceMonitor")) != 1 || len(ofKind(objs, "PersistentVolumeClaim")) != 1 || len(ofKind(objs, "BackendConfig")) != 1 {
			t.Fatalf("want a ServiceMonitor, a PersistentVolumeClaim and a BackendConfig")
		}
		var d appsv1.Deployment
		ofKind(objs, "Deployment")[0].into(t, &d)
		if d.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType {
			t.Errorf("SQLite on a claim rolls with %q: two pods would open one database", d.Spec.Strategy.Type)
		}
	})
	t.Run("existing-secret", func(t *testing.T) {
		objs := render(t, "existing-secret")
		if n := len(ofKind(objs, "Secret")); n != 0 {
			t.Errorf("%d Secrets made beside the existing one", n)
		}
		if n := len(ofKind(objs, "Namespace")); n != 1 {
			t.Errorf("%d Namespaces, want the sandbox namespace", n)
		}
	})
}

// TestChartSandboxPods: the sandbox pods' settings reach hangar's configuration, and the sandbox
// namespace the chart makes enforces the Pod Security level those pods meet.
func TestChartSandboxPods(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		set       string
		want      map[string]string
		namespace string // its enforced Pod Security level; "": the chart makes none
	}{
		{"", map[string]string{"HANGAR_K8S_NAMESPACE": "hangar-sandboxes", "HANGAR_K8S_RUN_AS_ROOT": "false",
			"HANGAR_K8S_RUN_AS_USER": "1000", "HANGAR_K8S_RUN_AS_GROUP": "1000", "HANGAR_K8S_MAX_LIFETIME": "24h",
			"HANGAR_K8S_CPU_REQUEST": "100m", "HANGAR_K8S_CPU_LIMIT": "2", "HANGAR_K8S_MEMORY_REQUEST": "256Mi",
			"HANGAR_K8S_MEMORY_LIMIT": "2Gi", "HANGAR_K8S_EPHEMERAL_STORAGE_REQUEST": "1Gi",
			"HANGAR_K8S_EPHEMERAL_STORAGE_LIMIT": "10Gi", "HANGAR_K8S_RUNTIME_CLASS": ""}, "restricted"},
		{"gvisor", map[string]string{"HANGAR_K8S_NAMESPACE": "agents", "HANGAR_K8S_RUNTIME_CLASS": "gvisor",
			"HANGAR_K8S_RUN_AS_ROOT": "true", "HANGAR_K8S_MAX_LIFETIME": "2h", "HANGAR_K8S_CPU_REQUEST": "500m",
			"HANGAR_K8S_CPU_LIMIT": "4", "HANGAR_K8S_MEMORY_REQUEST": "0", "HANGAR_K8S_MEMORY_LIMIT": "8Gi",
			"HANGAR_K8S_DAEMON_VIA": "port-forward", "HANGAR_DOCKER_PIDS": "512"}, ""},
	} {
		objs := render(t, tc.set)
		var cm corev1.ConfigMap
		ofKind(objs, "ConfigMap")[0].into(t, &cm)
		for k, v := range tc.want {
			if got := cm.Data[k]; got != v {
				t.Errorf("set %q: %s=%q, want %q", tc.set, k, got, v)
			}
		}
		nss := ofKind(objs, "Namespace")
		if tc.namespace == "" {
			if len(nss) != 0 {
				t.Errorf("set %q: %d Namespaces made, want none (createNamespace: false)", tc.set, len(nss))
			}
			continue
		}
		if len(nss) != 1 {
			t.Fatalf("set %q: %d Namespaces, want the sandbox namespace", tc.set, len(nss))
		}
		var ns corev1.Namespace
		nss[0].into(t, &ns)
		if ns.Name != tc.want["HANGAR_K8S_NAMESPACE"] || ns.Labels["pod-security.kubernetes.io/enforce"] != tc.namespace {
			t.Errorf("set %q: Namespace %s labelled %v, want %s enforcing %s", tc.set, ns.Name, ns.Labels, tc.want["HANGAR_K8S_NAMESPACE"], tc.namespace)
		}
	}
}

// TestChartSandboxNetworkPolicy: sandbox pods take traffic only on the daemon port from the
// hangar pods, and send only DNS by default.
func TestChartSandboxNetworkPolicy(t *testing.T) {
	t.Parallel()
	objs := render(t, "")
	nps := ofKind(objs, "NetworkPolicy")
	if len(nps) != 1 {
		t.Fatalf("%d NetworkPolicies, want 1", len(nps))
	}
	var np networkingv1.NetworkPolicy
	nps[0].into(t, &np)
	if np.Spec.PodSelector.MatchLabels["app.kubernetes.io/managed-by"] != "hangar" {
		t.Errorf("the policy does not select sandbox pods: %v", np.Spec.PodSelector)
	}
	if len(np.Spec.Ingress) != 1 || len(np.Spec.Ingress[0].Ports) != 1 || np.Spec.Ingress[0].Ports[0].Port.IntValue() != 49983 ||
		len(np.Spec.Ingress[0].From) != 1 || np.Spec.Ingress[0].From[0].PodSelector.MatchLabels["app.kubernetes.io/instance"] != "rt" {
		t.Errorf("ingress must be the daemon port from this release's hangar pods only: %+v", np.Spec.Ingress)
	}
	if len(np.Spec.Egress) != 1 || np.Spec.Egress[0].Ports[0].Port.IntValue() != 53 {
		t.Errorf("egress must be DNS only by default: %+v", np.Spec.Egress)
	}
}

// TestChartRefuses: the schema rejects typo'd keys at any depth, and value sets that cannot work
// fail with a sentence.
func TestChartRefuses(t *testing.T) {
	t.Parallel()
	cases := []struct{ set, want string }{
		{"replicaCont=2", "additional properties 'replicaCont' not allowed"},
		{"ingress.enabeld=true", "additional properties 'enabeld' not allowed"},
		{"config.stream-max-totl=5", "additional properties 'stream-max-totl' not allowed"},
		{"config.listen=0.0.0.0:1", "additional properties 'listen' not allowed"},
		{"secret.hangarSecret=short", "secret"},
		{"replicaCount=2", "replicaCount > 1 needs PostgreSQL"},
		{"gateway.enabled=true", "gateway.enabled needs gateway.parentRefs"},
		{"kubernetes.enabled=false", "set config.default-provider"},
		{"kubernetes.namespace=default", "kubernetes.namespace is the release's namespace (default)"},
		{"kubernetes.sandbox.runAsUser=0", "/kubernetes/sandbox/runAsUser': minimum: got 0"},
		{"kubernetes.sandbox.resources.limits.gpu=1", "additional properties 'gpu' not allowed"},
		{"autoscaling.enabled=true", "autoscaling.enabled needs PostgreSQL"},
		{"autoscaling.minReplicas=1", "/autoscaling/minReplicas': minimum: got 1"},
		{"terminationGracePeriodSeconds=45", "terminationGracePeriodSeconds (45) is shorter than lifecycle.preStopSleepSeconds (30) plus config.shutdown-grace (30s)"},
		{"service.sessionAffinity=Cookie", "/service/sessionAffinity'"},
		{"metrics.port=8080", "metrics.port is containerPort"},
	}
	for _, c := range cases {
		_, err := helm(t, "template", "rt", chartDir, "--set", c.set)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("--set %s: %v, want an error with %q", c.set, err, c.want)
		}
	}
}

// managedSettings are the settings the chart sets itself; every other setting of
// docs/configuration.md must be a key of config in values.schema.json.
var managedSettings = []string{"listen", "metrics-listen", "data-dir", "database-url", "tokens-file", "secret", "e2b-api-key", "k8s-namespace", "k8s-hangar-image", "k8s-image", "advertise-url",
	"k8s-runtime-class", "k8s-run-as-root", "k8s-run-as-user", "k8s-run-as-group", "k8s-cpu-request", "k8s-cpu-limit", "k8s-memory-request",
	"k8s-memory-limit", "k8s-ephemeral-storage-request", "k8s-ephemeral-storage-limit", "k8s-max-lifetime"}

func TestChartConfigKeysAreSettings(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile(filepath.Join(repoRoot(t), "docs", "configuration.md"))
	if err != nil {
		t.Fatal(err)
	}
	// The settings of `hangar serve`: the page's sections before `hangar health`'s.
	doc, _, _ = bytes.Cut(doc, []byte("\n## hangar health"))
	var flags []string
	for _, m := range regexp.MustCompile("(?m)^\\| `HANGAR_[A-Z0-9_]+` \\| `--([a-z0-9-]+)`").FindAllSubmatch(doc, -1) {
		flags = append(flags, string(m[1]))
	}
	raw, err := os.ReadFile(filepath.Join(chartDir, "values.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	var schema struct {
		Properties struct {
			Config struct {
				Properties map[string]any `json:"properties"`
			} `json:"config"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(raw, &schema); err != nil {
		t.Fatalf("values.schema.json: %v", err)
	}
	keys := schema.Properties.Config.Properties
	for _, f := range flags {
		_, inSchema := keys[f]
		managed := slices.Contains(managedSettings, f)
		switch {
		case managed && inSchema:
			t.Errorf("config.%s is in values.schema.json, but the chart sets it itself", f)
		case !managed && !inSchema:
			t.Errorf("docs/configuration.md has --%s: add it to config's properties in values.schema.json (or to managedSettings if the chart sets it)", f)
		}
	}
	for k := range keys {
		if !slices.Contains(flags, k) {
			t.Errorf("config.%s in values.schema.json is not a setting of docs/configuration.md", k)
		}
	}
}

// TestChartSecretKept: the chart's Secret decodes to what the values gave, the tokens file
// being the admin token's line.
func TestChartSecretKept(t *testing.T) {
	t.Parallel()
	objs := render(t, "replicas")
	var s corev1.Secret
	ofKind(objs, "Secret")[0].into(t, &s)
	want := map[string]string{
		"hangar-secret": "render-test-hangar-secret-0123456789abcdef",
		"tokens":        "render-test-admin-token-0123456789abcdefgh admin admin\n",
		"database-url":  "postgres://hangar:render-test-db-password@db:5432/hangar",
		"e2b-api-key":   "render-test-e2b-key-0123456789",
	}
	for k, v := range want {
		if got := string(s.Data[k]); got != v {
			t.Errorf("Secret key %s = %q, want %q (base64 %s)", k, got, v, base64.StdEncoding.EncodeToString([]byte(v)))
		}
	}
}
