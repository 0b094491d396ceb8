# Sourced by scripts/k8s/up: the namespace, certificates and configuration files it needs.

# network creates the node's namespace, a veth pair into it (the node's address inside, this
# machine's outside) and a route to the pods' network through it.
network() {
	ip netns add "$K8S_NETNS"
	ip link add "$K8S_VETH_HOST" type veth peer name "$K8S_VETH_NODE" netns "$K8S_NETNS"
	ip addr add "$K8S_HOST_IP/$K8S_LINK_PREFIX" dev "$K8S_VETH_HOST"
	ip link set "$K8S_VETH_HOST" up
	k8s_in_ns ip addr add "$K8S_NODE_IP/$K8S_LINK_PREFIX" dev "$K8S_VETH_NODE"
	k8s_in_ns ip link set "$K8S_VETH_NODE" up
	k8s_in_ns ip link set lo up
	# No default route: from the namespace, only this machine's end of the veth is reachable.
	# The node forwards between its veth and the pods' bridge (this namespace's setting only).
	k8s_in_ns sysctl -qw net.ipv4.ip_forward=1
	ip route add "$K8S_POD_CIDR" via "$K8S_NODE_IP" dev "$K8S_VETH_HOST"
}

# cert NAME SUBJECT EXTENSIONS: a P-256 key and a certificate signed by the cluster's CA.
cert() {
	local pki=$K8S_RUN/pki
	openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$pki/$1.key" -subj "$2" 2>/dev/null |
		openssl x509 -req -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -CAcreateserial -days 2 -out "$pki/$1.crt" \
			-extfile <(printf '%b\n' "$3") 2>/dev/null
}

certificates() {
	local pki=$K8S_RUN/pki client='keyUsage=critical,digitalSignature\nextendedKeyUsage=clientAuth'
	printf '%s\n' '[req]' 'distinguished_name=dn' 'x509_extensions=v3' 'prompt=no' '[dn]' 'CN=hangar-test-ca' \
		'[v3]' 'basicConstraints=critical,CA:TRUE' 'keyUsage=critical,keyCertSign,cRLSign,digitalSignature' \
		'subjectKeyIdentifier=hash' >"$pki/ca.cnf"
	openssl req -x509 -config "$pki/ca.cnf" -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
		-keyout "$pki/ca.key" -out "$pki/ca.crt" -days 2 2>/dev/null
	cert apiserver /CN=kube-apiserver "keyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\nsubjectAltName=IP:$K8S_NODE_IP,IP:127.0.0.1,IP:$K8S_SERVICE_IP,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
	cert kubelet-serving "/CN=$K8S_NODE_NAME" "keyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\nsubjectAltName=IP:$K8S_NODE_IP,DNS:$K8S_NODE_NAME"
	cert admin "/O=system:masters/CN=hangar-test-admin" "$client"
	cert apiserver-kubelet "/O=system:masters/CN=kube-apiserver-kubelet-client" "$client"
	cert kubelet "/O=system:nodes/CN=system:node:$K8S_NODE_NAME" "$client"
	cert controller-manager /CN=system:kube-controller-manager "$client"
	cert scheduler /CN=system:kube-scheduler "$client"
	openssl genrsa -out "$pki/sa.key" 2048 2>/dev/null
	openssl rsa -in "$pki/sa.key" -pubout -out "$pki/sa.pub" 2>/dev/null
}

# kubeconfig FILE SERVER CERT: a kubeconfig for the client certificate CERT, embedded (with
# file paths, client-go starts a goroutine per process that watches them for good).
kubeconfig() {
	local pki=$K8S_RUN/pki
	cat >"$1" <<YAML
apiVersion: v1
kind: Config
clusters:
- name: hangar-test
  cluster:
    server: $2
    certificate-authority-data: $(base64 -w0 "$pki/ca.crt")
users:
- name: $3
  user:
    client-certificate-data: $(base64 -w0 "$pki/$3.crt")
    client-key-data: $(base64 -w0 "$pki/$3.key")
contexts:
- name: hangar-test
  context: {cluster: hangar-test, user: $3}
current-context: hangar-test
YAML
}

configs() {
	local etc=$K8S_RUN/etc pki=$K8S_RUN/pki
	kubeconfig "$K8S_KUBECONFIG" "https://$K8S_NODE_IP:6443" admin
	kubeconfig "$etc/kubelet.kubeconfig" https://127.0.0.1:6443 kubelet
	kubeconfig "$etc/controller-manager.kubeconfig" https://127.0.0.1:6443 controller-manager
	kubeconfig "$etc/scheduler.kubeconfig" https://127.0.0.1:6443 scheduler

	# A second containerd with CRI, all its paths under $K8S_RUN. restrict_oom_score_adj: root
	# here lacks CAP_SYS_RESOURCE, and the pause container's -998 would fail every pod.
	cat >"$etc/containerd.toml" <<TOML
version = 2
root = "$K8S_RUN/containerd/root"
state = "$K8S_RUN/containerd/state"
[grpc]
  address = "$K8S_SOCK"
[ttrpc]
  address = "$K8S_SOCK.ttrpc"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$K8S_PAUSE_IMAGE"
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$K8S_RUN/cni/net.d"
TOML

	# One bridge in the node's namespace, no masquerading, port mapping or firewall plugin: no
	# rule is added to this machine's firewall.
	cat >"$K8S_RUN/cni/net.d/10-hangar.conflist" <<JSON
{"cniVersion": "1.0.0", "name": "hangar-test", "plugins": [{
  "type": "bridge", "bridge": "hk8s-br0", "isGateway": true, "ipMasq": false, "hairpinMode": true,
  "ipam": {"type": "host-local", "dataDir": "$K8S_RUN/cni/ipam",
           "ranges": [[{"subnet": "$K8S_POD_CIDR"}]], "routes": [{"dst": "0.0.0.0/0"}]}
}]}
JSON

	cat >"$etc/kubelet.yaml" <<YAML
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# This machine: cgroup v1 without systemd, swap allowed, no firewall rules of the kubelet's.
failCgroupV1: false
cgroupDriver: cgroupfs
failSwapOn: false
makeIPTablesUtilChains: false
containerRuntimeEndpoint: unix://$K8S_SOCK
podLogsDir: $K8S_RUN/pod-logs
address: $K8S_NODE_IP
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
tlsCertFile: $pki/kubelet-serving.crt
tlsPrivateKeyFile: $pki/kubelet-serving.key
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $pki/ca.crt}
authorization: {mode: Webhook}
resolvConf: /etc/resolv.conf
# A shared test machine: do not evict pods because its disk or memory runs low.
evictionHard: {memory.available: "1Mi", nodefs.available: "1%", imagefs.available: "1%", nodefs.inodesFree: "1%"}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
# A pod's emptyDir usage, which the eviction manager compares with its sizeLimit and the
# pod's ephemeral-storage limit, is measured (a du) every volumeStatsAggPeriod: at the default
# minute, on a loaded machine, a sandbox past its limit was not evicted within the test's two
# minutes (TestClusterDiskFillEvicted).
volumeStatsAggPeriod: 5s
YAML
}
