package podconfig
