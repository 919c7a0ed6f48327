// Package yamljson converts the first document of a YAML stream to JSON in
// one pass over a YAML event parser, without building a tree, so the
// memory it takes is a few times the input (its output, the scalars once,
// and state proportional to the nesting and the anchors) rather than the
// hundreds of bytes per value a tree-building decoder spends.
//
// The result is the JSON value sigs.k8s.io/yaml's YAMLToJSON gives (go-yaml
// v2 semantics), members in document order. What it does not convert in a
// stream (tags, merge keys, duplicate keys, keys other than strings,
// integers and booleans) is reported with ErrUnsupported, for the caller to
// hand to a full decoder under a budget of its own:
//
//	js, err := yamljson.Convert(data, yamljson.Limits{MaxDepth: 100, MaxNodes: 1 << 20, MaxOutput: 4 * len(data)})
//	if errors.Is(err, yamljson.ErrUnsupported) {
//		// decode with go-yaml, bounded
//	}
//
// The scanner and parser (apic.go, parserc.go, readerc.go, scannerc.go,
// yamlh.go, yamlprivateh.go) are go-yaml v2.4.4's (go.yaml.in/yaml/v2; MIT
// and Apache-2.0, see LICENSE, LICENSE.libyaml and NOTICE here), the same
// code sigs.k8s.io/yaml runs, so syntax and its errors are go-yaml's. The
// changes: apic.go keeps only the parser's functions (not the emitter's);
// and, each marked "nodekit change" in the code, the simple-key index map, which
// grew by an entry for every scalar, is a search of the simple-key stack;
// scalars are built in reused buffers and kept in shared chunks; a long
// scalar's buffer doubles instead of growing by a quarter.
package yamljson
