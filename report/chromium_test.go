package report

import (
	"os"
	"path/filepath"
	"testing"

	"mmlab/report/reporttest"
)

// TestReportInChromium renders a page as `mmlab all` fills it, opens it in
// headless Chromium and checks the page Chromium built: every seed, chart,
// series and point, no NaN, numbers in every table. It keeps the page and
// screenshots of it at a desktop and a phone width.
func TestReportInChromium(t *testing.T) {
	bin := reporttest.Chromium()
	if bin == "" {
		t.Skip(reporttest.SkipMessage)
	}
	out := reporttest.Artifacts(t)
	p := samplePage()
	page := filepath.Join(out, "index.html")
	if err := os.WriteFile(page, render(t, p), 0o644); err != nil {
		t.Fatal(err)
	}
	url := "file://" + page
	checkPage(t, reporttest.DOM(t, bin, url), p)
	for _, s := range []struct {
		name  string
		width int
	}{{"report-wide.png", 1280}, {"report-narrow.png", 420}} {
		shot := filepath.Join(out, s.name)
		b := reporttest.Screenshot(t, bin, url, shot, s.width).Bounds()
		t.Logf("screenshot %s (%dx%d)", shot, b.Dx(), b.Dy())
	}
}
