package mcp

import "testing"

// TestHolderOf: a session id names its replica before its last dot; one with none names none.
func TestHolderOf(t *testing.T) {
	t.Parallel()
	for sid, want := range map[string]string{
		"r_abc.RANDOMPART":    "r_abc",
		"pod.name.RANDOMPART": "pod.name",
		"RANDOMPARTONLY":      "",
		".RANDOMPART":         "",
		"r_abc.":              "r_abc",
		"":                    "",
	} {
		if got := holderOf(sid); got != want {
			t.Errorf("holderOf(%q) = %q, want %q", sid, got, want)
		}
	}
}
