// Package podconfig gathers pods from any number of sources (files, HTTP URLs,
// an HTTP push endpoint, the API server) and merges them into one ordered
// stream of PodUpdates for the sync loop.
package podconfig
