package hostile_test

import (
	"os"
	"testing"

	"github.com/hangar-dev/hangar/internal/provider/providertest"
)

// hangarBin is the built hangar (hangar-envd beside it) that every provider's run serves with.
var hangarBin string

func TestMain(m *testing.M) {
	os.Exit(providertest.MainWithHangar(m, &hangarBin))
}
