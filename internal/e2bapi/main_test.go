package e2bapi_test

import (
	"os"
	"testing"

	"github.com/hangar-dev/hangar/internal/provider/providertest"
)

// hangarBin is a static hangar-envd, run as the local sandboxes' daemon.
var hangarBin string

func TestMain(m *testing.M) { os.Exit(providertest.MainWithEnvd(m, &hangarBin)) }
