package ids_test

import (
	"regexp"
	"testing"

	"go.uber.org/goleak"

	"github.com/hangar-dev/hangar/internal/ids"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestForms(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		id   func() string
		form string
	}{
		{func() string { return ids.New("turn_", 16) }, `^turn_[a-z2-7]{16}$`},
		{func() string { return ids.New("r_", 26) }, `^r_[a-z2-7]{26}$`},
		{func() string { return ids.Hex("p_", 12) }, `^p_[0-9a-f]{12}$`},
		{func() string { return ids.Hex("x", 9) }, `^x[0-9a-f]{9}$`},
		{func() string { return ids.Hex("", 32) }, `^[0-9a-f]{32}$`},
	} {
		re := regexp.MustCompile(tc.form)
		seen := map[string]bool{}
		for range 100 {
			id := tc.id()
			if !re.MatchString(id) {
				t.Fatalf("id %q does not match %s", id, tc.form)
			}
			if seen[id] {
				t.Fatalf("id %q made twice in 100", id)
			}
			seen[id] = true
		}
	}
}
