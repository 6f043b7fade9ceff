package readmecheck

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"unicode"
)

var (
	// inlineLinkRe finds the target of [text](target) and ![alt](target).
	inlineLinkRe = regexp.MustCompile(`\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)`)
	// refLinkRe finds the target of a reference definition, [name]: target.
	refLinkRe = regexp.MustCompile(`^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)`)
	// codeSpanRe finds inline code, whose brackets are no links.
	codeSpanRe = regexp.MustCompile("`+[^`]*`+")
	// schemeRe tells a link to another site (https:, mailto:) from a path.
	schemeRe = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)
)

// BrokenLinks returns, one line each, the links of the Markdown file at
// path that lead nowhere in the checkout: a relative link to a file or
// directory that does not exist, or with a #fragment that names no
// heading of the Markdown file it points at. Links to other sites are
// not followed. Links inside code blocks and code spans are not links.
func BrokenLinks(path string) ([]string, error) {
	md, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var broken []string
	for _, l := range links(string(md)) {
		if schemeRe.MatchString(l.target) {
			continue
		}
		file, frag, _ := strings.Cut(l.target, "#")
		target := path
		if file != "" {
			target = filepath.Join(filepath.Dir(path), filepath.FromSlash(file))
		}
		fi, err := os.Stat(target)
		if err != nil {
			broken = append(broken, fmt.Sprintf("%s:%d: %s: no such file or directory", path, l.line, l.target))
			continue
		}
		if frag == "" {
			continue
		}
		if fi.IsDir() || !strings.HasSuffix(target, ".md") {
			broken = append(broken, fmt.Sprintf("%s:%d: %s: #%s, but %s is no Markdown file", path, l.line, l.target, frag, target))
			continue
		}
		doc, err := os.ReadFile(target)
		if err != nil {
			return nil, err
		}
		if !headingAnchors(string(doc))[frag] {
			broken = append(broken, fmt.Sprintf("%s:%d: %s: no heading #%s in %s", path, l.line, l.target, frag, target))
		}
	}
	return broken, nil
}

// A link is a link's target and the line (from 1) it is on.
type link struct {
	target string
	line   int
}

// links returns the links of a Markdown document outside its code.
func links(md string) []link {
	var out []link
	fence := ""
	for i, line := range strings.Split(strings.ReplaceAll(md, "\r\n", "\n"), "\n") {
		t := strings.TrimLeft(line, " ")
		if fence != "" {
			if strings.HasPrefix(t, fence) && strings.Trim(strings.TrimSpace(t), fence[:1]) == "" {
				fence = ""
			}
			continue
		}
		if f := fenceRe.FindStringSubmatch(line); f != nil {
			fence = f[2]
			continue
		}
		if m := refLinkRe.FindStringSubmatch(line); m != nil {
			out = append(out, link{m[1], i + 1})
			continue
		}
		for _, m := range inlineLinkRe.FindAllStringSubmatch(codeSpanRe.ReplaceAllString(line, ""), -1) {
			out = append(out, link{m[1], i + 1})
		}
	}
	return out
}

// headingAnchors returns the anchors GitHub gives the ATX headings of a
// Markdown document: lower case, spaces as hyphens, punctuation other
// than hyphens and underscores dropped, and -1, -2, ... after repeats.
func headingAnchors(md string) map[string]bool {
	anchors := map[string]bool{}
	seen := map[string]int{}
	fence := ""
	for _, line := range strings.Split(md, "\n") {
		t := strings.TrimLeft(line, " ")
		if fence != "" {
			if strings.HasPrefix(t, fence) && strings.Trim(strings.TrimSpace(t), fence[:1]) == "" {
				fence = ""
			}
			continue
		}
		if f := fenceRe.FindStringSubmatch(line); f != nil {
			fence = f[2]
			continue
		}
		if len(line)-len(t) > 3 || !strings.HasPrefix(t, "#") {
			continue
		}
		text := strings.TrimLeft(t, "#")
		if len(t)-len(text) > 6 || (text != "" && text[0] != ' ' && text[0] != '\t') {
			continue
		}
		var b strings.Builder
		for _, r := range strings.ToLower(strings.TrimSpace(text)) {
			switch {
			case r == ' ':
				b.WriteByte('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				b.WriteRune(r)
			}
		}
		a := b.String()
		if n := seen[a]; n > 0 {
			anchors[fmt.Sprintf("%s-%d", a, n)] = true
		} else {
			anchors[a] = true
		}
		seen[a]++
	}
	return anchors
}
