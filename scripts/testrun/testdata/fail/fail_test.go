package fail

import "testing"

func TestFails(t *testing.T) { t.Fatal("this test fails") }
