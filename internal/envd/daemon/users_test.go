package daemon

import (
	"context"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"os/user"
	"strconv"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	rpc "github.com/hangar-dev/hangar/internal/envd/spec/process"
	"github.com/hangar-dev/hangar/internal/envd/spec/process/processconnect"
)

// noPasswd is the user database of an image without /etc/passwd: every lookup fails as
// os/user's does when the file is missing.
var noPasswd = userDB{
	lookup: func(string) (*user.User, error) {
		return nil, &fs.PathError{Op: "open", Path: "/etc/passwd", Err: fs.ErrNotExist}
	},
	lookupID: func(string) (*user.User, error) {
		return nil, &fs.PathError{Op: "open", Path: "/etc/passwd", Err: fs.ErrNotExist}
	},
}

// TestNoPasswd: without a user database the daemon still runs commands, as its own uid and
// gid with HOME=/, for a request that names no user and for one that names the fallback.
func TestNoPasswd(t *testing.T) {
	t.Parallel()
	d := New(Config{AccessToken: "tok"})
	d.users = noPasswd
	if err := d.Check(); err != nil {
		t.Fatalf("check: %v", err)
	}
	srv := httptest.NewServer(d.Handler())
	t.Cleanup(func() { srv.Close(); d.Close() })
	c := processconnect.NewProcessClient(srv.Client(), srv.URL, connect.WithProtoJSON())

	own := strconv.Itoa(os.Getuid())
	if os.Getuid() == 0 {
		own = "root"
	}
	for _, user := range []string{"", own} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		req := connect.NewRequest(&rpc.StartRequest{Process: &rpc.ProcessConfig{Cmd: "sh", Args: []string{"-c", `echo "$(id -u):$(id -g):$HOME:$USER"`}}})
		req.Header().Set("X-Access-Token", "tok")
		if user != "" {
			req.Header().Set("Authorization", basic(user))
		}
		st, err := c.Start(ctx, req)
		if err != nil {
			t.Fatalf("start as %q: %v", user, err)
		}
		var out strings.Builder
		var exit int32 = -2
		for st.Receive() {
			ev := st.Msg().GetEvent()
			out.Write(ev.GetData().GetStdout())
			if e := ev.GetEnd(); e != nil {
				exit = e.GetExitCode()
			}
		}
		if err := st.Err(); err != nil {
			t.Fatalf("stream as %q: %v", user, err)
		}
		want := strconv.Itoa(os.Getuid()) + ":" + strconv.Itoa(os.Getgid()) + ":/:" + own + "\n"
		if exit != 0 || out.String() != want {
			t.Errorf("as %q: exit %d, output %q; want 0, %q", user, exit, out.String(), want)
		}
	}

	// Another name is still unknown: unauthenticated, with the name in the message.
	req := connect.NewRequest(&rpc.ListRequest{})
	req.Header().Set("X-Access-Token", "tok")
	req.Header().Set("Authorization", basic("alice"))
	_, err := c.List(context.Background(), req)
	if connect.CodeOf(err) != connect.CodeUnauthenticated || !strings.Contains(err.Error(), `"alice"`) {
		t.Errorf("list as alice: %v; want unauthenticated naming alice", err)
	}
}

// TestCheckFailsAtStart: a daemon whose default user or working directory does not exist
// does not serve; Serve returns the reason at once.
func TestCheckFailsAtStart(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"unknown user", Config{DefaultUser: "no-such-user-here"}, `unknown user "no-such-user-here"`},
		{"missing workdir", Config{Workdir: "/no/such/dir"}, `"/no/such/dir" does not exist`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			d := New(tc.cfg)
			d.users = noPasswd
			ln, err := Listen("127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			err = d.Serve(context.Background(), ln)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("serve: %v; want an error containing %s", err, tc.want)
			}
			if _, err := http.Get("http://" + ln.Addr().String() + "/health"); err == nil {
				t.Error("the listener is still open after a failed check")
			}
		})
	}
}

func basic(user string) string {
	r, _ := http.NewRequest(http.MethodGet, "http://x", nil)
	r.SetBasicAuth(user, "")
	return r.Header.Get("Authorization")
}
