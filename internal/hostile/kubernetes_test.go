package hostile_test

import (
	"context"
	"os"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// The images scripts/k8s/images imports into the test cluster (as the kubernetes provider's
// cluster tests use them); HANGAR_TEST_K8S_HANGAR_IMAGE and HANGAR_TEST_K8S_SANDBOX_IMAGE name
// others.
const (
	k8sHangarImage  = "hangar.test/hangar:k8s"
	k8sSandboxImage = "hangar.test/sandbox:k8s"
)

// TestHostileKubernetes runs the suite in real pods of the cluster of HANGAR_TEST_KUBECONFIG
// (`make test-k8s` brings one up and sets it), in a namespace of its own: with the provider's
// defaults (uid 1000, no capability) and as root (k8s-run-as-root, what split sessions need).
// hangar runs outside the cluster and reaches the daemons at their pod IPs. Without
// HANGAR_TEST_KUBECONFIG it skips, saying so.
func TestHostileKubernetes(t *testing.T) {
	t.Parallel()
	kc := os.Getenv("HANGAR_TEST_KUBECONFIG")
	if kc == "" {
		t.Skip("SKIPPING the Kubernetes column: HANGAR_TEST_KUBECONFIG is unset (`make test-k8s` brings a cluster up and runs it)")
	}
	ns := k8sNamespace(t, kc)
	hangarImage, image := k8sHangarImage, k8sSandboxImage
	if v := os.Getenv("HANGAR_TEST_K8S_HANGAR_IMAGE"); v != "" {
		hangarImage = v
	}
	if v := os.Getenv("HANGAR_TEST_K8S_SANDBOX_IMAGE"); v != "" {
		image = v
	}
	args := []string{"--k8s-namespace", ns, "--k8s-kubeconfig", kc, "--k8s-image", image, "--k8s-hangar-image", hangarImage,
		"--k8s-daemon-via", "pod-ip"}
	for _, tc := range []struct {
		name string
		root bool
	}{{"kubernetes", false}, {"kubernetes-root", true}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			col := column{name: tc.name, provider: "kubernetes", args: append(args[:len(args):len(args)], "--k8s-run-as-root="+map[bool]string{true: "true", false: "false"}[tc.root]),
				spec: map[string]any{"provider": "kubernetes"}, tmp: "/workspace", shim: true}
			checkColumn(t, tc.name, runColumn(t, col))
		})
	}
}

// k8sNamespace makes a namespace for the test in the cluster of kubeconfig, deleted when it
// ends.
func k8sNamespace(t *testing.T, kubeconfig string) string {
	t.Helper()
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatalf("load HANGAR_TEST_KUBECONFIG: %v", err)
	}
	kube := k8sClient(t, rc)
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	ns, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "hangar-hostile-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create a namespace: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
		defer cancel()
		if err := kube.CoreV1().Namespaces().Delete(ctx, ns.Name, metav1.DeleteOptions{}); err != nil {
			t.Errorf("delete namespace %s: %v", ns.Name, err)
		}
	})
	return ns.Name
}

// k8sClient is a clientset over rc whose idle connections are closed when the test ends, so
// that none outlives the tests (goleak).
func k8sClient(t *testing.T, rc *rest.Config) kubernetes.Interface {
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
