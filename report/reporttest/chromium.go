package reporttest

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"os"
	"os/exec"
	"testing"
	"time"
)

// SkipMessage is what a test says when it skips for want of Chromium.
const SkipMessage = "chromium not found: skipped the report rendering test"

// Chromium returns the path of a Chromium binary, or "" when there is none.
func Chromium() string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "headless_shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// Artifacts returns the directory where a test keeps what a person may want
// to look at afterwards: $MMLAB_ARTIFACTS when set (created if need be),
// else a temporary directory of the test.
func Artifacts(t testing.TB) string {
	t.Helper()
	dir := os.Getenv("MMLAB_ARTIFACTS")
	if dir == "" {
		return t.TempDir()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// run runs headless Chromium bin on url with args and returns its stdout.
// It runs as root too (--no-sandbox), with a profile and temporary
// directory of its own under t.TempDir().
func run(t testing.TB, bin, url string, args ...string) []byte {
	t.Helper()
	// A generous bound so that a hung browser fails the test rather than
	// the whole run; it is not a measure of anything.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	args = append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
		"--no-first-run", "--user-data-dir=" + t.TempDir()}, append(args, url)...)
	cmd := exec.CommandContext(ctx, bin, args...)
	// Its temporary files (/tmp/.org.chromium.Chromium.*) go to the test's
	// directory too, so that a test run leaves /tmp as it found it.
	cmd.Env = append(os.Environ(), "TMPDIR="+t.TempDir())
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %v: %v\n%s", bin, args, err, stderr.Bytes())
	}
	return stdout.Bytes()
}

// DOM opens url in headless Chromium bin and returns the page Chromium
// built, parsed.
func DOM(t testing.TB, bin, url string) *Node {
	t.Helper()
	root, err := Parse(bytes.NewReader(run(t, bin, url, "--dump-dom")))
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// Screenshot writes a PNG of the whole page at url, width pixels wide, to
// path and returns it. Chromium shoots its window, so the window grows
// until the page ends above its bottom, and the blank rows below the page
// are cut off. It fails the test when the image has few colours: a blank or
// failed render.
func Screenshot(t testing.TB, bin, url, path string, width int) image.Image {
	t.Helper()
	const margin = 32 // pixels kept below the page's last drawn row
	for h := 4096; ; h *= 2 {
		run(t, bin, url, "--screenshot="+path, fmt.Sprintf("--window-size=%d,%d", width, h))
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(f)
		f.Close()
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if b := img.Bounds(); b.Dx() != width || b.Dy() != h {
			t.Fatalf("%s is %dx%d, want %dx%d", path, b.Dx(), b.Dy(), width, h)
		}
		last := lastDrawnRow(img)
		if last+margin >= h && h < 1<<15 {
			continue // the page may go on below the window
		}
		cut := img.(interface {
			SubImage(image.Rectangle) image.Image
		}).SubImage(image.Rect(0, 0, width, max(min(last+margin, h), 1)))
		f, err = os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := png.Encode(f, cut); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		if n := colours(cut); n < 50 {
			t.Errorf("%s has %d colours: not a drawn page", path, n)
		}
		return cut
	}
}

// lastDrawnRow is the last row of img with a pixel that differs from its
// top left pixel (the page's background), or -1.
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

// colours counts the colours of img, on a grid of every third pixel. A drawn
// page has text, lines and the palette's colours; a blank one has one.
func colours(img image.Image) int {
	b := img.Bounds()
	seen := map[color.RGBA]bool{}
	for y := b.Min.Y; y < b.Max.Y; y += 3 {
		for x := b.Min.X; x < b.Max.X; x += 3 {
			seen[color.RGBAModel.Convert(img.At(x, y)).(color.RGBA)] = true
		}
	}
	return len(seen)
}
