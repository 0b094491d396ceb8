# Sourced by scripts/k8s/{up,down,images}: where the test cluster lives and how it is wired.
# Every path is under $HANGAR_K8S_RUN; every network is inside the namespace $K8S_NETNS that up
# creates, joined to this machine by one veth pair. Nothing listens on or reaches another
# address: the tests talk to the API server at $K8S_NODE_IP and to pods at their pod IPs, both
# inside that namespace.

K8S_REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
K8S_CACHE=${HANGAR_K8S_CACHE:-$K8S_REPO/.cache/k8s}
K8S_BIN=$K8S_CACHE/bin
# Short: containerd's socket path must stay under 108 bytes.
K8S_RUN=${HANGAR_K8S_RUN:-/var/lib/hangar-k8s}
K8S_LOGS=$K8S_RUN/logs
K8S_KUBECONFIG=$K8S_RUN/kubeconfig
K8S_SOCK=$K8S_RUN/containerd/containerd.sock

K8S_NETNS=hangar-k8s
K8S_VETH_HOST=hk8s-host # this machine's end
K8S_VETH_NODE=hk8s-node # the node's end, inside $K8S_NETNS
K8S_HOST_IP=10.213.0.1
K8S_NODE_IP=10.213.0.2
K8S_LINK_PREFIX=30
K8S_POD_CIDR=10.214.0.0/24
K8S_SERVICE_CIDR=10.215.0.0/24
K8S_SERVICE_IP=10.215.0.1 # the kubernetes Service's IP: in the API server's certificate only
K8S_NODE_NAME=hangar-node
K8S_PAUSE_IMAGE=hangar.test/pause:1

# The processes up starts, in start order; down stops them in reverse.
K8S_PROCS=(containerd etcd kube-apiserver kube-controller-manager kube-scheduler kubelet)

# k8s_in_ns CMD...: runs CMD in the node's network namespace only (not `ip netns exec`, which
# also gives it a mount namespace of its own: containerd and the kubelet must see each
# other's mounts).
k8s_in_ns() { nsenter --net=/run/netns/$K8S_NETNS "$@"; }

k8s_kubectl() { "$K8S_BIN/kubectl" --kubeconfig "$K8S_KUBECONFIG" "$@"; }
