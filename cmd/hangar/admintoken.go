package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/hangar-dev/hangar/internal/config"
	"github.com/hangar-dev/hangar/internal/settings"
)

const adminTokenSummary = "Prints the first admin token `hangar serve` made on its first start, from <data dir>/admin-token. " +
	"For an image with no shell (kubectl exec POD -- hangar admin-token): serve prints the token only to a terminal, never to a log."

func runAdminToken(_ context.Context, args []string, stdout, stderr io.Writer) error {
	dataDir := config.Default().DataDir
	ss := []settings.Setting{
		{Name: "data-dir", Arg: "DIR", Usage: "serve's data dir (HANGAR_DATA_DIR, shared with serve), where it keeps admin-token", Value: settings.String{P: &dataDir, Check: settings.NonEmpty}},
	}
	if err := settings.Parse("hangar admin-token", adminTokenSummary, "HANGAR_", ss, args, settings.LookupEnv, stdout); err != nil {
		return err
	}
	path := filepath.Join(dataDir, adminTokenFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%s does not exist: hangar made no first admin token here (the store had tokens already, the tokens file names an admin, "+
			"or another replica made it: its log says where)", path)
	}
	if err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	fmt.Fprintln(stdout, strings.TrimSpace(string(b)))
	return nil
}
