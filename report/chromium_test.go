package report

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// chromium returns the path of a Chromium binary, or "" when there is none.
func chromium() string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "headless_shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// artifacts is where the test keeps what a person may want to look at:
// $MMLAB_ARTIFACTS when set, else a temporary directory.
func artifacts(t *testing.T) string {
	dir := os.Getenv("MMLAB_ARTIFACTS")
	if dir == "" {
		return t.TempDir()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// runChromium runs headless Chromium on url with args and returns what it
// printed on stdout.
func runChromium(t *testing.T, bin, url string, args ...string) []byte {
	t.Helper()
	// A generous bound so that a hung browser fails the test rather than
	// the whole run; it is not a measure of anything.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	args = append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
		"--no-first-run", "--user-data-dir=" + t.TempDir()}, append(args, url)...)
	cmd := exec.CommandContext(ctx, bin, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %v: %v\n%s", bin, args, err, stderr.Bytes())
	}
	return stdout.Bytes()
}

// TestReportInChromium renders a page as `mmlab all` fills it, opens it in
// headless Chromium and checks the page Chromium built: every seed, chart,
// series and point, no NaN, numbers in every table. It keeps screenshots at
// a desktop and a phone width.
func TestReportInChromium(t *testing.T) {
	bin := chromium()
	if bin == "" {
		t.Skip("chromium not found: skipped the report rendering test")
	}
	out := artifacts(t)
	p := samplePage()
	page := filepath.Join(out, "index.html")
	f, err := os.Create(page)
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteHTML(f, p); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	url := "file://" + page

	dom := runChromium(t, bin, url, "--dump-dom")
	root := parseDOM(t, bytes.NewReader(dom))
	if len(root.all(tag("figure", "chart"))) == 0 {
		t.Fatalf("Chromium's page has no chart:\n%s", dom)
	}
	checkPage(t, root, p)

	for _, size := range []struct {
		name string
		w    int
	}{{"report-wide.png", 1280}, {"report-narrow.png", 420}} {
		shot := filepath.Join(out, size.name)
		img := screenshot(t, bin, url, shot, size.w)
		b := img.Bounds()
		// A drawn page has text, lines and the palette's colours; a blank
		// or failed render has one or two colours.
		colours := map[uint32]bool{}
		for y := b.Min.Y; y < b.Max.Y; y += 3 {
			for x := b.Min.X; x < b.Max.X; x += 3 {
				r, g, bl, _ := img.At(x, y).RGBA()
				colours[r>>8<<16|g>>8<<8|bl>>8] = true
			}
		}
		if len(colours) < 50 {
			t.Errorf("%s has %d colours: not a drawn page", shot, len(colours))
		}
		t.Logf("screenshot %s (%dx%d)", shot, b.Dx(), b.Dy())
	}
}

// screenshot takes a screenshot of the whole page at width w into path and
// returns it. Chromium shoots its window, so the window grows until the page
// ends above its bottom, and the blank rows below the page are cut off.
func screenshot(t *testing.T, bin, url, path string, w int) image.Image {
	t.Helper()
	const margin = 32 // pixels kept below the page's last drawn row
	for h := 4096; ; h *= 2 {
		runChromium(t, bin, url, "--screenshot="+path, fmt.Sprintf("--window-size=%d,%d", w, h))
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(f)
		f.Close()
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if b := img.Bounds(); b.Dx() != w || b.Dy() != h {
			t.Fatalf("%s is %dx%d, want %dx%d", path, b.Dx(), b.Dy(), w, h)
		}
		last := lastDrawnRow(img)
		if last < 0 {
			return img // blank: the caller says so
		}
		if last+margin < h || h >= 1<<15 {
			cut := img.(interface {
				SubImage(image.Rectangle) image.Image
			}).SubImage(image.Rect(0, 0, w, min(last+margin, h)))
			f, err := os.Create(path)
			if err != nil {
				t.Fatal(err)
			}
			if err := png.Encode(f, cut); err != nil {
				t.Fatal(err)
			}
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
			return cut
		}
	}
}

// lastDrawnRow is the last row of img with a pixel that differs from its top
// left pixel (the page's background), or -1.
func lastDrawnRow(img image.Image) int {
	b := img.Bounds()
	bg := color.RGBAModel.Convert(img.At(b.Min.X, b.Min.Y))
	for y := b.Max.Y - 1; y >= b.Min.Y; y-- {
		for x := b.Min.X; x < b.Max.X; x++ {
			if color.RGBAModel.Convert(img.At(x, y)) != bg {
				return y
			}
		}
	}
	return -1
}
