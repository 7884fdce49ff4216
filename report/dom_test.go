package report

import (
	"encoding/xml"
	"errors"
	"io"
	"strings"
	"testing"
)

// node is an element of a parsed HTML page.
type node struct {
	Name     string
	Attr     map[string]string
	Children []*node
	Text     string // the text directly inside
}

// parseDOM parses an HTML page with encoding/xml in its lenient HTML mode
// (void elements closed, HTML entities known): enough for the serialised DOM
// that Chromium prints and for WriteHTML's output.
func parseDOM(t *testing.T, r io.Reader) *node {
	t.Helper()
	d := xml.NewDecoder(r)
	d.Strict = false
	d.AutoClose = xml.HTMLAutoClose
	d.Entity = xml.HTMLEntity
	root := &node{Name: "#root"}
	stack := []*node{root}
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("parse the page: %v", err)
		}
		top := stack[len(stack)-1]
		switch tok := tok.(type) {
		case xml.StartElement:
			n := &node{Name: strings.ToLower(tok.Name.Local), Attr: map[string]string{}}
			for _, a := range tok.Attr {
				name := a.Name.Local
				if a.Name.Space != "" && a.Name.Space != "http://www.w3.org/2000/svg" {
					name = a.Name.Space + ":" + name
				}
				n.Attr[strings.ToLower(name)] = a.Value
			}
			top.Children = append(top.Children, n)
			stack = append(stack, n)
		case xml.EndElement:
			name := strings.ToLower(tok.Name.Local)
			for i := len(stack) - 1; i > 0; i-- {
				if stack[i].Name == name {
					stack = stack[:i]
					break
				}
			}
		case xml.CharData:
			top.Text += string(tok)
		}
	}
	return root
}

// all returns the elements under n (n included) for which match is true,
// in document order.
func (n *node) all(match func(*node) bool) []*node {
	var out []*node
	var walk func(*node)
	walk = func(m *node) {
		if match(m) {
			out = append(out, m)
		}
		for _, c := range m.Children {
			walk(c)
		}
	}
	walk(n)
	return out
}

// tag matches elements named name with every class in classes.
func tag(name string, classes ...string) func(*node) bool {
	return func(n *node) bool {
		if n.Name != name {
			return false
		}
		have := strings.Fields(n.Attr["class"])
		for _, c := range classes {
			found := false
			for _, h := range have {
				found = found || h == c
			}
			if !found {
				return false
			}
		}
		return true
	}
}

// text is all the text under n.
func (n *node) text() string {
	var b strings.Builder
	var walk func(*node)
	walk = func(m *node) {
		b.WriteString(m.Text)
		for _, c := range m.Children {
			walk(c)
		}
	}
	walk(n)
	return b.String()
}
