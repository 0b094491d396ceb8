package kubernetes

import (
	"context"
	"os"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/hangar-dev/hangar/internal/provider"
	"github.com/hangar-dev/hangar/internal/provider/providertest"
)

// TestClusterChartRBAC runs the providers' suite as the Helm chart's own ServiceAccount, with
// no more rights than the chart's Role gives it in the sandbox namespace (reaching daemons at
// their pod IPs, as the chart's hangar does), and checks that what the Role does not grant is
// refused: above all hangar's own Secret, in the release's namespace. `make test-k8s` installs
// the chart and sets HANGAR_TEST_K8S_SA_KUBECONFIG (a token of that ServiceAccount, from the
// TokenRequest API), HANGAR_TEST_K8S_SA_NAMESPACE (the sandbox namespace) and
// HANGAR_TEST_K8S_RELEASE_NAMESPACE; without them the test skips.
func TestClusterChartRBAC(t *testing.T) {
	t.Parallel()
	kc, ns, releaseNS := os.Getenv("HANGAR_TEST_K8S_SA_KUBECONFIG"), os.Getenv("HANGAR_TEST_K8S_SA_NAMESPACE"), os.Getenv("HANGAR_TEST_K8S_RELEASE_NAMESPACE")
	if kc == "" || ns == "" || releaseNS == "" {
		t.Skip("no chart installed: HANGAR_TEST_K8S_SA_KUBECONFIG, HANGAR_TEST_K8S_SA_NAMESPACE and HANGAR_TEST_K8S_RELEASE_NAMESPACE are unset (`make test-k8s` sets them after helm install)")
	}
	if ns == releaseNS {
		t.Fatalf("the sandbox namespace is the release's (%s): the chart must keep them apart", ns)
	}
	c := &cluster{kubeconfig: kc, namespace: ns, hangarImage: defaultHangarImage, image: defaultSandboxImage}
	rc, err := clientcmd.BuildConfigFromFlags("", kc)
	if err != nil {
		t.Fatal(err)
	}
	c.kube = testClient(t, rc)

	t.Run("suite", func(t *testing.T) {
		instance := providertest.UniqueName("rbac")
		providertest.Run(t, func(t *testing.T) provider.Provider { return c.provider(t, instance, DaemonViaPodIP) },
			providertest.Options{Daemon: true, NoDaemon: true, NoPause: true, ExecTimeout: execTimeout})
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
			{"read hangar's own Secret in the release namespace", func() error {
				_, err := c.kube.CoreV1().Secrets(releaseNS).Get(ctx, "hangar", metav1.GetOptions{})
				return err
			}},
			{"make a Secret in the release namespace", func() error {
				_, err := c.kube.CoreV1().Secrets(releaseNS).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "planted"}}, metav1.CreateOptions{})
				return err
			}},
		} {
			if err := tc.call(); !apierrors.IsForbidden(err) {
				t.Errorf("%s: error %v, want Forbidden", tc.what, err)
			}
		}
		// What the provider does not use in the cluster is not granted either (asked of the
		// API server's authorizer: no pod is needed to ask).
		for _, a := range []authorizationv1.ResourceAttributes{
			{Namespace: ns, Verb: "get", Resource: "pods", Subresource: "log"},
			{Namespace: ns, Verb: "create", Resource: "pods", Subresource: "portforward"},
			{Namespace: ns, Verb: "get", Resource: "pods", Subresource: "portforward"},
			{Namespace: ns, Verb: "list", Resource: "secrets"},
			{Namespace: releaseNS, Verb: "get", Resource: "secrets"},
			{Namespace: releaseNS, Verb: "create", Resource: "pods"},
		} {
			review, err := c.kube.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx,
				&authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &a}}, metav1.CreateOptions{})
			if err != nil {
				t.Fatalf("ask whether %s %s/%s in %s is allowed: %v", a.Verb, a.Resource, a.Subresource, a.Namespace, err)
			}
			if review.Status.Allowed {
				t.Errorf("the chart's ServiceAccount may %s %s/%s in %s", a.Verb, a.Resource, a.Subresource, a.Namespace)
			}
		}
	})
}
