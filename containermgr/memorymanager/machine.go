package memorymanager

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
)

// NUMANode is the memory of one NUMA node, in bytes per resource:
// v1.ResourceMemory and hugepages-<size> (e.g. "hugepages-2Mi").
type NUMANode struct {
	ID       int
	Capacity map[v1.ResourceName]uint64
}

const (
	maxNodes    = 1024
	maxFileSize = 64 << 10
)

// ReadMachine reads the NUMA nodes' memory from sysfs under root ("" or
// "/" for the machine): MemTotal from sys/devices/system/node/node<N>/meminfo
// and the hugepage pools from node<N>/hugepages/hugepages-<K>kB/nr_hugepages.
func ReadMachine(root string) ([]NUMANode, error) {
	if root == "" {
		root = "/"
	}
	dirs, _ := filepath.Glob(filepath.Join(root, "sys/devices/system/node/node[0-9]*"))
	if len(dirs) == 0 {
		return nil, fmt.Errorf("%w: no NUMA nodes under %s", ErrMachine, root)
	}
	if len(dirs) > maxNodes {
		return nil, fmt.Errorf("%w: %d NUMA nodes, limit %d", ErrMachine, len(dirs), maxNodes)
	}
	var nodes []NUMANode
	for _, d := range dirs {
		id, err := strconv.Atoi(strings.TrimPrefix(filepath.Base(d), "node"))
		if err != nil || id < 0 || id >= maxNodes {
			continue
		}
		total, err := memTotal(filepath.Join(d, "meminfo"))
		if err != nil {
			return nil, err
		}
		n := NUMANode{ID: id, Capacity: map[v1.ResourceName]uint64{v1.ResourceMemory: total}}
		pools, _ := filepath.Glob(filepath.Join(d, "hugepages", "hugepages-*kB"))
		for _, p := range pools {
			kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimPrefix(filepath.Base(p), "hugepages-"), "kB"), 10, 32)
			if err != nil || kb == 0 {
				continue
			}
			s, err := readSmall(filepath.Join(p, "nr_hugepages"))
			if err != nil {
				return nil, err
			}
			count, err := strconv.ParseUint(s, 10, 32)
			if err != nil {
				return nil, fmt.Errorf("%w: %s: bad nr_hugepages %q", ErrMachine, p, s)
			}
			n.Capacity[hugePageName(kb*1024)] = count * kb * 1024
		}
		nodes = append(nodes, n)
	}
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].ID < nodes[j].ID })
	return nodes, nil
}

// hugePageName is the resource name of a page size ("hugepages-2Mi").
func hugePageName(size uint64) v1.ResourceName {
	for _, u := range []struct {
		suffix string
		bytes  uint64
	}{{"Gi", 1 << 30}, {"Mi", 1 << 20}, {"Ki", 1 << 10}} {
		if size%u.bytes == 0 {
			return v1.ResourceName("hugepages-" + strconv.FormatUint(size/u.bytes, 10) + u.suffix)
		}
	}
	return v1.ResourceName("hugepages-" + strconv.FormatUint(size, 10))
}

func readSmall(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrMachine, err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxFileSize))
	if err != nil {
		return "", fmt.Errorf("%w: %s: %w", ErrMachine, path, err)
	}
	return strings.TrimSpace(string(b)), nil
}

// memTotal reads "Node N MemTotal: X kB" from a node's meminfo.
func memTotal(path string) (uint64, error) {
	s, err := readSmall(path)
	if err != nil {
		return 0, err
	}
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 5 && f[2] == "MemTotal:" && f[4] == "kB" {
			kb, err := strconv.ParseUint(f[3], 10, 64)
			if err != nil || kb > 1<<50 {
				return 0, fmt.Errorf("%w: %s: bad MemTotal %q", ErrMachine, path, f[3])
			}
			return kb * 1024, nil
		}
	}
	return 0, fmt.Errorf("%w: %s has no MemTotal", ErrMachine, path)
}
