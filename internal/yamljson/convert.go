package yamljson

import (
	"fmt"
	"hash/maphash"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Limits bound one conversion. Every limit is checked as the events arrive,
// before the work it bounds; a zero limit means no limit.
type Limits struct {
	// MaxDepth bounds the nesting of maps and lists, counted through
	// aliases.
	MaxDepth int
	// MaxNodes bounds the keys, values and collections, each alias counted
	// as a copy of what it names.
	MaxNodes int
	// MaxAliases bounds the alias references ("*a"), and separately the
	// anchors defined ("&a").
	MaxAliases int
	// MaxOutput bounds the bytes of JSON produced.
	MaxOutput int
	// TooLarge and TooDeep are wrapped by the errors of the limits above
	// (default ErrTooLarge and ErrTooDeep), so callers can use their own
	// sentinels.
	TooLarge, TooDeep error
}

// anchorDef is one anchored node: where its JSON is in the output, and its
// measure, so an alias is copied and counted without walking anything.
type anchorDef struct {
	id         int
	open       bool // the node has not ended yet (an alias to it is a cycle)
	start, end int
	nodes      int
	height     int
}

// frame is one open map or list.
type frame struct {
	mapping  bool
	entries  int // values written so far (lists) or keys (maps)
	wantKey  bool
	anchor   string
	anchorID int
	start    int // output offset of '[' or '{'
	nodes    int // c.nodes when the collection started
	height   int // height of the tallest child
	keysFrom int // this map's key hashes are c.keys[keysFrom:]
}

type converter struct {
	lim     Limits
	out     []byte
	stack   []frame
	nodes   int
	aliases int
	anchors map[string]anchorDef
	nextID  int
	keys    []uint64 // hashes of the keys of every open map
	seed    maphash.Seed
	measure bool // Measure: everything is converted, loosely
}

// Convert returns the JSON of the first YAML document of data, the same
// JSON value sigs.k8s.io/yaml's YAMLToJSON returns (go-yaml v2 semantics:
// YAML 1.1 booleans, octal and hexadecimal integers, first document only),
// with the members of each object in document order instead of sorted.
// Input with no document gives "null".
//
// It reads go-yaml's event stream and writes JSON as the events come, so
// it builds no tree: it allocates about the size of its output plus the
// scalars once more, and holds O(depth) state besides the anchors. What it
// does not convert (tags, merge keys "<<", keys that are not strings,
// integers or booleans, duplicate keys) returns an error wrapping
// ErrUnsupported, for the caller to convert another way. A syntax error
// reads as go-yaml's ("yaml: line 3: ...").
func Convert(data []byte, lim Limits) ([]byte, error) {
	return run(data, lim, false)
}

// Measure checks data against lim as Convert does, for YAML Convert leaves
// to a full decoder: tags are ignored, keys of any kind are measured as
// values, and merge keys as the aliases they are, so the aliases' expansion
// (values, depth, output) is bounded before a decoder that builds a tree
// expands it. It allocates what Convert does (the JSON, roughly, is built
// and dropped) and returns what Convert would for the limits and syntax,
// nil when they hold.
func Measure(data []byte, lim Limits) error {
	_, err := run(data, lim, true)
	return err
}

func run(data []byte, lim Limits, measure bool) ([]byte, error) {
	if lim.TooLarge == nil {
		lim.TooLarge = ErrTooLarge
	}
	if lim.TooDeep == nil {
		lim.TooDeep = ErrTooDeep
	}
	var p yaml_parser_t
	yaml_parser_initialize(&p)
	defer yaml_parser_delete(&p)
	if len(data) == 0 {
		data = []byte{'\n'} // as go-yaml does
	}
	yaml_parser_set_input_string(&p, data)
	c := &converter{lim: lim, out: make([]byte, 0, len(data)+len(data)/4+16), seed: maphash.MakeSeed(), measure: measure}
	var ev yaml_event_t
	started := false
	for {
		if !yaml_parser_parse(&p, &ev) {
			return nil, parseError(&p)
		}
		switch ev.typ {
		case yaml_STREAM_START_EVENT:
		case yaml_DOCUMENT_START_EVENT:
			started = true
		case yaml_STREAM_END_EVENT, yaml_DOCUMENT_END_EVENT:
			if !started || len(c.out) == 0 {
				return []byte("null"), nil
			}
			return c.out, nil
		default:
			if err := c.event(&ev); err != nil {
				return nil, err
			}
		}
		yaml_event_delete(&ev)
	}
}

func parseError(p *yaml_parser_t) error {
	var line int
	if p.problem_mark.line != 0 {
		line = p.problem_mark.line
		if p.error == yaml_SCANNER_ERROR {
			line++ // as go-yaml reports it
		}
	} else if p.context_mark.line != 0 {
		line = p.context_mark.line
	}
	msg := p.problem
	if msg == "" {
		msg = "unknown problem parsing YAML content"
	}
	if line != 0 {
		return fmt.Errorf("yaml: line %d: %s", line, msg)
	}
	return fmt.Errorf("yaml: %s", msg)
}

func unsupported(ev *yaml_event_t, format string, args ...any) error {
	return fmt.Errorf("%w: line %d: %s", ErrUnsupported, ev.start_mark.line+1, fmt.Sprintf(format, args...))
}

func (c *converter) event(ev *yaml_event_t) error {
	var top *frame
	if n := len(c.stack); n > 0 {
		top = &c.stack[n-1]
	}
	if top != nil && top.mapping && top.wantKey {
		if ev.typ == yaml_MAPPING_END_EVENT {
			return c.end(ev)
		}
		if !c.measure {
			return c.key(ev, top)
		}
		// Measuring: a key of any kind is measured as a value.
		if top.entries > 0 {
			c.out = append(c.out, ',')
		}
		top.entries++
		top.wantKey = false
		return c.value(ev, nil)
	}
	switch ev.typ {
	case yaml_SEQUENCE_END_EVENT, yaml_MAPPING_END_EVENT:
		return c.end(ev)
	}
	return c.value(ev, top)
}

// value converts a list entry, a map value or the root (top nil).
func (c *converter) value(ev *yaml_event_t, top *frame) error {
	if top != nil && !top.mapping {
		if top.entries > 0 {
			c.out = append(c.out, ',')
		}
		top.entries++
	}
	if top != nil && top.mapping {
		top.wantKey = true
	}
	if len(ev.tag) != 0 && !c.measure {
		return unsupported(ev, "tag %q", ev.tag)
	}
	switch ev.typ {
	case yaml_ALIAS_EVENT:
		return c.alias(ev)
	case yaml_SCALAR_EVENT:
		if err := c.count(ev, 1); err != nil {
			return err
		}
		start := len(c.out)
		out, err := appendScalar(c.out, ev)
		if err != nil && c.measure {
			out, err = append(c.out, "null"...), nil // the size is what counts
		}
		if err != nil {
			return err
		}
		c.out = out
		if err := c.checkOutput(ev); err != nil {
			return err
		}
		if len(ev.anchor) != 0 {
			if err := c.define(ev, string(ev.anchor), anchorDef{start: start, end: len(c.out), nodes: 1}); err != nil {
				return err
			}
		}
		return nil
	case yaml_SEQUENCE_START_EVENT, yaml_MAPPING_START_EVENT:
		if c.lim.MaxDepth > 0 && len(c.stack)+1 > c.lim.MaxDepth {
			return fmt.Errorf("%w: line %d: more than %d levels", c.lim.TooDeep, ev.start_mark.line+1, c.lim.MaxDepth)
		}
		if err := c.count(ev, 1); err != nil {
			return err
		}
		f := frame{mapping: ev.typ == yaml_MAPPING_START_EVENT, start: len(c.out), nodes: c.nodes - 1, keysFrom: len(c.keys)}
		f.wantKey = f.mapping
		if len(ev.anchor) != 0 {
			f.anchor = string(ev.anchor)
			if err := c.define(ev, f.anchor, anchorDef{open: true}); err != nil {
				return err
			}
			f.anchorID = c.nextID
		}
		if f.mapping {
			c.out = append(c.out, '{')
		} else {
			c.out = append(c.out, '[')
		}
		c.stack = append(c.stack, f)
		return nil
	}
	return fmt.Errorf("yamljson: unexpected %s event", ev.typ)
}

// define records an anchor; a later definition of the same name replaces it
// for the aliases after it, as in go-yaml.
func (c *converter) define(ev *yaml_event_t, name string, d anchorDef) error {
	if c.anchors == nil {
		c.anchors = make(map[string]anchorDef)
	}
	c.nextID++
	if c.lim.MaxAliases > 0 && c.nextID > c.lim.MaxAliases {
		return fmt.Errorf("%w: line %d: more than %d anchors", c.lim.TooLarge, ev.start_mark.line+1, c.lim.MaxAliases)
	}
	d.id = c.nextID
	c.anchors[name] = d
	return nil
}

func (c *converter) end(ev *yaml_event_t) error {
	n := len(c.stack)
	f := c.stack[n-1]
	c.stack = c.stack[:n-1]
	if f.mapping {
		keys := c.keys[f.keysFrom:]
		if len(keys) > 1 {
			slices.Sort(keys)
			for i := 1; i < len(keys); i++ {
				if keys[i] == keys[i-1] {
					return unsupported(ev, "a key appears twice in the map that ends here")
				}
			}
		}
		c.keys = c.keys[:f.keysFrom]
		c.out = append(c.out, '}')
	} else {
		c.out = append(c.out, ']')
	}
	if err := c.checkOutput(ev); err != nil {
		return err
	}
	if f.anchor != "" {
		if d, ok := c.anchors[f.anchor]; ok && d.id == f.anchorID {
			c.anchors[f.anchor] = anchorDef{id: d.id, start: f.start, end: len(c.out), nodes: c.nodes - f.nodes, height: f.height + 1}
		}
	}
	if n > 1 {
		p := &c.stack[n-2]
		p.height = max(p.height, f.height+1)
	}
	return nil
}

func (c *converter) alias(ev *yaml_event_t) error {
	name := string(ev.anchor)
	d, ok := c.anchors[name]
	if !ok {
		return fmt.Errorf("yaml: unknown anchor '%s' referenced", name)
	}
	if d.open {
		return fmt.Errorf("yaml: anchor '%s' value contains itself", name)
	}
	c.aliases++
	if c.lim.MaxAliases > 0 && c.aliases > c.lim.MaxAliases {
		return fmt.Errorf("%w: line %d: more than %d alias references", c.lim.TooLarge, ev.start_mark.line+1, c.lim.MaxAliases)
	}
	if c.lim.MaxDepth > 0 && len(c.stack)+d.height > c.lim.MaxDepth {
		return fmt.Errorf("%w: line %d: more than %d levels (through alias *%s)", c.lim.TooDeep, ev.start_mark.line+1, c.lim.MaxDepth, name)
	}
	if err := c.count(ev, d.nodes); err != nil {
		return err
	}
	if c.lim.MaxOutput > 0 && len(c.out)+(d.end-d.start) > c.lim.MaxOutput {
		return fmt.Errorf("%w: line %d: aliases expand the document beyond %d bytes of JSON", c.lim.TooLarge, ev.start_mark.line+1, c.lim.MaxOutput)
	}
	c.out = append(c.out, c.out[d.start:d.end]...)
	if n := len(c.stack); n > 0 {
		p := &c.stack[n-1]
		p.height = max(p.height, d.height)
	}
	return nil
}

func (c *converter) count(ev *yaml_event_t, n int) error {
	c.nodes += n
	if c.lim.MaxNodes > 0 && c.nodes > c.lim.MaxNodes {
		return fmt.Errorf("%w: line %d: more than %d values (keys counted, aliases counted as copies)", c.lim.TooLarge, ev.start_mark.line+1, c.lim.MaxNodes)
	}
	return nil
}

func (c *converter) checkOutput(ev *yaml_event_t) error {
	if c.lim.MaxOutput > 0 && len(c.out) > c.lim.MaxOutput {
		return fmt.Errorf("%w: line %d: more than %d bytes of JSON", c.lim.TooLarge, ev.start_mark.line+1, c.lim.MaxOutput)
	}
	return nil
}

// key writes a map key. Keys are what sigs.k8s.io/yaml turns them into:
// strings as they are, integers and booleans in decimal and "true"/"false".
func (c *converter) key(ev *yaml_event_t, top *frame) error {
	if ev.typ != yaml_SCALAR_EVENT {
		return unsupported(ev, "a map key that is not a scalar")
	}
	if len(ev.tag) != 0 {
		return unsupported(ev, "tag %q", ev.tag)
	}
	if len(ev.anchor) != 0 {
		return unsupported(ev, "an anchored map key")
	}
	if err := c.count(ev, 1); err != nil {
		return err
	}
	if top.entries > 0 {
		c.out = append(c.out, ',')
	}
	top.entries++
	top.wantKey = false
	from := len(c.out)
	if !ev.implicit {
		c.out = appendString(c.out, ev.value)
	} else {
		if string(ev.value) == "<<" {
			return unsupported(ev, "merge key <<")
		}
		switch r := resolvePlain(ev.value); r.kind {
		case kindString:
			c.out = appendString(c.out, ev.value)
		case kindBool:
			c.out = append(c.out, '"')
			c.out = strconv.AppendBool(c.out, r.b)
			c.out = append(c.out, '"')
		case kindInt:
			c.out = append(c.out, '"')
			c.out = strconv.AppendInt(c.out, r.i, 10)
			c.out = append(c.out, '"')
		default:
			return unsupported(ev, "map key %q is not a string, integer or boolean", ev.value)
		}
	}
	// The JSON text of a key is a function of the key's string (appendString
	// escapes one way only), so equal keys hash equal.
	if len(c.keys) == cap(c.keys) {
		// Double (append grows a large slice by a quarter, costing five
		// times the final size in copies).
		c.keys = append(make([]uint64, 0, 2*cap(c.keys)+16), c.keys...)
	}
	c.keys = append(c.keys, maphash.Bytes(c.seed, c.out[from:]))
	c.out = append(c.out, ':')
	return c.checkOutput(ev)
}

type kind uint8

const (
	kindString kind = iota
	kindNull
	kindBool
	kindInt
	kindUint
	kindFloat
)

// resolved is a plain scalar typed as go-yaml v2 types it when it decodes
// into an interface.
type resolved struct {
	kind kind
	b    bool
	i    int64
	u    uint64
	f    float64
}

// appendScalar appends the JSON of a value scalar.
func appendScalar(out []byte, ev *yaml_event_t) ([]byte, error) {
	if !ev.implicit {
		return appendString(out, ev.value), nil
	}
	switch r := resolvePlain(ev.value); r.kind {
	case kindNull:
		return append(out, "null"...), nil
	case kindBool:
		return strconv.AppendBool(out, r.b), nil
	case kindInt:
		return strconv.AppendInt(out, r.i, 10), nil
	case kindUint:
		return strconv.AppendUint(out, r.u, 10), nil
	case kindFloat:
		if math.IsNaN(r.f) || math.IsInf(r.f, 0) {
			return nil, fmt.Errorf("json: unsupported value: %s", strconv.FormatFloat(r.f, 'g', -1, 64))
		}
		return appendFloat(out, r.f), nil
	default:
		return appendString(out, ev.value), nil
	}
}

// resolvePlain types a plain scalar as go-yaml v2 does when it decodes into
// an interface: null, bool, int, uint64, float64, or else a string
// (timestamps included).
func resolvePlain(b []byte) resolved {
	switch string(b) {
	case "", "~", "null", "Null", "NULL":
		return resolved{kind: kindNull}
	case "y", "Y", "yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON":
		return resolved{kind: kindBool, b: true}
	case "n", "N", "no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF":
		return resolved{kind: kindBool}
	case ".nan", ".NaN", ".NAN":
		return resolved{kind: kindFloat, f: math.NaN()}
	case ".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF":
		return resolved{kind: kindFloat, f: math.Inf(1)}
	case "-.inf", "-.Inf", "-.INF":
		return resolved{kind: kindFloat, f: math.Inf(-1)}
	}
	switch c := b[0]; {
	case c == '.':
		if f, err := strconv.ParseFloat(string(b), 64); err == nil {
			return resolved{kind: kindFloat, f: f}
		}
	case c == '+' || c == '-' || ('0' <= c && c <= '9'):
		plain := strings.ReplaceAll(string(b), "_", "")
		if i, err := strconv.ParseInt(plain, 0, 64); err == nil {
			return resolved{kind: kindInt, i: i}
		}
		if u, err := strconv.ParseUint(plain, 0, 64); err == nil {
			return resolved{kind: kindUint, u: u}
		}
		if isYAMLFloat(plain) {
			if f, err := strconv.ParseFloat(plain, 64); err == nil {
				return resolved{kind: kindFloat, f: f}
			}
		}
		if rest, ok := strings.CutPrefix(plain, "0b"); ok {
			if i, err := strconv.ParseInt(rest, 2, 64); err == nil {
				return resolved{kind: kindInt, i: i}
			}
			if u, err := strconv.ParseUint(rest, 2, 64); err == nil {
				return resolved{kind: kindUint, u: u}
			}
		} else if rest, ok := strings.CutPrefix(plain, "-0b"); ok {
			if i, err := strconv.ParseInt("-"+rest, 2, 64); err == nil {
				return resolved{kind: kindInt, i: i}
			}
		}
	}
	return resolved{kind: kindString}
}

// isYAMLFloat reports whether s matches go-yaml v2's float pattern
// ^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$.
func isYAMLFloat(s string) bool {
	i := 0
	digits := func() int {
		j := i
		for i < len(s) && '0' <= s[i] && s[i] <= '9' {
			i++
		}
		return i - j
	}
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		i++
	}
	if i < len(s) && s[i] == '.' {
		i++
		if digits() == 0 {
			return false
		}
	} else {
		if digits() == 0 {
			return false
		}
		if i < len(s) && s[i] == '.' {
			i++
			digits()
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		if digits() == 0 {
			return false
		}
	}
	return i == len(s)
}

// appendFloat formats f as encoding/json does.
func appendFloat(out []byte, f float64) []byte {
	format := byte('f')
	if a := math.Abs(f); a != 0 && (a < 1e-6 || a >= 1e21) {
		format = 'e'
	}
	out = strconv.AppendFloat(out, f, format, -1, 64)
	if format == 'e' {
		// "1e-07" becomes "1e-7".
		if n := len(out); n >= 4 && out[n-4] == 'e' && out[n-3] == '-' && out[n-2] == '0' {
			out[n-2] = out[n-1]
			out = out[:n-1]
		}
	}
	return out
}

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string.
func appendString(out []byte, s []byte) []byte {
	out = append(out, '"')
	last := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		out = append(out, s[last:i]...)
		switch c {
		case '"', '\\':
			out = append(out, '\\', c)
		case '\n':
			out = append(out, '\\', 'n')
		case '\r':
			out = append(out, '\\', 'r')
		case '\t':
			out = append(out, '\\', 't')
		default:
			out = append(out, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		}
		last = i + 1
	}
	out = append(out, s[last:]...)
	return append(out, '"')
}
