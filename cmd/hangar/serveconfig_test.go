package main

import (
	"flag"
	"reflect"
	"testing"

	"github.com/hangar-dev/hangar/internal/config"
)

// TestEveryConfigFieldHasOneSetting: each value of config.Config is set by exactly one setting
// of `hangar serve` (one flag, one HANGAR_* variable), and no two settings share a name, so a
// field added to config without its setting, or bound twice, fails here.
// TestConfigurationDocListsEverySetting then holds every setting to its row in
// docs/configuration.md.
func TestEveryConfigFieldHasOneSetting(t *testing.T) {
	t.Parallel()
	var c config.Config
	fields := map[uintptr]string{}
	configFields(reflect.ValueOf(&c).Elem(), "Config", fields)
	bound := map[string][]string{}
	names := map[string]bool{}
	for _, s := range serveSettings(&c) {
		if names[s.Name] {
			t.Errorf("two settings are named %q", s.Name)
		}
		names[s.Name] = true
		field, ok := fields[target(s.Value)]
		if !ok {
			t.Errorf("--%s sets no field of config.Config", s.Name)
			continue
		}
		bound[field] = append(bound[field], "--"+s.Name)
	}
	for _, field := range fields {
		if n := len(bound[field]); n != 1 {
			t.Errorf("%s is set by %d settings %v, want 1", field, n, bound[field])
		}
	}
}

// configFields records the address and name of every field of v that is not a struct.
func configFields(v reflect.Value, name string, fields map[uintptr]string) {
	for i := range v.NumField() {
		f, fname := v.Field(i), name+"."+v.Type().Field(i).Name
		if f.Kind() == reflect.Struct {
			configFields(f, fname, fields)
			continue
		}
		fields[f.Addr().Pointer()] = fname
	}
}

// target is the address a setting's value writes to: the pointer each of package settings'
// value kinds holds first (an OptionalSize in the Size it embeds).
func target(v flag.Value) uintptr {
	rv := reflect.ValueOf(v)
	for rv.Kind() == reflect.Struct && rv.NumField() > 0 {
		rv = rv.Field(0)
	}
	if rv.Kind() != reflect.Pointer {
		return 0
	}
	return rv.Pointer()
}
