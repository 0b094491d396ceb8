package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/hangar-dev/hangar/internal/wire"
)

// fleetWeb opens the Fleet page in the person's browser, signed in as them: a one-time sign-in
// ticket, asked for with their token, goes in the address's fragment (which the browser sends
// to no server), and the page trades it for a token of its own. Without a browser to start it
// prints the address to open.
func (a *app) fleetWeb(ctx context.Context, c *client) error {
	var t wire.Ticket
	if err := c.do(ctx, "POST", "/api/fleet/sign-in-tickets", nil, &t); err != nil {
		return err
	}
	page := c.base + "/fleet/"
	link := page + "#ticket=" + t.Ticket
	opened, err := a.browse(ctx, link)
	if opened != "" {
		fmt.Fprintf(a.cfg.Stdout, "Opened %s in your browser (%s), signed in by a link that works once, within a minute.\n", page, opened)
		return nil
	}
	if err != nil {
		fmt.Fprintf(a.cfg.Stderr, "hangar: %v\n", err)
	}
	fmt.Fprintf(a.cfg.Stdout, "Open this address in your browser within a minute; it signs the page in once:\n%s\n", link)
	return nil
}

// browse starts a browser on url: each command of $BROWSER (a list separated by colons, "%s"
// standing for the address or the address added at the end), else xdg-open (open on macOS). It
// returns the command that opened it, or "" and why none did.
func (a *app) browse(ctx context.Context, url string) (string, error) {
	var tries [][]string
	for _, entry := range strings.Split(a.cfg.Getenv("BROWSER"), ":") {
		args := strings.Fields(entry)
		if len(args) == 0 {
			continue
		}
		if strings.Contains(entry, "%s") {
			for i := range args {
				args[i] = strings.ReplaceAll(args[i], "%s", url)
			}
		} else {
			args = append(args, url)
		}
		tries = append(tries, args)
	}
	if runtime.GOOS == "darwin" {
		tries = append(tries, []string{"open", url})
	} else {
		tries = append(tries, []string{"xdg-open", url})
	}
	var errs []error
	for _, args := range tries {
		path, err := a.lookPath(args[0])
		if err != nil {
			continue
		}
		cmd := exec.CommandContext(ctx, path, args[1:]...)
		// xdg-open and open return once the browser has the address; so does a browser that
		// hands it to its running window.
		if err := cmd.Run(); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", args[0], err))
			continue
		}
		return args[0], nil
	}
	if len(errs) == 0 {
		return "", errors.New("no browser to open the page with (set BROWSER, or install xdg-utils)")
	}
	return "", fmt.Errorf("no browser opened the page: %w", errors.Join(errs...))
}

// lookPath finds the executable name in the PATH of hangar's environment (Config.Getenv), as
// a shell would; a name with a slash is a path already.
func (a *app) lookPath(name string) (string, error) {
	if strings.Contains(name, "/") {
		return name, nil
	}
	for _, dir := range filepath.SplitList(a.cfg.Getenv("PATH")) {
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", exec.ErrNotFound
}
