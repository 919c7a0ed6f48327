package podconfig

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	yaml3 "go.yaml.in/yaml/v3"
)

// The alias measure the YAML path used before internal/yamljson (kept for
// TestDecodeYAMLSameAsBefore's reference decoder).

// checkYAMLShape parses the first YAML document into a node tree (which does
// not expand aliases) and measures it as if aliases were expanded: the
// expanded size must stay within maxExpandedSize, the depth within
// MaxManifestDepth, the expanded number of nodes within MaxManifestNodes
// and the alias references within MaxManifestAliases. Aliases are measured once each (memoized), so the check
// itself is linear in the input.
func checkYAMLShape(data []byte) error {
	var doc yaml3.Node
	if err := yaml3.NewDecoder(bytes.NewReader(data)).Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return ErrEmptyManifest
		}
		return err
	}
	m := yamlMeasure{memo: make(map[*yaml3.Node]yamlShape)}
	_, err := m.measure(&doc, 0)
	return err
}

type yamlShape struct {
	size   int64
	nodes  int64
	height int
}

type yamlMeasure struct {
	memo    map[*yaml3.Node]yamlShape
	total   int64 // expanded size so far
	nodes   int64 // expanded nodes so far
	aliases int
}

func (m *yamlMeasure) overLimits(line int) error {
	if m.total > maxExpandedSize {
		return fmt.Errorf("%w: aliases expand the document beyond %d bytes", ErrTooLarge, maxExpandedSize)
	}
	if m.nodes > MaxManifestNodes {
		return fmt.Errorf("%w: line %d: more than %d values (aliases counted as copies)", ErrTooLarge, line, MaxManifestNodes)
	}
	return nil
}

func (m *yamlMeasure) measure(n *yaml3.Node, depth int) (yamlShape, error) {
	if n == nil {
		return yamlShape{}, nil
	}
	if s, ok := m.memo[n]; ok {
		if depth+s.height > MaxManifestDepth {
			return s, fmt.Errorf("%w: line %d: more than %d levels", ErrTooDeep, n.Line, MaxManifestDepth)
		}
		m.total += s.size
		m.nodes += s.nodes
		return s, m.overLimits(n.Line)
	}
	var s yamlShape
	switch n.Kind {
	case yaml3.AliasNode:
		if n.Alias == nil {
			return s, fmt.Errorf("line %d: unresolved alias", n.Line)
		}
		m.aliases++
		if m.aliases > MaxManifestAliases {
			return s, fmt.Errorf("%w: line %d: more than %d alias references", ErrTooLarge, n.Line, MaxManifestAliases)
		}
		m.memo[n] = yamlShape{size: maxExpandedSize + 1, nodes: MaxManifestNodes + 1, height: MaxManifestDepth + 1} // cycle guard
		inner, err := m.measure(n.Alias, depth)
		if err != nil {
			return s, err
		}
		s = inner
	case yaml3.ScalarNode:
		s = yamlShape{size: int64(len(n.Value)) + 3, nodes: 1}
		m.total += s.size
		m.nodes++
	default: // document, mapping, sequence
		if n.Kind != yaml3.DocumentNode && depth+1 > MaxManifestDepth {
			return s, fmt.Errorf("%w: line %d: more than %d levels", ErrTooDeep, n.Line, MaxManifestDepth)
		}
		next := depth
		if n.Kind != yaml3.DocumentNode {
			next = depth + 1
		}
		s.size, s.nodes = 2, 1
		m.total += 2
		m.nodes++
		for _, c := range n.Content {
			cs, err := m.measure(c, next)
			if err != nil {
				return s, err
			}
			s.size += cs.size + 1
			s.nodes += cs.nodes
			m.total++
			if cs.height+1 > s.height {
				s.height = cs.height + 1
			}
		}
	}
	if err := m.overLimits(n.Line); err != nil {
		return s, err
	}
	m.memo[n] = s
	return s, nil
}
