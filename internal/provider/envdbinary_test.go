package provider

import (
	"os"
	"path/filepath"
	"testing"
)

// TestEnvdBeside: a provider's default hangar-envd is the one beside the running executable;
// without one, the executable itself, flagged as a fallback unless it is hangar-envd.
func TestEnvdBeside(t *testing.T) {
	t.Parallel()
	withEnvd, without := t.TempDir(), t.TempDir()
	for _, f := range []string{filepath.Join(withEnvd, "hangar"), filepath.Join(withEnvd, EnvdName), filepath.Join(without, "hangar")} {
		if err := os.WriteFile(f, nil, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name, exe, want string
		fallback        bool
	}{
		{"beside hangar", filepath.Join(withEnvd, "hangar"), filepath.Join(withEnvd, EnvdName), false},
		{"hangar alone", filepath.Join(without, "hangar"), filepath.Join(without, "hangar"), true},
		{"hangar-envd itself", filepath.Join(withEnvd, EnvdName), filepath.Join(withEnvd, EnvdName), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, fallback := envdBeside(tc.exe)
			if got != tc.want || fallback != tc.fallback {
				t.Errorf("envdBeside(%s) = %s, fallback %v; want %s, %v", tc.exe, got, fallback, tc.want, tc.fallback)
			}
		})
	}
}
