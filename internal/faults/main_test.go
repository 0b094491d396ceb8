package faults_test

import (
	"flag"
	"os"
	"testing"

	"github.com/hangar-dev/hangar/internal/provider/providertest"
)

// hangarBin is the built hangar (hangar-envd beside it) that every scenario runs.
var hangarBin string

// parallel is how many scenarios run at once unless -parallel says otherwise: a scenario
// mostly waits (on a fault's bound, on output every 0.2 s), so more than go test's default
// (GOMAXPROCS, 2 in CI) keeps the suite within its few minutes; more than 4 loads a 2-core
// machine so that a bound measured on the wall clock (a cancel's 10 s) is missed for the load.
const parallel = "4"

func TestMain(m *testing.M) {
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		flag.Set("test.parallel", parallel)
	}
	os.Exit(providertest.MainWithHangar(m, &hangarBin))
}
