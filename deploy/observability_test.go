package deploy_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/yaml"
)

// runtimeMetrics are Prometheus' and client_golang's collectors' (cmd/hangar registers the Go
// and process collectors).
var runtimeMetrics = []string{"up", "go_goroutines", "process_resident_memory_bytes", "process_cpu_seconds_total",
	// kube-state-metrics': a pod that is gone has no series of its own, its Deployment does.
	"kube_deployment_spec_replicas", "kube_deployment_status_replicas_available"}

// registeredMetrics finds the hangar_* metrics the code registers: every Name: "hangar_..." in
// the Go sources (tests aside) under internal/ and cmd/.
func registeredMetrics(t *testing.T) map[string]bool {
	t.Helper()
	names := map[string]bool{}
	re := regexp.MustCompile(`Name:\s*"(hangar_[a-z0-9_]+)"`)
	for _, dir := range []string{"internal", "cmd"} {
		err := filepath.WalkDir(filepath.Join(repoRoot(t), dir), func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			b, err := os.ReadFile(path)
			for _, m := range re.FindAllSubmatch(b, -1) {
				names[string(m[1])] = true
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if !names["hangar_streams_open"] || !names["hangar_http_requests_total"] {
		t.Fatalf("found only %v in the code: the search for registered metrics is broken", names)
	}
	return names
}

// checkExpr reports each metric expr names that hangar does not export. A histogram's series
// are its name with _bucket, _sum or _count.
func checkExpr(t *testing.T, where, expr string, known map[string]bool) (named []string) {
	t.Helper()
	ids := regexp.MustCompile(`\b(hangar_[a-z0-9_]+)`).FindAllStringSubmatch(expr, -1)
	ids = append(ids, regexp.MustCompile(`\b([a-z_][a-z0-9_]*)\{`).FindAllStringSubmatch(expr, -1)...)
	for _, m := range ids {
		name := m[1]
		if slices.Contains(named, name) {
			continue
		}
		base := name
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if b, ok := strings.CutSuffix(name, suffix); ok && known[b] {
				base = b
			}
		}
		switch {
		case known[base], slices.Contains(runtimeMetrics, name):
		default:
			t.Errorf("%s: %s is not a metric hangar exports (expr %s)", where, name, expr)
		}
		named = append(named, name)
	}
	if len(named) == 0 {
		t.Errorf("%s: expr %q names no metric", where, expr)
	}
	return named
}

type dashboard struct {
	UID        string  `json:"uid"`
	Title      string  `json:"title"`
	Panels     []panel `json:"panels"`
	Templating struct {
		List []variable `json:"list"`
	} `json:"templating"`
}

type variable struct {
	Name string `json:"name"`
	Type string `json:"type"`
}

type panel struct {
	ID         int    `json:"id"`
	Type       string `json:"type"`
	Title      string `json:"title"`
	Datasource *struct {
		UID string `json:"uid"`
	} `json:"datasource"`
	Targets []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
}

func TestGrafanaDashboard(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(filepath.Join("grafana", "hangar.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("grafana/hangar.json is not JSON: %v", err)
	}
	if d.UID == "" || d.Title == "" {
		t.Errorf("the dashboard needs a uid and a title")
	}
	if !slices.ContainsFunc(d.Templating.List, func(v variable) bool {
		return v.Name == "datasource" && v.Type == "datasource"
	}) {
		t.Errorf("the dashboard has no datasource variable: it would be tied to one Prometheus")
	}
	known := registeredMetrics(t)
	covered := map[string]bool{}
	ids := map[int]bool{}
	for _, p := range d.Panels {
		if ids[p.ID] {
			t.Errorf("panel id %d twice", p.ID)
		}
		ids[p.ID] = true
		if p.Type == "row" {
			continue
		}
		if len(p.Targets) == 0 || p.Datasource == nil || p.Datasource.UID != "${datasource}" {
			t.Errorf("panel %q has no query on the ${datasource} variable", p.Title)
		}
		for _, tg := range p.Targets {
			for _, n := range checkExpr(t, "panel "+p.Title, tg.Expr, known) {
				covered[strings.TrimSuffix(n, "_bucket")] = true
			}
		}
	}
	for n := range known {
		if !covered[n] {
			t.Errorf("the dashboard shows nothing of %s", n)
		}
	}
}

type ruleFile struct {
	Groups []struct {
		Name  string `json:"name"`
		Rules []struct {
			Alert       string            `json:"alert"`
			Expr        string            `json:"expr"`
			Labels      map[string]string `json:"labels"`
			Annotations map[string]string `json:"annotations"`
		} `json:"rules"`
	} `json:"groups"`
}

// TestAlertRules: every rule names real metrics and says how bad it is and what happened.
// promtool checks the syntax and the rules' behaviour (TestAlertRulesPromtool).
func TestAlertRules(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(filepath.Join("prometheus", "hangar-rules.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var rf ruleFile
	if err := yaml.Unmarshal(b, &rf); err != nil {
		t.Fatalf("hangar-rules.yaml: %v", err)
	}
	known := registeredMetrics(t)
	n := 0
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			n++
			if r.Alert == "" || r.Labels["severity"] == "" || r.Annotations["summary"] == "" || r.Annotations["description"] == "" {
				t.Errorf("rule %q needs an alert name, a severity, a summary and a description", r.Alert)
			}
			checkExpr(t, "alert "+r.Alert, r.Expr, known)
		}
	}
	if n == 0 {
		t.Fatal("no rules")
	}
}

func TestAlertRulesPromtool(t *testing.T) {
	t.Parallel()
	promtool := tool(t, "promtool", "HANGAR_PROMTOOL")
	for _, args := range [][]string{
		{"check", "rules", "prometheus/hangar-rules.yaml"},
		{"test", "rules", "prometheus/hangar-rules.test.yaml"},
	} {
		out, err := exec.Command(promtool, args...).CombinedOutput()
		if err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}
