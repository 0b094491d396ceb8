package daemon

import (
	"errors"
	"fmt"
	"os"
	"os/user"
	"strconv"
	"syscall"
)

// errNotPermitted is returned when a request names a user the daemon cannot act as.
var errNotPermitted = errors.New("not permitted")

// identity is a user requests run as.
type identity struct {
	name     string
	home     string
	uid, gid uint32
	groups   []uint32
	// switchTo is true when processes must change to this user: the daemon runs as root.
	switchTo bool
}

// userDB is where users are looked up: the os/user functions, replaced in tests to give an
// image without /etc/passwd.
type userDB struct {
	lookup   func(name string) (*user.User, error)
	lookupID func(uid string) (*user.User, error)
}

var systemUsers = userDB{lookup: user.Lookup, lookupID: user.LookupId}

// ownFallback is the daemon's own user when the user database has no entry for its uid (an
// image without /etc/passwd, or run with a uid it does not list): named "root" for uid 0 and
// by the number otherwise, with HOME=/ — so the daemon runs in any image.
func ownFallback() *user.User {
	name := strconv.Itoa(os.Getuid())
	if os.Getuid() == 0 {
		name = "root"
	}
	return &user.User{Uid: strconv.Itoa(os.Getuid()), Gid: strconv.Itoa(os.Getgid()), Username: name, HomeDir: "/"}
}

// lookupIdentity resolves name (empty: the daemon's own user). A daemon running as root may
// act as any user; any other daemon only as itself. The daemon's own user is always found:
// without an entry in the user database it is ownFallback, which a request may also name.
func (db userDB) lookupIdentity(name string) (*identity, error) {
	var u *user.User
	var err error
	if name == "" {
		if u, err = db.lookupID(strconv.Itoa(os.Getuid())); err != nil {
			u = ownFallback()
		}
	} else if u, err = db.lookup(name); err != nil {
		own := ownFallback()
		_, ownErr := db.lookupID(own.Uid)
		if ownErr == nil || (name != own.Username && name != own.Uid) {
			return nil, fmt.Errorf("unknown user %q: there is no such user in this sandbox", name)
		}
		u = own
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("user %q has a uid or gid that is not a number", u.Username)
	}
	id := &identity{name: u.Username, home: u.HomeDir, uid: uint32(uid), gid: uint32(gid), groups: []uint32{uint32(gid)}}
	if os.Getuid() == 0 {
		id.switchTo = true
		if gids, err := u.GroupIds(); err == nil {
			for _, g := range gids {
				if n, err := strconv.ParseUint(g, 10, 32); err == nil && uint32(n) != id.gid {
					id.groups = append(id.groups, uint32(n))
				}
			}
		}
	} else if int(id.uid) != os.Getuid() {
		return nil, fmt.Errorf("%w: the daemon runs as uid %d and cannot act as user %q", errNotPermitted, os.Getuid(), name)
	}
	if id.home == "" {
		id.home = "/"
	}
	return id, nil
}

// credential is what a process started for id runs with; nil means the daemon's own.
func (id *identity) credential() *syscall.Credential {
	if !id.switchTo {
		return nil
	}
	return &syscall.Credential{Uid: id.uid, Gid: id.gid, Groups: id.groups}
}

// chown gives path to id when the daemon acts for another user; errors are ignored because
// the file is usable either way.
func (id *identity) chown(path string) {
	if id.switchTo {
		_ = os.Lchown(path, int(id.uid), int(id.gid))
	}
}
