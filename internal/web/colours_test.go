package web_test

import (
	"math"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestStateColoursPassAA: the text colour of every state (and the status line's "Live", which
// is --done) is 4.5:1 or more against each background it is drawn on, in light and in dark
// mode, as WCAG AA asks of text. axe-core checks what a page shows; this checks the states a
// test cannot easily make (stuck, queued, cancelled) as well.
func TestStateColoursPassAA(t *testing.T) {
	t.Parallel()
	css, err := os.ReadFile("static/fleet.css")
	if err != nil {
		t.Fatal(err)
	}
	light, dark, ok := strings.Cut(string(css), "@media (prefers-color-scheme: dark)")
	if !ok {
		t.Fatal("fleet.css has no dark mode (@media (prefers-color-scheme: dark))")
	}
	modes := map[string]map[string]string{"light": colours(light), "dark": colours(dark)}
	for _, v := range []string{"bg", "surface", "hover"} {
		if modes["dark"][v] == "" {
			t.Fatalf("dark mode does not set --%s", v)
		}
	}
	for mode, c := range modes {
		for _, fg := range []string{"fg", "muted", "running", "queued", "done", "failed", "cancelled", "idle", "stuck"} {
			for _, bg := range []string{"bg", "surface", "hover"} {
				if r := contrast(c[fg], c[bg]); r < 4.5 {
					t.Errorf("%s mode: --%s %s on --%s %s is %.2f:1, under 4.5:1", mode, fg, c[fg], bg, c[bg], r)
				}
			}
		}
	}
}

var colourVar = regexp.MustCompile(`--([a-z]+):\s*#([0-9a-fA-F]{6}|[0-9a-fA-F]{3})\b`)

// colours returns the first value of each custom property in css set to a hex colour.
func colours(css string) map[string]string {
	c := map[string]string{}
	for _, m := range colourVar.FindAllStringSubmatch(css, -1) {
		if _, seen := c[m[1]]; !seen {
			c[m[1]] = m[2]
		}
	}
	return c
}

// contrast is WCAG 2's contrast ratio of two hex colours.
func contrast(a, b string) float64 {
	la, lb := luminance(a), luminance(b)
	return (math.Max(la, lb) + 0.05) / (math.Min(la, lb) + 0.05)
}

func luminance(hex string) float64 {
	if len(hex) == 3 {
		hex = string([]byte{hex[0], hex[0], hex[1], hex[1], hex[2], hex[2]})
	}
	var l float64
	for i, w := range []float64{0.2126, 0.7152, 0.0722} {
		n, _ := strconv.ParseUint(hex[2*i:2*i+2], 16, 8)
		c := float64(n) / 255
		if c <= 0.03928 {
			c /= 12.92
		} else {
			c = math.Pow((c+0.055)/1.055, 2.4)
		}
		l += w * c
	}
	return l
}
