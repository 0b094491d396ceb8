package benchkit

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/docker/docker/client"

	"github.com/hangar-dev/hangar/internal/provider/docker/dockertest"
)

// Percentile is the p-th percentile (nearest rank) of xs, rounded to the microsecond when xs
// are milliseconds; 0 for none.
func Percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	i := int(math.Ceil(p/100*float64(len(s)))) - 1
	return math.Round(s[max(0, min(i, len(s)-1))]*1000) / 1000
}

// DockerImage is the Docker test image (built locally when missing), and whether an engine
// answers at all: a bench skips Docker, saying so, when none does.
func DockerImage(ctx context.Context) (image string, up bool, err error) {
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		return "", false, nil
	}
	defer cli.Close()
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := cli.Ping(pctx); err != nil {
		return "", false, nil
	}
	image, err = dockertest.EnsureImage(ctx, cli)
	return image, true, err
}

// WriteResults writes v as indented JSON to dir/name and returns the path.
func WriteResults(dir, name string, v any) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	path := filepath.Join(dir, name)
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return "", err
	}
	return path, os.WriteFile(path, append(b, '\n'), 0o644)
}

// WriteSection puts section between the begin and end markers of the README at path, adding
// the markers at its end (and the file, with a title) when they are not there yet; the rest of
// the README, the other benches' sections, stays as it is.
func WriteSection(path, begin, end, section string) error {
	old, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	body := string(old)
	i, j := strings.Index(body, begin), strings.Index(body, end)
	if i < 0 || j < i {
		if body == "" {
			body = "# Benchmarks\n"
		}
		body = strings.TrimRight(body, "\n") + "\n\n" + begin + "\n" + end + "\n"
		i, j = strings.Index(body, begin), strings.Index(body, end)
	}
	body = body[:i+len(begin)] + "\n" + section + "\n" + body[j:]
	return os.WriteFile(path, []byte(body), 0o644)
}
