package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"

	"github.com/hangar-dev/hangar/internal/provider"
)

// How the control plane reaches a sandbox pod's daemon (Config.DaemonVia).
const (
	// DaemonViaPodIP: at the pod's IP, port DaemonPort. For a control plane inside the cluster
	// (or on a network that routes to pods).
	DaemonViaPodIP = "pod-ip"
	// DaemonViaPortForward: through the API server's pods/portforward, from a loopback port of
	// the control plane's own. For a control plane outside the cluster.
	DaemonViaPortForward = "port-forward"
)

// forward is one pod's port-forward: a loopback listener of this process whose connections
// reach the pod's DaemonPort through the API server.
type forward struct {
	uid  types.UID
	port uint16        // the loopback port
	stop func()        // ends it
	done chan struct{} // closed once it has ended: stopped, or its connection to the API server lost
	err  error         // why it ended, once done is closed
}

func (f *forward) alive() bool {
	select {
	case <-f.done:
		return false
	default:
		return true
	}
}

// close stops f and waits until its listener and connection are closed.
func (f *forward) close() {
	f.stop()
	<-f.done
}

// forwardedURL is the daemon URL of pod through its port-forward, made on first use and made
// again if it ended (the API server restarted, the connection broke), on the same loopback
// port when that port is still free. A URL is thus stable for the life of this Provider value;
// a restarted control plane gets new ports, and the URLs Get and List return.
func (p *Provider) forwardedURL(ctx context.Context, pod *corev1.Pod) (string, error) {
	p.fwdMu.Lock()
	defer p.fwdMu.Unlock()
	if p.fwdClosed {
		return "", errors.New("the provider is closed")
	}
	f := p.fwd[pod.Name]
	if f != nil && f.uid == pod.UID && f.alive() {
		return "http://127.0.0.1:" + strconv.Itoa(int(f.port)), nil
	}
	var port uint16
	if f != nil {
		f.close()
		delete(p.fwd, pod.Name)
		if f.uid == pod.UID {
			port = f.port
		}
	}
	f, err := p.startForward(ctx, pod, port)
	if err != nil && port != 0 {
		f, err = p.startForward(ctx, pod, 0) // the old port was taken meanwhile
	}
	if err != nil {
		return "", fmt.Errorf("port-forward to pod %s: %w", pod.Name, err)
	}
	p.fwd[pod.Name] = f
	return "http://127.0.0.1:" + strconv.Itoa(int(f.port)), nil
}

// startForward opens a port-forward to pod's DaemonPort on 127.0.0.1:port (0: any free port)
// and returns once it listens.
func (p *Provider) startForward(ctx context.Context, pod *corev1.Pod, port uint16) (*forward, error) {
	if p.rest == nil {
		return nil, fmt.Errorf("no cluster connection: %w", provider.ErrUnsupported)
	}
	req := p.kube.CoreV1().RESTClient().Post().Resource("pods").Namespace(pod.Namespace).Name(pod.Name).SubResource("portforward")
	tr, upgrader, err := spdy.RoundTripperFor(p.rest)
	if err != nil {
		return nil, fmt.Errorf("new spdy round tripper: %w", err)
	}
	dialer := spdy.NewDialer(upgrader, &http.Client{Transport: tr}, http.MethodPost, req.URL())
	// Websockets first (the API servers of today), SPDY where they are refused.
	if ws, err := portforward.NewSPDYOverWebsocketDialer(req.URL(), p.rest); err == nil {
		dialer = portforward.NewFallbackDialer(ws, dialer, websocketRefused)
	}
	fctx, stop := context.WithCancel(context.Background())
	ready := make(chan struct{})
	pf, err := portforward.NewOnAddressesWithContext(fctx, dialer, []string{"127.0.0.1"},
		[]string{strconv.Itoa(int(port)) + ":" + strconv.Itoa(DaemonPort)}, ready, io.Discard, io.Discard)
	if err != nil {
		stop()
		return nil, fmt.Errorf("new port-forward: %w", err)
	}
	f := &forward{uid: pod.UID, stop: stop, done: make(chan struct{})}
	go func() {
		f.err = pf.ForwardPorts()
		close(f.done)
		if f.err != nil && fctx.Err() == nil {
			p.log.Warn("port-forward to a sandbox's daemon ended", "pod", pod.Name, "err", f.err)
		}
	}()
	select {
	case <-ready:
	case <-f.done:
		stop()
		return nil, apiErr(f.err)
	case <-ctx.Done():
		stop() // not waiting: a dial in progress ends by itself
		return nil, ctx.Err()
	}
	ports, err := pf.GetPorts()
	if err != nil || len(ports) != 1 {
		f.close()
		return nil, fmt.Errorf("port-forward's local port: %v", err)
	}
	f.port = ports[0].Local
	return f, nil
}

// endForward closes the port-forward of the pod named name, if it has one.
func (p *Provider) endForward(name string) {
	p.fwdMu.Lock()
	f := p.fwd[name]
	delete(p.fwd, name)
	p.fwdMu.Unlock()
	if f != nil {
		f.close()
	}
}

// Close ends the provider's port-forwards (DaemonViaPortForward) and refuses new ones, and
// closes its idle connections to the API server. The pods stay.
func (p *Provider) Close() {
	p.fwdMu.Lock()
	p.fwdClosed = true
	fwd := p.fwd
	p.fwd = map[string]*forward{}
	p.fwdMu.Unlock()
	var wg sync.WaitGroup
	for _, f := range fwd {
		wg.Go(f.close)
	}
	wg.Wait()
	if p.http != nil {
		utilnet.CloseIdleConnectionsFor(p.http.Transport) // through client-go's wrappers
	}
}
