package broken

import "testing"

func TestDoesNotCompile(t *testing.T) { undefined() }
