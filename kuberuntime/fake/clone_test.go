package fake

import (
	"fmt"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// fill sets every field of m (recursively, lists and maps with two
// entries) to a value that depends on seed, so that two fills with
// different seeds differ in every field.
func fill(m protoreflect.Message, seed int) {
	fields := m.Descriptor().Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		switch {
		case fd.IsList():
			l := m.Mutable(fd).List()
			l.Truncate(0)
			for j := range 2 {
				if fd.Kind() == protoreflect.MessageKind {
					e := l.NewElement()
					fill(e.Message(), seed+j)
					l.Append(e)
				} else {
					l.Append(scalar(fd, seed+j))
				}
			}
		case fd.IsMap():
			mp := m.Mutable(fd).Map()
			mp.Range(func(k protoreflect.MapKey, _ protoreflect.Value) bool { mp.Clear(k); return true })
			for j := range 2 {
				k := scalar(fd.MapKey(), seed+j).MapKey()
				if fd.MapValue().Kind() == protoreflect.MessageKind {
					v := mp.NewValue()
					fill(v.Message(), seed+j)
					mp.Set(k, v)
				} else {
					mp.Set(k, scalar(fd.MapValue(), seed+j))
				}
			}
		case fd.Kind() == protoreflect.MessageKind:
			fill(m.Mutable(fd).Message(), seed)
		default:
			m.Set(fd, scalar(fd, seed))
		}
	}
}

func scalar(fd protoreflect.FieldDescriptor, seed int) protoreflect.Value {
	n := seed%5 + 1
	switch fd.Kind() {
	case protoreflect.BoolKind:
		return protoreflect.ValueOfBool(seed%2 == 0)
	case protoreflect.EnumKind:
		vals := fd.Enum().Values()
		return protoreflect.ValueOfEnum(vals.Get(n % vals.Len()).Number())
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		return protoreflect.ValueOfInt32(int32(n))
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return protoreflect.ValueOfInt64(int64(n))
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return protoreflect.ValueOfUint32(uint32(n))
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return protoreflect.ValueOfUint64(uint64(n))
	case protoreflect.StringKind:
		return protoreflect.ValueOfString(fmt.Sprintf("%s-%d", fd.Name(), seed))
	case protoreflect.BytesKind:
		return protoreflect.ValueOfBytes([]byte(fmt.Sprintf("%s-%d", fd.Name(), seed)))
	case protoreflect.FloatKind:
		return protoreflect.ValueOfFloat32(float32(n))
	case protoreflect.DoubleKind:
		return protoreflect.ValueOfFloat64(float64(n))
	}
	panic(fmt.Sprintf("no value for %s", fd.FullName()))
}

// checkClone fills in (seed 1), copies it with clone, then fills in again
// (seed 2): the copy must equal in as it was, field for field (so no
// field is forgotten, e.g. one a newer CRI API added), and share nothing
// with it.
func checkClone[M proto.Message](t *testing.T, in M, clone func(M) M) {
	t.Helper()
	fill(in.ProtoReflect(), 1)
	want := proto.Clone(in)
	got := clone(in)
	fill(in.ProtoReflect(), 2)
	if !proto.Equal(got, want) {
		t.Errorf("%T: the copy differs from the original:\n got  %v\n want %v", in, got, want)
	}
}

// TestClonesCopyEveryField checks the fake's field-by-field copies against
// protobuf's reflection: every field of the messages they copy whole, and
// the fields the fake reads of the configs it keeps.
func TestClonesCopyEveryField(t *testing.T) {
	checkClone(t, &runtimeapi.Mount{}, cloneMount)
	checkClone(t, &runtimeapi.LinuxContainerResources{}, cloneResources)
	checkClone(t, &runtimeapi.NamespaceOption{}, cloneNamespaceOption)
	checkClone(t, &runtimeapi.ImageSpec{}, cloneImageSpec)
	checkClone(t, &runtimeapi.AuthConfig{}, cloneAuth)
	checkClone(t, &runtimeapi.PodSandboxMetadata{}, sandboxMeta)

	// The configs: only what the fake reads is kept.
	sb := &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{},
		Linux: &runtimeapi.LinuxPodSandboxConfig{SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
			NamespaceOptions: &runtimeapi.NamespaceOption{}}}}
	fill(sb.Metadata.ProtoReflect(), 1)
	fill(sb.Linux.SecurityContext.NamespaceOptions.ProtoReflect(), 1)
	sb.LogDirectory, sb.Labels, sb.Annotations = "/logs", map[string]string{"l": "1"}, map[string]string{"a": "1"}
	wantSb := proto.Clone(sb)
	gotSb := sandboxConfig(sb)
	sb.Metadata.Name, sb.Labels["l"], sb.Annotations["a"] = "changed", "2", "2"
	sb.Linux.SecurityContext.NamespaceOptions.UsernsOptions.Uids[0].HostId = 99
	if !proto.Equal(gotSb, wantSb) {
		t.Errorf("sandbox config: got %v, want %v", gotSb, wantSb)
	}

	c := &runtimeapi.ContainerConfig{Metadata: &runtimeapi.ContainerMetadata{}, Image: &runtimeapi.ImageSpec{},
		Mounts: []*runtimeapi.Mount{{}, {}}, Linux: &runtimeapi.LinuxContainerConfig{Resources: &runtimeapi.LinuxContainerResources{}}}
	for _, m := range []proto.Message{c.Metadata, c.Image, c.Mounts[0], c.Mounts[1], c.Linux.Resources} {
		fill(m.ProtoReflect(), 1)
	}
	c.Command, c.Args, c.LogPath = []string{"sh"}, []string{"-c", "true"}, "c/0.log"
	c.Labels, c.Annotations = map[string]string{"l": "1"}, map[string]string{"a": "1"}
	wantC := proto.Clone(c)
	gotC := containerConfig(c)
	c.Metadata.Name, c.Image.Image, c.Mounts[1].HostPath, c.Linux.Resources.Unified["x"] = "changed", "changed", "changed", "changed"
	c.Command[0], c.Args[0], c.Labels["l"], c.Annotations["a"] = "changed", "changed", "2", "2"
	if !proto.Equal(gotC, wantC) {
		t.Errorf("container config: got %v, want %v", gotC, wantC)
	}

	// What the fake does not keep is dropped, and nil stays nil.
	if got := containerConfig(&runtimeapi.ContainerConfig{WorkingDir: "/w", Metadata: &runtimeapi.ContainerMetadata{Name: "c"}}); got.WorkingDir != "" || got.Linux != nil || got.Mounts != nil {
		t.Errorf("container config keeps what the fake does not read: %v", got)
	}
	if cloneMount(nil) != nil || cloneResources(nil) != nil || cloneAuth(nil) != nil || cloneImageSpec(nil) != nil || cloneNamespaceOption(nil) != nil {
		t.Error("a nil message was copied to a non-nil one")
	}
}
