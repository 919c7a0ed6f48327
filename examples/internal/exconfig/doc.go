// Package exconfig gives the examples the kubelet's --config: a
// KubeletConfiguration file (package kubeletconfig) whose values the flags
// given on the command line override, as the kubelet's flags override its
// file. Given keeps a flag and its field in agreement: the flag's value
// when it was given, the file's otherwise.
package exconfig
