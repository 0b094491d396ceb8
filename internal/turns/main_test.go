package turns

import (
	"os"
	"testing"

	"github.com/hangar-dev/hangar/internal/provider/providertest"
)

// hangarBin is the hangar binary the service tests run as the harness, built once.
var hangarBin string

func TestMain(m *testing.M) { os.Exit(providertest.MainWithEnvd(m, &hangarBin)) }
