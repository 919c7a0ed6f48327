package kubetypes

// PressureSource says whether the node is under resource pressure; the
// eviction manager implements it. A nil PressureSource means no pressure.
type PressureSource interface {
	IsUnderMemoryPressure() bool
	IsUnderDiskPressure() bool
	IsUnderPIDPressure() bool
}
