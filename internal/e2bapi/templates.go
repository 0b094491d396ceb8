package e2bapi

import (
	"fmt"
	"slices"
	"strings"

	"github.com/hangar-dev/hangar/internal/names"
)

// DefaultTemplate is the template of a request that names none (the SDK's own default) and the
// one every hangar offers: the server's default provider with its default image.
const DefaultTemplate = "base"

// Template is what an E2B template id or alias makes on hangar: a sandbox of a provider, with
// an image (docker, kubernetes) or an E2B template (e2b); empty: the provider's default.
type Template struct {
	Provider string // "": the server's default provider
	Image    string // docker and kubernetes: the image
	E2B      string // e2b: the template at E2B
}

// Templates maps E2B template ids to what they make.
type Templates map[string]Template

// ParseTemplates reads HANGAR_E2B_TEMPLATES: comma-separated name=provider[:image] entries
// (base=docker:hangar-sandbox:latest,py=docker:python:3.12,gpu=e2b:my-e2b-template,dev=local).
// base, when not listed, is the server's default provider with its default image.
func ParseTemplates(s string) (Templates, error) {
	ts := Templates{DefaultTemplate: {}}
	seen := map[string]bool{}
	for entry := range strings.SplitSeq(s, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		name, spec, ok := strings.Cut(entry, "=")
		if !ok {
			return nil, fmt.Errorf("template %q: write name=provider[:image], such as base=docker:hangar-sandbox:latest", entry)
		}
		name = strings.TrimSpace(name)
		if err := names.CheckLabel("template name", name); err != nil {
			return nil, fmt.Errorf("template %q: %v", entry, err)
		}
		if seen[name] {
			return nil, fmt.Errorf("template %s is listed twice", name)
		}
		seen[name] = true
		prov, image, _ := strings.Cut(strings.TrimSpace(spec), ":")
		t := Template{Provider: prov}
		switch prov {
		case "docker", "kubernetes":
			t.Image = image
		case "e2b":
			t.E2B = image
		case "local":
			if image != "" {
				return nil, fmt.Errorf("template %s: the local provider takes no image (it runs on this machine), but %q was given", name, image)
			}
		default:
			return nil, fmt.Errorf("template %s: unknown provider %q (docker, kubernetes, e2b or local)", name, prov)
		}
		ts[name] = t
	}
	return ts, nil
}

// lookup returns the template id, or a sentence saying which there are.
func (ts Templates) lookup(id string) (Template, error) {
	if t, ok := ts[id]; ok {
		return t, nil
	}
	return Template{}, fmt.Errorf("there is no template %q on this hangar; it offers %s (HANGAR_E2B_TEMPLATES lists them)", id, strings.Join(ts.names(), ", "))
}

func (ts Templates) names() []string {
	out := make([]string, 0, len(ts))
	for n := range ts {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}
