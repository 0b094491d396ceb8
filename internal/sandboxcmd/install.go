package sandboxcmd

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// Install runs the install verb (`hangar-envd install`, `hangar install`; name is how its help
// calls it): it copies the running executable to DEST (DEST/its
// name when DEST is a directory), mode 0755. It is what the Kubernetes provider's init
// container runs to place hangar-envd in a sandbox pod, since hangar's image is FROM scratch
// and has no cp. The copy is written beside DEST and renamed over it, so DEST is never a
// half-written binary, even if the verb is killed.
func Install(_ context.Context, name string, args []string, _, stderr io.Writer) error {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: %s DEST\n\nCopies this program to DEST (a file, or a directory to copy it into), mode 0755.\n", name)
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 || fs.Arg(0) == "" {
		fs.Usage()
		return fmt.Errorf("want one argument, the destination; got %d", fs.NArg())
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find the running executable: %w", err)
	}
	return installFile(exe, fs.Arg(0))
}

// installFile copies src to dest (dest/base(src) when dest is a directory) through a temporary
// file in the destination's directory, renamed into place.
func installFile(src, dest string) error {
	if fi, err := os.Stat(dest); err == nil && fi.IsDir() {
		dest = filepath.Join(dest, filepath.Base(src))
	}
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("open %s: %w", src, err)
	}
	defer in.Close()
	tmp, err := os.CreateTemp(filepath.Dir(dest), "."+filepath.Base(dest)+".install-*")
	if err != nil {
		return fmt.Errorf("install %s: %w", dest, err)
	}
	_, err = io.Copy(tmp, in)
	err = errors.Join(err, tmp.Chmod(0o755), tmp.Sync())
	err = errors.Join(err, tmp.Close())
	if err == nil {
		err = os.Rename(tmp.Name(), dest)
	}
	if err != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("install %s as %s: %w", src, dest, err)
	}
	return nil
}
