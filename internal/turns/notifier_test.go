package turns

import "testing"

// TestNotifier: a wake closes the channel of whoever waits on the key (and only that key); a
// follower leaving before a wake leaves nothing behind.
func TestNotifier(t *testing.T) {
	t.Parallel()
	n := notifier{chans: map[string]*waiters{}}
	a, releaseA := n.wait("session a")
	a2, releaseA2 := n.wait("session a")
	b, releaseB := n.wait("job b")
	n.wake(sessionKey("x"), "session a")
	for _, ch := range []<-chan struct{}{a, a2} {
		select {
		case <-ch:
		default:
			t.Fatal("a waiter on the woken key was not woken")
		}
	}
	select {
	case <-b:
		t.Fatal("a waiter on another key was woken")
	default:
	}
	releaseA()
	releaseA2()
	again, releaseAgain := n.wait("session a") // a new wait after the wake gets a new channel
	select {
	case <-again:
		t.Fatal("a wait taken after the wake is already woken")
	default:
	}
	releaseAgain()
	releaseB()
	if got := n.waiting(); got != 0 {
		t.Errorf("%d keys kept after every follower left", got)
	}
}
