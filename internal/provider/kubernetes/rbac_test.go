package kubernetes

import (
	"context"
	"os"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/hangar-dev/hangar/internal/provider"
	"github.com/hangar-dev/hangar/internal/provider/providertest"
)

// TestClusterChartRBAC runs the providers' suite as the Helm chart's own ServiceAccount, with
// no more rights than the chart's Role gives it in the sandbox namespace, and checks that
// what the Role does not grant is refused. `make test-k8s` installs the chart and sets
// HANGAR_TEST_K8S_SA_KUBECONFIG (a token of that ServiceAccount, from the TokenRequest API) and
// HANGAR_TEST_K8S_SA_NAMESPACE (the sandbox namespace); without them the test skips.
func TestClusterChartRBAC(t *testing.T) {
	t.Parallel()
	kc, ns := os.Getenv("HANGAR_TEST_K8S_SA_KUBECONFIG"), os.Getenv("HANGAR_TEST_K8S_SA_NAMESPACE")
	if kc == "" || ns == "" {
		t.Skip("no chart installed: HANGAR_TEST_K8S_SA_KUBECONFIG and HANGAR_TEST_K8S_SA_NAMESPACE are unset (`make test-k8s` sets them after helm install)")
	}
	c := &cluster{kubeconfig: kc, namespace: ns, hangarImage: defaultHangarImage, image: defaultSandboxImage}
	rc, err := clientcmd.BuildConfigFromFlags("", kc)
	if err != nil {
		t.Fatal(err)
	}
	c.kube = testClient(t, rc)

	t.Run("suite", func(t *testing.T) {
		instance := providertest.UniqueName("rbac")
		providertest.Run(t, func(t *testing.T) provider.Provider { return c.provider(t, instance, DaemonViaPortForward) },
			providertest.Options{Daemon: true, NoDaemon: true, NoPause: true, DaemonURLPerProvider: true})
	})

	t.Run("refused", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), clusterTimeout)
		defer cancel()
		for _, tc := range []struct {
			what string
			call func() error
		}{
			{"list secrets in the sandbox namespace (the Role grants get, not list)", func() error {
				_, err := c.kube.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{})
				return err
			}},
			{"list pods in the default namespace (the Role is namespaced)", func() error {
				_, err := c.kube.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
				return err
			}},
			{"list nodes (nothing cluster-wide)", func() error {
				_, err := c.kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
				return err
			}},
		} {
			if err := tc.call(); !apierrors.IsForbidden(err) {
				t.Errorf("%s: error %v, want Forbidden", tc.what, err)
			}
		}
	})
}
